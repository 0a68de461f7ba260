"""The Python reader agrees with the C reader: the same rows, bit for bit
(via `alisa trace dump`), and the same per-layer sparsity as `trace info`,
on a generated trace with per-head rows and a mix of row encodings; and it
rejects a corrupted file. Usage: test_read_trace.py PATH/TO/alisa TRACES_DIR"""
import json
import os
import subprocess
import sys
import tempfile

alisa, traces_dir = sys.argv[1], sys.argv[2]
sys.path.insert(0, traces_dir)
import io  # noqa: E402

import numpy as np  # noqa: E402
from read_trace import TraceError, dump, read_trace  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "t.trace")
    subprocess.run([alisa, "trace", "gen", "--model", "LLaMA-7B", "--layers", "3", "--seqs", "2",
                    "--prompt-len", "40", "--gen-len", "60", "--per-head", "--seed", "5",
                    "-o", path], check=True, capture_output=True)
    c_dump = subprocess.run([alisa, "trace", "dump", path], check=True,
                            capture_output=True, text=True).stdout
    buf = io.StringIO()
    dump(path, buf)
    py_dump = buf.getvalue()
    check(len(c_dump) > 0, "C dump is empty")
    check(c_dump == py_dump, "C and Python dumps differ")

    info = json.loads(subprocess.run([alisa, "trace", "info", path, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    t = read_trace(path)
    per_layer = [[] for _ in range(t.header["n_layers"])]
    encs = set()
    for st in t.steps():
        encs.update(int(e) for e in st.enc)
        if st.pos < t.seqs[st.seq]["prompt_len"]:
            continue
        for layer in range(t.header["n_layers"]):
            row = st.w[layer]
            per_layer[layer].append(float(np.mean(row < np.float32(0.01) * row.max())))
    t.close()
    check(t.header["model"] == "LLaMA-7B", "header model")
    check(len(encs) >= 2, f"expected both encodings, saw {encs}")
    for layer, values in enumerate(per_layer):
        want = info["sparsity"]["layers"][layer]
        check(len(values) == want["rows"], f"layer {layer}: row count")
        check(abs(np.mean(values) - want["mean"]) < 1e-5,
              f"layer {layer}: mean {np.mean(values)} vs {want['mean']}")

    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x40
    bad = os.path.join(tmp, "bad.trace")
    open(bad, "wb").write(data)
    try:
        for _ in read_trace(bad).steps():
            pass
        check(False, "corruption not detected")
    except TraceError as e:
        check("checksum mismatch" in str(e), f"unexpected error {e}")

print(f"{1 if failures == 0 else 0} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)

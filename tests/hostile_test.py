#!/usr/bin/env python3
"""Hostile files through the real CLI (issue 27): every reproducer in
../shared/fuzz-crashes/ (its README gives the commands) must end in one line
`alisa: error: FILE: ...` naming the file, exit 1, no sanitizer report, and
peak memory bounded (256 MB above what `alisa version` itself takes, which
is the CUDA runtime's in a CUDA build). Skips (77) without that folder.
Usage: hostile_test.py ALISA CRASH_DIR"""
import gzip, os, shutil, subprocess, sys, tempfile

alisa, crashes = os.path.abspath(sys.argv[1]), sys.argv[2]
if not os.path.isfile(os.path.join(crashes, "README.md")):
    if os.environ.get("CI") == "true":
        print("FAIL: CI=true and %s is missing" % crashes)
        sys.exit(1)
    print("SKIP: %s is missing" % crashes)
    sys.exit(77)

tmp = tempfile.mkdtemp()
for f in os.listdir(crashes):
    shutil.copy(os.path.join(crashes, f), tmp)
with gzip.open(os.path.join(tmp, "llama2c_wrap_v512.bin.gz")) as src, \
        open(os.path.join(tmp, "llama2c_wrap_v512.bin"), "wb") as dst:
    shutil.copyfileobj(src, dst)
for n in (17, 20):
    subprocess.run([sys.executable, "gen_trace_many_seqs.py", "many%d.trace" % n, str(n)],
                   cwd=tmp, check=True)

import struct, zlib

def bad_row_trace(path, row):
    """A structurally valid one-layer trace (format: sim/trace/trace.c) whose
    one step's row is `row` (3 weights, FP16): NaN, negative or not summing to 1"""
    def chunk(tag, p):
        h = tag + struct.pack("<I", len(p))
        return h + p + struct.pack("<I", zlib.crc32(h + p) & 0xffffffff)
    def s(x):
        b = x.encode()
        return struct.pack("<H", len(b)) + b
    with open(path, "wb") as f:
        f.write(b"ALISATRC" + struct.pack("<II", 1, 0))
        f.write(chunk(b"HEAD", s("OPT-125M") + struct.pack("<IIIIIIIfQ", 1, 12, 12, 768, 50272, 1, 0, 0.0, 1)
                      + s("synthetic") + s("") + s("") + s("")))
        f.write(chunk(b"SEQ ", struct.pack("<IIIIII", 0, 2, 1, 2, 5, 6)))
        f.write(chunk(b"STEP", struct.pack("<IIIB", 0, 2, 7, 0) + struct.pack("<3e", *row)))
        f.write(chunk(b"END ", struct.pack("<QI", 1, 1)))

# issue 48: every reader of trace rows refuses what `trace check` refuses
for name, row in (("nan_row.trace", (0.5, float("nan"), 0.5)), ("neg_row.trace", (0.75, 0.5, -0.25)),
                  ("sum3_row.trace", (1.0, 1.0, 1.0)), ("zero_row.trace", (0.0, 0.0, 0.0))):
    bad_row_trace(os.path.join(tmp, name), row)
# valid, but every weight equal: no rank correlation, so an error, not a NaN
bad_row_trace(os.path.join(tmp, "const_row.trace"), (1 / 3, 1 / 3, 1 / 3))

def run(args):
    """exit code, stderr and peak RSS (MB) of one alisa run, from wait4"""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([alisa] + args, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return p.returncode, err.read().decode(errors="replace"), usage.ru_maxrss / 1024.0

_, _, base = run(["version"])
cases = [  # (file named in the error, command)
    ("gguf_ffn_wrap.gguf", ["run", "--model", "gguf_ffn_wrap.gguf", "--prompt", "a", "-n", "1"]),
    ("gguf_ffn_wrap.gguf", ["model", "info", "gguf_ffn_wrap.gguf"]),
    ("gguf_align_trunc_page.gguf", ["model", "info", "gguf_align_trunc_page.gguf"]),
    ("gguf_tensor_2p62.gguf", ["model", "info", "gguf_tensor_2p62.gguf", "--tensors"]),
    ("gguf_ctx_1e23.gguf", ["run", "--model", "gguf_ctx_1e23.gguf", "--prompt", "a", "-n", "1"]),
    ("gguf_u64_cast_fuzz_min.gguf", ["model", "info", "gguf_u64_cast_fuzz_min.gguf"]),
    ("llama2c_wrap_v512.bin", ["run", "--model", "llama2c_wrap_v512.bin", "--tokenizer",
                               "tok512.bin", "--prompt", "Once", "-n", "1"]),
    ("tok16.bin", ["run", "--model", "tiny_llama2c_vocab16.bin", "--tokenizer", "tok16.bin",
                   "--prompt", "a", "-n", "1"]),
    ("tok_vocab1_fuzz.bin", ["run", "--model", "tiny_llama2c_vocab16.bin", "--tokenizer",
                             "tok_vocab1_fuzz.bin", "--prompt", "a", "-n", "1"]),
    ("sweep_empty_key.sweep", ["sweep", "sweep_empty_key.sweep", "--emit-jobs"]),
    ("sweep_empty_key_fuzz_min.sweep", ["sweep", "sweep_empty_key_fuzz_min.sweep", "--emit-jobs"]),
    ("many17.trace", ["trace", "check", "many17.trace"]),
    ("many20.trace", ["trace", "info", "many20.trace"]),
]
for t in ("nan_row.trace", "neg_row.trace", "sum3_row.trace", "zero_row.trace"):
    cases += [(t, ["trace", "check", t]), (t, ["trace", "info", t]),
              (t, ["sim", "--trace", t, "--system", "alisa", "--model", "OPT-125M", "--hardware", "H100-80GB",
                   "--batch", "1", "--prompt-len", "2", "--gen-len", "1"]),
              (t, ["plan", "--trace", t, "--selection", "swa", "--placement", "lru", "--gpu-kv-bytes", "1M"]),
              (t, ["fidelity", "--trace", t, "--selection", "swa"])]
cases += [("const_row.trace", ["fidelity", "--trace", "const_row.trace", "--selection", "swa", "--json"])]
# tok512.bin is the real tokenizer the llama2.c case names; without it the
# error would be about the missing file, so it must be there
shared_tok = os.path.join(crashes, "..", "models", "stories260K", "tok512.bin")
if os.path.isfile(shared_tok):
    shutil.copy(shared_tok, tmp)
fails = 0
for name, args in cases:
    code, err, peak = run(args)
    lines = [l for l in err.splitlines() if l.strip()]
    problems = []
    if code != 1:
        problems.append("exit %d" % code)
    if len(lines) != 1 or not lines[0].startswith("alisa: error: " + name):
        problems.append("stderr %r" % err[-300:])
    if "Sanitizer" in err or "runtime error" in err:
        problems.append("sanitizer report")
    if peak - base > 256:
        problems.append("peak memory %.0f MB above the %.0f MB baseline" % (peak - base, base))
    print("%s: alisa %s: %s" % ("FAIL" if problems else "ok", " ".join(args),
                                "; ".join(problems) or lines[0]))
    fails += bool(problems)
shutil.rmtree(tmp)
print("%d hostile files, %d failed" % (len(cases), fails))
sys.exit(1 if fails else 0)

#!/usr/bin/env python3
"""Re-predicts the stored rows of `alisa serve-run --predict` (a results
database from experiments/serve-validate) with another alisa binary: the
simulator's prediction does not depend on the measurement, so two cost
models can be compared on the same measured runs (issue 46, item 4).
`alisa serve` runs each stored stream (same requests, seed, batching, the
executor's KV pool in blocks, FP32 KV, the stored profile and hardware).
Prints, per row, each metric's error with the stored prediction and with
this binary's, then per sweep the mean absolute errors of both.
A stream the executor served on its dense cache (no --selection) is
predicted as such (alisa serve --dense-cache); --no-dense-cache predicts it
as the scheduler's path instead (the pricing before the profile measured
the dense cache).
--profiles DIR predicts from DIR's profile of the same file name instead
of the stored one (a variant of it: a term taken out, say).
Usage: serve-repredict.py ALISA_BINARY RESULTS_DB [--no-dense-cache] [--profiles DIR]
(run from the repository root; the stored paths must still exist)."""
import json
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict

# a block's FP32 K and V over every layer: 16 tokens x layers x kv_dim x 2 x 4
MODELS = {"stories260K": ("stories260K", 16 * 5 * 32 * 8),
          "SmolLM2": ("SmolLM2-135M", 16 * 30 * 192 * 8)}
LAYERS_KV = {"stories260K": (5, 32), "SmolLM2-135M": (30, 192)}


def nbytes(s):
    """A byte count as alisa's options read it (cli_parse_bytes' units)."""
    units = {"": 1, "B": 1, "k": 1e3, "kB": 1e3, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6,
             "G": 1e9, "GB": 1e9, "Ki": 1024, "KiB": 1024, "Mi": 2**20, "MiB": 2**20,
             "Gi": 2**30, "GiB": 2**30}
    n = len(s.rstrip("kKMGBi"))
    return float(s[:n]) * units[s[n:]]


METRICS = [("makespan", lambda d: d["makespan_s"]), ("ttft_mean", lambda d: d["ttft_s"]["mean"]),
           ("tpot_mean", lambda d: d["tpot_s"]["mean"]), ("e2e_mean", lambda d: d["e2e_s"]["mean"]),
           ("e2e_p99", lambda d: d["e2e_s"]["p99"])]


def main():
    alisa, db = sys.argv[1], sys.argv[2]
    dense_cache = "--no-dense-cache" not in sys.argv[3:]
    profiles = None
    if "--profiles" in sys.argv:
        at = sys.argv.index("--profiles")
        if at + 1 >= len(sys.argv):
            sys.exit("serve-repredict.py: --profiles needs a directory")
        profiles = sys.argv[at + 1]
    rows = sqlite3.connect(db).execute(
        "SELECT sweep, point, config, result FROM runs WHERE status = 'ok' "
        "AND json_extract(config, '$.command') = 'serve-run' ORDER BY sweep, point").fetchall()
    mae = defaultdict(lambda: [[0.0] * len(METRICS), [0.0] * len(METRICS), 0])
    for sweep, point, cfg, res in rows:
        p, r = json.loads(cfg)["params"], json.loads(res)
        model, block = next(v for k, v in MODELS.items() if k in p["model"])
        profile = os.path.join(profiles, os.path.basename(p["profile"])) if profiles else p["profile"]
        args = [alisa, "serve", "--trace", p["trace"], "--model", model, "--profile", profile,
                "--hardware", r["predicted"]["hardware"], "--requests", p["requests"],
                "--rate", p["rate"], "--burstiness", p.get("burstiness", "1"), "--prompt-len",
                p["prompt-len"], "--output-len", p["output-len"], "--seed", p["seed"],
                "--max-num-seqs", p["max-num-seqs"], "--max-batched-tokens",
                p["max-batched-tokens"], "--kv-pool", str(r["kv_blocks"] * block), "--kv-fp32",
                "--json"]
        if p.get("no-chunked-prefill") == "true":
            args.append("--no-chunked-prefill")
        if p.get("selection") or p.get("placement"):  # served on the tiered cache
            args += ["--selection", p.get("selection", "dense"),
                     "--placement", p.get("placement", "gpu-only")]
            if p.get("sparsity"):
                args += ["--sparsity", p["sparsity"]]
            if p.get("gpu-kv-bytes"):  # the device arena's tokens per request and layer
                layers, kv_dim = LAYERS_KV[model]
                args += ["--gpu-tokens", str(int(nbytes(p["gpu-kv-bytes"]) //
                                                 (int(p["max-num-seqs"]) * layers * kv_dim * 8)))]
        elif dense_cache:  # served on the dense cache
            args.append("--dense-cache")
        s = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        old = [100 * (f(r["predicted"]) - f(r)) / f(r) for _, f in METRICS]
        new = [100 * (f(s) - f(r)) / f(r) for _, f in METRICS]
        print(sweep, point, " ".join("%s %+.1f -> %+.1f" % (m[0], o, n)
                                     for m, o, n in zip(METRICS, old, new)))
        acc = mae[sweep]
        for i in range(len(METRICS)):
            acc[0][i] += abs(old[i])
            acc[1][i] += abs(new[i])
        acc[2] += 1
    print("\nmean absolute error, stored prediction -> this binary's:")
    for sweep, (o, n, k) in sorted(mae.items()):
        print(sweep, k, "streams:", " ".join("%s %.1f%% -> %.1f%%" % (m[0], a / k, b / k)
                                             for m, a, b in zip(METRICS, o, n)))


if __name__ == "__main__":
    main()

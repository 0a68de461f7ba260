#!/usr/bin/env python3
"""Device and pinned-host memory of each point of experiments/fig9-measured-h100.sweep
on the CUDA executor, and the device KV budget (--gpu-kv-bytes) that fits it
(issue 39: "sweeps sized to fit"). Prints the sweep's [vary] rows and a table.

What the CUDA backend allocates, from its code (exec/backend_cuda.c):
  weights    FP16, the catalog's weight_bytes_fp16 (cuda_weights)
  arenas     K and V, FP16: (streams x slots + batch x max_len prefill rows) x kv_dim x 2 x 2
             (cuda_kvstore); slots = the placement's device capacity a stream, plus,
             for a placement with visits (alisa), one step's selection budget
             (sim/core/scheduler.c with_staging; sel_budget: 2 round(n (1 - s) / 2))
  staging    cap x (4 kv_dim + hidden) x 4 + cap x hidden x 2 + 12 cap + 16 cap,
             cap = batch x max_len + 1 (cuda_kvstore's d_ok and the loads' d_qptr)
  activations for batch x 32 rows (a prefill chunk, exec/forward.h LLM_CHUNK, which
             cuda_kvstore also reserves):
             rows x rows_floats x 4 + rows x max(hidden, ffn) x 2 (ensure_rows)
  fixed      cuBLAS workspace 32 MiB (CUBLAS_WS_BYTES) and the CUDA context (about 0.7 GB,
             an estimate: not measured here)
The budget is the paper's 80 GB (the H100 has 85.0e9 bytes), except where the paper's
placement has no room left at all under it (alisa at OPT-30B batch 64: its visit staging,
one step's selection for each of 3,072 streams, takes 11.3 GB), which runs on the card's
85.0 GB and says so; cuda_kvstore refuses a point
that does not fit what the device has free, naming each term, before allocating.
flexgen-static gives every stream max_len device slots (host sequences stage their whole
history: with_staging under a dense selection), i.e. the whole KV on the device: at OPT-30B
batch 32 and 64 that cannot fit, and those two points are left out (said in the sweep).
Host arena (--cpu-kv-bytes): what can spill, the run's KV less the device budget, at least
1 GB (the default, every token, pins 56 GB at OPT-30B batch 64).
"""
import configparser
import os
import sys

PROMPT, GEN, SPARSITY, CHUNK = 128, 512, 0.8, 32
BUDGET = 80e9
PHYSICAL = 84.5e9  # the card's 85.0e9 less a margin for cuda_kvstore's check
FIXED = (32 << 20) + 0.7e9
SYSTEMS = [("swa", "alisa", True), ("swa", "alisa-cache", False),
           ("dense", "flexgen-static", False), ("dense", "gpu-only", False)]


def main():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    cat = configparser.ConfigParser()
    cat.read(os.path.join(root, "sim", "model", "catalog", "models.ini"))
    max_len = PROMPT + GEN
    half = round(max_len * (1 - SPARSITY) / 2)
    visit = 2 * half
    rows, table = [], []
    for model in ("OPT-6.7B", "OPT-13B", "OPT-30B"):
        m = cat[model]
        L, d, ffn, V = int(m["layers"]), int(m["hidden"]), int(m["ffn"]), int(m["vocab"])
        H = int(m["heads"])
        kv = d // H * int(m["kv_heads"])
        w = float(m["weight_bytes_fp16"])
        for b in (8, 32, 64):
            streams = b * L
            tok = 2 * kv * 2  # K and V, FP16, one token of one stream
            full = streams * max_len * tok
            cap = b * max_len + 1
            staging = cap * (4 * kv + d) * 4 + cap * d * 2 + 12 * cap + 16 * cap
            r = b * CHUNK
            rows_floats = 4 * d + 2 * kv + 2 * ffn + V + H * max_len + max_len
            act = r * rows_floats * 4 + r * max(d, ffn) * 2
            prefill_rows = b * max_len * tok
            for sel, place, visits in SYSTEMS:
                room = BUDGET - w - staging - act - FIXED - prefill_rows
                if visits:
                    room -= streams * visit * tok
                if place == "flexgen-static":
                    # every stream max_len slots: the whole KV whatever the budget
                    need = w + full + prefill_rows + staging + act + FIXED
                    if need > BUDGET:
                        table.append((model, b, place, "-", need, "left out: the whole KV on the device"))
                        continue
                note = ""
                if room <= 0:
                    # the paper's 80 GB leaves nothing past the visit staging:
                    # run on the card's own memory instead, and say so
                    room += PHYSICAL - BUDGET
                    note = "on the card's 85.0 GB (not the paper's 80): "
                # every token when it fits (exactly: a budget rounded down
                # would leave gpu-only a slot short at the last token)
                gpu = full if room >= full else int(room // 1e6 * 1e6)
                if gpu <= 0:
                    table.append((model, b, place, "-", 0, "no room for KV"))
                    continue
                cpu = int(max(1e9, full - gpu) // 1e6 * 1e6)
                slots = min(max_len, gpu // streams // tok) + (visit if visits else 0)
                dev = w + streams * min(slots, max_len) * tok + prefill_rows + staging + act + FIXED
                rows.append(f"{model},{b},{gpu},{cpu},{sel},{place}")
                table.append((model, b, place, gpu, dev, f"{note}host {cpu / 1e9:.1f} GB, KV share {gpu / full:.2f}"))
    out = sys.stdout
    out.write("; model,batch,gpu-kv-bytes,cpu-kv-bytes,selection,placement (fig9_sizing.py)\n")
    out.write("model,batch,gpu-kv-bytes,cpu-kv-bytes,selection,placement = " + rows[0] + "\n")
    for r in rows[1:]:
        out.write("    " + r + "\n")
    sys.stderr.write("| model | batch | placement | gpu-kv-bytes | device total GB | note |\n|---|---|---|---|---|---|\n")
    for model, b, place, gpu, dev, note in table:
        sys.stderr.write(f"| {model} | {b} | {place} | {gpu} | {dev / 1e9:.1f} | {note} |\n")


if __name__ == "__main__":
    main()

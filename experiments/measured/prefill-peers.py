#!/usr/bin/env python3
"""FlexGen's measured prefill beside the simulator's (issue 44 item 1: GEMM
throughput at prompt shapes; issue 49 item 1: prefill predicted).

For every point of experiments/peers-h100.sweep that ran in a window (the
rows of MEASURED, default experiments/bench/h100-2026-11-27b/peers-h100.csv),
the prefill time FlexGen measured (batch x prompt tokens over its prefill
tok/s) beside `alisa sim`'s prefill_s for the point's own policy on each
profile named (experiments/measured/h100-host-2026-11-27b.ini), with FlexGen's
host cost measured on the same window (--software flexgen-h100-host).
Prints a Markdown table.
Usage: python3 experiments/measured/prefill-peers.py [PROFILE_NAME...]"""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ALISA = os.environ.get("ALISA", os.path.join(ROOT, "build", "alisa"))
PROFILE = os.path.join(ROOT, "experiments", "measured", "h100-host-2026-11-27b.ini")
MEASURED = os.environ.get("MEASURED", os.path.join(ROOT, "experiments", "bench", "h100-2026-11-27b",
                                                   "peers-h100.csv"))
TRACE = os.path.join(ROOT, "traces", "synthetic-opt-8l-4s.trace")


def main():
    hws = sys.argv[1:] or ["H100-80GB-host-b-rule", "H100-80GB-host-b-gemm"]
    print("| point | model | batch | --percent | measured ms | " + " | ".join(hws) + " |")
    print("|---|---|---|---|---|" + "---|" * len(hws))
    for r in csv.DictReader(open(MEASURED)):
        if r["status"] != "ok":
            continue
        p = json.loads(r["params"])
        b, prompt = int(p["gpu-batch-size"]), int(p["prompt-len"])
        measured = b * prompt / float(r["prefill_tok_s"]) * 1e3
        system = "flexgen" if p["cpu-cache-compute"] == "true" else "flexgen-copy"
        cells = []
        for hw in hws:
            out = subprocess.run([ALISA, "sim", "--trace", TRACE, "--model", p["model"], "--hardware", hw,
                                  "--profile", PROFILE, "--software", "flexgen-h100-host", "--batch", str(b),
                                  "--prompt-len", str(prompt), "--gen-len", p["gen-len"], "--system", system,
                                  "--flexgen-percent", p["percent"].replace(":", ","), "--json"],
                                 check=True, capture_output=True, text=True).stdout
            pre = json.loads(out)["prefill_s"] * 1e3
            cells.append("%.1f (%+.0f%%)" % (pre, 100 * (pre / measured - 1)))
        print(f"| {r['point']} | {p['model']} | {b} | {p['percent'].replace(':', ' ')} | {measured:.1f} | "
              + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

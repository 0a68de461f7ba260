#!/usr/bin/env python3
"""experiments/measured/fig9-H100.csv (issue 47, item 5): every Fig. 9 run
measured on an H100 (the executor's rows of experiments/bench/h100-*/
fig9-measured-h100.csv, as alisa sweep exported them in the window), each
beside the simulator's figure for the same point where the simulator can
price it: a point whose KV the device holds whole (no offloads, no loads),
priced as gpu-only with the run's selection on the catalog's H100-80GB and
on H100-80GB-host-hbm (experiments/measured/h100-host-2026-11-27.ini), no
host costs (the executor has no Python runtime). A point that moved KV is
left unsimulated here: alisa sim runs a system's own schedule and tiers, not
the executor's explicit budgets (its check is alisa validate with a profile
calibrated at that scale, issue 47 item 4). tok/s is decode tokens over
decode seconds, as alisa run reports it. Real FlexGen's runs (the rows of
experiments/bench/h100-*/peers-h100.csv that ran, system flexgen-0.1.8) are
listed as measured, FlexGen's own decode throughput (projected by FlexGen
from its first steps where the command says --cut-gen-len); the simulator's
figures for them, on three profiles, are in experiments/measured/
peers-H100.md (predict-peers.sh).
Usage: python3 experiments/measured/fig9-table.py [H100|H200] > experiments/measured/fig9-DEVICE.csv
(H100, the default: the windows of experiments/bench/h100-*, priced on
H100-80GB and H100-80GB-host-hbm; H200: experiments/bench/h200-*, priced on
the catalog's H200-141GB and H200-141GB-host-rule of
experiments/measured/h200-host-2026-11-29.ini, its measured host with issue
44's HBM rule, nothing in it fitted on an H200 point)."""
import csv
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ALISA = os.environ.get("ALISA", os.path.join(ROOT, "build", "alisa"))
DEVICE = sys.argv[1] if len(sys.argv) > 1 else "H100"
if DEVICE not in ("H100", "H200"):
    sys.exit("fig9-table.py: device: H100 or H200, not '%s'" % DEVICE)
PROFILE = os.path.join(ROOT, "experiments", "measured",
                       "h100-host-2026-11-27.ini" if DEVICE == "H100" else "h200-host-2026-11-29.ini")
HARDWARE = ("H100-80GB", "H100-80GB-host-hbm") if DEVICE == "H100" else ("H200-141GB", "H200-141GB-host-rule")
WINDOWS = DEVICE.lower() + "-*"
TRACE = os.path.join(ROOT, "traces", "synthetic-opt-8l-4s.trace")


def simulate(row, hardware):
    out = subprocess.run([ALISA, "sim", "--trace", TRACE, "--model", row["model"].split(" ")[0],
                          "--hardware", hardware, "--profile", PROFILE, "--batch", row["batch"],
                          "--prompt-len", row["prompt_tokens"], "--gen-len", row["gen_tokens"],
                          "--system", "alisa", "--selection", row["selection"], "--placement", "gpu-only",
                          "--sparsity", row["sparsity"], "--software", "none", "--json"],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    if d["oom"]:
        return None
    return int(row["batch"]) * int(row["gen_tokens"]) / (d["total_s"] - d["prefill_s"])


def main():
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["device", "date", "system", "model", "batch", "prompt_len", "gen_len", "sparsity", "tok_s",
                "source", "profile", "point", "code_version", "offloaded", "loaded", "command"])
    seen = set()
    for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "bench", WINDOWS, "fig9-measured-h100.csv"))):
        for row in csv.DictReader(open(path)):
            key = (row["point"], row["code_version"])
            if row["status"] != "ok" or key in seen:
                continue
            seen.add(key)
            model = row["model"].split(" ")[0]
            date = row["created"][:10]
            common = [row["batch"], row["prompt_tokens"], row["gen_tokens"], row["sparsity"]]
            cmd = f"alisa sweep experiments/fig9-measured-h100.sweep --point {row['point']}"
            w.writerow([row["device"], date, row["placement"], model] + common +
                       ["%.1f" % float(row["decode_tok_s"]), "measured", "", row["point"], row["code_version"],
                        row["offloaded"], row["loaded"], cmd])
            if row["offloaded"] != "0" or row["loaded"] != "0":
                continue
            for hw in HARDWARE:
                tps = simulate(row, hw)
                w.writerow([row["device"], date, row["placement"], model] + common +
                           ["oom" if tps is None else "%.1f" % tps, "simulated", hw, row["point"], "", "", "",
                            f"alisa sim --system alisa --selection {row['selection']} --placement gpu-only "
                            f"--software none --hardware {hw}"])
    for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "bench", WINDOWS, "peers-h100.csv"))):
        for row in csv.DictReader(open(path)):
            if row["status"] != "ok":
                continue
            p = json.loads(row["params"])
            cmd = f"alisa sweep experiments/peers-h100.sweep --point {row['point']} (--percent " + \
                p["percent"].replace(":", " ") + (" --cpu-cache-compute" if p["cpu-cache-compute"] == "true" else "") + \
                ("" if p["cut-gen-len"] == "false" else f" --cut-gen-len {p['cut-gen-len']}") + ")"
            w.writerow([row["device"], row["created"][:10], "flexgen-0.1.8", row["model"], row["batch"],
                        row["prompt_tokens"], row["gen_tokens"], "0", "%.1f" % float(row["decode_tok_s"]),
                        "measured", "", row["point"], row["code_version"], "", "", cmd])


if __name__ == "__main__":
    main()

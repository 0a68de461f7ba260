#!/usr/bin/env bash
# The simulator's predictions for real FlexGen's points (experiments/
# peers-h100.sweep), written down before FlexGen has run on a GPU here, so
# the measurement checks them (issue 47, item 1). Each point's own policy is
# passed (--flexgen-percent; --system flexgen with --cpu-cache-compute, else
# flexgen-copy), at gpu-batch-size = batch and one GPU batch, on three
# profiles: the catalog's H100-80GB (datasheet peak, the paper's 20 GB/s
# link, an assumed 100 GB/s host), and the two of
# experiments/measured/h100-host-2026-11-27.ini (the window's measured host
# and link; and HBM at the efficiency one executor point gave). Decode
# tok/s = batch x gen / (total - prefill); FlexGen's own figure is prompts x
# (gen - 1) / decode latency, 0.2% apart at 512 tokens. A point FlexGen runs
# with --cut-gen-len C shows "P (W)": P projected as FlexGen projects
# (utils.project_decode_latency: the first two decode steps, then the mean
# of the next C - 3 for every remaining step), from the simulated step
# times (--timeline), and W the whole simulated run.
# Usage: bash experiments/measured/predict-peers.sh > experiments/measured/peers-predicted.md
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=${ALISA:-build/alisa}
prof=experiments/measured/h100-host-2026-11-27.ini
tl=$(mktemp)
trap 'rm -f "$tl"' EXIT
echo "| point | model | batch | --percent | cache compute | H100-80GB (catalog) | measured host + link | + HBM 0.562 |"
echo "|---|---|---|---|---|---|---|---|"
$alisa sweep experiments/peers-h100.sweep --list | python3 -c '
import json, sys
for line in sys.stdin:
    k, _, j = line.rstrip("\n").split("\t")
    p = json.loads(j)["params"]
    print(k, p["model"], p["gpu-batch-size"], p["percent"], p["cpu-cache-compute"], p["prompt-len"], p["gen-len"], p["cut-gen-len"])' |
while read -r k model b pct ccc P G cut; do
    sys=flexgen-copy
    [ "$ccc" = true ] && sys=flexgen
    cells=()
    for hw in H100-80GB H100-80GB-host H100-80GB-host-hbm; do
        cells+=("$($alisa sim --trace traces/synthetic-opt-8l-4s.trace --model "$model" --hardware "$hw" --profile "$prof" \
            --batch "$b" --prompt-len "$P" --gen-len "$G" --system $sys --flexgen-percent "${pct//:/,}" \
            --timeline "$tl" --json |
            python3 -c 'import csv, json, sys
d = json.load(sys.stdin)
b, g, cut = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if d["oom"]:
    print("out of memory")
    sys.exit()
whole = "%.1f" % (b * g / (d["total_s"] - d["prefill_s"]))
if cut == "false":
    print(whole)
    sys.exit()
ends = [float(r["end_ms"]) / 1e3 for r in csv.DictReader(open(sys.argv[4]))]
steps = [ends[0] - d["prefill_s"]] + [y - x for x, y in zip(ends, ends[1:])]
c = int(cut)
mid = steps[2:c - 1]
proj = sum(steps[:2]) + sum(mid) / len(mid) * (g - 1 - 2)
print("%.1f (%s)" % (b * g / proj, whole))' "$b" "$G" "$cut" "$tl")")
    done
    echo "| $k | $model | $b | ${pct//:/ } | $ccc | ${cells[0]} | ${cells[1]} | ${cells[2]} |"
done

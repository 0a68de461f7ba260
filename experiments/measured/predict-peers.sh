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
# With MEASURED=CSV (a window's peers-h100.csv) each point also shows
# FlexGen's measured decode tok/s and each profile's error against it (the
# projected figure where FlexGen projected); PROFILE=FILE and HWS="A B C"
# name the profiles (default: the first window's, as above; NAME@SOFTWARE
# also passes --software SOFTWARE):
#   PROFILE=experiments/measured/h100-host-2026-11-27b.ini \
#   HWS="H100-80GB H100-80GB-host-b-rule H100-80GB-host-b-rule@flexgen-h100" \
#   MEASURED=experiments/bench/h100-2026-11-27b/peers-h100.csv \
#   bash experiments/measured/predict-peers.sh > experiments/measured/peers-H100.md
# METRIC=prefill gives the prefill instead, in ms (the measured one: batch x
# prompt tokens over FlexGen's prefill tok/s; the simulated: prefill_s).
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=${ALISA:-build/alisa}
prof=${PROFILE:-experiments/measured/h100-host-2026-11-27.ini}
read -r -a hws <<<"${HWS:-H100-80GB H100-80GB-host H100-80GB-host-hbm}"
measured=${MEASURED:-}
metric=${METRIC:-decode}
[ "$metric" = decode ] || [ "$metric" = prefill ] || { echo "predict-peers.sh: METRIC: decode or prefill, not '$metric'" >&2; exit 2; }
[ -z "$measured" ] || [ -f "$measured" ] || { echo "predict-peers.sh: MEASURED: no file '$measured'" >&2; exit 2; }
tl=$(mktemp)
trap 'rm -f "$tl"' EXIT
if [ -z "${HWS:-}" ]; then
    head="H100-80GB (catalog) | measured host + link | + HBM 0.562"
else
    head=$(printf ' | %s' "${hws[@]}")
    head=${head# | }
fi
if [ -n "$measured" ]; then
    echo "| point | model | batch | --percent | cache compute | measured | $head | errors |"
    echo "|---|---|---|---|---|---|$(printf '%s' "${hws[@]/*/---|}")---|"
else
    echo "| point | model | batch | --percent | cache compute | $head |"
    echo "|---|---|---|---|---|$(printf '%s' "${hws[@]/*/---|}")"
fi
# measured K: FlexGen's decode tok/s (or prefill ms) at point K of
# $measured ("failed" or "not run" where it has none)
measured_at() {
    python3 -c 'import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["point"] == sys.argv[2]]
if not rows or rows[-1]["status"] != "ok":
    print("failed" if rows else "not run")
    sys.exit()
r = rows[-1]
if sys.argv[3] == "prefill":
    print("%.1f" % (int(r["batch"]) * int(r["prompt_tokens"]) / float(r["prefill_tok_s"]) * 1e3))
else:
    print("%.1f" % float(r["decode_tok_s"]))' "$measured" "$1" "$metric"
}
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
    for hwsw in "${hws[@]}"; do
        hw=${hwsw%@*} sw=()
        [ "$hw" = "$hwsw" ] || sw=(--software "${hwsw#*@}")
        cells+=("$($alisa sim --trace traces/synthetic-opt-8l-4s.trace --model "$model" --hardware "$hw" --profile "$prof" "${sw[@]}" \
            --batch "$b" --prompt-len "$P" --gen-len "$G" --system $sys --flexgen-percent "${pct//:/,}" \
            --timeline "$tl" --json |
            python3 -c 'import csv, json, sys
d = json.load(sys.stdin)
b, g, cut = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if d["oom"]:
    print("out of memory")
    sys.exit()
if sys.argv[5] == "prefill":
    print("%.1f" % (d["prefill_s"] * 1e3))
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
print("%.1f (%s)" % (b * g / proj, whole))' "$b" "$G" "$cut" "$tl" "$metric")")
    done
    row=$(printf ' | %s' "${cells[@]}")
    if [ -z "$measured" ]; then
        echo "| $k | $model | $b | ${pct//:/ } | $ccc$row |"
        continue
    fi
    m=$(measured_at "$k")
    errs=$(python3 -c 'import re, sys
m = sys.argv[1]
out = []
for c in sys.argv[2:]:
    p = re.match(r"[0-9.]+", c)
    if m == "failed":
        out.append("OOM both" if c == "out of memory" else "said to fit")
    elif not re.fullmatch(r"[0-9.]+", m):
        out.append("-")
    elif not p:
        out.append("runs" if c == "out of memory" else "-")
    else:
        out.append("%+.0f%%" % (100 * (float(p.group()) / float(m) - 1)))
print(" / ".join(out))' "$m" "${cells[@]}")
    echo "| $k | $model | $b | ${pct//:/ } | $ccc | $m$row | $errs |"
done

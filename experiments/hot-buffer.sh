#!/usr/bin/env bash
# HiSparse's hot buffer against the offline optimum (issue 45, item 4b): on
# every committed trace, the exact top-k selection (topk: the B heaviest
# tokens of each step's own row, HiSparse's indexer at its upper bound) at
# 80% KV sparsity, each (sequence, layer) stream with a GPU buffer of
# F x B_max tokens (B_max: the budget at the trace's longest context) over a
# host tier that holds everything, managed by exact LRU with every new token
# written through to the host as HiSparse's is (the hot-buffer placement);
# beside it Belady's misses on the same selections (alisa plan's offline
# bound, the same run's second pass). Hit rate: attended tokens found on
# the GPU when the step began, over all attended tokens of the decode.
# Writes plots/out/hot-buffer.csv and .md; plots/hot-buffer.gp draws the
# figure. Run from the repository root after `make build` (about 4 minutes
# on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
alisa=${ALISA:-build/alisa}
out=plots/out
mkdir -p "$out"
factors="1 1.25 1.5 2 3 4"
csv=$out/hot-buffer.csv
echo "trace,factor,buffer_tokens,streams,attended,lru_misses,belady_misses,lru_hit_rate,belady_hit_rate" >"$csv.tmp"
for t in traces/*.trace; do
    name=$(basename "$t" .trace)
    # the trace's streams, KV bytes a token and longest context (no capacity)
    read -r streams kvb maxlen < <($alisa plan --trace "$t" --selection topk --sparsity 0.8 \
        --placement gpu-only --json | python3 -c 'import json, sys
d = json.load(sys.stdin); print(d["streams"], d["kv_bytes_per_token_layer"], d["max_len"])')
    bmax=$(python3 -c "print(max(1, 2 * round($maxlen * 0.2 / 2)))")
    for f in $factors; do
        tok=$(python3 -c "import math; print(math.ceil($f * $bmax))")
        $alisa plan --trace "$t" --selection topk --sparsity 0.8 --placement hot-buffer \
            --gpu-kv-bytes $((tok * streams * kvb)) --json |
            python3 -c 'import json, sys
name, f, tok, streams = sys.argv[1:5]
d = json.load(sys.stdin)
if d["oom"]:
    print(f"{name},{f},{tok},{streams},oom,,,,"); sys.exit(0)
a, m, b = d["attended_tokens"], d["gpu_misses"], d["optimum"]["belady_misses"]
print(f"{name},{f},{tok},{streams},{a},{m},{b},{1 - m / a:.6f},{1 - b / a:.6f}")' "$name" "$f" "$tok" "$streams" >>"$csv.tmp"
    done
done
mv "$csv.tmp" "$csv"
python3 - "$csv" >"$out/hot-buffer.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("HiSparse's hot buffer (topk at 80% sparsity, exact LRU per (sequence, layer) stream) against Belady:")
print("GPU hit rate of the attended tokens, LRU / Belady, by buffer size (x the largest step's budget).")
print("`bash experiments/hot-buffer.sh`.\n")
fs = sorted({float(r["factor"]) for r in rows})
print("| trace | " + " | ".join(f"{f:g}x" for f in fs) + " |")
print("|---|" + "---:|" * len(fs))
for name in dict.fromkeys(r["trace"] for r in rows):
    cells = []
    for f in fs:
        r = next(x for x in rows if x["trace"] == name and float(x["factor"]) == f)
        cells.append("oom" if r["attended"] == "oom" else
                     f"{100 * float(r['lru_hit_rate']):.1f}% / {100 * float(r['belady_hit_rate']):.1f}%")
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
cat "$out/hot-buffer.md"

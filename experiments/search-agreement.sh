#!/usr/bin/env bash
# Issue 42: ALISA's schedule search against the simulator, on the schedule
# the search picks (placement alisa, greedy): at every Fig. 9 point (the
# fitted trace, traces/fitted-opt-8l-4s.trace), the Fig. 12 point with INT8 KV, and the Fig. 12 point
# on the two recorded traces (extended to 512 steps) at 50, 80 and 90%
# sparsity. Prints a Markdown table: throughput, the phases (p1 / p2 in
# decode steps, alpha / beta), the search's priced decode and the simulated
# one, and their difference; then ALISA's throughput against batch under
# the greedy search and the grid, with where phase II begins at batch 64. Run from the repository root after make build
# (experiments/reproduce writes plots/out/search-agreement.md); about a
# minute and a half on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
alisa=${ALISA:-build/alisa}
row() { # TRACE MODEL HARDWARE BATCH [OPTION...]
    local t=$1 m=$2 h=$3 b=$4
    shift 4
    "$alisa" sim --trace "$t" --model "$m" --hardware "$h" --system alisa --batch "$b" --json "$@" |
        python3 -c '
import json, sys
t, m, h, b, opts = sys.argv[1:6]
d = json.load(sys.stdin)
if d["oom"]:
    print(f"| {t} | {m} | {h} | {b} | {opts} | OOM | | | | |")
    sys.exit()
s, n = d["schedule"], d["gen_len"]
dec = d["total_s"] - d["prefill_s"]
srch = s["search_decode_s"]
p1 = s["p1"] if s["p1"] < n else "never"
p2 = s["p2"] if s["p2"] < n else "never"
tput, alpha, beta = d["throughput_tok_s"], s["alpha"], s["beta"]
print(f"| {t} | {m} | {h} | {b} | {opts} | {tput:.0f} | {p1} / {p2}, {alpha:.2f} / {beta:.2f} "
      f"| {srch:.3f} | {dec:.3f} | {100 * (srch - dec) / dec:+.1f}% |")
' "$(basename "$t" .trace)" "$m" "$h" "$b" "$*"
}
echo "| trace | model | hardware | batch | options | tok/s | p1 / p2, alpha / beta | search s | simulated s | search - sim |"
echo "|---|---|---|---:|---|---:|---|---:|---:|---:|"
syn=traces/fitted-opt-8l-4s.trace
for m in OPT-6.7B OPT-13B LLaMA-7B LLaMA-13B; do
    for b in 4 8 16 32 64; do row $syn $m V100-32GB $b; done
done
for m in OPT-30B LLaMA-33B; do
    for b in 4 8 16 32 64; do row $syn $m H100-80GB $b; done
done
row $syn OPT-30B H100-80GB 64 --kv-int8
for t in traces/smollm2-135m-wikitext2.trace traces/stories260K-tinystories.trace; do
    for sp in 0.5 0.8 0.9; do row $t OPT-30B H100-80GB 64 --sparsity $sp --extend; done
done

# ALISA's throughput against batch under each search (tok/s), and where the
# GPU tier ends (p1): the largest points fall with batch
echo
echo "| model | hardware | search | batch 4 | 8 | 16 | 32 | 64 | p1 at 64 |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for mh in OPT-13B:V100-32GB OPT-30B:H100-80GB LLaMA-33B:H100-80GB; do
    m=${mh%%:*} h=${mh#*:}
    for search in greedy grid; do
        line="| $m | $h | $search |"
        for b in 4 8 16 32 64; do
            out=$("$alisa" sim --trace $syn --model "$m" --hardware "$h" --system alisa --batch $b \
                --search $search --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
p1 = d["schedule"]["p1"]
print("%.0f %s" % (d["throughput_tok_s"], p1 if p1 < d["gen_len"] else "never"))')
            line="$line ${out% *} |"
            p1=${out#* }
        done
        echo "$line $p1 |"
    done
done

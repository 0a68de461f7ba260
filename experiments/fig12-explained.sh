#!/usr/bin/env bash
# Issue 42 (item 5): the paper's Fig. 12 point (OPT-30B, batch 64, 128 +
# 512 tokens, H100-80GB) taken apart, on the committed fitted trace (traces/fitted-opt-8l-4s.trace), the old synthetic one and
# on the recorded SmolLM2 trace (extended to 512 steps):
#   12a  the phases ALISA's greedy search picks at 50-90% KV sparsity;
#   12b  the recompute's gain at each sparsity: the greedy schedule against
#        the same alpha and p1 with no phase III (--schedule ALPHA,0,P1,512),
#        with the runs' overlap and without it (--overlap none);
#   12c  each technique's share: SWA (dense -> swa), the paper's scheduling
#        (flexgen-static -> alisa) and INT8 KV, added in every order, and
#        the Shapley value (the mean over orders) where every combination
#        runs; dense attention under placement alisa runs out of GPU memory
#        (every CPU token loaded at once), so orders through it are named
#        and left out.
# Prints Markdown. Run from the repository root after make build;
# experiments/reproduce writes plots/out/fig12-explained.md. About a
# minute on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
alisa=${ALISA:-build/alisa}
point=(--model OPT-30B --hardware H100-80GB --batch 64 --prompt-len 128 --gen-len 512)
traces=("fitted-opt-8l-4s:" "synthetic-opt-8l-4s:" "smollm2-135m-wikitext2:--extend")
json() { "$alisa" sim "${point[@]}" --json "$@"; }
field() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

echo "## Fig. 12a: phases by KV sparsity (greedy search, system alisa)"
echo
echo "| trace | sparsity | tok/s | p1 | p2 | alpha | beta |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for tr in "${traces[@]}"; do
    name=${tr%%:*} extra=${tr#*:}
    for sp in 0.5 0.6 0.7 0.8 0.9; do
        json --trace "traces/$name.trace" --system alisa --sparsity $sp $extra | field '"| '"$name"' | '"$sp"' | %.0f | %s | %s | %.2f | %.2f |" % (d["throughput_tok_s"], d["schedule"]["p1"] if d["schedule"]["p1"] < 512 else "never", d["schedule"]["p2"] if d["schedule"]["p2"] < 512 else "never", d["schedule"]["alpha"], d["schedule"]["beta"])'
    done
done

echo
echo "## Fig. 12b: the recompute's gain (decode time without phase III over with it)"
echo
echo "| trace | sparsity | overlap | p2, beta | decode s | without phase III s | gain |"
echo "|---|---:|---|---|---:|---:|---:|"
for tr in "${traces[@]}"; do
    name=${tr%%:*} extra=${tr#*:}
    for sp in 0.5 0.6 0.7 0.8 0.9; do
        for ov in prefetch none; do
            d=$(json --trace "traces/$name.trace" --system alisa --sparsity $sp --overlap $ov $extra)
            sched=$(echo "$d" | field '"%r,0,%d,512" % (d["schedule"]["alpha"], d["schedule"]["p1"])')
            p2=$(echo "$d" | field '("%d, %.2f" % (d["schedule"]["p2"], d["schedule"]["beta"])) if d["schedule"]["p2"] < 512 else "never"')
            with=$(echo "$d" | field 'd["total_s"] - d["prefill_s"]')
            without=$(json --trace "traces/$name.trace" --system alisa --sparsity $sp --overlap $ov \
                $extra --schedule "$sched" | field 'd["total_s"] - d["prefill_s"]')
            awk -v n="$name" -v s=$sp -v o=$ov -v p="$p2" -v a="$with" -v b="$without" \
                'BEGIN { printf "| %s | %s | %s | %s | %.2f | %.2f | %.2fx |\n", n, s, o, p, a, b, b / a }'
        done
    done
done

echo
echo "## Fig. 12c: each technique's share of the speed-up (fitted trace, 80%)"
echo
# the 8 combinations: selection dense|swa x placement flexgen-static|alisa x fp16|int8
declare -A t
for sel in dense swa; do
    for pl in flexgen-static alisa; do
        for kv in fp16 int8; do
            flag=""; [ $kv = int8 ] && flag=--kv-int8
            t[$sel.$pl.$kv]=$(json --trace traces/fitted-opt-8l-4s.trace --system alisa \
                --selection $sel --placement $pl $flag | field '"oom" if d["oom"] else d["total_s"]')
        done
    done
done
echo "| selection | placement | KV | total s |"
echo "|---|---|---|---:|"
for k in "${!t[@]}"; do echo "$k ${t[$k]}"; done | sort | while read -r k v; do
    IFS=. read -r sel pl kv <<<"$k"
    echo "| $sel | $pl | $kv | $v |"
done
echo
python3 - "$(for k in "${!t[@]}"; do echo "$k=${t[$k]}"; done)" <<'PY'
import itertools, math, sys
t = dict(line.split("=") for line in sys.argv[1].split())
steps = {"SWA": ("sel", "dense", "swa"), "scheduling": ("pl", "flexgen-static", "alisa"),
         "INT8": ("kv", "fp16", "int8")}
def key(state):
    return f'{state["sel"]}.{state["pl"]}.{state["kv"]}'
gains = {k: [] for k in steps}
print("| order | SWA | scheduling | INT8 | total |")
print("|---|---:|---:|---:|---:|")
for order in itertools.permutations(steps):
    state = {"sel": "dense", "pl": "flexgen-static", "kv": "fp16"}
    row, ok = {}, True
    for name in order:
        field, _, to = steps[name]
        before = t[key(state)]
        state[field] = to
        after = t[key(state)]
        if before == "oom" or after == "oom":
            ok = False
            break
        row[name] = float(before) / float(after)
    label = " -> ".join(order)
    if not ok:
        print(f"| {label} | passes through {key(state)}: out of memory | | | |")
        continue
    for k in steps:
        gains[k].append(math.log(row[k]))
    total = math.prod(row.values())
    print(f"| {label} | {row['SWA']:.2f}x | {row['scheduling']:.2f}x | {row['INT8']:.2f}x | {total:.1f}x |")
n = len(gains["SWA"])
print()
print(f"Mean over the {n} orders that run (geometric; the Shapley value needs all 6): " +
      ", ".join(f"{k} {math.exp(sum(v) / len(v)):.2f}x" for k, v in gains.items()))
PY

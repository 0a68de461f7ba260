#!/usr/bin/env bash
# Per-head selection against head-mean selection (issue 45): on traces that
# keep every head's row (recorded here with `alisa record --per-head`; too
# large to commit), each selection at 80% KV sparsity runs twice under
# HiSparse's hot buffer (LRU per stream, every new row written through to a
# host tier that holds everything), with a buffer of 1.5 x B_max tokens a
# stream (B_max: the budget at the longest context):
# - head-mean: one stream per (sequence, layer), one set for every head,
#   chosen on the head-mean row (what every committed figure runs);
# - per head (`--per-head`): one stream per (sequence, layer, KV head), each
#   KV head choosing on its query group's mean row and caching its own
#   (token, head) units, the same GPU bytes in all.
# Columns: the attention each KV head keeps (recall over every (step, KV
# head), mean and worst), the bytes the hot buffer loads over the link, and
# Belady's loads on the same selections (the offline bound, in bytes).
# Writes plots/out/per-head.csv and .md. Run from the repository root after
# `make build` and `make models` (SmolLM2's GGUF); about 6 minutes on 2
# cores, the recordings included (kept in build/traces-heads/).
set -euo pipefail
cd "$(dirname "$0")/.."
alisa=${ALISA:-build/alisa}
out=plots/out
dir=build/traces-heads
mkdir -p "$out" "$dir"
smollm2=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
text=../shared/models/eval-text
record() { # name, then alisa record's options
    local name=$1
    shift
    [ -s "$dir/$name.trace" ] || $alisa record "$@" --per-head -o "$dir/$name.trace" >/dev/null
}
if [ -s "$smollm2" ]; then
    record smollm2-135m-wikitext2-heads --model "$smollm2" --text "$text/wikitext2_wiki.test.raw" \
        --prompt-len 128 --gen-len 512 --threshold 0.01
    record smollm2-135m-tinystories-heads --model "$smollm2" \
        --text "$text/tinystories_val_subset.txt" --prompt-len 128 --gen-len 512 --threshold 0.01
else
    echo "per-head: $smollm2 missing (make models): SmolLM2's traces skipped" >&2
fi
record stories260K-tinystories-heads --model stories260K --text "$text/tinystories_val_subset.txt" \
    --prompt-len 128 --gen-len 384 --batch 4
csv=$out/per-head.csv
echo "trace,units_per_token,selection,mode,buffer_tokens,attended_per_step,head_recall_mean,head_recall_min,bytes_h2d,belady_bytes_h2d,gpu_hit_rate" >"$csv.tmp"
for t in "$dir"/*.trace; do
    name=$(basename "$t" .trace)
    read -r streams kvb maxlen < <($alisa plan --trace "$t" --selection topk --sparsity 0.8 \
        --placement gpu-only --json | python3 -c 'import json, sys
d = json.load(sys.stdin); print(d["streams"], d["kv_bytes_per_token_layer"], d["max_len"])')
    bmax=$(python3 -c "print(max(1, 2 * round($maxlen * 0.2 / 2)))")
    tok=$(python3 -c "import math; print(math.ceil(1.5 * $bmax))")
    for sel in topk quest infinigen h2o swa; do
        for mode in head-mean per-head; do
            flag=()
            [ "$mode" = per-head ] && flag=(--per-head)
            # quest's and infinigen's dense first two layers hold every
            # token, so no buffer of this size runs them: their recall alone,
            # every token on the GPU
            place=(--placement hot-buffer --gpu-kv-bytes $((tok * streams * kvb)))
            case $sel in quest | infinigen) place=(--placement gpu-only) ;; esac
            $alisa plan --trace "$t" --selection $sel --sparsity 0.8 "${place[@]}" \
                "${flag[@]}" --json |
                python3 -c 'import json, sys
name, sel, mode, tok = sys.argv[1:5]
d = json.load(sys.stdin)
if d["oom"]:
    print(f"{name},,{sel},{mode},{tok},,oom,,,,"); sys.exit(0)
if d["placement"] != "hot-buffer":
    tok = "all"
unit = d["kv_bytes_per_token_layer"]  # a token, or a (token, KV head) unit
units, up, hit = d["units_per_token"], d["bytes_h2d"], d["gpu_hit_rate"]
rmean, rmin = d["attention_head_recall_mean"], d["attention_head_recall_min"]
belady = d["optimum"]["belady_misses"] * unit if d["optimum"] else ""
att = d["attended_tokens"] / d["decode_steps"]
print(f"{name},{units},{sel},{mode},{tok},{att:.2f},{rmean:.6f},{rmin:.6f},{up},{belady},{hit:.6f}")' \
                    "$name" "$sel" "$mode" "$tok" >>"$csv.tmp"
        done
    done
done
mv "$csv.tmp" "$csv"
python3 - "$csv" >"$out/per-head.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("Per-head against head-mean selection at 80% KV sparsity under HiSparse's hot buffer")
print("(1.5 x the largest step's budget a stream, the same GPU bytes either way):")
print("attention each KV head keeps (mean / worst over every step and KV head), and the")
print("MB loaded over the link, LRU against Belady (quest and infinigen: every token on the")
print("GPU, their dense first two layers holding the whole context). `bash experiments/per-head.sh`.\n")
print("| trace | selection | tokens a step, head-mean / per head | recall per KV head, head-mean -> per head | MB up, head-mean (Belady) | MB up, per head (Belady) |")
print("|---|---|---:|---|---:|---:|")
def get(name, sel, mode):
    return next(r for r in rows if r["trace"] == name and r["selection"] == sel and r["mode"] == mode)
for name in dict.fromkeys(r["trace"] for r in rows):
    for sel in dict.fromkeys(r["selection"] for r in rows if r["trace"] == name):
        m, p = get(name, sel, "head-mean"), get(name, sel, "per-head")
        if "oom" in (m["head_recall_mean"], p["head_recall_mean"]):
            print(f"| {name} | {sel} | | oom | | |")
            continue
        rec = lambda r: f"{float(r['head_recall_mean']):.3f} / {float(r['head_recall_min']):.3f}"
        mb = lambda r: ("every token on the GPU" if r["buffer_tokens"] == "all" else
                        f"{int(r['bytes_h2d']) / 1e6:.1f} ({int(r['belady_bytes_h2d']) / 1e6:.1f})")
        att = f"{float(m['attended_per_step']):.1f} / {float(p['attended_per_step']):.1f}"
        print(f"| {name} | {sel} | {att} | {rec(m)} -> {rec(p)} | {mb(m)} | {mb(p)} |")
PY
cat "$out/per-head.md"

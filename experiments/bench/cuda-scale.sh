#!/usr/bin/env bash
# The CUDA executor at the paper's model shapes (issue 22), on a machine
# with an NVIDIA GPU: decode tokens/s of `alisa run --weights synthetic`
# (weights drawn on the GPU at the catalog's shape, FP16; random prompt ids)
# at batch 1, 8, 32, 64, 128 + 512 tokens, dense and under SWA at 80% with
# KV offloaded (alisa-cache placement: a device arena of a quarter of the
# run's KV, a pinned host arena as large), beside HF transformers on the same
# shape and GPU (experiments/bench/hf_decode.py: random FP16 weights, static
# cache), run by run in one session.
#
# Each point runs twice, eager (every kernel launched from the host, a
# tiered step waiting for each layer's attention) and pipelined
# (--cuda-pipeline: the dense step replayed as a CUDA graph, the
# tiered step planned a layer ahead and observed at its end), rows "eager"
# and "pipelined"; the HF peer once a point.
#
# Share of the HBM roofline: bytes read per decode step (every layer's
# matrices and the output head in FP16, plus the K and V attended: FP16 in
# the dense cache and the tiered arenas alike; on average P + G/2 tokens
# dense, 20% of them with SWA) / the mean time a decode token takes (batch /
# the decode tok/s `alisa run` prints) /
# the device-to-device bandwidth measured here by torch (bytes read plus
# written over a 2 GiB copy, the figure such machines are quoted by).
# Attention source: the attention the GPU computes from the synthetic
# weights (near uniform; --attention-from is not built), said in the table.
#
# The wall step (batch / decode tok/s, what a user waits for) and the
# forward step (the mean decode `total_us` of --timings: the layers and head,
# without the host's sampling and bookkeeping) are both reported; the
# roofline share is of the wall step. --timings records CUDA events, so the
# wall figure includes their small cost. alisa run's decode rate counts G
# tokens over G - 1 forward calls (the first comes from the prompt's last
# position), so the wall step reads (G - 1) / G of a forward's time: 0.2% at
# G = 512, a quarter at the rehearsal's G = 4.
#
# Each also runs under every value of FUSE ("1"; "1 0" for the A/B):
# ALISA_CUDA_FUSE=0 is the step as it was before its fused projections
# (2026-11-29: a cuBLAS GEMM a matrix, a separate residual add), step "eager-unfused" or "pipelined-unfused".
#
# Knobs: MODELS (default "LLaMA-7B"), BATCHES ("1 8 32 64"), MODES
# ("dense"; "dense offload"), PIPELINE ("0 1"), FUSE ("1"), P (128), G (512), HF (0:
# 1 runs the peer too, each with a ~50 s compile warm-up), OUT_DIR (where the
# Markdown table and CSV go, row by row as each run ends: experiments/bench),
# RUN_S (each run's time limit, 150 s), BACKEND (cuda; cpu rehearses the
# script without a GPU, as scripts/gpu-window --rehearse does), BW (the
# device-to-device GB/s, instead of measuring it with torch). Run from the
# repository root after `make build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=${ALISA:-build/alisa}
P=${P:-128} G=${G:-512}
backend=${BACKEND:-cuda} run_s=${RUN_S:-150} outdir=${OUT_DIR:-experiments/bench}
dev=$($alisa version | sed -n 's/^device: //p') drv=$($alisa version | sed -n 's/^driver: //p')
if [ "$backend" = cuda ]; then
    case "$dev" in none*|"") echo "cuda-scale.sh: no CUDA device ($dev)" >&2; exit 1 ;; esac
else
    dev="CPU rehearsal ($(uname -m))" drv=none
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bw=${BW:-$(timeout 120 python3 -c '
import torch, time
n = 1 << 30
a = torch.empty(n, dtype=torch.uint16, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(20): b.copy_(a)
torch.cuda.synchronize(); print(round(2 * 2 * n * 20 / (time.perf_counter() - t) / 1e9))')}
shape() { # model key -> value from the catalog
    awk -v m="[$1]" -v k="$2" '$0 == m { on = 1; next } /^\[/ { on = 0 }
        on && $1 == k { print $3; exit }' sim/model/catalog/models.ini
}
name=$(tr ' /' '__' <<<"$dev" | tr -cd 'A-Za-z0-9_.-')
mkdir -p "$outdir"
out=$outdir/cuda-scale-$name.md csv=$outdir/cuda-scale-$name.csv
today=$(date -u +%F)
echo "device,date,system,model,mode,step,batch,prompt,gen,wall_tok_s,step_ms,forward_ms,gb_s,roofline_share,hf_tok_s,note" >"$csv"
{
echo "Device: $dev; driver $drv; device-to-device copy measured at $bw GB/s (read + written)"
echo "Command: experiments/bench/cuda-scale.sh ($today, $(git rev-parse --short HEAD 2>/dev/null || echo unknown)); $P + $G tokens; weights synthetic FP16 drawn on the GPU; attention computed (synthetic weights)"
echo
echo "| model | KV | step | batch | alisa decode tok/s | wall step ms | forward ms | GB/s read | share of measured bandwidth (wall) | HF transformers tok/s | alisa / HF |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for M in ${MODELS:-LLaMA-7B}; do
    fam=$(shape "$M" family) L=$(shape "$M" layers) d=$(shape "$M" hidden) H=$(shape "$M" heads)
    kvh=$(shape "$M" kv_heads) ffn=$(shape "$M" ffn) fm=$(shape "$M" ffn_matrices)
    V=$(shape "$M" vocab) ctx=$(shape "$M" max_seq) tied=$(shape "$M" tied_embeddings)
    kv=$(( d / H * kvh ))
    wbytes=$(( (L * (2 * d * d + 2 * kv * d + fm * d * ffn) + V * d) * 2 ))
    for mode in ${MODES:-dense}; do
        for b in ${BATCHES:-1 8 32 64}; do
            extra=() share=1 kvb=2 # FP16 K and V, dense cache and tiered arenas alike (FP32 on the CPU)
            [ "$backend" = cpu ] && kvb=4
            if [ $mode = offload ]; then
                all=$(( (P + G) * kv * 2 * kvb * b * L ))
                extra=(--selection swa --sparsity 0.8 --placement alisa-cache
                       --gpu-kv-bytes $(( all / 4 )) --cpu-kv-bytes $(( all / 4 )))
                share=0.2
            fi
            hf=- ratio=-
            if [ "${HF:-0}" = 1 ] && [ $mode = dense ]; then
                if timeout -k 5 "$run_s" python3 experiments/bench/hf_decode.py --family $fam --layers $L --hidden $d \
                        --heads $H --kv-heads $kvh --ffn $ffn --vocab $V --max-seq $ctx \
                        --tied ${tied:-0} --batch $b --prompt $P --gen $G >"$tmp/hf" 2>"$tmp/hferr"; then
                    hf=$(sed -n 's/.*decode_tok_s=\([0-9.]*\).*/\1/p' "$tmp/hf")
                    echo "$dev,$today,hf,$M,$mode,-,$b,$P,$G,$hf,,,,,,\"$(cat "$tmp/hf")\"" >>"$csv"
                else
                    hf="failed: $(tail -1 "$tmp/hferr" | cut -c1-80 | tr ',|' ';/')"
                fi
            fi
            for fuse in ${FUSE:-1}; do
            for pipe in ${PIPELINE:-0 1}; do
                step=eager
                [ "$pipe" = 1 ] && step=pipelined
                [ "$fuse" = 0 ] && step=$step-unfused
                pflag=()
                [ "$pipe" = 1 ] && pflag=(--cuda-pipeline)
                rm -f "$tmp/t.jsonl"
                if ! ALISA_CUDA_FUSE=$fuse timeout -k 5 "$run_s" $alisa run --backend "$backend" --model "$M" --weights synthetic \
                        --prompt-tokens $P -n $G --batch $b "${extra[@]}" "${pflag[@]}" \
                        --timings "$tmp/t.jsonl" >/dev/null 2>"$tmp/err"; then
                    note="failed: $(tail -1 "$tmp/err" | tr ',|' ';/')"
                    echo "| $M | $mode | $step | $b | - | - | - | - | - | - | $note |"
                    echo "$dev,$today,alisa,$M,$mode,$step,$b,$P,$G,,,,,,,\"$note\"" >>"$csv"
                    continue
                fi
                fwd=$(awk -F'"total_us": ' '/"phase": "decode"/ { split($2, a, ","); s += a[1]; n++ }
                          END { if (n) printf "%.3f", s / n / 1e3; else print "" }' "$tmp/t.jsonl")
                tps=$(awk '/tokens\/s \(decode/ { for (i = 1; i <= NF; i++) if ($i == "tokens/s") print $(i - 1) }' "$tmp/err")
                read -r ms gbs pct < <(awk -v b=$b -v L=$L -v kv=$kv -v w=$wbytes -v share=$share \
                        -v kvb=$kvb -v bw=$bw -v tps="$tps" -v ctx=$(( P + G / 2 )) 'BEGIN {
                    t = b / tps; bytes = w + b * L * share * ctx * kv * 2 * kvb
                    printf "%.3f %.0f %.3f\n", t * 1e3, bytes / t / 1e9, bytes / t / 1e9 / bw }')
                ratio=-
                case "$hf" in [0-9]*) ratio=$(awk -v a="$tps" -v h="$hf" 'BEGIN { printf "%.2f", a / h }') ;; esac
                echo "| $M | $mode | $step | $b | $tps | $ms | $fwd | $gbs | $pct | $hf | $ratio |"
                echo "$dev,$today,alisa,$M,$mode,$step,$b,$P,$G,$tps,$ms,$fwd,$gbs,$pct,$hf,ok" >>"$csv"
            done
            done
        done
    done
done
} | tee "$out"
echo "cuda-scale.sh: $out and $csv" >&2

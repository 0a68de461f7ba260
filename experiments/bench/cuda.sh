#!/usr/bin/env bash
# CUDA executor speed (issue 7), on a machine with an NVIDIA GPU: decode
# tokens/s of SmolLM2-135M on the CUDA backend at batch 1, 8, 32 and 64,
# dense (every token's KV on the GPU) and with KV offload (SWA at 80%
# sparsity under ALISA placement, a GPU KV arena of about a quarter of the
# run's KV and a CPU arena as large, so phases II and III run), a prompt of about 64 tokens and 192
# new tokens, and the share of
# the HBM roofline each reached: (FP16 weights + the K and V read per step)
# / measured decode step time / peak bandwidth. The K and V read is
# B x layers x attended x kv_dim x 2 x 2 bytes (FP16 on the GPU, dense cache and arenas alike;
# 4 in the CPU backend's FP32 arenas), attended being
# pos + 1 dense and 20% of it with SWA (the budget rounds, so approximately).
# Peak bandwidth: PEAK_GBPS, else 4800 (H200), 2000 (H100 PCIe), 3350 (H100
# SXM). Prints a Markdown table and writes it to experiments/bench/
# cuda-<device>.md. Run from the repository root after `make build`.
# BACKEND=cpu PEAK_GBPS=N runs the same measurement on the CPU backend (a
# check of this script on a machine without a GPU; nothing is written).
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
smol=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
backend=${BACKEND:-cuda}
dev=$($alisa version | sed -n 's/^device: //p')
if [ "$backend" = cuda ]; then
    case "$dev" in none*) echo "cuda.sh: no CUDA device ($dev)" >&2; exit 1 ;; esac
else
    dev="CPU backend (script check)"
fi
peak=${PEAK_GBPS:-}
if [ -z "$peak" ]; then
    case "$dev" in *H200*) peak=4800 ;; *H100*PCIe*) peak=2000 ;; *H100*) peak=3350 ;;
        *) echo "cuda.sh: set PEAK_GBPS for $dev" >&2; exit 1 ;; esac
fi
info=$($alisa model info "$smol")
layers=$(awk '$1 == "block_count" { print $2 }' <<<"$info")
dim=$(awk '$1 == "embedding_length" { print $2 }' <<<"$info")
heads=$(awk '$1 == "attention.head_count" { print $2 }' <<<"$info")
kvh=$(awk '$1 == "attention.head_count_kv" { print $2 }' <<<"$info")
melems=$(awk '$1 == "tensors:" { print $3 }' <<<"$info")
kvdim=$(( dim / heads * kvh ))
P=100 G=192 # P bounds the prompt's tokens (300 characters) for the arena's size
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt=$(head -c 1000 "${ALISA_MODELS:-../shared/models}/eval-text/wikitext2_wiki.test.raw" |
         tr -s '\n ' '  ' | cut -c 1-300)
out=experiments/bench/cuda-$(tr ' /' '__' <<<"$dev" | tr -cd 'A-Za-z0-9_.-').md
[ "$backend" = cuda ] || out=/dev/null
{
    echo "Device: $dev; peak $peak GB/s; SmolLM2-135M ($melems M weights, FP16), $layers layers, kv_dim $kvdim"
    echo "Command: experiments/bench/cuda.sh ($(date -u +%F))"
    echo
    echo "| KV | batch | decode tokens/s | mean step ms | GB/s (weights + KV read) | share of peak | KV moves (offloaded/loaded/recomputed) |"
    echo "|---|---|---|---|---|---|---|"
    for mode in dense offload; do
        for b in ${BATCHES:-1 8 32 64}; do
            extra=()
            share=1 kvb=2 # FP16 on the GPU, dense cache and arenas (both since 2026-11-24)
            [ "$backend" = cpu ] && kvb=4 # the CPU backend's cache and arenas are FP32
            if [ $mode = offload ]; then
                all=$(( (P + G) * kvdim * 2 * kvb * b * layers ))
                extra=(--selection swa --sparsity 0.8 --placement alisa-cache --gpu-kv-bytes $(( all / 4 ))
                       --cpu-kv-bytes $(( all / 4 )))
                share=0.2
            fi
            $alisa run --backend $backend --model "$smol" --prompt "$prompt" -n $G \
                --batch $b --timings "$tmp/t.jsonl" "${extra[@]}" >/dev/null 2>"$tmp/err" ||
                { cat "$tmp/err" >&2; exit 1; }
            tps=$(awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($i == "tokens/s") print $(i - 1) }' "$tmp/err")
            moves=$(awk '/KV moves/ { print $4 "/" $6 "/" $8 }' "$tmp/err")
            awk -v b=$b -v L=$layers -v kv=$kvdim -v w=$melems -v share=$share -v kvb=$kvb -v peak=$peak \
                -v mode=$mode -v tps="$tps" -v moves="${moves:--}" '
                /"phase": "decode"/ {
                    match($0, /"pos": [0-9]+/); pos = substr($0, RSTART + 7, RLENGTH - 7) + 0
                    match($0, /"total_us": [0-9.]+/); us = substr($0, RSTART + 12, RLENGTH - 12) + 0
                    bytes += w * 1e6 * 2 + b * L * share * (pos + 1) * kv * 2 * kvb
                    t += us * 1e-6; n++
                }
                END { gbps = bytes / t / 1e9
                      printf "| %s | %d | %s | %.3f | %.0f | %.1f%% | %s |\n", mode, b, tps, t / n * 1e3, gbps, 100 * gbps / peak, moves }' "$tmp/t.jsonl"
        done
    done
} | tee "$out"

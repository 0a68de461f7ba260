#!/usr/bin/env bash
# Evaluated tokens per second per selection policy (issue 8's benchmark
# line): `alisa eval --no-reference` (no dense reference run) at 80% KV
# sparsity, 512-token windows, 128-token dense prefill, batch 8 windows.
# stories260K: the first 100 TinyStories blocks (19 windows), median of 3;
# SmolLM2-135M (when scripts/get-models has fetched it): 2 WikiText windows,
# one run. "dense" is the plain dense path, no scheduler; "swa+int8" adds
# INT8 KV. One OpenBLAS thread. Run from the repository root after
# `make build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
export OPENBLAS_NUM_THREADS=1
text=${ALISA_MODELS:-../shared/models}/eval-text
smol=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
rate() { # rate RUNS ARGS... -> median tokens/s
    local runs=$1
    shift
    for _ in $(seq 1 "$runs"); do
        $alisa eval "$@" --no-reference --json | awk -F: '/"tokens_per_s"/ { gsub(/[ ,]/, "", $2); print $2 }'
    done | sort -g | sed -n "$(( (runs + 1) / 2 ))p"
}
printf '%-14s %-10s %12s\n' model policy "tokens/s"
for m in stories260K "$smol"; do
    [ "$m" = "$smol" ] && [ ! -f "$smol" ] && continue
    if [ "$m" = "$smol" ]; then
        name=SmolLM2-135M runs=1 src=(--text "$text/wikitext2_wiki.test.raw" --max-tokens 1022)
    else
        name=stories260K runs=3 src=(--text "$text/tinystories_val_subset.txt" --blocks 100)
    fi
    for p in dense local strided streaming h2o swa swa+int8; do
        sel=()
        case $p in
        dense) ;;
        swa+int8) sel=(--selection swa --sparsity 0.8 --kv-int8) ;;
        *) sel=(--selection "$p" --sparsity 0.8) ;;
        esac
        printf '%-14s %-10s %12.0f\n' "$name" "$p" \
            "$(rate "$runs" --model "$m" "${src[@]}" --ctx 512 "${sel[@]}")"
    done
done

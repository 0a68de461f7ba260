#!/usr/bin/env bash
# CPU executor speed: decode tokens/s at batch 1, 8 and 32, with OpenBLAS
# GEMMs (the executor) and with plain loops one sequence at a time
# (ALISA_REFERENCE_GEMM=1: a single-file llama2.c-style forward pass, the
# issue's reference point). stories260K: median of 3 runs of 400 new tokens;
# SmolLM2-135M (when scripts/get-models has fetched it): one run of 24 new
# tokens. Then prefill speed: `alisa eval` on SmolLM2 scores one 256-token
# WikiText window (batch 1; 32-position chunks, each one GEMM over its rows)
# with both forward passes. One OpenBLAS thread. Run from the repository
# root after `make build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
export OPENBLAS_NUM_THREADS=1
smol=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
rate() { # rate ENV MODEL N RUNS BATCH -> median tokens/s
    for _ in $(seq 1 "$4"); do
        env $1 $alisa run --model "$2" --prompt "Once upon a time" -n "$3" --batch "$5" \
            2>&1 >/dev/null | awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($i == "tokens/s") print $(i - 1) }'
    done | sort -n | sed -n "$(( ($4 + 1) / 2 ))p"
}
printf '%-14s %-26s %8s %12s\n' model "forward pass" batch "tokens/s"
for m in stories260K "$smol"; do
    [ "$m" = "$smol" ] && [ ! -f "$smol" ] && continue
    n=400 runs=3 name=stories260K
    [ "$m" = "$smol" ] && n=24 runs=1 name=SmolLM2-135M
    for ref in 0 1; do
        label="executor (OpenBLAS)"
        [ $ref = 1 ] && label="reference (plain loops)"
        for b in 1 8 32; do
            printf '%-14s %-26s %8s %12s\n' "$name" "$label" "$b" \
                "$(rate ALISA_REFERENCE_GEMM=$ref "$m" $n $runs "$b")"
        done
    done
done
[ -f "$smol" ] || exit 0
wiki=${ALISA_MODELS:-../shared/models}/eval-text/wikitext2_wiki.test.raw
printf '\n%-14s %-26s %8s %12s\n' model "prefill (eval, 1 window)" batch "tokens/s"
for ref in 0 1; do
    label="executor (OpenBLAS)"
    [ $ref = 1 ] && label="reference (plain loops)"
    printf '%-14s %-26s %8s %12s\n' SmolLM2-135M "$label" 1 "$(ALISA_REFERENCE_GEMM=$ref $alisa eval \
        --model "$smol" --text "$wiki" --ctx 256 --max-tokens 255 --batch 1 --json |
        awk -F'[:,]' '/tokens_per_s/ { printf "%.1f", $2 }')"
done

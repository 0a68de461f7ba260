#!/usr/bin/env bash
# CPU executor speed on stories260K: decode tokens/s at batch 1, 8 and 32,
# with OpenBLAS GEMMs (the executor) and with plain loops one sequence at a
# time (ALISA_REFERENCE_GEMM=1: a single-file llama2.c-style forward pass,
# the issue's reference point). Median of 3 runs, 400 new tokens each, one
# OpenBLAS thread. Run from the repository root after `make build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
export OPENBLAS_NUM_THREADS=1
rate() { # rate ENV BATCH -> median tokens/s
    for _ in 1 2 3; do
        env $1 $alisa run --model stories260K --prompt "Once upon a time" -n 400 --batch "$2" \
            2>&1 >/dev/null | awk '/tokens\/s/ { for (i = 1; i <= NF; i++) if ($i == "tokens/s") print $(i - 1) }'
    done | sort -n | sed -n 2p
}
printf '%-26s %8s %12s\n' "forward pass" batch "tokens/s"
for b in 1 8 32; do
    printf '%-26s %8s %12s\n' "executor (OpenBLAS)" "$b" "$(rate ALISA_REFERENCE_GEMM=0 "$b")"
done
for b in 1 8 32; do
    printf '%-26s %8s %12s\n' "reference (plain loops)" "$b" "$(rate ALISA_REFERENCE_GEMM=1 "$b")"
done

#!/usr/bin/env bash
# Simulator speed: wall time and simulated decode steps per second for
# OPT-30B on H100-80GB, batch 64, 128 + 512 tokens, systems alisa and
# flexgen, on synthetic traces; then the same with 2x and 4x the work, in
# trace sequences (unique streams the scheduler must run) and in batch
# (which only re-weights already scheduled streams). Prints a table; run it
# from the repository root after `make build`. A run that runs out of memory
# stops early, so its time says nothing about speed (oom column).
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
out=build/bench
mkdir -p "$out"
for seqs in 4 8 16; do
    f="$out/opt30b-$seqs.trace"
    [ -f "$f" ] || $alisa trace gen --model OPT-30B --layers 32 --seqs "$seqs" --prompt-len 128 \
        --gen-len 512 --seed 7 -o "$f" 2>/dev/null
done
printf '%-8s %6s %6s %6s %10s %14s %16s\n' system seqs batch oom wall_s decode_steps/s stream_steps/s
for system in alisa flexgen; do
    for run in "4 64" "8 64" "16 64" "4 128" "4 256"; do
        set -- $run
        start=$(date +%s.%N)
        oom=$($alisa sim --trace "$out/opt30b-$1.trace" --model OPT-30B --hardware H100-80GB \
            --batch "$2" --prompt-len 128 --gen-len 512 --system "$system" --json |
            grep '"oom"' | tr -d ' ,' | cut -d: -f2)
        end=$(date +%s.%N)
        awk -v s="$system" -v q="$1" -v b="$2" -v o="$oom" -v t0="$start" -v t1="$end" 'BEGIN {
            w = t1 - t0; printf "%-8s %6d %6d %6s %10.3f %14.1f %16.0f\n", s, q, b, o, w, 512 / w,
            q * 32 * 640 / w }'
    done
done

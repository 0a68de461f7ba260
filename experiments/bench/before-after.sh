#!/usr/bin/env bash
# The CPU executor's decode speed against another build of itself (a change's
# before and after, e.g. a refactor that must not slow the forward pass):
# `alisa run` greedy decode, tok/s as it prints them, the two binaries
# interleaved, the median of the repeats, on stories260K (batch 1 on one
# thread, batch 8 on two) and SmolLM2-135M Q4_1 (batch 1 and 8 on two).
#   bash experiments/bench/before-after.sh OTHER_ALISA [REPEATS]   (default 5)
# OTHER_ALISA: a built `alisa` of the other version (e.g. a git worktree
# built with the same CMAKE_BUILD_TYPE as build/: `cmake -S . -B build
# -DALISA_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build
# --target alisa`). Check `uptime` first: it needs a quiet machine.
# CONFIGS: the runs, "MODEL BATCH THREADS TOKENS" each, ';'-separated
# (smollm2 names the GGUF below), instead of the four above.
# CALLGRIND=1: instead of wall time, the decode's instructions as valgrind's
# callgrind counts them (the run at N tokens less the run at N / 4, so the
# load and prompt cancel; OpenMP's threads wait passively, so no spinning is
# counted): deterministic where a shared VM's wall time is not.
set -euo pipefail
cd "$(dirname "$0")/../.."
other=${1:?usage: before-after.sh OTHER_ALISA [REPEATS]}
repeats=${2:-5}
this=$PWD/build/alisa
smollm2=${ALISA_MODELS_CACHE:-$PWD/models-cache}/SmolLM2-135M-Instruct.Q4_1.gguf
for f in "$other" "$this"; do [ -x "$f" ] || { echo "before-after: no $f" >&2; exit 1; }; done
[ -f "$smollm2" ] || { echo "before-after: no $smollm2 (bash scripts/get-models)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ALISA_WAIT=${ALISA_WAIT:-spin} ALISA_MODELS=${ALISA_MODELS:-$PWD/../shared/models}

# instructions BINARY MODEL BATCH THREADS N: the decode's instructions, millions
instructions() {
    local out=$tmp/cg.out counts=()
    for n in $(($5 / 4)) "$5"; do
        ALISA_WAIT_SET=1 OMP_WAIT_POLICY=PASSIVE valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$1" run --model "$2" --batch "$3" --threads "$4" --prompt "Once upon a time" -n "$n" \
            >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
        counts+=("$(sed -n 's/^totals: //p' "$out")")
    done
    echo "${counts[0]} ${counts[1]}" | awk '{ printf "%.2f\n", ($2 - $1) / 1e6 }'
}

# rate BINARY MODEL BATCH THREADS N: one run's decode tok/s
rate() {
    "$1" run --model "$2" --batch "$3" --threads "$4" --prompt "Once upon a time" -n "$5" \
        >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    sed -n 's/.*: \([0-9.]*\) tokens\/s (decode.*/\1/p' "$tmp/err" | tail -1
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [ -n "${CALLGRIND:-}" ]; then
    command -v valgrind >/dev/null || { echo "before-after: CALLGRIND=1 needs valgrind" >&2; exit 1; }
    echo "decode instructions (millions; callgrind, the run at N tokens less the run at N / 4)"
    echo "this: $this ($(git rev-parse --short HEAD)); other: $other; $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "| model | batch | threads | tokens | this | other | this / other |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for c in "stories260K 1 1 400" "stories260K 8 2 400" "$smollm2 1 1 16" "$smollm2 8 2 8"; do
        set -- $c
        a=$(instructions "$this" "$@") b=$(instructions "$other" "$@")
        printf "| %s | %s | %s | %s | %s | %s | %.4f |\n" "$(basename "$1")" "$2" "$3" "$4" "$a" "$b" \
            "$(echo "$a $b" | awk '{ print $1 / $2 }')"
    done
    exit 0
fi
echo "decode tok/s, median of $repeats interleaved runs, ALISA_WAIT=$ALISA_WAIT;"
echo "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) cores;" \
     "$(date -u '+%Y-%m-%d %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "this: $this ($(git rev-parse --short HEAD)); other: $other"
echo
echo "| model | batch | threads | tokens | this | other | this / other |"
echo "|---|---:|---:|---:|---:|---:|---:|"
configs=("stories260K 1 1 400" "stories260K 8 2 400" "$smollm2 1 2 64" "$smollm2 8 2 64")
[ -n "${CONFIGS:-}" ] && IFS=';' read -r -a configs <<<"${CONFIGS//smollm2/$smollm2}"
for c in "${configs[@]}"; do
    set -- $c
    : >"$tmp/a"; : >"$tmp/b"
    for i in $(seq "$repeats"); do
        rate "$this" "$1" "$2" "$3" "$4" >>"$tmp/a"
        rate "$other" "$1" "$2" "$3" "$4" >>"$tmp/b"
    done
    a=$(median <"$tmp/a") b=$(median <"$tmp/b")
    printf "| %s | %s | %s | %s | %.1f | %.1f | %.3f |\n" "$(basename "$1")" "$2" "$3" "$4" "$a" "$b" \
        "$(echo "$a $b" | awk '{ print $1 / $2 }')"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

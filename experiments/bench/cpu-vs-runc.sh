#!/usr/bin/env bash
# The CPU executor against llama2.c's run.c on stories260K (issue 28): greedy
# decoding at batch 1 on one thread, alisa run interleaved with run.c built
# as llama2.c's Makefile builds it (`make run`: -O3; `make runfast`: -Ofast),
# the median of the repeats, with each run's resident memory.
#
# run.c is not on PyPI or in Debian, so it is not fetched here: pass the path
# of run.c from github.com/karpathy/llama2.c (measured with commit 350e04f).
#   bash experiments/bench/cpu-vs-runc.sh PATH/TO/run.c [REPEATS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:?usage: cpu-vs-runc.sh PATH/TO/run.c [REPEATS]}
repeats=${2:-5}
models=${ALISA_MODELS:-$PWD/../shared/models}
model=$models/stories260K/stories260K.bin
tok=$models/stories260K/tok512.bin
alisa=$PWD/build/alisa
[ -f "$model" ] && [ -f "$tok" ] || { echo "cpu-vs-runc: no $model or $tok" >&2; exit 1; }
[ -x "$alisa" ] || { echo "cpu-vs-runc: build alisa first (make build)" >&2; exit 1; }
work=$PWD/build/runc
mkdir -p "$work"
gcc -O3 -o "$work/run-O3" "$src" -lm
gcc -Ofast -o "$work/run-Ofast" "$src" -lm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompt="Once upon a time"
steps=512 # the model's whole context

# Each runner prints "TOKENS_PER_S RSS_KB" for one run.
alisa_run() {
    /usr/bin/time -f "%M" -o "$tmp/rss" "$alisa" run --model "$model" --tokenizer "$tok" \
        --threads 1 --prompt "$prompt" -n $((steps - 5)) >/dev/null 2>"$tmp/err"
    echo "$(sed -n 's/.*: \([0-9.]*\) tokens\/s (decode.*/\1/p' "$tmp/err") $(cat "$tmp/rss")"
}
runc() { # binary
    /usr/bin/time -f "%M" -o "$tmp/rss" "$1" "$model" -z "$tok" -t 0 -n $steps -i "$prompt" \
        >/dev/null 2>"$tmp/err"
    echo "$(sed -n 's/achieved tok\/s: \([0-9.]*\)/\1/p' "$tmp/err") $(cat "$tmp/rss")"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for i in $(seq "$repeats"); do
    alisa_run >>"$tmp/alisa"
    runc "$work/run-O3" >>"$tmp/o3"
    runc "$work/run-Ofast" >>"$tmp/ofast"
done
a=$(cut -d' ' -f1 "$tmp/alisa" | median)
echo "stories260K, greedy, batch 1, 1 thread, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1);"
echo "run.c from $src; median of $repeats interleaved runs; $(date -u +%Y-%m-%d)"
echo
echo "| program | tok/s | alisa / it | RSS MB |"
echo "|---|---:|---:|---:|"
printf "| alisa run --threads 1 | %.0f | 1.00 | %.0f |\n" "$a" \
    "$(cut -d' ' -f2 "$tmp/alisa" | median | awk '{ print $1 / 1024 }')"
for v in o3:"run.c -O3" ofast:"run.c -Ofast"; do
    f=${v%%:*}
    t=$(cut -d' ' -f1 "$tmp/$f" | median)
    printf "| %s | %.0f | %.2f | %.0f |\n" "${v#*:}" "$t" "$(echo "$a $t" | awk '{ print $1 / $2 }')" \
        "$(cut -d' ' -f2 "$tmp/$f" | median | awk '{ print $1 / 1024 }')"
done

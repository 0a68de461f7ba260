#!/usr/bin/env bash
# The CPU executor against llama.cpp on the same machine (issue 28): SmolLM2-
# 135M Q4_1, decode at batch 1, 8 and 32 and one 512-token prompt, with 1
# and 2 threads (alisa's prompt twice: as `alisa run` prefills it, logits of
# the last position only, as llama-bench computes them; and as `alisa eval`
# runs a window, logits at every position), the two programs run
# interleaved (alisa, llama.cpp, alisa, llama.cpp, ...; the median of the
# repeats), with each run's resident
# memory. llama.cpp is built from the PyPI source release of
# llama-cpp-python (pinned below, sha256-checked) into build/llamacpp/
# (git-ignored, never committed). Prints a Markdown table; run it from the
# repository root after `make build`, on an otherwise idle machine.
#
#   bash experiments/bench/cpu-vs-llamacpp.sh [REPEATS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
alisa=$PWD/build/alisa
work=$PWD/build/llamacpp
version=0.3.36
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
model=${ALISA_MODELS:-../shared/models}/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || model=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || { echo "cpu-vs-llamacpp: no SmolLM2 GGUF (make models)" >&2; exit 1; }
text=../shared/models/eval-text/tinystories_val_subset.txt
# about 512 SmolLM2 tokens of it, cut at a space (alisa run says how many)
prompt=$(head -c 2300 "$text" | tr '\n' ' ' | sed 's/ [^ ]*$//')
mkdir -p "$work"

# llama.cpp, once: the sdist's vendored tree, CPU build for this machine
if [ ! -x "$work/build/bin/llama-bench" ] || [ ! -x "$work/build/bin/llama-batched-bench" ]; then
    tarball="$work/llama_cpp_python-$version.tar.gz"
    [ -f "$tarball" ] || pip download "llama-cpp-python==$version" --no-binary :all: --no-deps \
        -d "$work" >&2
    echo "$sha  $tarball" | sha256sum -c --quiet - >&2
    tar xzf "$tarball" -C "$work"
    src="$work/llama_cpp_python-$version/vendor/llama.cpp"
    cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON >"$work/cmake.log" 2>&1
    cmake --build "$work/build" -j"$(nproc)" --target llama-bench llama-batched-bench \
        >"$work/build.log" 2>&1
fi
bench=$work/build/bin/llama-bench
batched=$work/build/bin/llama-batched-bench

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each runner prints "TOKENS_PER_S RSS_KB" for one run.
alisa_decode() { # threads batch
    /usr/bin/time -f "%M" -o "$tmp/rss" "$alisa" run --model "$model" --threads "$1" \
        --prompt "Once upon a time" -n 128 --batch "$2" >/dev/null 2>"$tmp/err"
    echo "$(sed -n 's/.*: \([0-9.]*\) tokens\/s (decode.*/\1/p' "$tmp/err") $(cat "$tmp/rss")"
}
alisa_prefill() { # threads: a prompt of about 512 tokens, as alisa run prefills it
    /usr/bin/time -f "%M" -o "$tmp/rss" "$alisa" run --model "$model" --threads "$1" \
        --prompt "$prompt" -n 1 >/dev/null 2>"$tmp/err"
    sed -n 's/.*prompt of \([0-9]*\) tokens.*/\1/p' "$tmp/err" >"$tmp/np"
    echo "$(sed -n 's/.*: \([0-9.]*\) tokens\/s (prefill.*/\1/p' "$tmp/err") $(cat "$tmp/rss")"
}
alisa_prompt() { # threads
    /usr/bin/time -f "%M" -o "$tmp/rss" "$alisa" eval --model "$model" --threads "$1" \
        --text "$text" --ctx 512 --blocks 12 >"$tmp/out" 2>/dev/null
    echo "$(sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p' "$tmp/out") $(cat "$tmp/rss")"
}
llama_decode() { # threads batch
    if [ "$2" -eq 1 ]; then
        /usr/bin/time -f "%M" -o "$tmp/rss" "$bench" -m "$model" -t "$1" -p 0 -n 128 -r 1 -o csv \
            >"$tmp/out" 2>/dev/null
        echo "$(python3 -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1]))); print(r[-1]["avg_ts"])' "$tmp/out") $(cat "$tmp/rss")"
    else
        /usr/bin/time -f "%M" -o "$tmp/rss" "$batched" -m "$model" -t "$1" -c 8192 -npp 4 \
            -ntg 128 -npl "$2" >"$tmp/out" 2>/dev/null
        # the table row of this batch: | PP | TG | B | N_KV | T_PP | S_PP | T_TG | S_TG | ...
        echo "$(awk -F'|' -v b="$2" '$4 + 0 == b && $2 + 0 == 4 { gsub(/ /, "", $9); print $9 }' "$tmp/out") $(cat "$tmp/rss")"
    fi
}
llama_prompt() { # threads
    /usr/bin/time -f "%M" -o "$tmp/rss" "$bench" -m "$model" -t "$1" -p 512 -n 0 -r 1 -o csv \
        >"$tmp/out" 2>/dev/null
    echo "$(python3 -c 'import csv, sys; r = list(csv.DictReader(open(sys.argv[1]))); print(r[-1]["avg_ts"])' "$tmp/out") $(cat "$tmp/rss")"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "SmolLM2-135M Q4_1 ($(basename "$model")), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1),"
echo "llama.cpp from llama-cpp-python $version; median of $repeats interleaved runs; $(date -u +%Y-%m-%d)"
echo
echo "| test | threads | alisa tok/s | llama.cpp tok/s | alisa / llama.cpp | alisa RSS MB | llama.cpp RSS MB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for t in 1 2; do
    for test in "decode, batch 1:1" "decode, batch 8:8" "decode, batch 32:32" \
        "prompt, 512 tokens (alisa run's prefill):f" "prompt, 512 tokens, logits at every position (alisa eval):p"; do
        name=${test%%:*} b=${test##*:}
        : >"$tmp/a"
        : >"$tmp/l"
        for ((r = 0; r < repeats; r++)); do
            if [ "$b" = f ]; then
                alisa_prefill "$t" >>"$tmp/a"
                llama_prompt "$t" >>"$tmp/l"
            elif [ "$b" = p ]; then
                alisa_prompt "$t" >>"$tmp/a"
                llama_prompt "$t" >>"$tmp/l"
            else
                alisa_decode "$t" "$b" >>"$tmp/a"
                llama_decode "$t" "$b" >>"$tmp/l"
            fi
        done
        at=$(cut -d' ' -f1 "$tmp/a" | median) am=$(cut -d' ' -f2 "$tmp/a" | median)
        lt=$(cut -d' ' -f1 "$tmp/l" | median) lm=$(cut -d' ' -f2 "$tmp/l" | median)
        awk -v n="$name" -v t="$t" -v at="$at" -v lt="$lt" -v am="$am" -v lm="$lm" 'BEGIN {
            printf "| %s | %d | %.1f | %.1f | %.2f | %.0f | %.0f |\n", n, t, at, lt,
                (lt > 0 ? at / lt : 0), am / 1024, lm / 1024 }'
    done
done
echo
echo "alisa run's prompt: $(cat "$tmp/np") tokens (llama-bench -p 512: 512)"

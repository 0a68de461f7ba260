#!/usr/bin/env bash
# Issue 41: the executor's thread count on a shared machine. Decode tok/s of
# stories260K (200 tokens) and SmolLM2-135M (32 tokens, batch 1 and 8), and
# `alisa eval` of stories260K, under the automatic thread count, --threads 1
# and --threads N (every CPU), every CPU spinning as before issue 41 (the
# peer of the same run), and the automatic count with ALISA_WAIT=spin
# (OMP_WAIT_POLICY=ACTIVE), each on a quiet machine and beside BUSY (2) busy loops;
# the median of REPS (3) runs. Prints a Markdown table; a benchmark, not a
# test. Run from the repository root after `make build` (and make models).
set -uo pipefail
cd "$(dirname "$0")/../.."
alisa=${ALISA:-build/alisa} reps=${REPS:-3} busy=${BUSY:-2}
smol=models-cache/SmolLM2-135M-Instruct.Q4_1.gguf
text=${ALISA_MODELS:-../shared/models}/eval-text/tinystories_val_subset.txt
ncpu=$(nproc)
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }'; }
rate() { # CMD... -> the decode (or eval) tokens/s it printed (run: stderr; eval: stdout)
    timeout 120 "$@" 2>&1 | grep -o '[0-9.]* tokens/s' | tail -1 | cut -d' ' -f1
}
loops=()
start_busy() { for _ in $(seq 1 "$busy"); do sh -c 'while :; do :; done' & loops+=($!); done; sleep 1; }
stop_busy() { kill "${loops[@]}" 2>/dev/null; wait "${loops[@]}" 2>/dev/null; loops=(); }
trap stop_busy EXIT
echo "$(date -u +%FT%TZ), $(git rev-parse --short HEAD), $ncpu CPUs, $(uptime | sed 's/.*load/load/')"
echo
echo "| run | threads | quiet tok/s | beside $busy busy loops tok/s |"
echo "|---|---|---|---|"
for what in stories smollm2 smollm2-b8 eval; do
    case $what in
        stories) cmd=("$alisa" run --model stories260K --prompt "Once upon a time" -n 200) ;;
        smollm2) [ -f "$smol" ] || continue
                 cmd=("$alisa" run --model "$smol" --prompt "Once upon a time" -n 32) ;;
        smollm2-b8) [ -f "$smol" ] || continue
                 cmd=("$alisa" run --model "$smol" --prompt "Once upon a time" -n 32 --batch 8) ;;
        eval) cmd=("$alisa" eval --model stories260K --text "$text" --ctx 256 --max-tokens 4096) ;;
    esac
    # "spinning": every CPU with the libraries' spinning waits, the default
    # before issue 41 (ALISA_WAIT_SET= turns off the passive-waiting restart)
    for t in auto 1 "$ncpu" spinning spin; do
        opt=()
        case $t in
            auto) ;;
            spinning) opt=(--threads "$ncpu") ;;
            spin) ;;
            *) opt=(--threads "$t") ;;
        esac
        [ "$t" = spin ] && export ALISA_WAIT=spin || unset ALISA_WAIT
        [ "$t" = spinning ] && export ALISA_WAIT_SET= || unset ALISA_WAIT_SET
        q=$(for _ in $(seq 1 "$reps"); do rate "${cmd[@]}" "${opt[@]}"; done | median)
        start_busy
        b=$(for _ in $(seq 1 "$reps"); do rate "${cmd[@]}" "${opt[@]}"; done | median)
        stop_busy
        echo "| $what | $t | $q | $b |"
        unset ALISA_WAIT_SET ALISA_WAIT
    done
done

#!/usr/bin/env bash
# Issue 39: the GPU window kit rehearsed end to end on the CPU, every stage
# (scripts/gpu-window --rehearse --kill all): the pack made from this build,
# each stage run in a scratch copy with a bare environment, its reads, its
# $OUT and its time limits checked, partial results surviving a kill. A
# broken kit fails here, not in a GPU window.
# Usage: gpu_window_test.sh REPO_ROOT BUILD_DIR MODELS_DIR
set -u
root=$1 build=$2 models=$3
for d in stories260K llama2-tokenizer-32k eval-text; do
    if [ ! -d "$models/$d" ]; then
        echo "SKIPPED: $models/$d missing (the pack needs it)"
        [ "${CI:-}" = true ] && exit 1
        exit 77
    fi
done
command -v patchelf >/dev/null || { echo "FAIL: patchelf missing (bash scripts/setup installs it)"; exit 1; }
cd "$root" || exit 1
ALISA_BUILD=$build ALISA_MODELS=$models bash scripts/gpu-window --rehearse --kill all
rc=$?
# a plan is checked whole before any stage runs: file, line and value named
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
printf '60 tests\n# a comment\n20 tset\n' >"$t/a.plan"
printf '60 fig9 1 BATCHES="1 2"\n' >"$t/b.plan"
for i in 1 2 3 4 5 6 7 8; do echo "10 host"; done >"$t/c.plan"
printf '5 host\n' >"$t/d.plan"
for c in "a.plan:3: stage 'tset'" "b.plan:1: 'BATCHES=\"1'" "c.plan: 8 stages, at most 7" "d.plan:1: seconds '5'"; do
    f=${c%%:*}
    out=$(OUT="$t/out" bash scripts/gpu-window --plan "$t/$f" 2>&1)
    prc=$?
    if [ $prc != 2 ] || ! grep -qF "$t/$c" <<<"$out"; then
        echo "FAIL: --plan $f: exit $prc, '$out' (expected exit 2 and '$c')"
        rc=1
    fi
    [ ! -e "$t/out/plan.txt" ] || { echo "FAIL: --plan $f ran something"; rc=1; }
done
# a stage run for real where there is no GPU stops before the pack's
# setup.sh copies its binaries over this build's (exit 2, one line)
if nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_window_test: a GPU is here: the no-GPU refusal is not checked (SKIPPED that check)"
else
    cp -p "$build/alisa" "$t/alisa.before"
    out=$(OUT="$t/out2" bash scripts/gpu-window tests 2>&1)
    prc=$?
    if [ $prc != 2 ] || ! grep -qF "gpu-window: tests: no GPU here" <<<"$out"; then
        echo "FAIL: gpu-window tests without a GPU: exit $prc, '$out' (expected exit 2, 'no GPU here')"
        rc=1
    fi
    cmp -s "$build/alisa" "$t/alisa.before" || { echo "FAIL: gpu-window without a GPU changed $build/alisa"; rc=1; }
fi
exit $rc

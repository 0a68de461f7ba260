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

#!/usr/bin/env bash
# The dependency rule between alisa's folders (CMakeLists.txt, each folder's
# README): every project header a source file includes ("x.h") must live in
# a folder its layer may use.
#
#   sim/core    the scheduler core           core only (and libm)
#   sim/trace   the trace format             core
#   sim/model   catalogs, cost model, search core
#   sim         the simulator shell          core, trace, model
#   exec        the executor (+ kernels)     core, model, kernels
#   sim/cli     the simulator's commands     core, trace, model, sim, itself
#   exec/cli    the executor's commands      everything
#
# The libraries' include paths enforce most of this at build time; this test
# also covers the CLI folders (built into one binary) and names the file,
# and holds that no command sets up the scheduler core itself.
# Usage: layering_test.sh SOURCE_DIR [--self-test]
# --self-test: first checks, on a copy of the folders, that an include from
# above the core in a core file is caught.
set -u
src=${1:-$(dirname "$0")/..}
cd "$src" || exit 1
if [ "${2:-}" = --self-test ]; then
    tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/tests" && cp -r sim exec kernels "$tmp/"
    printf '#include "trace.h"\n' >>"$tmp/sim/core/scheduler.c"
    if out=$(bash "$0" "$tmp"); then
        echo "FAIL: self-test: a core file including trace.h passed"; exit 1
    fi
    case $out in *"sim/core/scheduler.c includes trace.h"*) ;; *)
        echo "FAIL: self-test: the violation was not named: $out"; exit 1 ;; esac
    echo "self-test: a core file including trace.h is caught"
    rm -rf "$tmp/sim" "$tmp/exec" && cp -r sim exec "$tmp/"
    printf 'static void f(void) { scheduler_create(0, 0, 0, 0); }\n' >>"$tmp/exec/cli/cmd_exec.c"
    out=$(bash "$0" "$tmp") && { echo "FAIL: self-test: a command calling scheduler_create passed"; exit 1; }
    case $out in *"exec/cli/cmd_exec.c:"*"scheduler_create"*) ;; *)
        echo "FAIL: self-test: the scheduler set-up in a command was not named: $out"; exit 1 ;; esac
    echo "self-test: a command setting up the scheduler is caught"
    rm -rf "$tmp/sim" "$tmp/exec" && cp -r sim exec "$tmp/"
    printf 'static int g(const struct placement_ops *p) { return p == &place_lru_ops; }\n' \
        >>"$tmp/sim/replay.c"
    out=$(bash "$0" "$tmp") && { echo "FAIL: self-test: a shell naming a policy passed"; exit 1; }
    case $out in *"sim/replay.c:"*"place_lru_ops"*) ;; *)
        echo "FAIL: self-test: the policy named in a shell was not found: $out"; exit 1 ;; esac
    echo "self-test: a shell branching on a policy's identity is caught"
    rm -rf "$tmp/sim" "$tmp/exec" && cp -r sim exec "$tmp/"
    printf 'static int h(const struct llm_config *c) { return c->arch == LLM_ARCH_OPT; }\n' \
        >>"$tmp/exec/backend_cpu.c"
    out=$(bash "$0" "$tmp") && { echo "FAIL: self-test: a backend naming an architecture passed"; exit 1; }
    case $out in *"exec/backend_cpu.c:"*"LLM_ARCH_OPT"*) ;; *)
        echo "FAIL: self-test: the architecture named in a backend was not found: $out"; exit 1 ;; esac
    echo "self-test: a backend branching on an architecture's identity is caught"
fi

allowed() { # allowed LAYER -> the folders its files may include from
    case $1 in
        sim/core) echo "sim/core" ;;
        sim/trace) echo "sim/core sim/trace" ;;
        sim/model) echo "sim/core sim/model" ;;
        sim) echo "sim/core sim/trace sim/model sim" ;;
        exec) echo "sim/core sim/model exec kernels" ;;
        kernels) echo "kernels" ;;
        sim/cli) echo "sim/core sim/trace sim/model sim sim/cli" ;;
        exec/cli) echo "sim/core sim/trace sim/model sim sim/cli exec exec/cli kernels" ;;
    esac
}

# every project header, by name -> its folder (names are unique)
declare -A home
for h in sim/core/*.h sim/trace/*.h sim/model/*.h sim/*.h exec/*.h kernels/*.h sim/cli/*.h \
         exec/cli/*.h; do
    name=$(basename "$h")
    if [ -n "${home[$name]:-}" ]; then
        echo "FAIL: header $name is in both ${home[$name]} and $(dirname "$h")"
        exit 1
    fi
    home[$name]=$(dirname "$h")
done

fail=0 checked=0
for layer in sim/core sim/trace sim/model sim exec kernels sim/cli exec/cli; do
    ok=" $(allowed "$layer") "
    for f in "$layer"/*.c "$layer"/*.h "$layer"/*.cu; do
        [ -f "$f" ] || continue
        checked=$((checked + 1))
        while IFS= read -r inc; do
            dir=${home[$inc]:-}
            [ -n "$dir" ] || continue # a system or library header
            case $ok in
                *" $dir "*) ;;
                *) echo "FAIL: $f includes $inc from $dir; $layer may use only:$ok"
                   fail=$((fail + 1)) ;;
            esac
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done
[ "$checked" -gt 50 ] || { echo "FAIL: only $checked files found under $src"; exit 1; }
if [ "$fail" -gt 0 ]; then
    echo "$fail include(s) break the layering"
    exit 1
fi
# the commands parse, resolve and report; the shells set up the scheduler
# (issue 40: exec/tiered.c for the executor, sim/replay.c for the simulator)
if calls=$(grep -n "scheduler_create *(" sim/cli/*.c exec/cli/*.c); then
    echo "FAIL: a command sets up the scheduler itself (use exec/tiered.h or sim/replay.h):"
    echo "$calls"
    exit 1
fi
# the shells and commands ask a policy's table what they need (ask, don't
# name: ../shared/STYLE.md); they never branch on which policy it is
policies=$(sed -n 's/^[[:space:]]*\.name = "\([a-z0-9-]*\)",.*/\1/p' sim/core/sel_*.c sim/core/selection.c \
    sim/core/place_*.c | sort -u | paste -sd'|')
[ -n "$policies" ] || { echo "FAIL: no policy names found in sim/core"; exit 1; }
if named=$(grep -nE "[=!]= *&(place|sel)_[a-z0-9_]+_ops|strcmp\([^)]*\"($policies)\"\)" \
        sim/*.c exec/*.c sim/cli/*.c exec/cli/*.c); then
    echo "FAIL: a shell branches on which policy it runs (give the ops table a field instead):"
    echo "$named"
    exit 1
fi
# the model is written once (exec/layers.c) and reads the architecture as
# data (llm_arch_info); only the loaders (exec/model.c) map a checkpoint's
# family to its architecture
if named=$(grep -nE "LLM_ARCH_[A-Z]+" exec/*.c exec/*.cu exec/cli/*.c kernels/*.cu kernels/*.h \
        | grep -v "^exec/model\.c:"); then
    echo "FAIL: code outside the loaders branches on which architecture it runs (read llm_arch_info):"
    echo "$named"
    exit 1
fi
echo "layering: $checked files, every include within its layer; no command sets up the" \
     "scheduler; no shell names a policy or an architecture to branch on it"

#!/usr/bin/env bash
# The fuzz harnesses are the files tests/fuzz/fuzz_*.c (but fuzz_common.c
# and fuzz_replay.c); three lists must name exactly them: the targets
# `make fuzz` builds (read from `make -n fuzz`), tests/fuzz/run's default
# targets (run --list) and tests/fuzz/CMakeLists.txt's ALISA_FUZZ_TARGETS.
# The Makefile's hand-kept list once lacked fuzz_safetensors, and make fuzz
# stopped at the missing binary (issue 48). Names the list and the harness.
# Usage: targets_test.sh SOURCE_DIR [--self-test]
# --self-test: first checks, on a copy, that a Makefile listing its targets
# by hand without fuzz_safetensors is caught.
set -u
src=${1:-$(dirname "$0")/../..}
cd "$src" || exit 1
if [ "${2:-}" = --self-test ]; then
    tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/tests" && cp -r tests/fuzz "$tmp/tests/" && cp Makefile "$tmp/"
    hand=$(bash tests/fuzz/run --list | grep -vx safetensors | sed 's/^/fuzz_/' | tr '\n' ' ')
    sed -i "s/--target \$(FUZZ_TARGETS)/--target $hand/" "$tmp/Makefile"
    if out=$(bash "$0" "$tmp"); then
        echo "FAIL: self-test: a Makefile without fuzz_safetensors passed"; exit 1
    fi
    case $out in *"make fuzz lacks safetensors"*) ;; *)
        echo "FAIL: self-test: the missing target was not named: $out"; exit 1 ;; esac
    echo "self-test: a Makefile without fuzz_safetensors is caught"
fi

files=$(for f in tests/fuzz/fuzz_*.c; do
    t=${f#tests/fuzz/fuzz_}
    t=${t%.c}
    case $t in common | replay) ;; *) echo "$t" ;; esac
done | sort)
[ "$(echo "$files" | wc -w)" -ge 8 ] || { echo "FAIL: only $(echo $files) under $src/tests/fuzz"; exit 1; }
make_list=$(make -s -n -C "$src" fuzz 2>/dev/null | sed -n 's/.*--target //p' | tr ' ' '\n' |
    sed -n 's/^fuzz_//p' | sort)
run_list=$(bash tests/fuzz/run --list | sort)
cmake_list=$(sed -n 's/^set(ALISA_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt |
    tr ' ' '\n' | sort)

fail=0
compare() { # compare WHAT LIST: every harness in LIST, nothing else
    local missing extra
    missing=$(comm -23 <(echo "$files") <(echo "$2") | tr '\n' ' ')
    extra=$(comm -13 <(echo "$files") <(echo "$2") | tr '\n' ' ')
    [ -z "$missing" ] || { echo "FAIL: $1 lacks $missing(harnesses tests/fuzz/fuzz_*.c)"; fail=1; }
    [ -z "$extra" ] || { echo "FAIL: $1 names ${extra}with no tests/fuzz/fuzz_*.c"; fail=1; }
}
compare "make fuzz" "$make_list"
compare "tests/fuzz/run --list" "$run_list"
compare "tests/fuzz/CMakeLists.txt's ALISA_FUZZ_TARGETS" "$cmake_list"
[ "$fail" -eq 0 ] || exit 1
echo "fuzz targets: $(echo $files) in make fuzz, tests/fuzz/run and CMake"

#!/usr/bin/env bash
# The README's tour stays true: every command in a ```sh block of README.md
# is run as shown (continuation lines joined), with build/ on PATH, from a
# scratch directory laid out like the repository root (traces/,
# experiments/, plots/, models-cache/ linked in, ../shared beside it), so
# what the commands write lands in the scratch directory. A command that
# fails fails the test with its output. Blocks without `sh` are not run.
# Without the real models (../shared/models) the test skips (exit 77).
# Usage: readme_test.sh ALISA_BINARY SOURCE_DIR MODELS_DIR
set -u
alisa=$1 src=$(cd "$2" && pwd) models=$3
readme=$src/README.md
[ -f "$readme" ] || { echo "FAIL: no $readme"; exit 1; }
if [ ! -f "$models/stories260K/stories260K.bin" ]; then
    if [ "${CI:-}" = true ]; then echo "FAIL: CI=true and $models is missing"; exit 1; fi
    echo "SKIP: the real models ($models) are missing; the README's tour needs them"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/repo" "$tmp/bin"
for d in traces experiments plots models-cache sim; do
    [ -e "$src/$d" ] && ln -s "$src/$d" "$tmp/repo/$d"
done
ln -s "$(cd "$models/.." && pwd)" "$tmp/shared"
ln -s "$(cd "$(dirname "$alisa")" && pwd)/$(basename "$alisa")" "$tmp/bin/alisa"
export PATH="$tmp/bin:$PATH" ALISA_MODELS="$models"

# The commands: lines of ```sh blocks, a trailing backslash joining the next.
mapfile -t cmds < <(awk '
    /^```sh[[:space:]]*$/ { inblock = 1; next }
    /^```/ { inblock = 0; next }
    inblock {
        line = $0
        if (line ~ /\\$/) { sub(/\\$/, "", line); acc = acc line; next }
        print acc line; acc = ""
    }' "$readme")
[ "${#cmds[@]}" -ge 10 ] || { echo "FAIL: only ${#cmds[@]} commands found in $readme"; exit 1; }

fail=0
cd "$tmp/repo" || exit 1
for c in "${cmds[@]}"; do
    if out=$(bash -c "$c" 2>&1 </dev/null); then
        echo "ok: $c"
    else
        echo "FAIL (exit $?): $c"
        printf '%s\n' "$out" | tail -n 15
        fail=$((fail + 1))
    fi
done
echo "${#cmds[@]} README commands, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# The README's tour and the help texts stay true: every command in a ```sh
# block of README.md is run as shown (continuation lines joined), then every
# command under "examples" in each command's --help (in the order of
# `helps` below: a sweep before the export of its rows), with build/ on PATH, from a
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

n_readme=${#cmds[@]}
# The help texts' examples: lines starting "  alisa " in the block that
# starts with "examples (run as shown" and ends at a blank line.
helps=(catalog policy "trace gen" "trace info" "trace check" "trace dump" "trace stats" plan fidelity sim serve serve-run search sweep db run
       eval record model calibrate validate validate-external version)
# every command alisa help lists has its examples here
for c in $("$alisa" help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
    [ "$c" = help ] && continue
    case " ${helps[*]} " in *" $c "*) ;; *)
        echo "FAIL: alisa $c is not in this test's list of help texts"; exit 1 ;; esac
done
for h in "${helps[@]}"; do
    # shellcheck disable=SC2086
    mapfile -t ex < <("$alisa" $h --help | awk '/^examples \(run as shown/ { on = 1; next }
                                               /^$/ { on = 0 } on && /^  alisa / { sub(/^  /, ""); print }')
    [ "${#ex[@]}" -ge 1 ] || { echo "FAIL: alisa $h --help has no examples"; exit 1; }
    cmds+=("${ex[@]}")
done

fail=0 seen=$'\n'
cd "$tmp/repo" || exit 1
for c in "${cmds[@]}"; do
    # a help example that is also a README command has run already
    case $seen in *$'\n'"$c"$'\n'*) echo "ok (ran above): $c"; continue ;; esac
    seen+="$c"$'\n'
    t0=$(date +%s.%N)
    if out=$(bash -c "$c" 2>&1 </dev/null); then
        echo "ok ($(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.1f') s): $c"
    else
        echo "FAIL (exit $?): $c"
        printf '%s\n' "$out" | tail -n 15
        fail=$((fail + 1))
    fi
done
echo "$n_readme README commands and $((${#cmds[@]} - n_readme)) help examples, $fail failed"
[ "$fail" -eq 0 ]

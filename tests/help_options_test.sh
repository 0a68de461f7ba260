#!/usr/bin/env bash
# Help texts against the option tables the parsers use (issue 26): for each
# command, every long option in its getopt_long table (printed by the
# command itself under ALISA_LIST_OPTIONS=1, sim/cli/cli.h) must appear in
# its --help, and every --option its --help names must be in the table.
# Usage: help_options_test.sh ALISA_BINARY
set -u
alisa=$1
cmds=(catalog fidelity plan search sim serve serve-run sweep "db export" "trace info" "trace check" "trace dump"
      "trace gen" "trace stats" calibrate run eval record validate validate-external)
# options a help names that belong to another program: COMMAND:--option
elsewhere=" record:--kv-fp32 sweep:--json sweep:--sshloginfile sim:--cpu-cache-compute sim:--percent search:--system search:--search validate-external:--query "  # alisa plan's; the points'; GNU parallel's; FlexGen's (2); alisa sim's (2); db export's
fail=0 checked=0
for c in "${cmds[@]}"; do
    # shellcheck disable=SC2086
    table=$(ALISA_LIST_OPTIONS=1 "$alisa" $c </dev/null) || { echo "FAIL: alisa $c lists no options"; fail=$((fail + 1)); continue; }
    [ -n "$table" ] || { echo "FAIL: alisa $c: empty option table"; fail=$((fail + 1)); continue; }
    # shellcheck disable=SC2086
    help=$("$alisa" $c --help </dev/null)
    for o in $table; do
        checked=$((checked + 1))
        grep -qE -- "${o}([^a-z0-9-]|$)" <<<"$help" || { echo "FAIL: alisa $c: $o is parsed but not in --help"; fail=$((fail + 1)); }
    done
    # what the help names: --word tokens; an option may be followed by =, space, [, etc.
    for o in $(grep -oE -- "(^|[^a-z0-9-])--[a-z][a-z0-9-]*" <<<"$help" | grep -oE -- "--[a-z][a-z0-9-]*" | sort -u); do
        checked=$((checked + 1))
        case $elsewhere in *" $c:$o "*) continue ;; esac
        grep -qxF -- "$o" <<<"$table" || { echo "FAIL: alisa $c --help names $o, which it does not parse"; fail=$((fail + 1)); }
    done
done
# every command's --help: exit 0, its usage on stdout, nothing on stderr
for c in $("$alisa" help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
    checked=$((checked + 1))
    out=$("$alisa" "$c" --help 2>err.txt </dev/null); code=$?
    if [ "$code" -ne 0 ] || [ -s err.txt ] || ! grep -q "^usage: alisa" <<<"$out"; then
        echo "FAIL: alisa $c --help (exit $code): $(head -c 200 err.txt)"; fail=$((fail + 1))
    fi
done
rm -f err.txt
echo "${#cmds[@]} commands, $checked option names checked, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Results are never put at risk (issue 27): a sweep whose database stops
# taking writes (a full disk, simulated with a file-size limit: writes past
# it fail with EFBIG) exits non-zero, says how many points it could not
# store, and loses none of the rows it did store; a rerun with room stores
# the rest, each point exactly once. Reads never change a database: db
# export reads a read-only copy, db merge refuses a missing input without
# creating anything and leaves its inputs byte for byte as they were.
# Usage: results_fault_test.sh PATH/TO/alisa REPO_ROOT
set -u
alisa=$1 root=$2
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # check EXIT-CODE DESCRIPTION
    if [ "$1" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi
}
rows() { "$alisa" db export --db "$1" --query runs | tail -n +2 | grep -c ',ok,' || true; }

"$alisa" trace gen --model OPT-6.7B --layers 2 --seqs 2 --prompt-len 16 --gen-len 16 --seed 5 \
    -o "$tmp/t.trace" 2>/dev/null
cat >"$tmp/f.sweep" <<SPEC
[sweep]
name = full
command = sim
[fixed]
trace = $tmp/t.trace
model = OPT-30B
hardware = H100-80GB
prompt-len = 16
gen-len = 16
[vary]
batch = 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20
system = alisa flexgen vllm
SPEC
n=60

# 1. the database fills: 64 KiB per file (WAL included), ~60 rows need more
( ulimit -f 64; trap '' XFSZ; "$alisa" sweep "$tmp/f.sweep" --db "$tmp/f.db" --jobs 2 ) \
    >/dev/null 2>"$tmp/log1"
code=$?
check $((code == 0)) "a sweep whose database filled exited 0"
summary=$(grep "^full: " "$tmp/log1")
unsaved=$(printf '%s\n' "$summary" | sed -n 's/.* \([0-9]*\) NOT STORED.*/\1/p')
check $((${unsaved:-0} == 0)) "the summary does not count unstored points: $summary"
grep -q "commit failed\|cannot\|disk\|large" "$tmp/log1"
check $? "no error names the failed write: $(cat "$tmp/log1")"
stored=$(rows "$tmp/f.db")
check $((stored == 0 || stored >= n)) "stored $stored of $n before the disk filled (expected some, not all)"
ran=$(printf '%s\n' "$summary" | sed -n 's/^full: \([0-9]*\) run.*/\1/p')
check $((ran - unsaved != stored)) "$ran run - $unsaved not stored != $stored rows in the database"
python3 - "$tmp/f.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ok = db.execute("PRAGMA integrity_check").fetchone()[0]
sys.exit(0 if ok == "ok" else 1)
PY
check $? "the database is not intact after the failed write"

# 2. with room again: the rest is stored, every point once
"$alisa" sweep "$tmp/f.sweep" --db "$tmp/f.db" --jobs 2 >/dev/null 2>"$tmp/log2"
check $? "the rerun with room failed: $(tail -1 "$tmp/log2")"
check $(($(rows "$tmp/f.db") != n)) "after the rerun $(rows "$tmp/f.db") rows, expected $n"
dups=$("$alisa" db export --db "$tmp/f.db" --query runs | tail -n +2 | cut -d, -f1,2 | sort | uniq -d | wc -l)
check $((dups != 0)) "$dups points stored twice"

# 3. reads change nothing: export from a read-only directory, merge inputs untouched
mkdir "$tmp/ro" && cp "$tmp/f.db" "$tmp/ro/" && chmod a-w "$tmp/ro/f.db" "$tmp/ro"
before=$(sha256sum "$tmp/ro/f.db" | cut -d' ' -f1)
"$alisa" db export --db "$tmp/ro/f.db" --query runs -o "$tmp/ro.csv" 2>"$tmp/log3"
check $? "export of a read-only database failed: $(cat "$tmp/log3")"
check $(($(tail -n +2 "$tmp/ro.csv" | wc -l) != n)) "export of the read-only copy has the wrong rows"
"$alisa" db merge "$tmp/m.db" "$tmp/ro/f.db" >/dev/null 2>"$tmp/log4"
check $? "merge from a read-only input failed: $(cat "$tmp/log4")"
check $(($(rows "$tmp/m.db") != n)) "the merge copied $(rows "$tmp/m.db") rows, expected $n"
after=$(sha256sum "$tmp/ro/f.db" | cut -d' ' -f1)
check $([ "$before" = "$after" ]; echo $?) "reading changed the input database"
"$alisa" db merge "$tmp/new.db" "$tmp/no-such.db" >/dev/null 2>"$tmp/log5"
code=$?
check $((code == 0)) "merge with a mistyped input exited 0"
check $([ ! -e "$tmp/new.db" ] && [ ! -e "$tmp/no-such.db" ]; echo $?) \
    "merge with a mistyped input created a file"
grep -q "no-such.db" "$tmp/log5"
check $? "the merge error does not name the missing input: $(cat "$tmp/log5")"

# 4. a user who cannot write the database's directory (root writes through
# chmod, so as nobody when run as root): export and merge read it, as
# immutable (issue 48: "not a results database")
if [ "$(id -u)" -ne 0 ]; then asuser=(); elif command -v setpriv >/dev/null; then
    asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups); else asuser=(skip); fi
if [ "${asuser[0]:-}" != skip ]; then
    ro2=$(mktemp -d /tmp/alisa-ro.XXXXXX)
    cp "$tmp/f.db" "$ro2/" && chmod 755 "$ro2" && chmod 644 "$ro2/f.db"
    out=$("${asuser[@]}" "$alisa" db export --db "$ro2/f.db" --query runs 2>"$tmp/log6")
    check $? "export by a user who cannot write the directory failed: $(cat "$tmp/log6")"
    check $(($(tail -n +2 <<<"$out" | grep -c ',ok,') != n)) "that export has the wrong rows"
    "${asuser[@]}" "$alisa" db merge /dev/null/x.db "$ro2/f.db" >/dev/null 2>"$tmp/log7"
    grep -q "not a results database" "$tmp/log7"
    check $((! $?)) "an unwritable output is blamed on the input: $(cat "$tmp/log7")"
    rm -rf "$ro2"
else
    echo "SKIPPED: the read-only user case (root without setpriv)"
fi

# 5. db merge: an ok row replaces an error row of the same point, and says so
cat >"$tmp/e.sweep" <<SPEC
[sweep]
name = retry
command = exec
program = $tmp/flaky.sh
[vary]
batch = 1 2
SPEC
printf '#!/bin/sh\n[ -f %s/ok ] || [ "$2" = 1 ] || exit 3\necho "{\\"x\\": $2}"\n' "$tmp" >"$tmp/flaky.sh"
chmod +x "$tmp/flaky.sh"
"$alisa" sweep "$tmp/e.sweep" --db "$tmp/e1.db" >/dev/null 2>&1 # point 1 fails
touch "$tmp/ok"
"$alisa" sweep "$tmp/e.sweep" --db "$tmp/e2.db" >/dev/null 2>&1 # both ok
"$alisa" db merge "$tmp/e1.db" "$tmp/e2.db" 2>"$tmp/log8"
grep -q "merged 0 rows into .*; 1 error rows replaced by ok rows" "$tmp/log8"
check $? "merge did not replace the error row: $(cat "$tmp/log8")"
check $(($(rows "$tmp/e1.db") != 2)) "after the merge $(rows "$tmp/e1.db") ok rows, expected 2"

echo "results_fault: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

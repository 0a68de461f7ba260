#!/usr/bin/env bash
# Sweeps as users run them: kill a sweep mid-run and rerun it (every point
# stored exactly once, all ok), a second rerun runs nothing, and the
# GNU parallel path (--emit-jobs | parallel, then db merge) gives the same
# rows as a direct run.
# Usage: sweep_test.sh PATH/TO/alisa REPO_ROOT
set -u
alisa=$(realpath "$1")
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # check CONDITION-EXIT-CODE DESCRIPTION
    if [ "$1" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi
}
# a process that is gone or a zombie (PID 1 here may not reap orphans)
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null); [ -z "$st" ] || [ "${st#Z}" != "$st" ]; }
rows() { "$alisa" db export --db "$1" --query runs | tail -n +2 | grep -c ok || true; }

cat >"$tmp/k.sweep" <<SPEC
[sweep]
name = killme
command = sim
[fixed]
trace = $root/traces/synthetic-opt-8l-4s.trace
model = OPT-30B
hardware = H100-80GB
prompt-len = 128
gen-len = 512
[vary]
batch = 16 32 48 64
system = alisa flexgen h2o
sparsity = 0.7 0.8 0.9
SPEC
n=36

"$alisa" sweep "$tmp/k.sweep" --db "$tmp/k.db" >/dev/null 2>"$tmp/log1" &
pid=$!
# wait until some rows are in, then kill without warning
for _ in $(seq 1 200); do
    sleep 0.1
    [ -f "$tmp/k.db" ] && [ "$(rows "$tmp/k.db" 2>/dev/null)" -ge 3 ] && break
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
partial=$(rows "$tmp/k.db")
[ "$partial" -gt 0 ] && [ "$partial" -lt $n ]
check $? "the kill came mid-sweep ($partial of $n rows)"

"$alisa" sweep "$tmp/k.sweep" --db "$tmp/k.db" >/dev/null 2>"$tmp/log2"
check $? "the rerun succeeds"
grep -q "$partial skipped" "$tmp/log2"
check $? "the rerun skips the $partial stored points"
[ "$(rows "$tmp/k.db")" -eq $n ]
check $? "every point stored once after the rerun ($(rows "$tmp/k.db") of $n)"
[ "$("$alisa" db export --db "$tmp/k.db" --query runs | tail -n +2 | cut -d, -f2 | sort -u | wc -l)" -eq $n ]
check $? "no point twice"
"$alisa" sweep "$tmp/k.sweep" --db "$tmp/k.db" 2>&1 | grep -q "0 run, $n skipped"
check $? "a second rerun runs nothing"

# GNU parallel: one job per point, each its own database, then merged.
"$alisa" sweep "$tmp/k.sweep" --emit-jobs --parts "$tmp/parts" >"$tmp/jobs.txt"
[ "$(wc -l <"$tmp/jobs.txt")" -eq $n ]
check $? "one command per point"
parallel -j 2 <"$tmp/jobs.txt" 2>/dev/null
check $? "GNU parallel ran every job"
"$alisa" db merge "$tmp/merged.db" "$tmp"/parts/*.db 2>/dev/null
check $? "merge"
"$alisa" db export --db "$tmp/merged.db" --query sim -o "$tmp/merged.csv"
"$alisa" db export --db "$tmp/k.db" --query sim -o "$tmp/direct.csv"
# same points, same metrics (wall time differs: drop the column named wall_s)
no_wall() { awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "wall_s") w = i }
                              { if (w) $w = ""; print }' "$1"; }
head -1 "$tmp/direct.csv" | tr , '\n' | grep -qx wall_s &&
    diff <(no_wall "$tmp/merged.csv") <(no_wall "$tmp/direct.csv") >/dev/null
check $? "parallel + merge gives the same rows as the direct run"

# The executor's speed as rows: command = run (synthetic weights at a
# catalog shape need no model files), exported by the "run" query.
cat >"$tmp/r.sweep" <<SPEC
[sweep]
name = runs
command = run
[fixed]
model = OPT-125M
weights = synthetic
prompt-tokens = 8
gen-tokens = 3
[vary]
batch = 1 2
SPEC
"$alisa" sweep "$tmp/r.sweep" --db "$tmp/r.db" >/dev/null 2>&1
check $? "a sweep of alisa run"
"$alisa" db export --db "$tmp/r.db" --query run -o "$tmp/r.csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
         { n++; if ($c["status"] != "ok" || $c["model"] != "OPT-125M (synthetic:1)" ||
                    $c["backend"] != "CPU" || $c["batch"] != n || $c["gen_tokens"] != 3 ||
                    !($c["decode_tok_s"] > 0) || $c["code_version"] == "") bad = 1 }
         END { exit bad || n != 2 }' "$tmp/r.csv"
check $? "the run query gives one row per point with its batch, backend, speed and code version"

# command = exec: a peer's benchmark program (here a stand-in script beside
# the spec, found relative to it) run with each point's options and --json;
# its JSON is the row's result, a failing point is an error row with its
# message, and the "peer" query exports them.
cat >"$tmp/peer.sh" <<'PEER'
#!/bin/sh
model= batch= json=0
while [ $# -gt 0 ]; do
    case $1 in --model) model=$2; shift 2 ;; --batch) batch=$2; shift 2 ;; --json) json=1; shift ;; *) exit 2 ;; esac
done
[ "$json" = 1 ] || exit 2
[ "$batch" = 3 ] && { echo "batch 3 does not fit" >&2; exit 3; }
echo "{\"system\": \"stand-in\", \"model\": \"$model\", \"batch\": $batch, \"decode_tok_s\": $((batch * 10)), \"device\": \"none\", \"driver\": \"none\"}"
PEER
chmod +x "$tmp/peer.sh"
# How alisa's idle threads wait (sim/cli/main.c): passively by default,
# spinning under ALISA_WAIT=spin (OMP_WAIT_POLICY=ACTIVE in alisa's own
# environment after its restart), a bad value refused before any work; a
# peer started by the sweep sees neither (the user's environment). The peer
# reads its parent's environment (alisa's) from /proc.
cat >"$tmp/envpeer.sh" <<'PEER'
#!/bin/sh
{ tr '\0' '\n' <"/proc/$PPID/environ" | grep '^OMP_WAIT_POLICY=' || echo none
  echo "own=${OMP_WAIT_POLICY-unset}"; } >"$(dirname "$0")/env.txt"
echo '{"system": "env", "device": "none", "driver": "none", "decode_tok_s": 1}'
PEER
chmod +x "$tmp/envpeer.sh"
printf '[sweep]\nname = env\ncommand = exec\nprogram = envpeer.sh\n[vary]\nbatch = 1\n' >"$tmp/env.sweep"
for w in passive spin; do
    rm -f "$tmp/env.db"
    env -u OMP_WAIT_POLICY -u ALISA_WAIT_SET ALISA_WAIT=$w "$alisa" sweep "$tmp/env.sweep" \
        --db "$tmp/env.db" >/dev/null 2>&1
    want=PASSIVE
    [ $w = spin ] && want=ACTIVE
    [ "$(cat "$tmp/env.txt" 2>/dev/null)" = "$(printf 'OMP_WAIT_POLICY=%s\nown=unset' $want)" ]
    check $? "ALISA_WAIT=$w: alisa runs with OMP_WAIT_POLICY=$want, its peer without ($(cat "$tmp/env.txt" 2>/dev/null | tr '\n' ' '))"
done
ALISA_WAIT=fast "$alisa" version >/dev/null 2>"$tmp/env.err"
[ $? -eq 2 ] && grep -q "ALISA_WAIT: 'fast': expected passive (the default) or spin" "$tmp/env.err"
check $? "a bad ALISA_WAIT is refused with one line"

cat >"$tmp/p.sweep" <<SPEC
[sweep]
name = peers
command = exec
program = peer.sh
[fixed]
model = OPT-30B
[vary]
batch = 1 2 3
SPEC
"$alisa" sweep "$tmp/p.sweep" --db "$tmp/p.db" >/dev/null 2>&1
[ $? -eq 1 ]
check $? "an exec sweep with a failing point exits 1"
"$alisa" db export --db "$tmp/p.db" --query peer -o "$tmp/p.csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
         { n++; ok = $c["status"] == "ok"
           if (n < 3 && (!ok || $c["system"] != "stand-in" || $c["model"] != "OPT-30B" ||
                         $c["batch"] != n || $c["decode_tok_s"] != 10 * n)) bad = 1
           if (n == 3 && ok) bad = 1 }
         END { exit bad || n != 3 }' "$tmp/p.csv"
check $? "the peer query gives each exec point's JSON, the failed one as an error row"
"$alisa" db export --db "$tmp/p.db" --query runs | grep -q "exit 3: batch 3 does not fit"
check $? "the failed exec point keeps the program's message"

# A point past its time limit (--timeout, or the spec's [sweep] timeout) is
# stopped with everything it started (its process group: the sleep below
# must not outlive it) and stored as "timed out"; a point that prints without
# end keeps at most 64 MiB and is stored as failed, saying how much it dropped
cat >"$tmp/slow.sh" <<'SLOW'
#!/bin/sh
case "$*" in
*"--batch 1 "*) echo '{"system": "slow", "batch": 1}' ;;
*"--batch 2 "*) sleep 300 & echo $! >"$(dirname "$0")/child.pid"; wait ;;
*"--batch 3 "*) yes ;;
esac
SLOW
chmod +x "$tmp/slow.sh"
cat >"$tmp/t.sweep" <<SPEC
[sweep]
name = slow
command = exec
program = slow.sh
timeout = 30
[vary]
batch = 1 2 3
SPEC
t=$(date +%s)
"$alisa" sweep "$tmp/t.sweep" --db "$tmp/t.db" --timeout 2 >/dev/null 2>"$tmp/t.log"
[ $? -eq 1 ] && [ $(( $(date +%s) - t )) -lt 25 ]
check $? "--timeout stops a point that runs too long (exit 1, well inside the spec's 30 s)"
"$alisa" db export --db "$tmp/t.db" --query runs >"$tmp/t.csv"
grep -q "timed out after 2 s" "$tmp/t.csv" && [ "$(grep -c ',ok,' "$tmp/t.csv")" -eq 1 ]
check $? "the timed-out point is stored as timed out, the quick one as ok"
sleep 0.5
gone "$(cat "$tmp/child.pid" 2>/dev/null || echo 999999)"
check $? "the timed-out point's own children are stopped too"
grep -q "printed more than 64 MiB (.* bytes of stdout and 0 of stderr dropped)" "$tmp/t.csv"
check $? "a point printing without end is cut (its output capped), not stored whole"

# SIGTERM: the running point is stopped with its children, nothing partial is
# stored, and the sweep says how to resume
rm -f "$tmp/child.pid"
"$alisa" sweep "$tmp/t.sweep" --db "$tmp/t2.db" --point 1 >/dev/null 2>"$tmp/term.log" &
spid=$!
for _ in $(seq 1 100); do [ -s "$tmp/child.pid" ] && break; sleep 0.1; done
kill -TERM $spid
wait $spid
[ $? -eq 143 ] && grep -q "run the same command again to resume" "$tmp/term.log"
check $? "SIGTERM stops the sweep (exit 143) and says how to resume"
sleep 0.5
gone "$(cat "$tmp/child.pid" 2>/dev/null || echo 999999)"
check $? "SIGTERM stops the running point's children (no orphan)"

# --emit-jobs quotes every word: a spec in a directory with a quote, $ and a
# space, and --set values, run through a shell, give the same rows
hd="$tmp/bob's \$HOME runs"
mkdir -p "$hd"
sed 's/^timeout = 30$//' "$tmp/t.sweep" >"$hd/t.sweep"
cp "$tmp/slow.sh" "$hd/"
(cd "$hd" && "$alisa" sweep t.sweep --emit-jobs --set batch=1 --parts "$hd/parts") >"$tmp/jobs2.txt"
[ "$(wc -l <"$tmp/jobs2.txt")" -eq 3 ] && bash "$tmp/jobs2.txt" 2>/dev/null &&
    "$alisa" db merge "$tmp/m2.db" "$hd"/parts/*.db 2>/dev/null &&
    [ "$("$alisa" db export --db "$tmp/m2.db" --query runs | grep -c ',ok,')" -eq 1 ]
check $? "--emit-jobs lines run as written from a path with ' \$ and spaces, --set passed on"
"$alisa" sweep "$tmp/t.sweep" --list --set batch=7 | awk -F'\t' '$3 !~ /"batch":"7"/ { bad = 1 } END { exit bad || NR != 3 }'
check $? "--list prints every point's configuration, --set applied"

# issue 41: a spec's keys checked against the command's options before any
# point runs (file, line, key and the nearest option); a failed point's
# reason printed as it fails and again in the summary
sed 's/^sparsity = /sparsty = /' "$tmp/k.sweep" >"$tmp/typo.sweep"
"$alisa" sweep "$tmp/typo.sweep" --db "$tmp/typo.db" >/dev/null 2>"$tmp/typo.log"
[ $? -eq 1 ] && [ ! -e "$tmp/typo.db" ] &&
    grep -q "typo.sweep:13: 'sparsty' is not an option of alisa sim; did you mean 'sparsity'?" "$tmp/typo.log"
check $? "a misspelled key is refused before any point, naming file, line and the option meant: $(cat "$tmp/typo.log")"
"$alisa" sweep "$tmp/k.sweep" --db "$tmp/typo.db" --point 0 --set frobnicate=1 >/dev/null 2>"$tmp/typo.log"
[ $? -eq 1 ] && grep -q "k.sweep (--set): 'frobnicate' is not an option of alisa sim" "$tmp/typo.log"
check $? "a --set key is checked too"
"$alisa" sweep "$tmp/p.sweep" --db "$tmp/p2.db" >/dev/null 2>"$tmp/p2.log"
grep -q "point 2 FAILED .*: exit 3: batch 3 does not fit" "$tmp/p2.log" &&
    grep -q "^  FAILED point 2: exit 3: batch 3 does not fit" "$tmp/p2.log"
check $? "a failed point's reason is printed as it fails and in the summary"
# issue 41: a plan point out of memory is stored as its own status 'oom'
# (its partial counts kept), counted apart, never as 'ok'; a database made
# before the status existed takes it, every old row kept
python3 - "$tmp/old.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript("""CREATE TABLE runs (id INTEGER PRIMARY KEY, sweep TEXT NOT NULL,
 point INTEGER NOT NULL, config_hash TEXT NOT NULL UNIQUE, config TEXT NOT NULL,
 code_version TEXT NOT NULL, result TEXT NOT NULL,
 status TEXT NOT NULL CHECK (status IN ('ok', 'error')), error TEXT, wall_s REAL NOT NULL,
 created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
INSERT INTO runs (sweep, point, config_hash, config, code_version, result, status, wall_s)
 VALUES ('old', 0, 'abc', '{}', 'v0', '{}', 'ok', 1.0);""")
db.commit()
PY
cat >"$tmp/oom.sweep" <<SPEC
[sweep]
name = oomy
command = plan
[fixed]
trace = $root/traces/synthetic-opt-8l-4s.trace
selection = swa
placement = gpu-only
[vary]
gpu-kv-bytes = 1K 1G
SPEC
"$alisa" sweep "$tmp/oom.sweep" --db "$tmp/old.db" >/dev/null 2>"$tmp/oom.log"
code=$?
runs=$("$alisa" db export --db "$tmp/old.db" --query runs)
[ $code -eq 0 ] && grep -q "^oomy,0,.*,oom," <<<"$runs" && grep -q "^oomy,1,.*,ok," <<<"$runs" &&
    grep -q "^old,0,abc,ok" <<<"$runs" && grep -q "1 out of memory: status 'oom'" "$tmp/oom.log" &&
    grep -q "point 0 out of memory" "$tmp/oom.log"
check $? "a point out of memory is stored as 'oom' and counted apart, in an older database too: $(tail -1 "$tmp/oom.log")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# alisa validate-external (issue 44): a hand-made suite's table against
# `alisa sim --json` run by hand on the same settings, the error and the
# held-out mean computed here (awk), in-sample and excluded points kept out
# of the headline, rows in the results database, and bad suites refused
# with one line naming the file, the point and the field.
# Usage: external_test.sh PATH/TO/alisa REPO_ROOT
set -u
alisa=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
pass=0 fail=0
check() { # check EXIT-CODE DESCRIPTION
    if [ "$1" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi
}
point() { # ID SET PUBLISHED SYSTEM MODEL BATCH [extra key = value lines]
    printf '[%s]\nsource = a test\nset = %s\npublished_tok_s = %s\nhardware = H100-80GB\n' "$1" "$2" "$3"
    printf 'system = %s\nmodel = %s\nbatch = %s\nprompt-len = 64\ngen-len = 16\n' "$4" "$5" "$6"
    shift 6
    for l in "$@"; do printf '%s\n' "$l"; done
    printf '\n'
}
{
    point dense held-out 900 dense-gpu OPT-6.7B 8
    point fg held-out 40 flexgen OPT-30B 16 "flexgen-percent = 100:0:50:50"
    point ins in-sample 10 dense-gpu OPT-13B 4
    point tot held-out 5000 dense-gpu OPT-6.7B 8 "metric = prompt+generated"
    printf '[far]\nsource = a test\nset = excluded\nreason = needs a disk tier\npublished_tok_s = 1\n'
} >"$tmp/s.ini"

# the same settings simulated by hand (dense systems read no attention)
"$alisa" trace gen --model OPT-6.7B --layers 2 --seqs 1 --prompt-len 64 --gen-len 16 --seed 3 \
    -o "$tmp/t.trace" >/dev/null 2>&1
sim() { "$alisa" sim --trace "$tmp/t.trace" --hardware H100-80GB --prompt-len 64 --gen-len 16 \
        --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["throughput_tok_s"])'; }
d=$(sim --system dense-gpu --model OPT-6.7B --batch 8)
f=$(sim --system flexgen --model OPT-30B --batch 16 --flexgen-percent 100:0:50:50)
i=$(sim --system dense-gpu --model OPT-13B --batch 4)

"$alisa" validate-external "$tmp/s.ini" --json >"$tmp/out.json" 2>"$tmp/err"
check $? "validate-external exited non-zero: $(cat "$tmp/err")"
python3 - "$d" "$f" "$i" "$tmp/out.json" <<'PY'
import json, sys
d, f, i = map(float, sys.argv[1:4])
r = json.load(open(sys.argv[4]))
pts = {p["id"]: p for p in r["points"]}
bad = []
def near(a, b): return abs(a - b) <= 1e-5 * max(1, abs(b))
# prompt and generated tokens over the whole time: 64 + 16 of every 16
for pid, sim, pub in (("dense", d, 900), ("fg", f, 40), ("ins", i, 10), ("tot", d * 80 / 16, 5000)):
    p = pts[pid]
    if not near(p["predicted_tok_s"], sim): bad.append(f"{pid}: predicted {p['predicted_tok_s']} vs sim {sim}")
    if not near(p["error_pct"], 100 * (sim - pub) / pub): bad.append(f"{pid}: error {p['error_pct']}")
mae = (abs(100 * (d - 900) / 900) + abs(100 * (f - 40) / 40) + abs(100 * (d * 5 - 5000) / 5000)) / 3
h = r["held-out"]
if h["points"] != 3 or not near(h["mean_abs_error_pct"], mae): bad.append(f"held-out {h} vs {mae}")
if r["in-sample"]["points"] != 1: bad.append("in-sample count")
if "predicted_tok_s" in pts["far"] or pts["far"].get("reason") != "needs a disk tier": bad.append("excluded point")
if bad: print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
check $? "the suite's figures against alisa sim and the arithmetic here"

# the text table names every point and the excluded reason
txt=$("$alisa" validate-external "$tmp/s.ini" 2>/dev/null)
grep -q "^held-out: mean absolute error .* over 3 points" <<<"$txt"; check $? "text headline: $txt"
grep -q "^excluded far: needs a disk tier" <<<"$txt"; check $? "text: excluded reason"

# rows in the results database, one per point run
"$alisa" validate-external "$tmp/s.ini" --db "$tmp/r.db" >/dev/null 2>&1
check $? "--db run failed"
csv=$("$alisa" db export --db "$tmp/r.db" --query external)
[ "$(tail -n +2 <<<"$csv" | grep -c ',ok,')" -eq 4 ]; check $? "four ok rows expected: $csv"
grep -q ',dense,held-out,a test,dense-gpu,OPT-6.7B,H100-80GB,,8,64,16,900' <<<"$csv"; check $? "row of dense: $csv"

# a point that does not simulate: reported, exit 1, the others still run
{ cat "$tmp/s.ini"; point broken held-out 5 dense-gpu OPT-6.7B 8 "warp = 9"; } >"$tmp/b.ini"
txt=$("$alisa" validate-external "$tmp/b.ini" 2>"$tmp/err"); rc=$?
[ $rc = 1 ] && grep -q "^broken .*warp" <<<"$txt" && grep -q "^dense " <<<"$txt"
check $? "a failing point: exit $rc, $txt $(cat "$tmp/err")"

# bad suites: one line naming the file, the point and the field; exit 1
bad_suite() { # DESCRIPTION EXPECTED-TEXT  (suite on stdin)
    cat >"$tmp/x.ini"
    "$alisa" validate-external "$tmp/x.ini" >/dev/null 2>"$tmp/err"; local rc=$?
    [ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "x.ini" "$tmp/err" && grep -q -- "$2" "$tmp/err"
    check $? "$1: exit $rc, $(cat "$tmp/err")"
}
point p held-out 5 dense-gpu OPT-6.7B 8 | sed '/^source/d' | bad_suite "no source" "\[p\] has no source"
point p maybe 5 dense-gpu OPT-6.7B 8 | bad_suite "bad set" "set 'maybe'"
point p held-out -3 dense-gpu OPT-6.7B 8 | bad_suite "negative figure" "published_tok_s '-3'"
point p held-out nan dense-gpu OPT-6.7B 8 | bad_suite "NaN figure" "published_tok_s 'nan'"
printf '[p]\nsource = s\nset = excluded\npublished_tok_s = 2\n' | bad_suite "excluded without reason" "without a reason"
point p held-out 5 dense-gpu OPT-6.7B 8 | sed '/^model/d' | bad_suite "no model" "has no model"
point p held-out 5 dense-gpu OPT-6.7B 8 "metric = tokens" | bad_suite "bad metric" "metric 'tokens'"
point p held-out 5 dense-gpu OPT-6.7B 8 "json = true" | bad_suite "json set" "json: set by the command"
{ point p held-out 5 dense-gpu OPT-6.7B 8; point p held-out 5 dense-gpu OPT-6.7B 8; } |
    bad_suite "a point twice" "\[p\] .*given twice"
printf 'model = x\n' | bad_suite "key outside a section" "outside a point"
: | bad_suite "empty suite" "no points"
"$alisa" validate-external "$tmp" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && grep -q "not a regular file" "$tmp/err"; check $? "a directory as suite: exit $rc"
"$alisa" validate-external >/dev/null 2>&1; [ $? = 2 ]; check $? "no suite: usage error"
[ -z "$(ls "$tmp" | grep alisa-external)" ]; check $? "temporary traces left behind"

# --rule NAME: each point's hardware HW-NAME, its software SW-NAME where the
# catalog has one (FlexGen's here; dense-gpu's software is none), against
# alisa sim run by hand on those profiles
mkdir -p "$tmp/cat"
cp "$root"/sim/model/catalog/*.ini "$tmp/cat/"
sed -n '/^\[H100-80GB\]/,/^$/p' "$root/sim/model/catalog/hardware.ini" |
    sed 's/^\[H100-80GB\]/[H100-80GB-t]/; s/^gemm_efficiency = .*/gemm_efficiency = 0.5/;
         s/^hbm_efficiency = .*/hbm_efficiency = 0.5/' >>"$tmp/cat/hardware.ini"
printf '\n[flexgen-t]\nop_host_us = 400\nops_per_layer = 18\npageable_relay = 1\n' >>"$tmp/cat/software.ini"
csim() { sim --catalog "$tmp/cat" --hardware H100-80GB-t "$@"; }
dt=$(csim --system dense-gpu --model OPT-6.7B --batch 8)
ft=$(csim --system flexgen --model OPT-30B --batch 16 --flexgen-percent 100:0:50:50 --software flexgen-t)
fn=$(csim --system flexgen --model OPT-30B --batch 16 --flexgen-percent 100:0:50:50)
"$alisa" validate-external "$tmp/s.ini" --catalog "$tmp/cat" --rule t --json >"$tmp/rule.json" 2>"$tmp/err"
check $? "--rule t exited non-zero: $(cat "$tmp/err")"
python3 - "$dt" "$ft" "$fn" "$d" "$tmp/rule.json" <<'PY'
import json, sys
dt, ft, fn, d = map(float, sys.argv[1:5])
r = json.load(open(sys.argv[5]))
pts = {p["id"]: p for p in r["points"]}
near = lambda a, b: abs(a - b) <= 1e-5 * max(1, abs(b))
bad = []
if r.get("rule") != "t": bad.append(f"rule {r.get('rule')}")
if not near(pts["dense"]["predicted_tok_s"], dt) or near(dt, d): bad.append(f"dense {pts['dense']} vs {dt} (default {d})")
if not near(pts["fg"]["predicted_tok_s"], ft) or near(ft, fn): bad.append(f"fg {pts['fg']} vs {ft} (flexgen's own software {fn})")
if bad: print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
check $? "--rule t: the points on H100-80GB-t and flexgen-t"
# its rows name the profile priced and the rule
"$alisa" validate-external "$tmp/s.ini" --catalog "$tmp/cat" --rule t --db "$tmp/rt.db" >/dev/null 2>&1
csv=$("$alisa" db export --db "$tmp/rt.db" --query external)
grep -q ',dense,held-out,a test,dense-gpu,OPT-6.7B,H100-80GB-t,t,8,64,16,900' <<<"$csv"
check $? "--rule t's row of dense: $csv"
# a sweep under the rule: db export --query sim names the profile priced
printf '[sweep]\nname = r\ncommand = sim\n\n[fixed]\ntrace = %s\ncatalog = %s\nhardware = H100-80GB\nrule = t\nmodel = OPT-6.7B\nsystem = dense-gpu\nprompt-len = 64\ngen-len = 16\n\n[vary]\nbatch = 8\n' \
    "$tmp/t.trace" "$tmp/cat" >"$tmp/r.sweep"
"$alisa" sweep "$tmp/r.sweep" --db "$tmp/rs.db" >/dev/null 2>&1 &&
    "$alisa" db export --db "$tmp/rs.db" --query sim | grep -q '^r,0,ok,OPT-6.7B,H100-80GB-t,dense-gpu,'
check $? "a sweep under --rule t: the sim export's hardware is H100-80GB-t"
# alisa serve --rule t: the same profiles as named by hand (its software
# none unless given; flexgen's here, as flexgen-t)
serve() { "$alisa" serve --trace "$tmp/t.trace" --catalog "$tmp/cat" --model OPT-6.7B --rate 4 \
              --requests 20 --json "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["makespan_s"])'; }
sr=$(serve --hardware H100-80GB --rule t --software flexgen)
sh=$(serve --hardware H100-80GB-t --software flexgen-t)
sp=$(serve --hardware H100-80GB --software flexgen)
awk -v a="$sr" -v b="$sh" -v c="$sp" 'BEGIN { exit !(a == b && a != c) }'
check $? "serve --rule t: $sr, by hand $sh, without the rule $sp"
"$alisa" validate-external "$tmp/s.ini" --rule nosuch >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "s.ini: \[dense\]: --rule nosuch: hardware H100-80GB has no profile H100-80GB-nosuch" "$tmp/err"
check $? "--rule without its profiles: exit $rc, $(cat "$tmp/err")"
# alisa sim --rule t itself: the same profiles as named by hand (flexgen's
# software flexgen-t; dense-gpu's none kept), and one line without them
rs=$(sim --catalog "$tmp/cat" --rule t --system flexgen --model OPT-30B \
         --batch 16 --flexgen-percent 100:0:50:50)
awk -v a="$rs" -v b="$ft" 'BEGIN { exit !(a == b) }'; check $? "sim --rule t: $rs, by hand $ft"
rs=$(sim --catalog "$tmp/cat" --rule t --software flexgen --system flexgen --model OPT-30B \
         --batch 16 --flexgen-percent 100:0:50:50)
awk -v a="$rs" -v b="$ft" 'BEGIN { exit !(a == b) }'; check $? "sim --rule t --software flexgen: $rs, by hand $ft"
rd=$(sim --catalog "$tmp/cat" --rule t --system dense-gpu --model OPT-6.7B --batch 8)
awk -v a="$rd" -v b="$dt" 'BEGIN { exit !(a == b) }'; check $? "sim --rule t, dense-gpu: $rd, by hand $dt"
"$alisa" sim --trace "$tmp/t.trace" --hardware H100-80GB --rule nosuch --system dense-gpu \
    --model OPT-6.7B --batch 8 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc != 0 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "no profile H100-80GB-nosuch" "$tmp/err"
check $? "sim --rule without its profile: exit $rc, $(cat "$tmp/err")"
"$alisa" validate-external "$tmp/s.ini" --rule t --peak >/dev/null 2>&1; [ $? = 2 ]
check $? "--rule and --peak together: usage error"

# the committed suite parses and every point not excluded names its source
if [ -f "$root/experiments/external/suite.ini" ]; then
    "$alisa" validate-external "$root/experiments/external/suite.ini" --json >"$tmp/suite.json" 2>"$tmp/err"
    check $? "the committed suite: $(cat "$tmp/err")"
fi
echo "external: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

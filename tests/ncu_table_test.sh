#!/usr/bin/env bash
# Issue 39, item 4: experiments/bench/ncu_table.py, the table of one
# profiled decode step, on a hand-made Nsight Compute raw CSV
# (tests/data/ncu-raw-handmade.csv: four launches of three kernels, worked
# by hand below) and on inputs it must refuse with one line.
# Usage: ncu_table_test.sh REPO_ROOT
set -u
root=$1
py=${PYTHON:-python3}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
rc=0
fail() { echo "FAIL: $*"; rc=1; }
out=$($py "$root/experiments/bench/ncu_table.py" "$root/tests/data/ncu-raw-handmade.csv" --peak 3000) ||
    fail "ncu_table.py exited $? on the hand-made CSV"
# gemv2T: 2 launches, 20,000 + 10,000 ns, 33,554,432 + 16,384 + 16,777,216 +
# 8,192 = 50,356,224 bytes: 30.0 us, 30/35 = 85.7%, 1,679 GB/s, 0.56 of
# 3,000; rmsnorm 49,152 bytes in 3,000 ns: 16 GB/s; the step: 51,405,376
# bytes in 35,000 ns, 1,469 GB/s, 0.49
for want in '| `gemv2T_kernel_val` | 2 | 30.0 | 85.7% | 0.050 | 1,679 | 0.56 |' \
            '| `rmsnorm` | 1 | 3.0 | 8.6% | 0.000 | 16 | 0.01 |' \
            '| `attn_scores_warp` | 1 | 2.0 | 5.7% | 0.001 | 500 | 0.17 |' \
            '| **the step** | 4 | 35.0 | 100% | 0.051 | 1,469 | 0.49 |'; do
    grep -qF -- "$want" <<<"$out" || fail "no row '$want' in: $out"
done
# largest time first
[ "$(grep -c '^| `' <<<"$out")" = 3 ] && [ "$(grep -m1 '^| `' <<<"$out" | cut -d'`' -f2)" = gemv2T_kernel_val ] ||
    fail "rows not grouped by kernel, largest first: $out"
# refused with one line naming the file and what is wrong
printf 'no csv here\n' >"$t/none.csv"
sed 's/"nsecond"/"usecond"/' "$root/tests/data/ncu-raw-handmade.csv" >"$t/us.csv"
sed 's/"2,000"/"n\/a"/' "$root/tests/data/ncu-raw-handmade.csv" >"$t/nan.csv"
for c in "none.csv:no header row" "us.csv:only base units" "nan.csv:is 'n/a', not a number" "missing.csv:No such file"; do
    f=${c%%:*} msg=${c#*:}
    err=$($py "$root/experiments/bench/ncu_table.py" "$t/$f" 2>&1 >/dev/null)
    e=$?
    [ $e = 1 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -qF "$t/$f" <<<"$err" && grep -qF "$msg" <<<"$err" ||
        fail "$f: exit $e, '$err' (expected exit 1 and one line naming the file and '$msg')"
done
[ $rc = 0 ] && echo "ncu_table: ok"
exit $rc

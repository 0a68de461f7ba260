#!/usr/bin/env bash
# Issue 41 (item 1): the held-out validation error on a quiet machine and
# beside BUSY (2) busy loops. Calibrates stories260K on the quiet machine
# (as make validate does, --repeat 2), then runs its held-out sweep
# (experiments/validation-heldout-stories260k.sweep, 12 points, 3 repeats
# each, one point at a time) twice on that profile: quiet, and with the busy
# loops running. Prints, for each, the mean and largest absolute decode
# error, and the points whose measured weight rate drifted from the
# profile's beyond its noise (validate's warning: the drift, mean and
# largest, and the points it warned on).
# A benchmark, not a test: run from the repository root after make build
# and make models; about 3 minutes on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/../.."
alisa=${ALISA:-build/alisa} busy=${BUSY:-2}
work=$(mktemp -d)
loops=()
start_busy() { for _ in $(seq 1 "$busy"); do sh -c 'while :; do :; done' & loops+=($!); done; sleep 1; }
stop_busy() { [ ${#loops[@]} -eq 0 ] || { kill "${loops[@]}" 2>/dev/null; wait "${loops[@]}" 2>/dev/null; }; loops=(); }
trap 'stop_busy; rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
echo "$(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) CPUs, $(uptime | sed 's/.*load/load/')"
$alisa calibrate --model stories260K -o "$work/stories260k.ini" --repeat 2 --name cpu-stories260k \
    --json >"$work/calibration.json" || exit 1
spec=experiments/validation-heldout-stories260k.sweep
summary() { # summary LABEL DB
    $alisa db export --db "$2" --query validate -o "$work/$1.csv"
    awk -F, -v label="$1" '
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { e = $c["total_error_pct"]; a = e < 0 ? -e : e; s += a; n++; if (a > m) m = a
          if ($c["status"] != "ok") bad++
          # validate'"'"'s drift: the mean of the rates probed before and after the
          # run against the profile'"'"'s (cmd_validate.c, validate_warn_drift)
          r = ($c["weight_rate_before_gbps"] + $c["weight_rate_after_gbps"]) / 2
          d = r / $c["weight_rate_profile_gbps"] - 1; d = d < 0 ? -d : d; sd += d
          if (d > md) md = d; if (d > noise) warned++ }
        END { printf "| %s | %d | %.1f%% | %.1f%% | %d | %.0f%% | %.0f%% | %d |\n", label, n,
              s / n, m, bad, 100 * sd / n, 100 * md, warned }' noise="$noise" "$work/$1.csv"
}
echo
# the noise validate tolerates: the profile's probe spread, at least 10%
noise=$(awk -F' = ' '$1 == "weight_probe_spread" { s = $2 } END { print (s > 0.10 ? s : 0.10) }' \
    "$work/stories260k.ini")
echo "| machine | held-out points | mean abs. decode error | largest | not ok | mean drift | largest drift | points warned |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
$alisa sweep "$spec" --set "profile=$work/stories260k.ini" --db "$work/quiet.db" --jobs 1 \
    >/dev/null 2>"$work/quiet.log"
summary quiet "$work/quiet.db"
start_busy
$alisa sweep "$spec" --set "profile=$work/stories260k.ini" --db "$work/busy.db" --jobs 1 \
    >/dev/null 2>"$work/busy.log"
stop_busy
summary "beside $busy busy loops" "$work/busy.db"
echo
echo "drift: |the run's weight rate / the profile's - 1|; validate warns beyond $noise"

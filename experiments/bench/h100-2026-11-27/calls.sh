#!/usr/bin/env bash
# The 2026-11-27 H100 window's two calls (copied from the git-ignored
# .gpu/go.sh they ran as; the case on CALL added here). One call: stages in order, each under its own STAGE_S, each
# stage's files tarred into $OUT as it ends (8 files at most come back).
set -u
T0=$(date +%s) END=${END_S:-555}
W=/tmp/w; mkdir -p $W
pack() { tar -C $W -czf "$OUT/$1.tgz" "$1" 2>/dev/null; }
st() { # name seconds stage args...
    local name=$1 s=$2; shift 2
    local left=$(( T0 + END - $(date +%s) ))
    [ "$s" -gt "$left" ] && s=$left
    [ "$s" -lt 30 ] && { echo "== $name: skipped, $left s left" | tee -a $W/rc.txt; return; }
    mkdir -p $W/$name
    echo "== $name ($s s) $(date -u +%T)"
    ( export OUT=$W/$name STAGE_S=$s; bash scripts/gpu-window "$@" ) >$W/$name/stdout.txt 2>&1
    echo "== $name rc=$? $(date -u +%T)" | tee -a $W/rc.txt
    tail -25 $W/$name/stdout.txt
    pack $name
}
{ date -u; nvidia-smi; nproc; free -g; } >$W/machine.txt 2>&1; cp $W/machine.txt $OUT/
# First call (device tool run, timeout_s 590, carry [".gpu"], after make build
# and scripts/gpu-pack at 81376e1): `OUT=$OUT bash .gpu/go.sh`
case ${CALL:-1} in
1)
st tests 150 tests
MODES=dense BATCHES="1 64" HF=1 st scale1 250 scale
st host 30 host
MODES=dense BATCHES="8 32" HF=0 st scale2 80 scale
st fig9 400 fig9 24 27 25 ;;
# Second call, on the warm machine (timeout_s 470): `END_S=440 CALL=2 ...`
2)
MODES=dense BATCHES="64" HF=0 st scale3 90 scale
st fig9b 150 fig9 28 30 29
MODES=dense BATCHES="64" HF=1 PIPELINE=0 RUN_S=300 st scale4 400 scale ;;
esac
cp $W/rc.txt $OUT/

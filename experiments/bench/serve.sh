#!/usr/bin/env bash
# Serving simulator speed (issue 46, item 5): wall time to simulate 10,000
# requests of 512 + 512 tokens on OPT-13B (A100-80GB) under four
# selection/placement pairs, at a Poisson rate of 4 requests/s and with all
# requests at once, on a synthetic trace long enough for every request (no
# synthetic extension). Prints a table with iterations and simulated
# iterations per second; run it from the repository root after `make
# build`, on a quiet machine (uptime first; the CPU seconds, user + system,
# stand beside the wall time since other work may share the machine). The
# target is under 10 s a run on one core.
set -euo pipefail
cd "$(dirname "$0")/../.."
alisa=build/alisa
out=build/bench
mkdir -p "$out"
trace="$out/opt13b-serve.trace"
[ -f "$trace" ] || $alisa trace gen --model OPT-13B --layers 8 --seqs 4 --prompt-len 512 \
    --gen-len 512 --seed 7 -o "$trace" 2>/dev/null
uptime
printf '%-8s %-10s %6s %8s %7s %10s %8s %12s %8s\n' selection placement rate wall_s cpu_s \
    iterations replays iterations/s tok/s
for pair in "dense gpu-only" "h2o gpu-only" "swa lru" "swa alisa"; do
    for rate in 4 0; do
        set -- $pair
        start=$(date +%s.%N)
        json=$(/usr/bin/time -f '%U %S' -o "$out/serve.time" $alisa serve --trace "$trace" --model OPT-13B --hardware A100-80GB \
            --requests 10000 --rate "$rate" --prompt-len 512 --output-len 512 \
            --selection "$1" --placement "$2" --json)
        end=$(date +%s.%N)
        python3 -c '
import json, sys
d = json.loads(sys.argv[1]); w = float(sys.argv[5]) - float(sys.argv[4])
print("%-8s %-10s %6s %8.2f %7.2f %10d %8d %12.0f %8.0f" % (sys.argv[2], sys.argv[3], sys.argv[6], w,
      float(sys.argv[7]),
      d["iterations"], d["placement_replays"], d["iterations"] / w, d["throughput_tok_s"]))
' "$json" "$1" "$2" "$start" "$end" "$rate" "$(awk '{ print $1 + $2 }' "$out/serve.time")"
    done
done

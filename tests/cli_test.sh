#!/usr/bin/env bash
# The alisa CLI as a user meets it: exit codes (0 ok, 1 failure, 2 usage),
# --help for every command, and the trace gen -> check -> info pipeline.
# Usage: cli_test.sh PATH/TO/alisa
set -u
alisa=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# expect CODE DESCRIPTION CMD...: runs CMD, checks its exit code; output in $tmp/out
expect() {
    local want=$1 what=$2
    shift 2
    "$@" >"$tmp/out" 2>&1
    local got=$?
    if [ "$got" -eq "$want" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $what: exit $got, expected $want"
        sed 's/^/    /' "$tmp/out" | head -20
    fi
}

# grep_out PATTERN DESCRIPTION: the last command's output contains PATTERN
grep_out() {
    if grep -q -- "$1" "$tmp/out"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $2: output lacks '$1'"
        sed 's/^/    /' "$tmp/out" | head -20
    fi
}

expect 2 "no command" "$alisa"
grep_out "usage: alisa <command>" "no command prints usage"
expect 2 "unknown command" "$alisa" frobnicate
grep_out "unknown command 'frobnicate'" "unknown command named"
expect 0 "help" "$alisa" help
grep_out "trace" "help lists trace"
expect 0 "--help" "$alisa" --help
expect 0 "version" "$alisa" version
grep_out "cuda:" "version reports the CUDA build"
for cmd in catalog trace version help policy plan search sim fidelity; do
    expect 0 "$cmd --help" "$alisa" $cmd --help
    grep_out "usage: alisa $cmd" "$cmd --help shows its usage"
done
for sub in info check gen dump; do
    expect 0 "trace $sub --help" "$alisa" trace $sub --help
    grep_out "usage: alisa trace $sub" "trace $sub --help"
done
expect 2 "bad option" "$alisa" catalog --frob
grep_out "unrecognized option '--frob'" "bad option named"
grep_out "(alisa catalog --help for the options)" "bad option points at --help"
[ "$(wc -l <"$tmp/out")" -eq 1 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a usage error is one line"; }
expect 2 "unknown trace command" "$alisa" trace frob
expect 2 "missing option value" "$alisa" catalog --catalog
expect 2 "bad option value" "$alisa" trace gen --model OPT-6.7B -o "$tmp/x" --seqs two
grep_out "\-\-seqs: 'two' is not a non-negative integer" "bad value named"
expect 2 "missing --model" "$alisa" trace gen -o "$tmp/x"
expect 2 "unknown model (a bad value: exit 2)" "$alisa" trace gen --model GPT-9 -o "$tmp/x"
grep_out "\-\-model GPT-9: not in the catalog" "unknown model named"
expect 2 "impossible config" "$alisa" trace gen --model OPT-6.7B -o "$tmp/x" --sparsity-last 1.5
grep_out "sparsity-last 1.5" "impossible value named"

expect 0 "catalog" "$alisa" catalog
grep_out "OPT-30B" "catalog lists OPT-30B"
grep_out "H100-80GB" "catalog lists H100"
expect 0 "catalog --json" "$alisa" catalog hardware --json
grep_out '"link_gbps": 20' "hardware json"
printf '[T-test]\ngpu = a test GPU\ngpu_mem_gib = 7.5\nhbm_gbps = 100\nfp16_tflops = 10\nhost_dram_gib = 8\nlink_gbps = 1\nlink_latency_us = 1\nhost_mem_gbps = 2\ngemm_efficiency = 1\nhbm_efficiency = 1\n' >"$tmp/p.ini"
expect 0 "catalog --profile" "$alisa" catalog hardware --profile "$tmp/p.ini"
grep_out "^T-test  *a test GPU  *7.50" "catalog lists the profile's section"
printf '; nothing\n' >"$tmp/p0.ini"
expect 1 "catalog --profile without a section" "$alisa" catalog hardware --profile "$tmp/p0.ini"

expect 0 "trace gen" "$alisa" trace gen --model OPT-13B --layers 4 --seqs 2 --prompt-len 32 \
    --gen-len 64 --seed 3 -o "$tmp/a.trace"
expect 0 "trace check" "$alisa" trace check "$tmp/a.trace"
grep_out "ok (192 steps)" "check counts steps"
expect 0 "trace info" "$alisa" trace info "$tmp/a.trace"
grep_out "model:      OPT-13B  layers 4" "info shape"
grep_out "over 128 decode steps" "info counts decode steps"
expect 0 "trace info --json" "$alisa" trace info "$tmp/a.trace" --json
grep_out '"mean"' "info json has sparsity"
expect 0 "trace dump" "$alisa" trace dump "$tmp/a.trace" --seq 1 --pos 40 --layer 2
grep_out "^1 40 2 -1 " "dump filters rows"

# The scheduler: policies, plan, search.
expect 0 "policy list" "$alisa" policy list
grep_out "swa" "policy list shows swa"
grep_out "OFFLINE BOUND" "belady marked as a bound"
expect 2 "policy bad" "$alisa" policy frob
expect 0 "plan" "$alisa" plan --trace "$tmp/a.trace" --selection swa --sparsity 0.8 \
    --placement alisa --gpu-kv-bytes 8M --cpu-kv-bytes 4M --every 16
grep_out "totals: 512 decode steps" "plan counts decode steps x streams"
grep_out "phase II (first offload)" "plan reports the phases"
expect 0 "plan --json" "$alisa" plan --trace "$tmp/a.trace" --placement belady \
    --gpu-kv-bytes 8MiB --json
grep_out '"gpu_misses"' "plan json has gpu_misses"
grep_out '"bytes_h2d"' "plan json has bytes_h2d"
grep_out '"recomputed_tokens"' "plan json has recomputed_tokens"
expect 0 "plan --log" "$alisa" plan --trace "$tmp/a.trace" --log "$tmp/a.log" --every 0
[ "$(grep -c decode "$tmp/a.log")" -eq 512 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: decision log lines"; }
expect 2 "plan unknown placement" "$alisa" plan --trace "$tmp/a.trace" --placement magic
expect 2 "plan bad bytes" "$alisa" plan --trace "$tmp/a.trace" --gpu-kv-bytes 3X
grep_out "unknown unit 'X'" "bad unit named"
expect 1 "plan missing trace" "$alisa" plan --trace "$tmp/none.trace"
expect 0 "search" "$alisa" search --model OPT-30B --hardware H100-80GB --batch 64 --grid 4
grep_out "^greedy  alpha" "search prints greedy"
expect 2 "search unknown model" "$alisa" search --model X --hardware H100-80GB --batch 1

# The simulator (the a.trace prompt is 32 tokens, 64 generated).
expect 0 "sim" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B --hardware V100-32GB \
    --batch 8 --prompt-len 32 --gen-len 64 --system alisa --timeline "$tmp/tl.csv"
grep_out "^throughput" "sim prints throughput"
[ "$(wc -l <"$tmp/tl.csv")" -eq 65 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: timeline rows"; }
expect 0 "sim --json" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B --hardware V100-32GB \
    --batch 8 --prompt-len 32 --gen-len 64 --system flexgen --json
for key in throughput_tok_s total_s oom bytes_h2d bytes_d2h gpu_hit_rate recomputed_tokens \
           attention_recall_mean host_s relay_s cache_gpu_percent lp_layer_ns; do
    grep_out "\"$key\"" "sim json has $key"
done
grep_out '"software": "flexgen"' "sim json names the software"
# the dominant category is the largest of the parts of the decode its time
# line prints (weights, KV, recompute, stall; host from the JSON), and a
# stall names the busiest of what the GPU waits on
# (batch 8: compute on weights; batch 64 with the KV on the host: a stall on
# the CPU's attention, or on the link up)
for run in "alisa 8" "dense-gpu 8" "flexgen 64" "flexgen-copy 64"; do
    read -r sys b <<<"$run"
    "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B --hardware V100-32GB --batch "$b" \
        --prompt-len 32 --gen-len 64 --system "$sys" --flexgen-percent 100,0,0,100 --json \
        >"$tmp/dom.json" 2>&1 &&
    python3 - "$tmp/dom.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
parts = {"compute on weights": d["compute_weights_s"], "compute on KV": d["compute_kv_s"],
         "recompute": d["recompute_s"], "host": d["host_s"], "GPU stall": d["stall_s"]}
best = max(parts, key=parts.get)
assert d["dominant"] == best and abs(d["dominant_s"] - parts[best]) < 1e-9, (d["dominant"], parts)
if best == "GPU stall":
    w = {"link up": d["transfer_h2d_s"], "link down": d["transfer_d2h_s"],
         "CPU attention": d["cpu_attention_s"]}
    assert d["dominant_waiting"] == max(w, key=w.get), (d["dominant_waiting"], w)
else:
    assert d["dominant_waiting"] is None
PY
    [ $? -eq 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: sim's dominant category ($sys)"; }
done
expect 0 "sim --flexgen-gpu-batch" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 64 --system flexgen-copy \
    --flexgen-gpu-batch 2 --software none
grep_out "gpu-batch-size 2 --num-gpu-batches 4" "sim prints FlexGen's GPU batches"
expect 2 "sim --flexgen-gpu-batch not dividing" "$alisa" sim --trace "$tmp/a.trace" \
    --model OPT-13B --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 64 \
    --system flexgen --flexgen-gpu-batch 3
grep_out "flexgen-gpu-batch 3: does not divide --batch 8" "sim names the bad GPU batch"
expect 2 "sim --flexgen-gpu-batch for vllm" "$alisa" sim --trace "$tmp/a.trace" \
    --model OPT-13B --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 64 \
    --system vllm --flexgen-gpu-batch 4
expect 2 "sim unknown software" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 64 --system alisa --software slow
grep_out "software slow: not in the catalog" "sim names the unknown software"
expect 1 "sim oom" "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B --hardware V100-32GB \
    --batch 8 --prompt-len 32 --gen-len 64 --system dense-gpu
grep_out "out of memory: the weights" "sim reports weights not fitting"
expect 1 "sim short trace" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --system alisa
grep_out "the workload needs 128" "sim names the prompt mismatch"
expect 0 "sim --extend" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B --hardware V100-32GB \
    --batch 8 --prompt-len 32 --gen-len 96 --system alisa --extend
grep_out "the last 32 decode steps use synthetic rows" "sim reports the extension"
expect 2 "sim unknown system" "$alisa" sim --trace "$tmp/a.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --system magic
# per-head selection: refused on a trace without per-head rows, run on one with them
expect 1 "plan --per-head without per-head rows" "$alisa" plan --trace "$tmp/a.trace" --per-head
grep_out "a.trace: per-head streams need per-head rows" "plan --per-head names the trace"
expect 0 "trace gen --per-head" "$alisa" trace gen --model OPT-13B --layers 2 --seqs 2 \
    --prompt-len 32 --gen-len 32 --per-head -o "$tmp/heads.trace"
expect 0 "plan --per-head" "$alisa" plan --trace "$tmp/heads.trace" --selection topk \
    --placement lru --gpu-kv-bytes 2MiB --per-head --every 0
grep_out "sequences x layers x 40 KV heads" "plan --per-head counts KV-head streams"
grep_out "per KV head mean" "plan reports the recall per KV head"
expect 2 "plan --per-head --log" "$alisa" plan --trace "$tmp/heads.trace" --per-head \
    --log "$tmp/heads.log"
expect 0 "sim --per-head" "$alisa" sim --trace "$tmp/heads.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 32 --system alisa --per-head
grep_out "(selected per KV head)" "sim says it selected per KV head"
expect 1 "sim --per-head --extend" "$alisa" sim --trace "$tmp/heads.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 64 --system alisa --per-head \
    --extend
grep_out "the synthetic extension has no per-head rows" "sim --per-head refuses the extension"
expect 1 "sim --per-head vllm" "$alisa" sim --trace "$tmp/heads.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 32 --system vllm --per-head
grep_out "per-head with system vllm" "sim --per-head refuses vLLM's per-sequence model"
expect 0 "trace gen --per-head SmolLM2" "$alisa" trace gen --model SmolLM2-135M --layers 2 \
    --prompt-len 32 --gen-len 32 --per-head -o "$tmp/heads3.trace"
expect 1 "sim --per-head uneven" "$alisa" sim --trace "$tmp/heads3.trace" --model OPT-13B \
    --hardware V100-32GB --batch 8 --prompt-len 32 --gen-len 32 --system alisa --per-head
grep_out "KV width 5120 (hidden 5120) does not split into the trace's 3 KV heads" \
    "sim --per-head names the shape that does not split"

# Bad input files: one line naming the file, exit 1, no crash.
expect 1 "missing trace" "$alisa" trace info "$tmp/none.trace"
grep_out "alisa: error: $tmp/none.trace: cannot open" "missing trace named"
head -c 1000 "$tmp/a.trace" >"$tmp/cut.trace"
expect 1 "truncated trace" "$alisa" trace check "$tmp/cut.trace"
grep_out "cut.trace: byte " "truncation located"
[ "$(wc -l <"$tmp/out")" -eq 1 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: error is not one line"; }
printf 'not a trace at all' >"$tmp/junk.trace"
expect 1 "junk trace" "$alisa" trace info "$tmp/junk.trace"
grep_out "bad magic" "junk detected"
# fidelity (Fig. 4): dense is exact, a sparse policy is not; errors named
expect 0 "fidelity dense" "$alisa" fidelity --trace "$tmp/a.trace" --selection dense --json
grep_out '"spearman_mean": 1.0,' "dense is perfectly rank-correlated with itself"
grep_out '"mass_kept_mean": 1.0,' "dense keeps all the mass"
expect 0 "fidelity swa" "$alisa" fidelity --trace "$tmp/a.trace" --selection swa --sparsity 0.8
grep_out " mean " "fidelity prints the layer means"
grep -q '^    3 ' "$tmp/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: fidelity lacks layer 3"; }
expect 2 "fidelity without a selection" "$alisa" fidelity --trace "$tmp/a.trace"
expect 2 "fidelity, unknown selection" "$alisa" fidelity --trace "$tmp/a.trace" --selection nope
grep_out "--selection nope: unknown" "unknown selection named"
expect 1 "fidelity, missing trace" "$alisa" fidelity --trace "$tmp/none.trace" --selection swa
grep_out "none.trace" "missing trace named"
# a selection's own parameters (its declared knobs) are options of every
# command that takes a selection; one the selection lacks, or out of its
# range, is a usage error naming it; the value reaches the policy
expect 2 "a knob the selection lacks" "$alisa" fidelity --trace "$tmp/a.trace" --selection swa --sinks 2
grep_out "--sinks: selection swa has no such parameter (its own: --window-steps)" "the missing knob named"
expect 2 "a knob out of range" "$alisa" plan --trace "$tmp/a.trace" --selection streaming --sinks 2.5
grep_out "--sinks 2.5: selection streaming takes a whole number of at least 1" "the range named"
expect 2 "a knob of a run without a selection" "$alisa" run --model stories260K --prompt-tokens 4 -n 2 --stride 3
grep_out "--stride: selection dense has no such parameter" "the executor's default selection named"
for s in 1 6; do
    expect 0 "fidelity streaming --sinks $s" "$alisa" fidelity --trace "$tmp/a.trace" --selection streaming \
        --budget-tokens 12 --sinks $s --json
    sed -n 's/.*"mass_kept_mean": *\([0-9.e-]*\).*/\1/p' "$tmp/out" >"$tmp/mass$s"
done
[ -s "$tmp/mass1" ] && ! cmp -s "$tmp/mass1" "$tmp/mass6" && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: --sinks changed nothing ($(cat "$tmp/mass1") $(cat "$tmp/mass6"))"; }
expect 0 "sim reports the knobs" "$alisa" sim --trace "$tmp/a.trace" --model OPT-6.7B --hardware H100-80GB \
    --batch 2 --prompt-len 32 --gen-len 16 --system alisa --window-steps 3 --json
grep_out '"window-steps": 3' "sim's JSON carries the selection's parameters"
expect 1 "gen into a missing dir" "$alisa" trace gen --model OPT-13B -o "$tmp/no/such/dir.trace"
expect 1 "bad catalog dir" "$alisa" catalog --catalog "$tmp/nowhere"
grep_out "nowhere/models.ini: cannot open" "missing catalog named"
# A gen that fails while writing (the disk fills: an 8 KiB file-size limit)
# leaves the existing file it was told to replace as it was, and no .part.
cp "$tmp/a.trace" "$tmp/keep.trace"
expect 1 "gen that fills the disk over an existing file" bash -c \
    "ulimit -f 8; trap '' XFSZ; exec \"$alisa\" trace gen --model OPT-13B --layers 2 --seqs 1 \
     --prompt-len 16 --gen-len 256 -o \"$tmp/keep.trace\""
cmp -s "$tmp/a.trace" "$tmp/keep.trace" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: the existing trace changed"; }
[ ! -e "$tmp/keep.trace.part" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a .part file was left"; }

# Issue 48: options bounded before any work, each with one line naming the
# option and value (the reproducers took 11.8 GB, 16.7 GB, or grew without end)
expect 2 "sim --batch 2^31" "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B --hardware H100-80GB \
    --system vllm --batch 2147483647
grep_out "batch 2147483647: expected 1..65536 sequences" "sim --batch names its bound"
expect 1 "sim --gen-len past the model's context" "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B \
    --hardware H100-80GB --system alisa --batch 4 --gen-len 1000000 --extend
grep_out "over OPT-30B's context of 2048" "sim names the context"
expect 2 "run --batch 1000000" "$alisa" run --model OPT-125M --weights synthetic --prompt-tokens 4 \
    -n 2 --batch 1000000
grep_out "a prefill chunk's activations" "run counts the activations, not only the KV"
expect 2 "trace gen --gen-len 1000000" "$alisa" trace gen --model OPT-125M --gen-len 1000000 \
    -o "$tmp/huge.trace"
grep_out "the trace needs at least" "trace gen estimates the file's size first"
[ ! -e "$tmp/huge.trace" ] && [ ! -e "$tmp/huge.trace.part" ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: trace gen wrote a file it refused"; }

# Issue 48: writers never replace a link, FIFO or device; "-" is stdout
ln -s "$tmp/keep.trace" "$tmp/tl-link"
mkfifo "$tmp/tl-fifo"
for out in "$tmp/tl-link" "$tmp/tl-fifo" /dev/null; do
    expect 1 "sim --timeline $out" timeout 20 "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B \
        --hardware H100-80GB --system alisa --batch 4 --prompt-len 32 --gen-len 64 --timeline "$out"
    grep_out "refusing to replace it" "the refusal says why ($out)"
done
[ -L "$tmp/tl-link" ] && [ -p "$tmp/tl-fifo" ] && [ -c /dev/null ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: a link, FIFO or device was replaced"; }
expect 0 "sim --timeline -" "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B --hardware H100-80GB \
    --system alisa --batch 4 --prompt-len 32 --gen-len 64 --timeline -
grep_out "^step,end_ms" "the timeline went to standard output"

# issue 41: near misses get a suggestion; --version is version
expect 2 "sim --system misspelled" "$alisa" sim --trace "$tmp/a.trace" --model OPT-30B \
    --hardware H100-80GB --system alsia --batch 4
grep_out "--system alsia: unknown; did you mean 'alisa'?" "the nearest system is suggested"
expect 2 "plan --selection misspelled" "$alisa" plan --trace "$tmp/a.trace" --selection swaa --placement lru
grep_out "did you mean 'swa'?" "the nearest selection is suggested"
expect 2 "command misspelled" "$alisa" swep
grep_out "unknown command 'swep'; did you mean 'sweep'?" "the nearest command is suggested"
expect 0 "--version" "$alisa" --version
grep_out "^alisa [0-9]" "--version prints the version"

expect 0 "a tiered placement without a device limit runs" "$alisa" run --model OPT-125M --weights synthetic \
    --prompt-tokens 4 -n 2 --selection swa --placement alisa
grep_out "warning: --placement alisa without --gpu-kv-bytes" "... and says it tiers nothing"
expect 2 "run --model misspelled" "$alisa" run --model SmolLM-135M --prompt hi -n 2
grep_out "did you mean 'SmolLM2-135M'?" "the fetched model's short name is suggested"
echo '{"model": {}}' >"$tmp/tokenizer.json"
expect 1 "an HF tokenizer.json" "$alisa" run --model OPT-125M --weights synthetic --tokenizer "$tmp/tokenizer.json" \
    --prompt hi -n 2
grep_out "HF tokenizer.json is not supported; pass --tokenizer" "... is refused saying what to pass"

# Issue 48: an input that is a FIFO is refused at once, never waited on
# (a GGUF, a llama2.c checkpoint, a trace)
for f in m.gguf m.bin t.trace; do mkfifo "$tmp/fifo-$f"; done
expect 1 "a FIFO as a GGUF" timeout 10 "$alisa" model info "$tmp/fifo-m.gguf"
grep_out "not a regular file" "... refused, not waited on"
expect 1 "a FIFO as a llama2.c checkpoint" timeout 10 "$alisa" run --model "$tmp/fifo-m.bin" \
    --tokenizer "$tmp/fifo-m.gguf" --prompt a -n 1
grep_out "not a regular file" "... refused, not waited on"
expect 1 "a FIFO as a trace" timeout 10 "$alisa" trace info "$tmp/fifo-t.trace"
grep_out "not a regular file" "... refused, not waited on"

# Issue 43: alisa trace stats on a generated trace: the CSV's rows (overall,
# each layer overall and by bin, each bin overall), JSON, bad values
"$alisa" trace gen --model OPT-6.7B --layers 2 --seqs 2 --prompt-len 16 --gen-len 40 --seed 4 \
    -o "$tmp/st.trace" >/dev/null 2>&1
expect 0 "trace stats" "$alisa" trace stats "$tmp/st.trace" -o "$tmp/st.csv"
grep_out "^all layers" "... prints the overall row"
rows=$(tail -n +2 "$tmp/st.csv" | wc -l)
[ "$rows" -eq $((1 + 2 * 5 + 4)) ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: trace stats CSV: $rows rows, expected 15"; }
expect 0 "trace stats --json, two traces" "$alisa" trace stats "$tmp/st.trace" "$tmp/st.trace" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["traces"]; assert len(t)==2 and t[0]["all"]==t[1]["all"] and len(t[0]["layers"])==2 and len(t[0]["bins"])==4' "$tmp/out" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: trace stats JSON"; }
expect 0 "trace stats --budget-tokens" "$alisa" trace stats "$tmp/st.trace" --budget-tokens 8 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=d["traces"][0]["all"]; assert d["budget_tokens"]==8 and 0 < a["picks_per_row"] <= 4, (d["budget_tokens"], a["picks_per_row"])' "$tmp/out" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: trace stats --budget-tokens: SWA's global picks within floor(8/2)"; }
expect 2 "trace stats: alpha 0" "$alisa" trace stats "$tmp/st.trace" --alpha 0
grep_out "alpha 0" "... names the value"
expect 2 "trace stats: unknown selection" "$alisa" trace stats "$tmp/st.trace" --selection swb
expect 1 "trace stats: a missing trace" "$alisa" trace stats "$tmp/none.trace" -o "$tmp/n.csv"
[ ! -e "$tmp/n.csv" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a CSV left by a failed trace stats"; }

# Issue 43 item 3: alisa trace fit writes parameters that trace gen reads
# (the fitted profile and sinks in the generated trace's header), JSON,
# and bad parameter files named by file, key and line
expect 0 "trace fit" "$alisa" trace fit "$tmp/st.trace" --max-iter 4 --sim-layers 2 -o "$tmp/fit.ini"
grep_out "^kept_after_32" "... prints the statistics"
grep -q '^sparsity-profile = ' "$tmp/fit.ini" && grep -q '^\[generator\]' "$tmp/fit.ini" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: trace fit's parameters file"; }
expect 0 "trace gen --params" "$alisa" trace gen --model OPT-6.7B --layers 2 --prompt-len 16 \
    --gen-len 40 --params "$tmp/fit.ini" -o "$tmp/fitted.trace"
"$alisa" trace info "$tmp/fitted.trace" >"$tmp/out" 2>&1
grep_out "profile=" "... the fitted profile in the trace's generator line"
expect 0 "trace gen --params, OPT-30B" "$alisa" trace gen --model OPT-30B --layers 2 --prompt-len 16 \
    --gen-len 40 --params "$tmp/fit.ini" -o "$tmp/fitted30.trace"
grep_out "density scaled by 0.3" "... made sparser by the paper's trend"
"$alisa" trace fit "$tmp/st.trace" --max-iter 2 --sim-layers 2 --json -o "$tmp/fit2.ini" 2>/dev/null >"$tmp/fit.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["distance"] >= 0 and len(d["params"]["sparsity_profile"]) == 2' "$tmp/fit.json" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: trace fit JSON"; }
printf '[generator]\nnoise = 1\nhh-drft = 2\n' >"$tmp/bad.ini"
expect 1 "trace gen: an unknown key" "$alisa" trace gen --model OPT-6.7B --layers 2 --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "bad.ini: hh-drft: unknown key (alisa trace gen --help lists them) (line 3)" "... named with its line"
printf '[generator]\nsparsity-profile = 0.5, 1.5\n' >"$tmp/bad.ini"
expect 1 "trace gen: a profile knot of 1.5" "$alisa" trace gen --model OPT-6.7B --layers 2 --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "bad.ini: sparsity profile knot 1: 1.5" "... named with its file"
printf '[generator]\nnoise = abc\nhh-alpha = xyz\n' >"$tmp/bad.ini"
expect 1 "trace gen: two bad values" "$alisa" trace gen --model OPT-6.7B --layers 2 --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "noise: 'abc'.*(line 2)" "... the first named, with its line"
printf '[generator]\nsparsity-profile =\n' >"$tmp/bad.ini"
expect 1 "trace gen: an empty profile" "$alisa" trace gen --model OPT-6.7B --layers 2 --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "sparsity-profile: empty" "... named"
expect 1 "trace gen: a directory as parameters" "$alisa" trace gen --model OPT-6.7B --params "$tmp" -o "$tmp/b.trace"
grep_out "not a regular file" "... refused"
printf '[generator]\nnoise = 1e300\n' >"$tmp/bad.ini"
expect 1 "trace gen: noise 1e300" "$alisa" trace gen --model OPT-6.7B --layers 2 --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "noise 1e+300" "... named"
# a profile of 12 knots on continuation lines, read back whole
printf '[generator]\nsparsity-profile = 0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 0.91\n   0.92, 0.93\n' >"$tmp/long.ini"
expect 0 "trace gen: a 12-knot profile" "$alisa" trace gen --model OPT-6.7B --layers 12 --prompt-len 8 \
    --gen-len 8 --params "$tmp/long.ini" -o "$tmp/long.trace"
"$alisa" trace info "$tmp/long.trace" >"$tmp/out" 2>&1
grep_out "profile=0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.91,0.92,0.93" "... all 12 knots"
printf '[other]\nnoise = 1\n' >"$tmp/bad.ini"
expect 1 "trace gen: a key outside [generator]" "$alisa" trace gen --model OPT-6.7B --params "$tmp/bad.ini" -o "$tmp/b.trace"
grep_out "expected \[generator\]" "... named"
[ ! -e "$tmp/b.trace" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a trace from bad parameters"; }
expect 2 "trace fit: no -o" "$alisa" trace fit "$tmp/st.trace"
expect 1 "trace fit: a missing trace" "$alisa" trace fit "$tmp/none.trace" -o "$tmp/n.ini"
[ ! -e "$tmp/n.ini" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: parameters left by a failed fit"; }

# Issue 46: alisa serve: a stream drawn, written as CSV and read back to the
# same figures; the per-request and per-iteration tables; bad values (exit
# 2) and bad files (exit 1) named in one line, nothing left behind
"$alisa" trace gen --model OPT-6.7B --layers 2 --seqs 2 --prompt-len 16 --gen-len 40 --seed 4 \
    -o "$tmp/sv.trace" >/dev/null 2>&1
sv=(--trace "$tmp/sv.trace" --model OPT-13B --hardware A100-80GB --requests 30 --rate 50
    --prompt-len 8:16 --output-len 2:24)
expect 0 "serve" "$alisa" serve "${sv[@]}" --dump-requests "$tmp/req.csv" --per-request "$tmp/pr.csv" \
    --timeline "$tmp/tl.csv" --json
cp "$tmp/out" "$tmp/serve1.json"
[ "$(tail -n +2 "$tmp/req.csv" | wc -l)" -eq 30 ] && [ "$(tail -n +2 "$tmp/pr.csv" | wc -l)" -eq 30 ] &&
    head -1 "$tmp/tl.csv" | grep -q "^iteration,start_s" && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL: serve's CSVs"; }
expect 0 "serve --requests-csv" "$alisa" serve --trace "$tmp/sv.trace" --model OPT-13B \
    --hardware A100-80GB --requests-csv "$tmp/req.csv" --json
python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["ttft_s"]==b["ttft_s"] and a["e2e_s"]==b["e2e_s"] and a["requests"]==30' \
    "$tmp/serve1.json" "$tmp/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: serve from its own CSV"; }
expect 0 "serve, sparse offload" "$alisa" serve "${sv[@]}" --selection swa --placement lru \
    --gpu-tokens 32 --slo-ttft 0.5 --slo-tpot 0.05
grep_out "^goodput" "... prints goodput under objectives"
expect 0 "serve --search-rate" "$alisa" serve "${sv[@]}" --slo-ttft 0.2 --search-rate 1:200 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["rate_search"]; assert 1 <= d["rate"] <= 200 and d["runs"] >= 1' "$tmp/out" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: serve --search-rate JSON"; }
expect 2 "serve --search-rate without an objective" "$alisa" serve "${sv[@]}" --search-rate 1:200
grep_out "needs an objective" "... says what it needs"
expect 2 "serve --search-rate 5:2" "$alisa" serve "${sv[@]}" --slo-ttft 1 --search-rate 5:2
expect 2 "serve: rate -1" "$alisa" serve "${sv[@]}" --rate -1
grep_out "rate -1" "... names the value"
expect 2 "serve: --prompt-len 9:3" "$alisa" serve "${sv[@]}" --prompt-len 9:3
expect 0 "serve: the offline bound" "$alisa" serve "${sv[@]}" --selection swa --placement belady --gpu-tokens 32
expect 2 "serve: --max-num-seqs 0" "$alisa" serve "${sv[@]}" --max-num-seqs 0
printf 'arrival_s,prompt_len,output_len\n0,8,4\n0.5,x,4\n' >"$tmp/bad.csv"
expect 1 "serve: a bad CSV" "$alisa" serve "${sv[@]}" --requests-csv "$tmp/bad.csv" --per-request "$tmp/no.csv"
grep_out "bad.csv: line 3: prompt_len 'x'" "... names file, line and value"
[ ! -e "$tmp/no.csv" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: a table left by a failed serve"; }
expect 1 "serve: requests past the trace" "$alisa" serve "${sv[@]}" --output-len 60 --selection h2o
grep_out "pass --extend" "... says how to continue"
expect 1 "serve: out of memory" "$alisa" serve "${sv[@]}" --gpu-mem 27G
grep_out "out of memory" "... says so"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

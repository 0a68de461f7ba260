#!/usr/bin/env python3
"""FlexGen 0.1.8's own benchmark entry point (flexgen/flex_opt.py: its
add_parser_arguments and run_flexgen, unchanged) on a GPU machine that
cannot reach the Hugging Face hub, for issue 23's real-FlexGen Fig. 9.

run_flexgen asks AutoTokenizer.from_pretrained("facebook/opt-30b") for a
tokenizer, which needs the hub. With dummy weights (--path _DUMMY_) the
tokenizer only turns FlexGen's fixed prompt into left-padded ids
(get_test_inputs) and is never asked to decode, so this script hands it a
stand-in: the ids of OPT's BOS (2) followed by fixed token ids, left-padded
with OPT's pad id (1) to the length asked. Throughput does not depend on
which ids they are. Every other line of FlexGen runs as shipped.

Not yet run (written 2026-11-24 without a GPU at hand); carry the wheels
flexgen-0.1.8 and pulp beside the working tree (the GPU machine's README
explains `.whl`). Usage, the options being FlexGen's own:
  python3 experiments/bench/flexgen_run.py --model facebook/opt-6.7b \
      --path _DUMMY_ --percent 100 0 100 0 100 0 --gpu-batch-size 8 \
      --prompt-len 128 --gen-len 512

Two additions for `alisa sweep` (command = exec, experiments/peers-h100.sweep):
--percent also takes its six shares as one value separated by ',' or ':'
(a sweep's linked [vary] lists use ',' themselves), and
--json sends FlexGen's own printing to stderr and prints one JSON object on
stdout: FlexGen's figures as its benchmark log has them (read back with its
own read_benchmark_log; decode tok/s = prompts x (gen_len - 1) / decode
latency, FlexGen's definition), the policy, the device, the driver and the
software versions.
"""
import argparse
import contextlib
import json
import os
import sys
import tempfile

from flexgen import flex_opt

from gpu_facts import driver_version

PROMPT_IDS = [2, 32826, 16, 5, 812, 343, 9]  # stand-in ids; any would do with dummy weights


class _Ids:
    def __init__(self, ids):
        self.input_ids = ids


class StandInTokenizer:
    """What get_test_inputs uses of a tokenizer: __call__ with padding to max_length."""

    def __call__(self, prompts, padding="max_length", max_length=32):
        assert padding == "max_length"
        ids = PROMPT_IDS[:max_length]
        return _Ids([[1] * (max_length - len(ids)) + ids for _ in prompts])

    def batch_decode(self, *args, **kwargs):
        raise RuntimeError("the stand-in tokenizer cannot decode: run with --path _DUMMY_")


class _AutoTokenizer:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        return StandInTokenizer()


def split_argv(argv):
    """(--json given, argv without it, --percent's one-value form spread out)."""
    want_json, out = False, []
    for i, a in enumerate(argv):
        if a == "--json":
            want_json = True
        elif i and argv[i - 1] == "--percent" and ("," in a or ":" in a):
            out.extend(x for x in a.replace(":", ",").split(",") if x)
        else:
            out.append(a)
    return want_json, out


def main():
    flex_opt.AutoTokenizer = _AutoTokenizer
    parser = argparse.ArgumentParser()
    flex_opt.add_parser_arguments(parser)
    want_json, argv = split_argv(sys.argv[1:])
    args = parser.parse_args(argv)
    assert len(args.percent) == 6, "--percent takes six shares"
    assert "_DUMMY_" in args.path, "the stand-in tokenizer serves dummy weights only"
    if not want_json:
        flex_opt.run_flexgen(args)
        return
    import torch
    import transformers
    from flexgen.utils import read_benchmark_log
    with tempfile.TemporaryDirectory() as tmp:
        args.log_file = os.path.join(tmp, "flexgen.log")
        with contextlib.redirect_stdout(sys.stderr):
            flex_opt.run_flexgen(args)
        r = read_benchmark_log(args.log_file)
    print(json.dumps({
        "system": "flexgen", "model": args.model,
        "batch": args.gpu_batch_size * args.num_gpu_batches,
        "gpu_batch_size": args.gpu_batch_size, "num_gpu_batches": args.num_gpu_batches,
        "percent": args.percent, "cpu_cache_compute": bool(args.cpu_cache_compute),
        "prompt_tokens": args.prompt_len, "gen_tokens": args.gen_len,
        "prefill_s": r.prefill_latency, "prefill_tok_s": r.prefill_throughput,
        "decode_s": r.decode_latency, "decode_tok_s": r.decode_throughput,
        "total_tok_s": r.total_throughput,
        "device": torch.cuda.get_device_name(0), "driver": driver_version(),
        "software": f"flexgen 0.1.8, torch {torch.__version__}, "
                    f"transformers {transformers.__version__}"}))


if __name__ == "__main__":
    main()

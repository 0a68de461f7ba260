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
"""
import argparse

from flexgen import flex_opt

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


def main():
    flex_opt.AutoTokenizer = _AutoTokenizer
    parser = argparse.ArgumentParser()
    flex_opt.add_parser_arguments(parser)
    args = parser.parse_args()
    assert len(args.percent) == 6
    assert "_DUMMY_" in args.path, "the stand-in tokenizer serves dummy weights only"
    flex_opt.run_flexgen(args)


if __name__ == "__main__":
    main()

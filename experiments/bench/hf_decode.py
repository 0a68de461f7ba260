#!/usr/bin/env python3
"""HF transformers' decode speed at a catalog shape with random FP16 weights,
the peer of `alisa run --weights synthetic` in experiments/bench/cuda-scale.sh.

The model is built from its config (LlamaConfig or OPTConfig at the shape
given), weights drawn by transformers' own initialisation on the GPU, FP16;
prompts are random token ids; greedy decoding of exactly G new tokens with a
static KV cache (cache_implementation="static"; the dynamic cache when the
static one is refused, and the line says which). Decode time is the whole
generate() minus a generate() of one token (the prefill), each the median of
REPS runs after an untimed whole-length run (the first generate() with a
static cache sets up, and may compile, its forward: seen as a 10x slower
first run on an H100). Prints one line of key=value pairs; with --json one
JSON object instead (what `alisa sweep` stores for command = exec). The
shape comes from the options, or from --model NAME, read from the
catalog's sim/model/catalog/models.ini.

--offload cpu: Accelerate's CPU offloading as FlexGen's baseline script
sets it up for one GPU (benchmark/hf_ds/hf_opt.py, get_hf_opt_model with
cpu_offload): the decoder layers and the final norm on "cpu" (Accelerate
keeps their weights in host memory and moves each layer's to the GPU for
its forward), the embeddings and the output head on GPU 0. The model is
built on the host (FP16, transformers' initialisation) and dispatched with
accelerate.dispatch_model; the KV cache is the dynamic one, as that
script's generate() has it, and the line says so.
"""
import argparse
import configparser
import json
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, OPTConfig

from gpu_facts import driver_version


def config(a):
    if a.family == "llama":
        cfg = LlamaConfig(hidden_size=a.hidden, intermediate_size=a.ffn,
                          num_hidden_layers=a.layers, num_attention_heads=a.heads,
                          num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                          max_position_embeddings=a.max_seq, tie_word_embeddings=bool(a.tied))
    else:
        cfg = OPTConfig(hidden_size=a.hidden, ffn_dim=a.ffn, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, vocab_size=a.vocab,
                        word_embed_proj_dim=a.hidden, max_position_embeddings=a.max_seq,
                        do_layer_norm_before=True)
    return cfg


def build(a):
    cfg = config(a)
    torch.manual_seed(0)
    if a.offload == "none":
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float16)
        return m.eval()
    from accelerate import dispatch_model
    m = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float16).eval()
    dispatch_model(m, device_map=offload_map(m, a.family), main_device=0)
    return m


def offload_map(m, family):
    """hf_opt.py's device map for one GPU with cpu_offload, for either
    family: the decoder's layers and final norm on "cpu", every other part
    of the decoder (embeddings, positions) and the output head on GPU 0."""
    prefix, inner = ("model.decoder", m.model.decoder) if family == "opt" else ("model", m.model)
    dm = {f"{prefix}.{name}": "cpu" if name in ("layers", "final_layer_norm", "norm") else 0
          for name, _ in inner.named_children()}
    dm["lm_head"] = 0
    return dm


CATALOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "model",
                       "catalog", "models.ini")
SHAPE_KEYS = {"family": "family", "layers": "layers", "hidden": "hidden", "heads": "heads",
              "kv_heads": "kv_heads", "ffn": "ffn", "vocab": "vocab", "max_seq": "max_seq",
              "tied": "tied_embeddings"}


def catalog_shape(a):
    """Fills a's shape from the catalog's section for a.model."""
    c = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    c.read(CATALOG)
    if a.model not in c:
        sys.exit(f"hf_decode.py: --model {a.model}: not in {CATALOG}")
    sec = c[a.model]
    for attr, key in SHAPE_KEYS.items():
        if key not in sec and attr != "tied":
            sys.exit(f"hf_decode.py: {CATALOG}: [{a.model}] has no {key}")
        v = sec.get(key, "0").strip()
        if attr == "family":
            setattr(a, attr, v)
        elif attr == "tied":
            setattr(a, attr, 1 if v.lower() in ("1", "yes", "true") else 0)
        else:
            setattr(a, attr, int(v))


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser()
    for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "max_seq", "tied"):
        p.add_argument("--" + k.replace("_", "-"), dest=k, type=int, default=0)
    for k in ("batch", "prompt", "gen"):
        p.add_argument("--" + k, dest=k, type=int, required=True)
    p.add_argument("--family", choices=("llama", "opt"))
    p.add_argument("--model", help="a catalog model: its shape instead of the options")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--offload", choices=("none", "cpu"), default="none",
                   help="cpu: Accelerate's CPU offloading as FlexGen's hf_opt.py sets it up")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = p.parse_args()
    if a.model:
        catalog_shape(a)
    missing = [k for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                           "max_seq") if not getattr(a, k)]
    if missing:
        p.error("the shape needs --model or --" + ", --".join(k.replace("_", "-") for k in missing))
    if a.family not in ("llama", "opt"):
        p.error(f"family {a.family}: the peer builds llama and opt shapes only")
    m = build(a)
    ids = torch.randint(3, a.vocab, (a.batch, a.prompt), device="cuda")
    mask = torch.ones_like(ids)
    cache = "static" if a.offload == "none" else None

    def gen(n):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, attention_mask=mask,
                  pad_token_id=0)
        if cache:
            kw["cache_implementation"] = cache
        with torch.inference_mode():
            return m.generate(ids, **kw)

    try:
        gen(2)
    except Exception as exc:  # noqa: BLE001 - report and fall back
        print(f"# static cache refused ({type(exc).__name__}: {exc}); dynamic cache",
              file=sys.stderr)
        cache = None
        gen(2)
    # a whole-length run first, untimed, with the static cache only: its
    # generate() sets up (and may compile) its forward on first use, which is
    # no decode time; the dynamic cache (Accelerate's offload) compiles
    # nothing, and a second whole run would double a point whose every step
    # moves all decoder weights over the link
    if cache:
        out = gen(a.gen)
        assert out.shape[1] == a.prompt + a.gen, out.shape
    full = statistics.median(timed(lambda: gen(a.gen)) for _ in range(a.reps))
    pre = statistics.median(timed(lambda: gen(1)) for _ in range(a.reps))
    dec = full - pre
    if a.json:
        print(json.dumps({
            "system": "hf" if a.offload == "none" else "hf-accelerate-offload",
            "model": a.model or f"{a.family}-{a.layers}x{a.hidden}", "offload": a.offload,
            "batch": a.batch, "prompt_tokens": a.prompt, "gen_tokens": a.gen,
            "cache": cache or "dynamic", "prefill_s": pre, "decode_s": dec,
            "prefill_tok_s": a.batch * a.prompt / pre,
            "decode_tok_s": a.batch * (a.gen - 1) / dec,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
            "device": torch.cuda.get_device_name(0), "driver": driver_version(),
            "software": f"transformers {transformers.__version__}, torch {torch.__version__}"}))
        return
    print(f"hf transformers={transformers.__version__} torch={torch.__version__} "
          f"offload={a.offload} cache={cache or 'dynamic'} batch={a.batch} prompt={a.prompt} gen={a.gen} "
          f"prefill_s={pre:.4f} decode_s={dec:.4f} "
          f"decode_tok_s={a.batch * (a.gen - 1) / dec:.1f} "
          f"peak_gib={torch.cuda.max_memory_allocated() / 2**30:.1f}")


if __name__ == "__main__":
    main()

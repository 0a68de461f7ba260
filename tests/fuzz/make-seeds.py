#!/usr/bin/env python3
"""Writes the valid seeds of the structure-aware and multi-file harnesses
into tests/fuzz/corpus/ (committed; rerun only to change them):

  gguf/tiny_llama_{f32,q8_0}.gguf   a whole LLaMA model at tiny shapes, with
                                    its GPT-2 style tokenizer, that loads
  forward/*.in                      model.gguf (+ tokenizer.bin, llama2.c)
  checkpoint/*.in                   tests/golden's tiny HF checkpoints: the
                                    LLaMA one sharded in two with an index
  sim/*.in                          a catalog, a profile, a sweep spec and
                                    a trace for alisa sim

Multi-file inputs are files each introduced by a line "==> NAME <==", the
newline before it not the previous file's (the format fuzz_dir reads,
tests/fuzz/fuzz.h). GGUF as ggml's docs/gguf.md
describes version 3; llama2.c's tokenizer as its run.c reads it. numpy only.
Usage: python3 tests/fuzz/make-seeds.py"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")

U32, F32, STRING, ARRAY, U64 = 4, 6, 8, 9, 10


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack("<I", typ)
    if typ == U32:
        out += struct.pack("<I", val)
    elif typ == U64:
        out += struct.pack("<Q", val)
    elif typ == F32:
        out += struct.pack("<f", val)
    elif typ == STRING:
        out += gstr(val)
    elif typ == ARRAY:  # of strings
        out += struct.pack("<IQ", STRING, len(val)) + b"".join(gstr(s) for s in val)
    return out


def q8_0(m):
    """ggml's Q8_0: blocks of 32 weights, a binary16 scale then 32 int8."""
    flat = m.astype(np.float32).reshape(-1, 32)
    out = bytearray()
    for blk in flat:
        d = float(np.abs(blk).max()) / 127.0
        q = np.round(blk / d).astype(np.int8) if d else np.zeros(32, np.int8)
        out += np.float16(d).tobytes() + q.tobytes()
    return bytes(out)


def gguf_model(quant, dim=32, hidden=64, layers=1, heads=4, kv_heads=2, vocab=64, seed=1):
    rng = np.random.default_rng(seed)
    kvd = dim // heads * kv_heads
    tokens = [chr(c) for c in range(ord("!"), ord("!") + vocab)]
    merges = ["a b", "b c"]
    meta = [
        kv("general.architecture", STRING, "llama"),
        kv("llama.embedding_length", U32, dim),
        kv("llama.feed_forward_length", U32, hidden),
        kv("llama.block_count", U32, layers),
        kv("llama.attention.head_count", U32, heads),
        kv("llama.attention.head_count_kv", U32, kv_heads),
        kv("llama.context_length", U32, 64),
        kv("llama.rope.freq_base", F32, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        kv("tokenizer.ggml.model", STRING, "gpt2"),
        kv("tokenizer.ggml.tokens", ARRAY, tokens),
        kv("tokenizer.ggml.merges", ARRAY, merges),
        kv("tokenizer.ggml.bos_token_id", U32, 1),
    ]
    # (name, ne0 = input width, ne1 = rows); norms are 1-D
    shapes = [("token_embd.weight", dim, vocab), ("output_norm.weight", dim, None),
              ("output.weight", dim, vocab)]
    for l in range(layers):
        p = "blk.%d." % l
        shapes += [(p + "attn_norm.weight", dim, None), (p + "attn_q.weight", dim, dim),
                   (p + "attn_k.weight", dim, kvd), (p + "attn_v.weight", dim, kvd),
                   (p + "attn_output.weight", dim, dim), (p + "ffn_norm.weight", dim, None),
                   (p + "ffn_gate.weight", dim, hidden), (p + "ffn_up.weight", dim, hidden),
                   (p + "ffn_down.weight", hidden, dim)]
    infos, blobs, off = [], [], 0
    for name, ne0, ne1 in shapes:
        if ne1 is None:
            data, typ, dims = np.ones(ne0, np.float32).tobytes(), 0, [ne0]
        else:
            m = rng.uniform(-0.3, 0.3, (ne1, ne0)).astype(np.float32)
            if quant and ne0 % 32 == 0:
                data, typ = q8_0(m), 8
            else:
                data, typ = m.tobytes(), 0
            dims = [ne0, ne1]
        infos.append(gstr(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", typ, off))
        pad = (-len(data)) % 32
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(shapes), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % 32)
    return head + b"".join(blobs)


def llama2c_tokenizer(vocab):
    """run.c's tokenizer.bin: max_token_length, then (score, length, bytes) per
    token; ids 3..258 are the byte pieces <0x00>..<0xFF>."""
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    pieces += [" " + chr(ord("a") + i % 26) * (1 + i // 26) for i in range(vocab - len(pieces))]
    out = struct.pack("<i", max(len(p.encode()) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fi", -float(i), len(b)) + b
    return out


def files(*named):
    return b"\n".join(b"==> " + n.encode() + b" <==\n" + data for n, data in named)


def write(rel, data):
    path = os.path.join(CORPUS, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    print("%s: %d bytes" % (os.path.relpath(path, ROOT), len(data)))


def safetensors(tensors):
    """tensors: name -> (dtype, shape, bytes)"""
    header, off, blobs = {}, 0, []
    for name, (dt, shape, data) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}


def main():
    f32, q8 = gguf_model(False), gguf_model(True)
    write("gguf/tiny_llama_f32.gguf", f32)
    write("gguf/tiny_llama_q8_0.gguf", q8)
    write("forward/tiny_llama_f32.in", files(("model.gguf", f32)))
    write("forward/tiny_llama_q8_0.in", files(("model.gguf", q8)))
    big = gguf_model(True, vocab=320, seed=2)
    write("forward/tiny_llama_vocab320_tokenizer_bin.in",
          files(("model.gguf", big), ("tokenizer.bin", llama2c_tokenizer(320))))

    golden = os.path.join(ROOT, "tests", "golden")
    llama = read_safetensors(os.path.join(golden, "tiny-llama", "model.safetensors"))
    names = sorted(llama)
    half = {n: llama[n] for n in names[: len(names) // 2]}
    rest = {n: llama[n] for n in names[len(names) // 2:]}
    shards = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    index = json.dumps({"metadata": {}, "weight_map": {
        **{n: shards[0] for n in half}, **{n: shards[1] for n in rest}}}, indent=1).encode()
    cfg = open(os.path.join(golden, "tiny-llama", "config.json"), "rb").read()
    write("checkpoint/tiny_llama_two_shards.in",
          files(("config.json", cfg), ("model.safetensors.index.json", index),
                (shards[0], safetensors(half)), (shards[1], safetensors(rest))))
    opt = os.path.join(golden, "tiny-opt")
    write("checkpoint/tiny_opt_one_file.in",
          files(("config.json", open(os.path.join(opt, "config.json"), "rb").read()),
                ("model.safetensors", open(os.path.join(opt, "model.safetensors"), "rb").read())))
    self_index = json.dumps({"weight_map": {names[0]: "model.safetensors.index.json"}}).encode()
    write("checkpoint/index_names_itself.in",
          files(("config.json", cfg), ("model.safetensors.index.json", self_index)))

    cat = os.path.join(ROOT, "sim", "model", "catalog")

    def section(path, first):
        """the catalog file's [first] section and what follows up to the next one"""
        lines, keep = open(path).read().splitlines(True), False
        out = []
        for ln in lines:
            if ln.startswith("["):
                keep = ln.strip() == "[%s]" % first
            if keep:
                out.append(ln)
        return "".join(out).encode()

    models = section(os.path.join(cat, "models.ini"), "OPT-6.7B")
    hardware = section(os.path.join(cat, "hardware.ini"), "H100-80GB")
    software = open(os.path.join(cat, "software.ini"), "rb").read()
    trace = open(os.path.join(HERE, "corpus", "trace", "tiny.trace"), "rb").read()
    for system, extra in (("alisa", "sparsity = 0.8\n"), ("vllm", ""), ("flexgen", "")):
        spec = ("[sweep]\nname = fuzz\ncommand = sim\n\n[fixed]\nmodel = OPT-6.7B\n"
                "hardware = H100-80GB\nsystem = %s\ntrace = trace\nprompt-len = 8\n"
                "gen-len = 8\n%s\n[vary]\nbatch = 1 4\n"
                % (system, extra)).encode()
        write("sim/opt67b_h100_%s.in" % system,
              files(("models.ini", models), ("hardware.ini", hardware),
                    ("software.ini", software), ("spec.sweep", spec), ("trace", trace)))


if __name__ == "__main__":
    sys.exit(main())

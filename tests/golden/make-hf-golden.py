#!/usr/bin/env python3
"""Four tiny random Hugging Face checkpoints and their logits from an
independent numpy forward pass, written as transformers' modeling_opt.py,
modeling_llama.py, modeling_qwen2.py and modeling_mistral.py compute them
(not from our C code):

- tiny-opt: OPT (pre-LayerNorm with bias, learned positions with OPT's
  offset of 2, ReLU MLP, biases on every projection, head tied to the
  embedding), F16 tensors;
- tiny-llama: LLaMA with grouped-query attention (4 query heads, 2 KV heads)
  and Hugging Face's rotate-half RoPE (so a loader must permute q and k rows
  to interleaved pairs), BF16 matrices, F32 norms, an untied head;
- tiny-qwen2: Qwen2 (LLaMA's layer with biases on the q, k and v
  projections only, added before the rotate-half RoPE; theta 1e6, as
  Qwen2's config), grouped-query attention, F16 matrices, F32 norms and
  biases, the head tied to the embedding (as Qwen2-0.5B);
- tiny-mistral: Mistral (LLaMA's layer) with a sliding window of 3 tokens
  over the 8 positions (HF's sliding-window mask: key j visible to query i
  when i - 3 < j <= i), BF16 matrices, F32 norms, an untied head.

Each directory gets config.json and model.safetensors (written by hand: an
8-byte header length, the JSON header, the data); hf-golden.txt gets, per
model, the token ids and the logits at every position (float64 reference
from the stored, rounded weights; %.6f).

Run once by hand and commit the outputs:
    python3 tests/golden/make-hf-golden.py tests/golden
(needs numpy only).
"""
import json
import os
import struct
import sys

import numpy as np

rng = np.random.default_rng(20261124)
IDS = [1, 17, 42, 5, 63, 30, 8, 51]


def bf16_bits(a):
    """float32 -> bfloat16 bit patterns, round to nearest even."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def store(tensors, path):
    """tensors: name -> (dtype, array as stored); writes safetensors."""
    header, blobs, at = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def attention(q, k, v, H, KVH, window=0):
    T, hd = q.shape[0], q.shape[1] // H
    q = q.reshape(T, H, hd).transpose(1, 0, 2)
    k = np.repeat(k.reshape(T, KVH, hd).transpose(1, 0, 2), H // KVH, axis=0)
    v = np.repeat(v.reshape(T, KVH, hd).transpose(1, 0, 2), H // KVH, axis=0)
    s = q @ k.transpose(0, 2, 1)
    s = s + np.triu(np.full((T, T), -np.inf), 1)
    if window:  # keys j <= i - window hidden from query i
        s = s + np.tril(np.full((T, T), -np.inf), -window)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(T, H * hd)


def tiny_opt(out):
    d, H, L, ffn, V, P = 32, 4, 2, 64, 64, 128
    cfg = {"model_type": "opt", "hidden_size": d, "num_attention_heads": H, "num_hidden_layers": L,
           "ffn_dim": ffn, "vocab_size": V, "max_position_embeddings": P, "word_embed_proj_dim": d,
           "do_layer_norm_before": True, "activation_function": "relu"}
    t, W = {}, {}

    def add(name, shape, scale, offset=0.0):
        a = (offset + scale * rng.standard_normal(shape)).astype(np.float16)
        t[name] = ("F16", a)
        W[name] = a.astype(np.float64)

    pre = "model.decoder."
    add(pre + "embed_tokens.weight", (V, d), 0.5)
    add(pre + "embed_positions.weight", (P + 2, d), 0.5)
    for l in range(L):
        p = f"{pre}layers.{l}."
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            add(p + f"self_attn.{n}.weight", (d, d), 1 / np.sqrt(d))
            add(p + f"self_attn.{n}.bias", (d,), 0.1)
        for n in ("self_attn_layer_norm", "final_layer_norm"):
            add(p + f"{n}.weight", (d,), 0.1, 1.0)
            add(p + f"{n}.bias", (d,), 0.1)
        add(p + "fc1.weight", (ffn, d), 1 / np.sqrt(d))
        add(p + "fc1.bias", (ffn,), 0.1)
        add(p + "fc2.weight", (d, ffn), 1 / np.sqrt(ffn))
        add(p + "fc2.bias", (d,), 0.1)
    add(pre + "final_layer_norm.weight", (d,), 0.1, 1.0)
    add(pre + "final_layer_norm.bias", (d,), 0.1)
    os.makedirs(out, exist_ok=True)
    store(t, os.path.join(out, "model.safetensors"))
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    # the forward pass, modeling_opt.py's OPTDecoder with do_layer_norm_before
    T = len(IDS)
    h = W[pre + "embed_tokens.weight"][IDS] + W[pre + "embed_positions.weight"][np.arange(T) + 2]
    for l in range(L):
        p = f"{pre}layers.{l}."
        lin = lambda x, n: x @ W[p + n + ".weight"].T + W[p + n + ".bias"]
        x = layernorm(h, W[p + "self_attn_layer_norm.weight"], W[p + "self_attn_layer_norm.bias"])
        q = lin(x, "self_attn.q_proj") * (d // H) ** -0.5
        h = h + lin(attention(q, lin(x, "self_attn.k_proj"), lin(x, "self_attn.v_proj"), H, H),
                    "self_attn.out_proj")
        x = layernorm(h, W[p + "final_layer_norm.weight"], W[p + "final_layer_norm.bias"])
        h = h + lin(np.maximum(lin(x, "fc1"), 0), "fc2")
    h = layernorm(h, W[pre + "final_layer_norm.weight"], W[pre + "final_layer_norm.bias"])
    return h @ W[pre + "embed_tokens.weight"].T


def rope_tables(T, hd, theta):
    inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)
    ang = np.outer(np.arange(T), inv)
    return np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))


def rotate_half(x, heads, hd, cos, sin):
    T = x.shape[0]
    x = x.reshape(T, heads, hd)
    rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
    return (x * cos[:, None] + rot * sin[:, None]).reshape(T, heads * hd)


def llama_like(out, model_type, eps, window=0):
    """tiny-llama, or with a sliding window tiny-mistral (modeling_mistral.py
    is LLaMA's layer under the sliding-window mask)."""
    d, H, KVH, L, ffn, V, P, theta = 32, 4, 2, 2, 48, 64, 128, 10000.0
    hd = d // H
    cfg = {"model_type": model_type, "hidden_size": d, "num_attention_heads": H,
           "num_key_value_heads": KVH, "num_hidden_layers": L, "intermediate_size": ffn,
           "vocab_size": V, "max_position_embeddings": P, "rms_norm_eps": eps, "rope_theta": theta}
    if window:
        cfg["sliding_window"] = window
    cfg["tie_word_embeddings"] = False
    t, W = {}, {}

    def add(name, shape, scale, offset=0.0, f32=False):
        a = offset + scale * rng.standard_normal(shape)
        if f32:
            a = a.astype(np.float32)
            t[name] = ("F32", a)
            W[name] = a.astype(np.float64)
        else:
            bits = bf16_bits(a)
            t[name] = ("BF16", bits)
            W[name] = bf16_value(bits)

    add("model.embed_tokens.weight", (V, d), 0.5)
    for l in range(L):
        p = f"model.layers.{l}."
        add(p + "self_attn.q_proj.weight", (d, d), 1.5 / np.sqrt(d))
        add(p + "self_attn.k_proj.weight", (KVH * hd, d), 1.5 / np.sqrt(d))
        add(p + "self_attn.v_proj.weight", (KVH * hd, d), 1 / np.sqrt(d))
        add(p + "self_attn.o_proj.weight", (d, d), 1 / np.sqrt(d))
        add(p + "mlp.gate_proj.weight", (ffn, d), 1 / np.sqrt(d))
        add(p + "mlp.up_proj.weight", (ffn, d), 1 / np.sqrt(d))
        add(p + "mlp.down_proj.weight", (d, ffn), 1 / np.sqrt(ffn))
        add(p + "input_layernorm.weight", (d,), 0.1, 1.0, f32=True)
        add(p + "post_attention_layernorm.weight", (d,), 0.1, 1.0, f32=True)
    add("model.norm.weight", (d,), 0.1, 1.0, f32=True)
    add("lm_head.weight", (V, d), 0.5)
    os.makedirs(out, exist_ok=True)
    store(t, os.path.join(out, "model.safetensors"))
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    # modeling_llama.py: rotate-half RoPE, repeat_kv, SwiGLU
    T = len(IDS)
    cos, sin = rope_tables(T, hd, theta)
    h = W["model.embed_tokens.weight"][IDS]
    for l in range(L):
        p = f"model.layers.{l}."
        mm = lambda x, n: x @ W[p + n + ".weight"].T
        x = rmsnorm(h, W[p + "input_layernorm.weight"], eps)
        q = rotate_half(mm(x, "self_attn.q_proj"), H, hd, cos, sin) * hd ** -0.5
        k = rotate_half(mm(x, "self_attn.k_proj"), KVH, hd, cos, sin)
        h = h + mm(attention(q, k, mm(x, "self_attn.v_proj"), H, KVH, window), "self_attn.o_proj")
        x = rmsnorm(h, W[p + "post_attention_layernorm.weight"], eps)
        g = mm(x, "mlp.gate_proj")
        h = h + mm(g / (1 + np.exp(-g)) * mm(x, "mlp.up_proj"), "mlp.down_proj")
    h = rmsnorm(h, W["model.norm.weight"], eps)
    return h @ W["lm_head.weight"].T


def tiny_llama(out):
    return llama_like(out, "llama", 1e-6)


def tiny_qwen2(out):
    d, H, KVH, L, ffn, V, P, theta, eps = 32, 4, 2, 2, 48, 64, 128, 1000000.0, 1e-6
    hd = d // H
    cfg = {"model_type": "qwen2", "hidden_size": d, "num_attention_heads": H,
           "num_key_value_heads": KVH, "num_hidden_layers": L, "intermediate_size": ffn,
           "vocab_size": V, "max_position_embeddings": P, "rms_norm_eps": eps, "rope_theta": theta,
           "tie_word_embeddings": True, "use_sliding_window": False}
    t, W = {}, {}

    def add(name, shape, scale, offset=0.0, f32=False):
        a = (offset + scale * rng.standard_normal(shape)).astype(np.float32 if f32 else np.float16)
        t[name] = ("F32" if f32 else "F16", a)
        W[name] = a.astype(np.float64)

    add("model.embed_tokens.weight", (V, d), 0.5)
    for l in range(L):
        p = f"model.layers.{l}."
        add(p + "self_attn.q_proj.weight", (d, d), 1.5 / np.sqrt(d))
        add(p + "self_attn.q_proj.bias", (d,), 0.5, f32=True)
        add(p + "self_attn.k_proj.weight", (KVH * hd, d), 1.5 / np.sqrt(d))
        add(p + "self_attn.k_proj.bias", (KVH * hd,), 0.5, f32=True)
        add(p + "self_attn.v_proj.weight", (KVH * hd, d), 1 / np.sqrt(d))
        add(p + "self_attn.v_proj.bias", (KVH * hd,), 0.5, f32=True)
        add(p + "self_attn.o_proj.weight", (d, d), 1 / np.sqrt(d))
        add(p + "mlp.gate_proj.weight", (ffn, d), 1 / np.sqrt(d))
        add(p + "mlp.up_proj.weight", (ffn, d), 1 / np.sqrt(d))
        add(p + "mlp.down_proj.weight", (d, ffn), 1 / np.sqrt(ffn))
        add(p + "input_layernorm.weight", (d,), 0.1, 1.0, f32=True)
        add(p + "post_attention_layernorm.weight", (d,), 0.1, 1.0, f32=True)
    add("model.norm.weight", (d,), 0.1, 1.0, f32=True)
    os.makedirs(out, exist_ok=True)
    store(t, os.path.join(out, "model.safetensors"))
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    # modeling_qwen2.py: Qwen2Attention's biased q, k, v, then rotate-half
    # RoPE (apply_rotary_pos_emb), repeat_kv, Qwen2MLP's SwiGLU
    T = len(IDS)
    cos, sin = rope_tables(T, hd, theta)
    h = W["model.embed_tokens.weight"][IDS]
    for l in range(L):
        p = f"model.layers.{l}."
        mm = lambda x, n: x @ W[p + n + ".weight"].T
        lin = lambda x, n: mm(x, n) + W[p + n + ".bias"]
        x = rmsnorm(h, W[p + "input_layernorm.weight"], eps)
        q = rotate_half(lin(x, "self_attn.q_proj"), H, hd, cos, sin) * hd ** -0.5
        k = rotate_half(lin(x, "self_attn.k_proj"), KVH, hd, cos, sin)
        h = h + mm(attention(q, k, lin(x, "self_attn.v_proj"), H, KVH), "self_attn.o_proj")
        x = rmsnorm(h, W[p + "post_attention_layernorm.weight"], eps)
        g = mm(x, "mlp.gate_proj")
        h = h + mm(g / (1 + np.exp(-g)) * mm(x, "mlp.up_proj"), "mlp.down_proj")
    h = rmsnorm(h, W["model.norm.weight"], eps)
    return h @ W["model.embed_tokens.weight"].T


def tiny_mistral(out):
    return llama_like(out, "mistral", 1e-5, window=3)


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "hf-golden.txt"), "w") as f:
        f.write("# logits of tests/golden/tiny-opt, tiny-llama, tiny-qwen2 and tiny-mistral from an\n")
        f.write("# independent numpy forward pass (tests/golden/make-hf-golden.py wrote this)\n")
        for name, fn in (("tiny-opt", tiny_opt), ("tiny-llama", tiny_llama),
                         ("tiny-qwen2", tiny_qwen2), ("tiny-mistral", tiny_mistral)):
            logits = fn(os.path.join(out, name))
            f.write(f"model {name} {len(IDS)} {logits.shape[1]}\n")
            f.write("ids " + " ".join(map(str, IDS)) + "\n")
            for row in logits:
                f.write(" ".join("%.6f" % v for v in row) + "\n")


if __name__ == "__main__":
    main()

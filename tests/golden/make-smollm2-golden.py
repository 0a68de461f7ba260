#!/usr/bin/env python3
"""Golden tokens and logits for SmolLM2-135M-Instruct (Q4_1 GGUF) from
llama.cpp, an implementation none of us wrote (through its Python binding,
llama-cpp-python, built from the PyPI source release on a CPU machine).

Two runs, two files:
- f32: the Q4_1 weights dequantised to F32 by llama.cpp's own gguf package
  (gguf.quants.dequantize) into a temporary F32 GGUF, run with an F32 KV
  cache: the same arithmetic our executor does (it dequantises to F32 at
  load), so tokens and logits must agree closely.
- q4_1: the file as shipped, llama.cpp's own quantised path (Q4_1 weights
  times activations quantised to Q8_1, F16 KV cache): what a llama.cpp user
  gets; it differs from F32 arithmetic by a few tenths of a logit.

For each fixed prompt: the prompt's token ids (BOS + llama.cpp's own
tokenization), the greedy continuation of N_GEN tokens, and, at a few steps,
the top TOP_K logits (id and value) of llama.cpp's last row. The C test
(tests/test_golden.c) encodes the same prompts, decodes greedily and compares.

Run once by hand and commit the two outputs (on a CPU without usable AMX
tiles, build llama.cpp without them, as here):
    python3 -m venv /tmp/lcp
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
      -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" \
      /tmp/lcp/bin/pip install llama-cpp-python==0.3.36 gguf==0.19.0 numpy
    /tmp/lcp/bin/python tests/golden/make-smollm2-golden.py \
        models-cache/SmolLM2-135M-Instruct.Q4_1.gguf tests/golden ../shared/models
"""
import os
import sys
import tempfile

import gguf
import llama_cpp
import numpy as np
from gguf import quants

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):",
    "Water boils at 100 degrees Celsius, and",
]
# Texts tokenized whole (no BOS), from ../shared/models: the first bytes up to
# a line end.
TEXTS = [("eval-text/wikitext2_wiki.test.raw", 8000), ("eval-text/tinyshakespeare_input.txt", 4000),
         ("eval-text/tinystories_val_subset.txt", 4000)]
N_GEN = 64
TOP_K = 8
LOGIT_STEPS = [0, 1, 8, 32, 63]


def to_f32(src, dst):
    """Every tensor of src dequantised to F32 (gguf's own dequantiser), the
    metadata copied as is."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vt = f.types[0]
        w.add_key_value(name, f.contents(), vt, f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
    for t in r.tensors:
        w.add_tensor(t.name, quants.dequantize(t.data, t.tensor_type).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(path, label, out, **kv):
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True,
                          n_threads=2, seed=0, verbose=False, **kv)
    print("# golden data: llama.cpp (llama-cpp-python %s), %s" % (llama_cpp.__version__, label), file=out)
    print("# made by tests/golden/make-smollm2-golden.py; format:", file=out)
    print("# prompt <text>            the prompt, as given", file=out)
    print("# prompt_tokens <ids...>   BOS + llama.cpp's tokenization", file=out)
    print("# gen_tokens <ids...>      greedy continuation", file=out)
    print("# logits <step> <id>:<value> ...   top logits of the row that chose gen token <step>", file=out)
    print("# text <path under models> <bytes>   then text_tokens <ids...>: a text's first bytes, no BOS", file=out)
    for text in PROMPTS:
        llm.reset()
        toks = llm.tokenize(text.encode(), add_bos=True, special=False)
        if toks[0] != llm.token_bos():
            toks = [llm.token_bos()] + toks
        print("prompt %s" % text, file=out)
        print("prompt_tokens %s" % " ".join(map(str, toks)), file=out)
        llm.eval(toks)
        gen, rows = [], {}
        for step in range(N_GEN):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            nxt = int(np.argmax(row))
            if step in LOGIT_STEPS:
                top = np.argsort(-row)[:TOP_K]
                rows[step] = " ".join("%d:%.5f" % (int(i), row[i]) for i in top)
            gen.append(nxt)
            llm.eval([nxt])
        print("gen_tokens %s" % " ".join(map(str, gen)), file=out)
        for step in LOGIT_STEPS:
            print("logits %d %s" % (step, rows[step]), file=out)
    return llm


def texts(llm, models, out):
    for rel, n in TEXTS:
        with open(os.path.join(models, rel), "rb") as f:
            data = f.read(n)
        data = data[:data.rfind(b"\n") + 1]
        print("text %s %d" % (rel, len(data)), file=out)
        print("text_tokens %s" % " ".join(map(str, llm.tokenize(data, add_bos=False, special=False))), file=out)


def main():
    src, outdir = sys.argv[1:3]
    models = sys.argv[3] if len(sys.argv) > 3 else "../shared/models"
    name = os.path.basename(src)
    with open(os.path.join(outdir, "smollm2-llamacpp-q4_1.txt"), "w") as out:
        llm = run(src, "%s as shipped (Q4_1 x Q8_1, F16 KV)" % name, out)
        texts(llm, models, out)
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "f32.gguf")
        to_f32(src, f32)
        with open(os.path.join(outdir, "smollm2-llamacpp-f32.txt"), "w") as out:
            run(f32, "%s dequantised to F32 by gguf %s, F32 KV" % (name, gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0"),
                out, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden tokens and logits for SmolLM2-135M-Instruct (Q4_1 GGUF) from
llama.cpp, an implementation none of us wrote (through its Python binding,
llama-cpp-python, built from the PyPI source release on a CPU machine).

For each fixed prompt: the prompt's token ids (BOS + llama.cpp's own
tokenization), the greedy continuation of N_GEN tokens, and, at a few steps,
the top TOP_K logits (id and value) of llama.cpp's last row. The C test
(tests/test_golden.c) encodes the same prompts, decodes greedily and compares:
prompt tokens exact, generated tokens exact, logits within a tolerance (llama.cpp
multiplies Q4_1 weights by activations quantised to Q8_1; we dequantise to F32).

Run once by hand and commit the output:
    python3 -m venv /tmp/lcp && /tmp/lcp/bin/pip install llama-cpp-python==0.3.36
    /tmp/lcp/bin/python tests/golden/make-smollm2-golden.py \
        models-cache/SmolLM2-135M-Instruct.Q4_1.gguf > tests/golden/smollm2-llamacpp.txt
"""
import sys

import llama_cpp
import numpy as np

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):",
    "Water boils at 100 degrees Celsius, and",
]
N_GEN = 64
TOP_K = 8
LOGIT_STEPS = [0, 1, 8, 32, 63]


def main():
    path = sys.argv[1]
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, logits_all=True,
                          n_threads=2, seed=0, verbose=False)
    print("# golden data: llama.cpp (llama-cpp-python %s) on %s" % (llama_cpp.__version__, path.split("/")[-1]))
    print("# made by tests/golden/make-smollm2-golden.py; format:")
    print("# prompt <text>            the prompt, as given")
    print("# prompt_tokens <ids...>   BOS + llama.cpp's tokenization")
    print("# gen_tokens <ids...>      greedy continuation")
    print("# logits <step> <id>:<value> ...   top logits of the row that chose gen token <step>")
    for text in PROMPTS:
        llm.reset()
        toks = llm.tokenize(text.encode(), add_bos=True, special=False)
        if toks[0] != llm.token_bos():
            toks = [llm.token_bos()] + toks
        print("prompt %s" % text)
        print("prompt_tokens %s" % " ".join(map(str, toks)))
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
        print("gen_tokens %s" % " ".join(map(str, gen)))
        for step in LOGIT_STEPS:
            print("logits %d %s" % (step, rows[step]))


if __name__ == "__main__":
    main()

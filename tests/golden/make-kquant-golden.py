#!/usr/bin/env python3
"""Golden dequantisation of ggml's k-quant blocks (Q4_K, Q6_K) by gguf-py,
the numpy implementation in llama.cpp's own repository (gguf.quants), so the
C reader (exec/qmat.c) is checked against code none of us wrote.

Random blocks from a fixed seed, with their binary16 scales set to plausible
values (random bytes there could be NaN); per block one line
    TYPE HEX-BYTES
and one line of the 256 dequantised floats (%.9g: exact for float32).

Run once by hand and commit the output:
    python3 -m venv /tmp/gg && /tmp/gg/bin/pip install gguf==0.19.0 numpy
    /tmp/gg/bin/python tests/golden/make-kquant-golden.py > tests/golden/kquants.txt
"""
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

rng = np.random.default_rng(20261124)
print("# gguf-py (gguf==0.19.0) gguf.quants.dequantize of random k-quant blocks;")
print("# tests/golden/make-kquant-golden.py wrote this")
for name, qtype, size, scales in (("Q4_K", T.Q4_K, 144, [(0, 0.02), (2, 0.01)]),
                                  ("Q6_K", T.Q6_K, 210, [(208, 0.005)])):
    for _ in range(3):
        b = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for at, scale in scales:
            b[at:at + 2] = np.float16(scale * (0.5 + rng.random())).tobytes()
        y = quants.dequantize(np.frombuffer(bytes(b), dtype=np.uint8), qtype)
        print(name, bytes(b).hex())
        print(" ".join("%.9g" % v for v in y.astype(np.float32)))

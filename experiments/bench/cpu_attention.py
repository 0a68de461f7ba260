#!/usr/bin/env python3
"""FlexGen's CPU attention (--cpu-cache-compute), its memory traffic measured
on this machine against the machine's own memory bandwidth (issue 44, item 2).

FlexGen 0.1.8 decodes with the KV cache on the CPU this way
(flexgen/pytorch_backend.py, TorchDevice.mha_gen, the dense branch where
k_cache is on the CPU): the cache's FP16 rows for the sequence so far are
viewed as (b * n_head, head_dim, s) and (b * n_head, s, head_dim), converted
to FP32 (`k, v = k.float(), v.float()`: a new FP32 tensor each), and
_attention_value runs torch.bmm(q, k), softmax and torch.bmm(w, v) in FP32.
Counted from that code, each FP16 KV byte costs the host 1 byte read and 2
written by the conversion and 2 read by the bmm: 5 bytes (7 where the
stores first read their lines, as ordinary stores do).

No PyTorch is at hand here (PyPI's Linux wheel brings the CUDA libraries, a
few GB), so numpy stands in for it with the same operations, shapes and
dtypes: astype(float32) on the strided view, then a batched matmul (OpenBLAS
sgemm, as torch's CPU bmm calls MKL or OpenBLAS sgemm), a softmax and the
second matmul. The figure it prints is the one the simulator needs: host
seconds per FP16 KV byte attended, as a multiple of one byte at the machine's
measured bandwidth (a numpy triad, a = s * c then a += b: two passes that
read and write 5 arrays, counted as the code's reads and writes, as the
attention's 5 bytes are). That multiple is the factor a simulated host
applies to its host_mem_gbps.

With --torch (where PyTorch is installed, as on a GPU window's machine: the
`host` stage of scripts/gpu-window runs it there) the attention is FlexGen's
own operations on CPU tensors: k.float(), v.float(), torch.bmm, softmax in
FP32, torch.bmm, under torch.set_num_threads(N).

Usage: python3 experiments/bench/cpu_attention.py [--threads N] [--repeat R] [--torch]
Prints a table and one JSON line; takes about a minute on 2 cores.
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--torch", action="store_true",
                    help="attend with PyTorch's CPU operations, as FlexGen does (needs torch)")
    a = ap.parse_args()
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(a.threads)
    import numpy as np  # after the thread settings
    torch = None
    if a.torch:
        try:
            import torch
        except ImportError:
            print("cpu_attention.py: --torch: PyTorch is not installed", file=sys.stderr)
            return 2
        torch.set_num_threads(a.threads)

    def best(f, r):
        t = []
        for _ in range(r):
            t0 = time.perf_counter()
            f()
            t.append(time.perf_counter() - t0)
        return min(t), sorted(t)[len(t) // 2]

    # the machine's bandwidth: a triad over 3 x 64 MiB arrays of FP64
    n = 8 << 20
    b, c = np.random.rand(n), np.random.rand(n)
    out = np.empty(n)

    def triad():
        np.multiply(c, 3.0, out=out)
        np.add(out, b, out=out)
    if torch is not None:  # numpy's triad runs on one thread; torch's on all
        tb, tc, tout = torch.from_numpy(b), torch.from_numpy(c), torch.from_numpy(out)

        def triad():
            torch.mul(tc, 3.0, out=tout)
            tout.add_(tb)
    tri_min, _ = best(triad, a.repeat)
    # c read, out written; out and b read, out written: 5 arrays
    triad_gbps = 5 * 8 * n / tri_min / 1e9

    rows = []
    # FlexGen's shapes: OPT-30B (56 heads of 128) and OPT-6.7B (32 of 128),
    # one GPU batch of its policy, the sequence at 512 + a few generated
    for model, n_head, gb in (("OPT-30B", 56, 48), ("OPT-6.7B", 32, 16)):
        hd = 128
        for s in (256, 544, 1024):
            kc = (np.random.rand(s, gb * n_head, hd).astype(np.float16) - 0.5)
            vc = (np.random.rand(s, gb * n_head, hd).astype(np.float16) - 0.5)
            q = np.random.rand(gb * n_head, 1, hd).astype(np.float32)

            def attend():
                k = kc.transpose(1, 2, 0).astype(np.float32)  # (b*h, hd, s)
                v = vc.transpose(1, 0, 2).astype(np.float32)  # (b*h, s, hd)
                w = np.matmul(q, k)
                w -= w.max(axis=2, keepdims=True)
                np.exp(w, out=w)
                w /= w.sum(axis=2, keepdims=True)
                return np.matmul(w, v)
            if torch is not None:
                tk, tv, tq = torch.from_numpy(kc), torch.from_numpy(vc), torch.from_numpy(q)

                def attend():  # FlexGen's mha_gen with the cache on the CPU
                    k = tk.permute(1, 2, 0).float()
                    v = tv.permute(1, 0, 2).float()
                    w = torch.softmax(torch.bmm(tq, k), dim=2)
                    return torch.bmm(w, v)
            t_min, t_med = best(attend, a.repeat)
            kv_bytes = kc.nbytes + vc.nbytes
            kv_gbps = kv_bytes / t_min / 1e9
            rows.append({"model": model, "gpu_batch": gb, "n_head": n_head, "head_dim": hd,
                         "seq": s, "kv_mb": kv_bytes / 1e6, "seconds_min": t_min,
                         "seconds_median": t_med, "kv_gbps": kv_gbps,
                         "host_bytes_per_kv_byte": triad_gbps / kv_gbps})
            del kc, vc
    lib = f"torch {torch.__version__}" if torch is not None else f"numpy {np.__version__}"
    print(f"machine: {os.cpu_count()} cores, {a.threads} threads, {lib}; "
          f"triad {triad_gbps:.2f} GB/s (bytes moved, best of {a.repeat})")
    print(f"{'model':9} {'gpu batch':>9} {'seq':>5} {'KV MB':>8} {'s (best)':>9} "
          f"{'KV GB/s':>8} {'host bytes / KV byte':>21}")
    for r in rows:
        print(f"{r['model']:9} {r['gpu_batch']:9d} {r['seq']:5d} {r['kv_mb']:8.1f} "
              f"{r['seconds_min']:9.4f} {r['kv_gbps']:8.2f} {r['host_bytes_per_kv_byte']:21.2f}")
    factors = sorted(r["host_bytes_per_kv_byte"] for r in rows)
    print(json.dumps({"triad_gbps": triad_gbps, "threads": a.threads, "library": lib, "rows": rows,
                      "factor_median": factors[len(factors) // 2],
                      "factor_min": factors[0], "factor_max": factors[-1]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

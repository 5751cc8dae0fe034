#!/usr/bin/env python3
"""Times one linear layer (y = x W^T + b) in float32 and in bfloat16 (the
product in bfloat16 with float accumulation, the output back to float, as
nmt-translate --bf16 makes it: src/model/quantized.h) at the decoder step's
shapes of configs/multi30k-en-de.toml, on one thread, through the same
LibTorch nmt links (Debian's python3-torch). Prints one line per shape and
row count: median microseconds of each and their ratio.

  ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/reference/linear_precision.py [REPS]
"""
import statistics
import sys
import time

import torch


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    torch.set_num_threads(1)
    torch.manual_seed(1)
    # (K, N): output projection [V, E], query + context GRU hidden [A + 3D, D],
    # GRU1 hidden [3D, D], deep output [E, D + C + E].
    for k, n in [(256, 8000), (512, 2048), (512, 1536), (1280, 256)]:
        w, b = torch.randn(n, k) * 0.05, torch.randn(n)
        wb = w.bfloat16()
        for m in [1, 4, 16, 64, 320]:
            x = torch.randn(m, k)
            f32 = lambda: torch.nn.functional.linear(x, w, b)
            bf16 = lambda: torch.nn.functional.linear(x.bfloat16(), wb).float().add_(b)
            times = {"float32": [], "bfloat16": []}
            for _ in range(5):  # interleaved rounds
                for name, f in (("float32", f32), ("bfloat16", bf16)):
                    t = time.perf_counter()
                    for _ in range(reps):
                        f()
                    times[name].append((time.perf_counter() - t) / reps * 1e6)
            a, c = statistics.median(times["float32"]), statistics.median(times["bfloat16"])
            print(f"K {k:5d} N {n:5d} rows {m:4d}: float32 {a:8.1f} us, bfloat16 {c:8.1f} us, {a / c:5.2f}x")


if __name__ == "__main__":
    main()

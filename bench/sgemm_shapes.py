#!/usr/bin/env python
"""Our float32 GEMM (engine/kernels/sgemm.py) against numpy's on one thread, product by product: the
figures behind ``sgemm.MAX_ROWS`` and ``MAX_ROWS_LONG`` (which products ``kernels.gemm`` gives it).

    python bench/sgemm_shapes.py                 # the shapes of bench/README.md's table
    python bench/sgemm_shapes.py 64x784x512 8@64x32x64 --reps 50

A shape is ``MxKxN`` (one product) or ``B@MxKxN`` (a stack of B, as attention's per-head products).
Prints numpy's and our median times and numpy/ours (above 1: ours is faster), with the host's
OpenBLAS core and the limits this process chose. Not a test.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"        # before numpy loads

import numpy as np                              # noqa: E402
from threadpoolctl import threadpool_info      # noqa: E402

import tapelab                                  # noqa: E402

SHAPES = ("64x784x512", "64x512x784", "64x512x512", "64x96x256", "48x256x256", "96x784x512", "128x784x512",
          "256x784x512", "512x784x512", "1024x1024x1024", "20x200x800", "32x32x256", "32x64x256", "32x128x256",
          "64x64x64", "64x128x64", "64x256x32", "64@64x32x64", "64@64x64x32")


def parse(shape: str) -> tuple:
    batch, _, dims = shape.rpartition("@")
    m, k, n = (int(d) for d in dims.split("x"))
    return int(batch) if batch else 0, m, k, n


def median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[reps // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    tapelab.set_num_threads(1)
    sgemm = importlib.import_module("tapelab.kernels").loops("sgemm")
    cores = sorted({lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"})
    print(f"OpenBLAS core {', '.join(map(str, cores)) or '-'}; MAX_ROWS {sgemm.MAX_ROWS}, MAX_ROWS_LONG "
          f"{sgemm.MAX_ROWS_LONG} (K >= {sgemm.LONG_MIN_K}, N >= {sgemm.LONG_MIN_N}); 1 thread, medians of {args.reps}")
    rng = np.random.default_rng(0)
    for shape in args.shapes:
        batch, m, k, n = parse(shape)
        lead = (batch,) if batch else ()
        a = rng.standard_normal(lead + (m, k), dtype=np.float32)
        b = rng.standard_normal(lead + (k, n), dtype=np.float32)
        out = np.empty(lead + (m, n), np.float32)
        ours = (lambda: sgemm.matmul_batch_into(a, b, out)) if batch else (lambda: sgemm.matmul_into(a, b, out))
        ours()                                   # compiled (or loaded from the cache) before timing
        theirs = median_time(lambda: np.matmul(a, b, out=out), args.reps)
        own = median_time(ours, args.reps)
        print(f"{shape:>16s}  numpy {theirs * 1e6:9.1f} us  ours {own * 1e6:9.1f} us  numpy/ours {theirs / own:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

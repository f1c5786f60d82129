"""Two-thread A/B in one process, rounds alternating: tapelab's intra-op pool against numpy's BLAS
threads, or one GEMM split threshold against another, on the bench programs' steps.

    python bench/ab_threads.py gpt128 lstm resnet                 # pool (BLAS at 1) vs BLAS threads
    python bench/ab_threads.py --gemm-min 19 21 gpt128 resnet     # kernels.GEMM_PARALLEL_MIN 2^19 vs 2^21
    python bench/ab_threads.py --one-vs-two mlp64 transformer     # set_num_threads(1) vs (2), both on the pool

Two-thread wall times on a shared 2-core machine swing by +-30% from one run to the next; within
one process, alternating rounds see the same machine state, so the per-round ratio separates two
settings that separate runs cannot. Not a test.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "2"   # before numpy loads
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE, os.path.join(HERE, "programs")]

import numpy as np                      # noqa: E402
from threadpoolctl import threadpool_limits   # noqa: E402

import models                           # noqa: E402
import tapelab                          # noqa: E402
from tapelab.kernels import gemm as _gemm     # noqa: E402

STEPS = {"gpt128": (lambda m, r, t: models.gpt_step(m, r, t, 128), lambda r, n: models.gpt_batches(r, 128, n)),
         "gpt384": (lambda m, r, t: models.gpt_step(m, r, t, 384), lambda r, n: models.gpt_batches(r, 384, n)),
         "lstm": (models.lstm_step, models.lstm_batches),
         "resnet": (models.resnet_step, models.resnet_batches)}
WORKLOADS = ("mlp64", "mlp512", "cnn", "transformer")    # bench/workloads.py's rows, one fixed batch each


def _setting(gemm_min: int, blas: int):
    _gemm.GEMM_PARALLEL_MIN = gemm_min
    return threadpool_limits(blas, user_api="blas")


@contextlib.contextmanager
def _threads(n: int):
    tapelab.set_num_threads(n)
    yield


def _workload_step(name: str):
    """A bench/run.py row's tapelab step, called with the (ignored) batch like the programs'."""
    import workloads
    title = {"mlp64": "MLP 784-512-512-10 step, batch 64", "mlp512": "MLP 784-512-512-10 step, batch 512",
             "cnn": "CNN step, batch 32", "transformer": "Transformer block step, batch 16x64"}[name]
    row = next(w for w in workloads.REGISTRY if w.name == title)
    step = row.build(tapelab, workloads.Context("tapelab", tapelab))
    return lambda batch: step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("programs", nargs="+", choices=sorted(STEPS) + list(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=4, help="steps per setting per round")
    ap.add_argument("--gemm-min", type=int, nargs=2, metavar=("A", "B"),
                    help="compare GEMM_PARALLEL_MIN = 2^A against 2^B (both on the pool)")
    ap.add_argument("--one-vs-two", action="store_true",
                    help="compare set_num_threads(1) against (2): two threads should never be slower")
    args = ap.parse_args()
    tapelab.set_num_threads(2)
    if args.one_vs_two:
        names = ("1 thread", "2 threads")
        settings = (lambda: _threads(1), lambda: _threads(2))
    elif args.gemm_min:
        names = (f"2^{args.gemm_min[0]}", f"2^{args.gemm_min[1]}")
        settings = (lambda: _setting(1 << args.gemm_min[0], 1), lambda: _setting(1 << args.gemm_min[1], 1))
    else:
        names = ("pool", "BLAS threads")
        settings = (lambda: _setting(_gemm.GEMM_PARALLEL_MIN, 1), lambda: _setting(1 << 62, 2))

    def tensor(a):
        return tapelab.tensor(np.ascontiguousarray(a, dtype=np.float32))
    for name in args.programs:
        if name in WORKLOADS:
            step, data = _workload_step(name), [None] * args.steps
        else:
            build, batches = STEPS[name]
            step = build(tapelab, np.random.default_rng(0), tensor)
            data = list(batches(np.random.default_rng(1), args.steps))
        for b in data:
            step(b).item()
        times = ([], [])
        for r in range(args.rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                with settings[i]():
                    step(data[0]).item()
                    t0 = time.perf_counter()
                    for b in data:
                        step(b).item()
                    times[i].append((time.perf_counter() - t0) / len(data) * 1e3)
        ratios = sorted(b / a for a, b in zip(*times))
        print(f"{name}: {names[0]} {statistics.median(times[0]):.1f} ms, {names[1]} {statistics.median(times[1]):.1f} ms "
              f"a step (medians); {names[1]}/{names[0]} per round {statistics.median(ratios):.3f} "
              f"(IQR {ratios[len(ratios) // 4]:.3f}-{ratios[(3 * len(ratios)) // 4]:.3f})")


if __name__ == "__main__":
    main()

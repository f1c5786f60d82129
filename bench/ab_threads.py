"""Two-thread A/B in one process, rounds alternating: tapelab's intra-op pool against numpy's BLAS
threads, or one GEMM split threshold against another, on the bench programs' steps.

    python bench/ab_threads.py gpt128 lstm resnet                 # pool (BLAS at 1) vs BLAS threads
    python bench/ab_threads.py --gemm-min 19 21 gpt128 resnet     # kernels.GEMM_PARALLEL_MIN 2^19 vs 2^21
    python bench/ab_threads.py --one-vs-two mlp64 transformer     # set_num_threads(1) vs (2), both on the pool

Two-thread wall times on a shared 2-core machine swing by +-30% from one run to the next; within
one process, alternating rounds see the same machine state, so the per-round ratio separates two
settings that separate runs cannot. Each line also gives the calling thread's CPU time (thread
clock) and the process's (all threads) per step: where other processes keep the cores busy, a
split's second block waits for a core and the wall time says little, while the calling thread's
CPU time is what the step would take with a core free for each thread (hand-offs aside), and the
process's minus it is the work the pool's workers took. Not a test.
"""
from __future__ import annotations

import argparse
import importlib
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
_gemm = importlib.import_module("tapelab.kernels.gemm")   # the module (the package exports its function) # noqa: E402

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
        times = ([], [])                # per round: (wall, calling thread's CPU, process CPU) ms a step
        for r in range(args.rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                with settings[i]():
                    step(data[0]).item()
                    clocks = time.perf_counter(), time.thread_time(), time.process_time()
                    for b in data:
                        step(b).item()
                    ends = time.perf_counter(), time.thread_time(), time.process_time()
                    times[i].append([(e - s) / len(data) * 1e3 for s, e in zip(clocks, ends)])
        print(f"{name}: {names[0]} {_median(times[0], 0):.1f} ms, {names[1]} {_median(times[1], 0):.1f} ms a step "
              f"(medians); {names[1]}/{names[0]} per round {_ratio(times, 0)}; calling thread's CPU "
              f"{_median(times[0], 1):.1f} / {_median(times[1], 1):.1f} ms, ratio {_ratio(times, 1)}; process CPU "
              f"{_median(times[0], 2):.1f} / {_median(times[1], 2):.1f} ms")


def _median(rounds: list, clock: int) -> float:
    return statistics.median(r[clock] for r in rounds)


def _ratio(times: tuple, clock: int) -> str:
    """The second setting's time over the first's per round on ``clock``: median (IQR)."""
    ratios = sorted(b[clock] / a[clock] for a, b in zip(*times))
    return (f"{statistics.median(ratios):.3f} (IQR {ratios[len(ratios) // 4]:.3f}-"
            f"{ratios[(3 * len(ratios)) // 4]:.3f})")


if __name__ == "__main__":
    main()

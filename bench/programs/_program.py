"""What every program here shares: its command line, the thread settings (made before numpy
and torch start), the training loop and the per-step times it prints.

    python bench/programs/gpt.py --lib tapelab --steps 50 --threads 1

prints one line per step when ``--verbose``, then ``per-step: median X ms, mean Y ms over N
steps (after W warm-up steps)``, the line ``run_all.py`` reads.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _threads_from_argv() -> int:
    """``--threads N`` (default: all CPUs), read at import: BLAS reads its thread count when numpy
    loads, so this module is imported before anything that imports numpy."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--threads", type=int, default=None)
    return p.parse_known_args()[0].threads or len(os.sched_getaffinity(0))


THREADS = _threads_from_argv()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)
if "numpy" in sys.modules:
    raise ImportError("import _program before numpy: BLAS has already chosen its thread count")


def run(description: str, build, batches) -> None:
    """Train ``build(m, rng, tensor)``'s step on ``batches(rng, n)`` for a fixed number of steps."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--lib", choices=("tapelab", "torch"), default="tapelab")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="BLAS and torch threads (default: all CPUs)")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    threads = THREADS
    import importlib

    import numpy as np
    m = importlib.import_module(args.lib)
    if args.lib == "torch":
        m.set_num_threads(threads)
    clock = time.thread_time if args.clock == "thread" else time.perf_counter

    def tensor(a):
        return m.tensor(np.ascontiguousarray(a, dtype=np.float32))

    step = build(m, np.random.default_rng(0), tensor)
    times, losses = [], []
    for i, batch in enumerate(batches(np.random.default_rng(1), args.warmup + args.steps)):
        t0 = clock()
        loss = step(batch)
        value = loss.item()
        dt = clock() - t0
        losses.append(value)
        if i >= args.warmup:
            times.append(dt)
        if args.verbose:
            print(f"step {i:4d}  loss {value:.4f}  {dt * 1e3:8.2f} ms")
    print(f"{args.lib}: first loss {losses[0]:.6f}, last loss {losses[-1]:.6f}")
    print(f"per-step: median {statistics.median(times) * 1e3:.3f} ms, mean {statistics.mean(times) * 1e3:.3f} ms "
          f"over {len(times)} steps (after {args.warmup} warm-up steps), {args.clock} clock, {threads} threads")
    sys.stdout.flush()

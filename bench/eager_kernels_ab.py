#!/usr/bin/env python
"""A/B of tapelab's fused eager loops (engine/kernels) in one process: the same workload step
with the loops on, with them off (``kernels.set_enabled(False)``: the numpy formulas), and
PyTorch's, repetitions alternating so machine load hits all three alike.

    python bench/eager_kernels_ab.py -k "block step" --threads 1   # thread clock
    python bench/eager_kernels_ab.py -k "block step" --threads 2   # wall clock

Prints per workload: the median time per step of each side, the spread (IQR / median), and
torch/tapelab for both tapelab settings. Not a test: nothing asserts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _measure(w, args, clock, tapelab, torch, kernels, Context) -> dict:
    """Samples per side ("on", "off", "torch"): seconds per step, repetitions alternating."""
    with w.session(tapelab, Context("tapelab", tapelab, {})) as tl, \
            w.session(torch, Context("torch", torch, {})) as th:
        def on():
            kernels.set_enabled(True)
            tl()

        def off():
            kernels.set_enabled(False)
            tl()
        sides = {"on": on, "off": off, "torch": th}
        samples = {k: [] for k in sides}
        for f in sides.values():
            for _ in range(3):
                f()
        for _ in range(args.reps):
            for k, f in sides.items():
                t0 = clock()
                for _ in range(args.steps):
                    f()
                samples[k].append((clock() - t0) / args.steps)
        kernels.set_enabled(True)
    return samples


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-k", dest="filter", default="block step", help="workloads whose name contains this")
    p.add_argument("--threads", type=int, default=1, help="1: thread clock; more: wall clock")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--steps", type=int, default=5, help="steps per repetition")
    args = p.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    sys.path.insert(0, HERE)
    import torch

    import tapelab
    from tapelab import kernels
    from workloads import REGISTRY, Context

    torch.set_num_threads(args.threads)
    tapelab.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    print(f"{'thread' if args.threads == 1 else 'wall'} clock, {args.threads} thread(s), median of {args.reps} "
          f"repetitions of {args.steps} steps; load average {os.getloadavg()[0]:.1f}")
    print(f"{'workload':<40} {'loops on':>10} {'loops off':>10} {'torch':>10}  torch/on  torch/off  "
          "spread on/off/torch")
    for w in REGISTRY:
        if args.filter.lower() not in w.name.lower() or w.missing(tapelab):
            continue
        try:
            samples = _measure(w, args, clock, tapelab, torch, kernels, Context)
        except Exception as e:   # noqa: BLE001 - a broken workload is a row, not a crash
            print(f"{w.name:<40} error: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        med = {k: statistics.median(v) for k, v in samples.items()}
        spread = {k: (lambda q: (q[2] - q[0]) / med[k])(statistics.quantiles(v, n=4)) for k, v in samples.items()}
        print(f"{w.name:<40} {med['on'] * 1e3:8.2f}ms {med['off'] * 1e3:8.2f}ms {med['torch'] * 1e3:8.2f}ms"
              f"  {med['torch'] / med['on']:7.2f}x  {med['torch'] / med['off']:8.2f}x  "
              f"{spread['on']:.0%}/{spread['off']:.0%}/{spread['torch']:.0%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

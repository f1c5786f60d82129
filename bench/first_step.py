"""The first step of bench rows in a fresh numba cache: how long a new install waits for compiles.

    NUMBA_CACHE_DIR=$(mktemp -d) python bench/first_step.py -k "CNN step" --threads 2

Builds the named ``bench/workloads.py`` row (``-k``, a name's start or substring) with tapelab, runs
its first step, then a second, and prints both times with numba's compile time per kernel (self
time: a compile nested in another's counted once, in its own dispatcher), on the calling thread's CPU
clock (numba compiles on the calling thread; the wall clock also counts what else the host runs).
Run each row in its own process and cache directory: a kernel an earlier row compiled is not
compiled again.
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import time

from numba.core import event

HERE = pathlib.Path(__file__).resolve().parent


class _CompileTimes(event.Listener):
    """numba's ``numba:compile`` events summed per dispatcher, nested compiles subtracted."""

    def __init__(self):
        super().__init__()
        self.seconds = collections.defaultdict(float)
        self.count = collections.Counter()
        self.signatures = collections.defaultdict(list)
        self._open: list[list[float]] = []

    def on_start(self, event) -> None:
        self._open.append([time.thread_time(), 0.0])

    def on_end(self, event) -> None:
        fn = event.data["dispatcher"].py_func
        name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
        started, nested = self._open.pop()
        spent = time.thread_time() - started
        self.seconds[name] += spent - nested
        self.count[name] += 1
        self.signatures[name].append(", ".join(map(str, event.data["args"])))
        if self._open:
            self._open[-1][1] += spent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", required=True, help="a bench row's name (its start or a substring)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=12, help="kernels listed")
    ap.add_argument("--signatures", action="store_true", help="each listed kernel's compiled argument types")
    args = ap.parse_args(argv)
    if not os.environ.get("NUMBA_CACHE_DIR"):
        print("note: NUMBA_CACHE_DIR is not set: kernels already cached in the tree are not compiled", file=sys.stderr)

    started = time.perf_counter()
    import tapelab
    tapelab.set_num_threads(args.threads)
    imported = time.perf_counter() - started
    sys.path.insert(0, str(HERE))
    from workloads import REGISTRY, Context
    row = next((w for w in REGISTRY if args.k in w.name), None)
    if row is None:
        ap.error(f"no bench row matches {args.k!r}")
    times = _CompileTimes()
    with row.session(tapelab, Context("tapelab", tapelab, {})) as step:
        with event.install_listener("numba:compile", times):
            started, cpu = time.perf_counter(), time.thread_time()
            step()
            first, first_cpu = time.perf_counter() - started, time.thread_time() - cpu
        started = time.perf_counter()
        step()
        second = time.perf_counter() - started
    print(f"{row.name}, {args.threads} thread(s): import {imported:.1f} s, first step {first:.1f} s "
          f"(this thread's CPU {first_cpu:.1f} s), "
          f"second {second * 1e3:.1f} ms; compiles {sum(times.seconds.values()):.1f} s in "
          f"{sum(times.count.values())}")
    for name, seconds in sorted(times.seconds.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {seconds:6.2f} s  x{times.count[name]}  {name}")
        if args.signatures:
            for signature in times.signatures[name]:
                print(f"             ({signature})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

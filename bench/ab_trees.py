#!/usr/bin/env python
"""Two trees of tapelab side by side, each in a process of its own, rounds alternating: the A/B for
changes that live in the process (the intra-op pool's threads, their CPUs, its timing).

    git worktree add /tmp/base <commit>
    python bench/ab_trees.py --base /tmp/base                        # every training row, 2 threads
    python bench/ab_trees.py --base /tmp/base -k "MLP" -k LSTM --rounds 20 --threads 1

``bench/ab_chain.py`` imports both trees into one process, which suits per-call costs; a pool
cannot be shared that way. Here each side is a child process that imports its tree's
``engine/`` as ``tapelab``, builds a ``bench/workloads.py`` row, warms it up, then times
``--steps`` steps per round on request; between rounds each side pauses ``--settle`` seconds, as
``bench/run.py`` does at more than one thread, so each round starts from idle threads. Prints
both medians and base/new with the quartiles of the per-round ratios (above 1: the new tree is
faster). Not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = ("MLP 784-512-512-10 step, batch 64", "MLP 784-512-512-10 step, batch 512", "CNN step",
        "Transformer block step", "GPT block step d128", "GPT block step d384", "LSTM LM step",
        "ResNet basic-block step", "matmul 1024x1024")

CHILD = r"""
import importlib.util, os, sys, time
tree, name, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]
spec = importlib.util.spec_from_file_location("tapelab", os.path.join(tree, "engine", "__init__.py"),
                                              submodule_search_locations=[os.path.join(tree, "engine")])
m = importlib.util.module_from_spec(spec); sys.modules["tapelab"] = m; spec.loader.exec_module(m)
sys.path.insert(0, os.path.join(tree, "bench"))
m.set_num_threads(threads)
from workloads import REGISTRY, Context
row = next(w for w in REGISTRY if w.name.startswith(name))
step = row.session(m, Context("tapelab", m)).__enter__()
start = time.perf_counter()
while time.perf_counter() - start < 0.5:
    step()
print(row.name, flush=True)
for line in sys.stdin:
    n = int(line)
    start = time.perf_counter()
    for _ in range(n):
        step()
    print((time.perf_counter() - start) / n, flush=True)
"""


def compare(base: str, new: str, name: str, args) -> str:
    sides = {side: subprocess.Popen([sys.executable, "-c", CHILD, tree, name, str(args.threads)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for side, tree in (("base", base), ("new", new))}
    try:
        full = [p.stdout.readline().strip() for p in sides.values()][0]
        times = {"base": [], "new": []}
        for r in range(args.rounds):
            for side in (("base", "new") if r % 2 else ("new", "base")):
                time.sleep(args.settle)
                sides[side].stdin.write(f"{args.steps}\n")
                sides[side].stdin.flush()
                times[side].append(float(sides[side].stdout.readline()))
    finally:
        for p in sides.values():
            p.stdin.close()
            p.wait()
    b, n = statistics.median(times["base"]), statistics.median(times["new"])
    ratios = sorted(x / y for x, y in zip(times["base"], times["new"]))
    q = len(ratios) // 4
    return (f"{full[:44]:44s} base {b * 1e3:8.2f} ms  new {n * 1e3:8.2f} ms  base/new "
            f"{statistics.median(ratios):.2f} (IQR {ratios[q]:.2f}-{ratios[-q - 1]:.2f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the other tree (a git worktree)")
    ap.add_argument("--new", default=os.path.dirname(HERE), help="this checkout (default)")
    ap.add_argument("-k", dest="rows", action="append", help="rows whose name starts with this (default: the training rows)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="steps per round")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--settle", type=float, default=0.15, help="pause before each round (bench/run.py's default)")
    args = ap.parse_args(argv)
    print(f"base {os.path.abspath(args.base)} vs new {os.path.abspath(args.new)}: {args.threads} threads, "
          f"{args.rounds} rounds of {args.steps} steps, {args.settle} s pauses, load {os.getloadavg()[0]:.2f}")
    for name in args.rows or ROWS:
        print(compare(os.path.abspath(args.base), os.path.abspath(args.new), name, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

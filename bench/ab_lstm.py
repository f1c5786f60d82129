"""A/B of the LSTM LM row on two source trees and torch, in one process, repetitions alternating.

    git worktree add /tmp/base <commit>
    python bench/ab_lstm.py --base /tmp/base             # base tree vs this checkout, torch beside
    python bench/ab_lstm.py --base /tmp/base --threads 2 # all three at 2 intra-op threads, wall clock

The trees are imported side by side as ``ab_chain.py`` does (the base tree's ``engine/`` as
``tlbase``); each round runs one repetition (two steps) of base, new and torch on the thread
clock (the wall clock with ``--threads`` above 1), and the ratios are taken per round, so load hits
the three alike. Not a test.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def _ratio(name: str, num: list, den: list) -> str:
    r = sorted(a / b for a, b in zip(num, den))
    return f"{name} {statistics.median(r):.3f} (IQR {r[len(r) // 4]:.3f}-{r[(3 * len(r)) // 4]:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, type=pathlib.Path, help="the other tree (a git worktree)")
    ap.add_argument("--new", type=pathlib.Path, default=HERE.parent, help="default: this checkout")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--threads", type=int, default=1, help="set_num_threads for all three (default 1)")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.path[:0] = [str(HERE), str(HERE / "programs")]
    from ab_chain import _import_trees
    import torch
    import workloads
    tlbase, tapelab = _import_trees(args.base.resolve(), args.new.resolve())
    for mod in (torch, tlbase, tapelab):
        mod.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    sides = {name: workloads.lstm_lm(mod, workloads.Context(kind, mod))
             for name, mod, kind in (("base", tlbase, "tapelab"), ("new", tapelab, "tapelab"), ("torch", torch, "torch"))}
    for step in sides.values():
        for _ in range(3):
            step()
    times = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, step in sides.items():
            start = clock()
            step()
            step()
            times[name].append((clock() - start) / 2 * 1e3)
    for name, t in times.items():
        print(f"{name:6s} {statistics.median(t):7.2f} ms")
    print(_ratio("base/new", times["base"], times["new"]), _ratio("torch/new", times["torch"], times["new"]),
          _ratio("torch/base", times["torch"], times["base"]), sep="\n")


if __name__ == "__main__":
    main()

"""A/B of ``backward()`` while someone watches, on two source trees, in one process.

    git worktree add /tmp/base <commit>
    python bench/ab_watched_backward.py --base /tmp/base
    python bench/ab_watched_backward.py --base /tmp/base --graphs mlp --pairs 600

Two graphs: ``chain`` (16 ``(h * 1.01).tanh()`` on 8x8 plus a sum, 34 nodes: Python-bound, so the
walk's own cost shows) and ``mlp`` (``run.py``'s MLP b64 step's loss: the real step, numpy-bound).
Each is walked plain, under a ``backward_step`` subscriber that does nothing, and inside a
``tapelab.tape()`` (its forward recorded too, as the tape row does); only ``loss.backward()`` is
timed, on the thread clock. Trees are imported side by side as ``ab_chain.py`` does, and the sides
alternate per pair: the ratio base/new is taken per pair and printed with its quartiles. Not a
test: nothing asserts.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _graphs(t) -> dict:
    """A function per graph making a fresh loss of ``t``'s tensors (the leaves made once)."""
    import numpy as np
    t.set_num_threads(1)
    rng = np.random.default_rng(0)
    w = t.tensor(rng.standard_normal((8, 8)).astype(np.float32), requires_grad=True)

    def chain():
        h = w
        for _ in range(16):
            h = (h * 1.01).tanh()
        return h.sum()
    x = t.tensor(rng.standard_normal((64, 784)).astype(np.float32))
    y = t.tensor(rng.integers(0, 10, 64))
    model = t.nn.Sequential(t.nn.Linear(784, 512), t.nn.ReLU(), t.nn.Linear(512, 512), t.nn.ReLU(),
                            t.nn.Linear(512, 10))

    def mlp():
        return t.nn.functional.cross_entropy(model(x), y)
    return {"chain": (chain, [w]), "mlp": (mlp, list(model.parameters()))}


def _walk(t, make, leaves, how: str, reps: int) -> float:
    """µs per ``loss.backward()`` of ``make()``, ``reps`` times, plain / subscribed / taped."""
    clock = time.thread_time_ns
    total = 0
    for _ in range(reps):
        for p in leaves:
            p.grad = None
        scope = (t.tape() if how == "tape" else
                 t.events.subscribe("backward_step", lambda step: None) if how == "subscriber" else
                 contextlib.nullcontext())
        with scope:
            loss = make()
            start = clock()
            loss.backward()
            total += clock() - start
    return total / reps / 1e3


def main() -> None:
    from ab_chain import _import_trees
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, type=pathlib.Path, help="the other tree (a git worktree)")
    ap.add_argument("--new", type=pathlib.Path, default=HERE.parent, help="default: this checkout")
    ap.add_argument("--graphs", nargs="*", default=["chain", "mlp"])
    ap.add_argument("--hows", nargs="*", default=["plain", "subscriber", "tape"])
    ap.add_argument("--pairs", type=int, default=41, help="alternating pairs of repetitions per row")
    args = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    trees = dict(zip(("base", "new"), _import_trees(args.base.resolve(), args.new.resolve())))
    graphs = {name: _graphs(t) for name, t in trees.items()}
    for g in args.graphs:
        reps = 20 if g == "chain" else 1
        for how in args.hows:
            times = {"base": [], "new": []}
            for i in range(args.pairs + 2):
                for name in (("base", "new") if i % 2 else ("new", "base")):
                    dt = _walk(trees[name], *graphs[name][g], how, reps)
                    if i >= 2:   # the first pairs warm up
                        times[name].append(dt)
            ratios = sorted(b / n for b, n in zip(times["base"], times["new"]))
            q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
            print(f"{g:6s} {how:10s} base {statistics.median(times['base']):7.1f} µs  new "
                  f"{statistics.median(times['new']):7.1f} µs  base/new {statistics.median(ratios):.3f} "
                  f"(IQR {q1:.3f}-{q3:.3f}, {args.pairs} pairs)")


if __name__ == "__main__":
    main()

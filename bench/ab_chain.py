"""A/B of the per-op rows on two source trees, in one process, repetitions alternating.

    git worktree add /tmp/base <commit>
    python bench/ab_chain.py --base /tmp/base            # base tree vs this checkout
    python bench/ab_chain.py --base /tmp/base --rounds 31 --rows fwd+bwd

On a machine shared with other work, two separate runs of ``run.py`` differ by more than the
change being measured; here both trees are imported side by side (the base tree's ``engine/`` as
the package ``tlbase``, possible because the engine imports itself only relatively), each
repetition of one is followed by one of the other on the thread clock, and the ratio is taken per
pair: load hits both sides of a pair alike. Prints the medians and base/new with its quartiles.
Not a test: nothing asserts.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def _import_trees(base: pathlib.Path, new: pathlib.Path):
    """Import ``base/engine`` as ``tlbase`` and ``new/engine`` as ``tapelab``."""
    trees = {"tlbase": base / "engine", "tapelab": new / "engine"}

    class _Finder:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            root = trees.get(name)
            if root is None:
                return None
            return importlib.util.spec_from_file_location(name, root / "__init__.py",
                                                          submodule_search_locations=[str(root)])

    sys.meta_path.insert(0, _Finder)
    import tapelab
    import tlbase
    return tlbase, tapelab


def _rows(t) -> dict:
    """The chain rows of ``run.py``, built by its own workload functions (``workloads.py``) for ``t``."""
    import workloads
    ctx = workloads.Context("tapelab", t)
    return {"fwd+bwd": workloads.chain_fwd_bwd(t, ctx), "recording": workloads.chain_fwd(t, ctx),
            "no_grad": workloads.chain_fwd_nograd(t, ctx)}


def _rep(fn, n: int) -> float:
    start = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, type=pathlib.Path, help="the other tree (a git worktree)")
    ap.add_argument("--new", type=pathlib.Path, default=HERE.parent, help="default: this checkout")
    ap.add_argument("--rounds", type=int, default=21, help="alternating pairs of repetitions per row")
    ap.add_argument("--calls", type=int, default=400, help="calls per repetition")
    ap.add_argument("--rows", nargs="*", default=["fwd+bwd", "recording", "no_grad"])
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sides = {name: _rows(mod) for name, mod in zip(("base", "new"), _import_trees(args.base.resolve(),
                                                                                   args.new.resolve()))}
    for row in args.rows:
        for side in sides.values():
            for _ in range(200):
                side[row]()
        times = {"base": [], "new": []}
        for _ in range(args.rounds):
            for name, side in sides.items():
                times[name].append(_rep(side[row], args.calls))
        ratios = sorted(b / n for b, n in zip(times["base"], times["new"]))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        print(f"{row:10s} base {statistics.median(times['base']):7.1f} µs  new {statistics.median(times['new']):7.1f} µs"
              f"  base/new {statistics.median(ratios):.3f} (IQR {q1:.3f}-{q3:.3f})")


if __name__ == "__main__":
    main()

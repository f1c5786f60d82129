"""A/B of whole workload steps between this checkout and another tree, in alternating processes.

    git worktree add /tmp/base <commit>
    python bench/ab_steps.py --base /tmp/base -k "MLP 784-512-512-10 step, batch 64, replayed"
    python bench/ab_steps.py --base /tmp/base -k "CNN step" -k ResNet --threads 2 --rounds 5

Each round runs one fresh process per tree (base first, then this one), each importing only its own
tree's ``engine/`` as ``tapelab`` and timing the tapelab side of the named ``bench/workloads.py``
steps: the median of 9 repetitions of a loop of at least 0.15 s. Separate processes, so neither
tree's caches, pools or compiled loops touch the other's; alternating rounds, so load from other
processes hits both alike. With one thread the clock is ``time.thread_time`` (CPU time of the
calling thread: steady on a busy host), with more the wall clock. Prints each round's times and the
median of the per-round ratios base/new (above 1: this checkout is faster). Not a test: nothing
asserts.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def _child(tree: str, names: list[str], clock: str) -> None:
    """In the child: import ``tree``'s engine as ``tapelab``, time each step, print JSON."""
    import importlib.util
    import time
    spec = importlib.util.spec_from_file_location("tapelab", f"{tree}/engine/__init__.py",
                                                  submodule_search_locations=[f"{tree}/engine"])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tapelab"] = module
    try:   # tapelab.widgets and tapelab.kernel (the editable install's finder): this tree's as well
        import _tapelab_editable_finder as finder
        finder._ROOT = pathlib.Path(tree)
    except ImportError:
        pass
    spec.loader.exec_module(module)
    sys.path.insert(0, str(HERE))
    from workloads import REGISTRY, Context
    now = time.thread_time if clock == "thread" else time.perf_counter
    out = {}
    for name in names:
        w = next((w for w in REGISTRY if w.name == name), None) or next(w for w in REGISTRY if w.name.startswith(name))
        with w.session(module, Context("tapelab", module, {})) as step:
            for _ in range(3):
                step()
            loops, t = 0, now()
            while now() - t < 0.05:
                step()
                loops += 1
            loops = max(1, int(loops * 0.15 / 0.05))
            reps = []
            for _ in range(9):
                t = now()
                for _ in range(loops):
                    step()
                reps.append((now() - t) / loops)
        out[w.name] = statistics.median(reps)
    print(json.dumps(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=pathlib.Path, help="the other tree (a git worktree)")
    ap.add_argument("-k", action="append", required=True, help="a workload name, or its start (repeatable)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    clock = "thread" if args.threads == 1 else "wall"
    if args.child:
        _child(args.child[0], args.k, args.child[1])
        return 0
    env = {**os.environ, **{v: str(args.threads) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    trees = {"base": str(args.base.resolve()), "new": str(HERE.parent)}
    times: dict = {"base": [], "new": []}
    for r in range(args.rounds):
        for side, tree in trees.items():
            cmd = [sys.executable, __file__, "--base", tree, "--child", tree, clock] + [a for k in args.k for a in ("-k", k)]
            res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            times[side].append(res)
            print(f"round {r + 1} {side:4s} " + "  ".join(f"{n[:40]}: {t * 1e3:.3f} ms" for n, t in res.items()), flush=True)
    print(f"{clock} clock, {args.threads} thread(s), {args.rounds} rounds")
    for name in times["new"][0]:
        ratios = [b[name] / n[name] for b, n in zip(times["base"], times["new"])]
        print(f"{name}: base {statistics.median(b[name] for b in times['base']) * 1e3:.3f} ms, new "
              f"{statistics.median(n[name] for n in times['new']) * 1e3:.3f} ms, base/new {statistics.median(ratios):.3f} "
              f"(per round {', '.join(f'{x:.2f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

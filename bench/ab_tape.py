"""The cost of seeing, in one process: the MLP step of ``run.py`` plain, inside a ``tapelab.tape()``,
inside ``profiler.profile()``, and a loop of steps inside one ``widgets.LiveTape`` (``%tape on``).

    python bench/ab_tape.py                       # all three, 15 rounds of 30 steps
    python bench/ab_tape.py --rows tape --rounds 31

Each round times ``--steps`` plain steps, then as many observed ones, on the thread clock; the
overhead is taken per round (observed / plain - 1), so load hits both halves of a round alike.
Prints the median overhead and its quartiles. Not a test: nothing asserts.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def _loops(t, steps: int) -> dict:
    """A callable per row running ``steps`` MLP steps (``workloads._mlp_step``, batch 64)."""
    import workloads
    from tapelab.widgets.live import LiveTape
    step = workloads._mlp_step(t, workloads.Context("tapelab", t), 64)

    def plain():
        for _ in range(steps):
            step()

    def taped():
        for _ in range(steps):
            with t.tape():
                step()

    def profiled():
        for _ in range(steps):
            with t.profiler.profile():
                step()

    def streamed():
        with LiveTape(sinks=[lambda delta: None]):
            for _ in range(steps):
                step()
    return {"plain": plain, "tape": taped, "profiled": profiled, "streaming": streamed}


def _time(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=30, help="steps per half round")
    ap.add_argument("--rows", nargs="*", default=["tape", "streaming", "profiled"])
    args = ap.parse_args()
    import tapelab
    tapelab.set_num_threads(1)
    loops = _loops(tapelab, args.steps)
    for name in ["plain"] + args.rows:
        loops[name]()                              # warm up
    for row in args.rows:
        over, base = [], []
        for _ in range(args.rounds):
            p = _time(loops["plain"])
            o = _time(loops[row])
            over.append(o / p - 1)
            base.append(p / args.steps)
        over.sort()
        q1, q3 = over[len(over) // 4], over[(3 * len(over)) // 4]
        print(f"{row:10s} plain {statistics.median(base) * 1e3:.2f} ms/step  overhead {statistics.median(over):+.1%}"
              f" (IQR {q1:+.1%} .. {q3:+.1%}, {args.rounds} rounds of {args.steps} steps)")


if __name__ == "__main__":
    main()

"""The cost of seeing, in one process: the MLP step of ``run.py`` plain, inside a ``tapelab.tape()``,
inside ``profiler.profile()``, and a loop of steps inside one ``widgets.LiveTape`` (``%tape on``).

    python bench/ab_tape.py                       # all three, 15 rounds of 30 steps
    python bench/ab_tape.py --rows tape --rounds 31
    python bench/ab_tape.py --split --rounds 9     # forward / backward / opt.step, plain and watched

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


def _split(t, rounds: int, steps: int) -> None:
    """The step's forward, backward and ``opt.step()`` apart (µs a step, medians over rounds):
    plain, under an ``op`` subscriber that does nothing, and inside a tape."""
    import numpy as np
    from tapelab.base import events
    rng = np.random.default_rng(0)
    x = t.tensor(rng.standard_normal((64, 784)).astype(np.float32))
    y = t.tensor(rng.integers(0, 10, 64))
    model = t.nn.Sequential(t.nn.Linear(784, 512), t.nn.ReLU(), t.nn.Linear(512, 512), t.nn.ReLU(),
                            t.nn.Linear(512, 10))
    opt = t.optim.SGD(model.parameters(), lr=0.01)
    clock = time.thread_time

    def step(acc):
        t0 = clock()
        opt.zero_grad()
        loss = t.nn.functional.cross_entropy(model(x), y)
        t1 = clock()
        loss.backward()
        t2 = clock()
        opt.step()
        acc[0] += t1 - t0
        acc[1] += t2 - t1
        acc[2] += clock() - t2

    def run(how):
        acc = [0.0, 0.0, 0.0]
        sub = events.subscribe("op", lambda ev: None) if how == "op subscriber" else None
        for _ in range(steps):
            if how == "tape":
                with t.tape():
                    step(acc)
            else:
                step(acc)
        if sub is not None:
            sub.unsubscribe()
        return [a / steps * 1e6 for a in acc]
    hows = ("plain", "op subscriber", "tape")
    times = {h: [] for h in hows}
    for h in hows:
        run(h)
    for _ in range(rounds):
        for h in hows:
            times[h].append(run(h))
    print(f"{'':15s} {'forward':>8s} {'backward':>9s} {'opt.step':>9s}  (µs a step)")
    for h, rows in times.items():
        f, b, o = (statistics.median(c) for c in zip(*rows))
        print(f"{h:15s} {f:8.0f} {b:9.0f} {o:9.0f}")


def _time(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=30, help="steps per half round")
    ap.add_argument("--rows", nargs="*", default=["tape", "streaming", "profiled"])
    ap.add_argument("--split", action="store_true", help="instead: forward, backward, opt.step apart")
    args = ap.parse_args()
    import tapelab
    tapelab.set_num_threads(1)
    if args.split:
        _split(tapelab, args.rounds, args.steps)
        return
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

"""The chain rows, tapelab side only, as the best of many repetitions: for A/B of two engine
trees on a loaded machine, where the bench's medians swing by 20-30%.

    python bench/programs/chain_best.py                 # the installed tree
    python bench/programs/chain_best.py --root /tmp/x   # a tree exported with `git archive REV engine widgets kernel`

Prints the best time per call of ``chain16 fwd+bwd``, ``fwd (recording)`` and ``fwd (no_grad)``
over ``--reps`` repetitions of ``--calls`` calls (thread clock). Run two trees alternately.
"""
import argparse
import pathlib
import time

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--root", default=None, help="a folder holding engine/ (default: the editable install's)")
p.add_argument("--reps", type=int, default=15)
p.add_argument("--calls", type=int, default=1000)
args = p.parse_args()
if args.root:
    import _tapelab_editable_finder as finder   # the editable install's import hook (hatch_build.py)
    finder._ROOT = pathlib.Path(args.root)

import numpy as np  # noqa: E402

import tapelab as T  # noqa: E402

rng = np.random.default_rng(0)
x = T.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)
w = T.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)


def chain():
    return ((x * w + 1).tanh() * x).sigmoid().sum()


def fwd_bwd():
    x.grad = w.grad = None
    chain().backward()


def no_grad():
    with T.no_grad():
        chain()


def best(fn):
    for _ in range(200):
        fn()
    out = float("inf")
    for _ in range(args.reps):
        t0 = time.thread_time()
        for _ in range(args.calls):
            fn()
        out = min(out, (time.thread_time() - t0) / args.calls)
    return out * 1e6


print(f"{T.__file__}: fwd+bwd {best(fwd_bwd):.1f} µs, fwd (recording) {best(chain):.1f} µs, "
      f"fwd (no_grad) {best(no_grad):.1f} µs")

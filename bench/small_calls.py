"""The per-call cost researchers' small programs pay, tapelab against PyTorch in one process.

    python bench/small_calls.py               # every statement below
    python bench/small_calls.py -k nll        # those whose text contains "nll"
    python bench/small_calls.py --base /tmp/base   # another tree's tapelab (a git worktree) against this one

Each statement runs in a loop under both libraries, repetitions alternating on the thread clock
(one thread each), so load from other processes hits both sides alike; prints the medians and
torch/tapelab. The statements are what a small model's step or a data pipeline calls many times:
a small Linear, a loss on class targets, an index op, a batch from a DataLoader, noise, dropout, the
in-place updates of gradients and an EMA, per-sample gradients and their norms. Not a test:
nothing asserts.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent

STATEMENTS = [
    ("F.linear(x, W, B)", 2000),
    ("F.linear(x, W, B).sum().backward()", 1000),
    ("F.nll_loss(logp, y)", 2000),
    ("F.nll_loss(F.log_softmax(x, 1), y).backward()", 1000),
    ("F.cross_entropy(x, y).backward()", 1000),
    ("x.gather(1, y[:, None])", 2000),
    ("emb(idx)", 2000),
    ("m.stack(samples)", 500),
    ("X[5]", 5000),
    ("next(iter(loader))", 200),
    ("m.randn(32, 64)", 2000),
    ("m.randn(50176)", 100),
    ("F.dropout(A, 0.1)", 100),
    ("P.grad.zero_()", 5000),
    ("E.lerp_(P.grad, 0.001)", 2000),
    ("m._foreach_lerp_(ema, params, 0.001)", 1000),
    ("psg(pdict, X[:32], labels[:32])", 20),
    ("G.flatten(1).norm(dim=1)", 200),
]


def setup(m) -> dict:
    """The same values under either library (numpy draws, converted)."""
    m.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((64, 10)).astype(np.float32), requires_grad=True)
    y = m.tensor(rng.integers(0, 10, 64))
    images = m.tensor(rng.standard_normal((6400, 1, 28, 28)).astype(np.float32))
    labels = m.tensor(rng.integers(0, 10, 6400))
    data = m.utils.data
    mlp = m.nn.Sequential(m.nn.Flatten(), m.nn.Linear(784, 64), m.nn.ReLU(), m.nn.Linear(64, 10))
    params = list(mlp.parameters())
    P = m.tensor(rng.standard_normal((128, 128)).astype(np.float32), requires_grad=True)
    P.grad = m.zeros(128, 128)

    def loss(p, xx, yy):   # a per-sample loss for vmap(grad(...)): DP-SGD's per-sample gradients
        return m.nn.functional.cross_entropy(m.func.functional_call(mlp, p, (xx.unsqueeze(0),)), yy.unsqueeze(0))
    return dict(m=m, F=m.nn.functional, x=x, y=y, P=P, E=P.detach().clone(),
                params=[p.detach() for p in params], ema=[p.detach().clone() for p in params],
                pdict={k: v.detach() for k, v in mlp.named_parameters()}, labels=labels,
                psg=m.func.vmap(m.func.grad(loss), in_dims=(None, 0, 0)),
                G=m.tensor(rng.standard_normal((32, 64, 784)).astype(np.float32)),
                A=m.tensor(rng.random((16, 4, 64, 64)).astype(np.float32)),   # a GPT block's attention weights
                W=m.tensor(rng.standard_normal((20, 10)).astype(np.float32), requires_grad=True),
                B=m.tensor(rng.standard_normal(20).astype(np.float32), requires_grad=True),
                logp=m.nn.functional.log_softmax(x.detach(), 1).requires_grad_(),
                emb=m.nn.Embedding(100, 16), idx=m.tensor(rng.integers(0, 100, (8, 16))),
                X=images, samples=[images[i] for i in range(64)],
                loader=data.DataLoader(data.TensorDataset(images, labels), batch_size=64, shuffle=True))


def _repeat(stmt: str, env: dict, n: int) -> float:
    code = compile(f"for _ in range({n}): {stmt}", "<statement>", "exec")
    start = time.thread_time()
    exec(code, env)
    return (time.thread_time() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="filter", default="")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--base", type=pathlib.Path, help="compare this tree's engine/ (as the base) with this checkout's, "
                                                     "instead of torch with tapelab")
    ap.add_argument("--new", type=pathlib.Path, default=HERE.parent, help="with --base: the other tree (default: this checkout)")
    args = ap.parse_args()
    if args.base is not None:
        from ab_chain import _import_trees
        other, tapelab = _import_trees(args.base.resolve(), args.new.resolve())
        names = ("base", "new")
    else:
        import tapelab
        import torch as other
        names = ("torch", "tapelab")
    envs = {names[0]: setup(other), names[1]: setup(tapelab)}
    print(f"{'statement':48s} {names[0]:>10s} {names[1]:>10s}  {names[0]}/{names[1]} (IQR of the pairs)")
    for stmt, n in STATEMENTS:
        if args.filter not in stmt:
            continue
        for env in envs.values():
            _repeat(stmt, env, max(1, n // 10))
        times = {name: [] for name in envs}
        for _ in range(args.rounds):
            for name, env in envs.items():
                times[name].append(_repeat(stmt, env, n))
        ratios = sorted(a / b for a, b in zip(*times.values()))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        t, tl = (statistics.median(v) for v in times.values())
        print(f"{stmt:48s} {t:8.2f}us {tl:8.2f}us  {statistics.median(ratios):.2f} ({q1:.2f}-{q3:.2f})")


if __name__ == "__main__":
    main()

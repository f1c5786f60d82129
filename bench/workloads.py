"""The benchmark workloads: each one is written once and runs on both ``tapelab`` and ``torch``.

A workload is a function ``build(m, ctx)`` decorated with ``@workload(...)``:
- ``m`` is the module under test (``tapelab`` or ``torch``), so the same code times both;
- ``ctx`` is a ``Context`` (``ctx.side`` is "tapelab" or "torch", ``ctx.rng`` a seeded numpy
  Generator, ``ctx.tensor(array, requires_grad=False)`` makes a float32 tensor from numpy data so
  both sides see identical values, ``ctx.options`` the runner's options);
- it returns the step to time (a zero-argument callable), or it is a generator that does set-up,
  ``yield``s the step and tears down after the timing (for subscribers, modes, ...).

``requires=("nn.Conv2d", ...)`` names attributes of ``m`` the workload needs; while tapelab lacks
one, its row reads "n/a" instead of failing. ``quick=False`` leaves a workload out of ``--quick``.

To add a workload, write a function below in its group (see "ADD NEW WORKLOADS HERE").
"""
from __future__ import annotations

import contextlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import floors  # noqa: E402 - the hand-written numpy steps (bench/programs/floors.py)
import models  # noqa: E402 - the real-program steps, shared with bench/programs/*.py


@dataclass
class Workload:
    name: str
    group: str
    build: Callable
    requires: tuple = ()
    quick: bool = True
    note: str = ""
    floor: Callable | None = None   # floor(rng) -> step: the same step in plain numpy (programs/floors.py)

    def missing(self, m) -> list[str]:
        out = []
        for path in self.requires:
            obj = m
            for part in path.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is None:
                out.append(f"{m.__name__}.{path}")
        return out

    @contextlib.contextmanager
    def session(self, m, ctx):
        """Yield the step callable; tear down afterwards (generator workloads)."""
        if inspect.isgeneratorfunction(self.build):
            with contextlib.contextmanager(self.build)(m, ctx) as step:
                yield step
        else:
            yield self.build(m, ctx)


@dataclass
class Context:
    side: str
    m: object
    options: dict = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def tensor(self, array, requires_grad: bool = False):
        t = self.m.tensor(np.ascontiguousarray(array, dtype=np.float32))
        if requires_grad:
            t.requires_grad_(True)
        return t


REGISTRY: list[Workload] = []


def workload(name: str, group: str, requires: tuple = (), quick: bool = True, note: str = "",
             floor: Callable | None = None):
    def deco(fn):
        REGISTRY.append(Workload(name, group, fn, tuple(requires), quick, note, floor))
        return fn
    return deco


# =============================================================================================
# (a) per-op overhead: a 5-op elementwise chain (+ sum) on 16-element tensors
# =============================================================================================

def _chain_inputs(ctx, requires_grad=True):
    x = ctx.tensor(ctx.rng.standard_normal(16), requires_grad)
    w = ctx.tensor(ctx.rng.standard_normal(16), requires_grad)
    return x, w


def _chain(x, w):
    return ((x * w + 1).tanh() * x).sigmoid().sum()


@workload("chain16 fwd+bwd", "per-op overhead", floor=floors.chain,
          note="((x*w + 1).tanh() * x).sigmoid().sum().backward(): 6 ops forward, their vjps backward")
def chain_fwd_bwd(m, ctx):
    x, w = _chain_inputs(ctx)

    def step():
        x.grad = w.grad = None
        _chain(x, w).backward()
    return step


@workload("chain16 fwd (recording)", "per-op overhead", floor=lambda rng: floors.chain(rng, False), note="forward only; inputs require grad")
def chain_fwd(m, ctx):
    x, w = _chain_inputs(ctx)
    return lambda: _chain(x, w)


@workload("chain16 fwd (no_grad)", "per-op overhead", floor=lambda rng: floors.chain(rng, False), note="forward only under no_grad: bare dispatch")
def chain_fwd_nograd(m, ctx):
    x, w = _chain_inputs(ctx)

    def step():
        with m.no_grad():
            _chain(x, w)
    return step


# =============================================================================================
# (c) dispatch with an event subscriber: a no-op subscribed to tapelab.events 'op';
#     torch gets the nearest equivalent, a no-op TorchDispatchMode (sees every aten op, backward too)
# =============================================================================================

@contextlib.contextmanager
def _observe_every_op(m, ctx):
    if ctx.side == "tapelab":
        sub = m.events.subscribe("op", lambda payload: None)
        try:
            yield
        finally:
            sub.unsubscribe()
        return
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:                          # pragma: no cover - older torch
        yield
        return

    class NoOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with NoOp():
        yield


@workload("chain16 fwd+bwd, op subscriber", "dispatch events",
          note="tapelab: no-op fn subscribed to events 'op'; torch: no-op TorchDispatchMode")
def chain_fwd_bwd_observed(m, ctx):
    step = chain_fwd_bwd(m, ctx)
    with _observe_every_op(m, ctx):
        yield step


@workload("chain16 fwd (no_grad), op subscriber", "dispatch events",
          note="as above, forward only under no_grad")
def chain_fwd_nograd_observed(m, ctx):
    step = chain_fwd_nograd(m, ctx)
    with _observe_every_op(m, ctx):
        yield step


# =============================================================================================
# (b) training steps
# =============================================================================================

NN_API = ("nn.Linear", "nn.ReLU", "nn.Sequential", "nn.functional.cross_entropy", "optim.SGD")


def _use_nn(m, ctx) -> bool:
    """nn/optim once tapelab has them (both sides then use them), plain tensor ops until then."""
    choice = ctx.options.get("mlp_api", "auto")
    if choice != "auto":
        return choice == "nn"
    import tapelab
    return not Workload("", "", None, NN_API).missing(tapelab)


def _mlp_step(m, ctx, batch, sizes=(784, 512, 512, 10), lr=0.01):
    rng = ctx.rng
    x = ctx.tensor(rng.standard_normal((batch, sizes[0])))
    labels = rng.integers(0, sizes[-1], batch)
    # identical initial weights on both sides (PyTorch's default Linear init range)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(fan_in)
        params.append((rng.uniform(-bound, bound, (fan_out, fan_in)), rng.uniform(-bound, bound, fan_out)))

    if _use_nn(m, ctx):
        layers = []
        for i, (w, b) in enumerate(params):
            lin = m.nn.Linear(w.shape[1], w.shape[0])
            with m.no_grad():
                lin.weight.copy_(ctx.tensor(w))
                lin.bias.copy_(ctx.tensor(b))
            layers += [lin, m.nn.ReLU()] if i < len(params) - 1 else [lin]
        model = m.nn.Sequential(*layers)
        y = m.tensor(labels.astype(np.int64))
        opt = m.optim.SGD(model.parameters(), lr=lr)

        def step():
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        step.variant = "nn.Sequential + F.cross_entropy + optim.SGD"
        return step

    # plain tensor ops: matmul, relu, log-softmax through exp/log/sum, manual SGD
    ws = [(ctx.tensor(w.T, True), ctx.tensor(b, True)) for w, b in params]
    onehot = ctx.tensor(np.eye(sizes[-1], dtype=np.float32)[labels])
    flat = [p for pair in ws for p in pair]

    def step():
        h = x
        for i, (w, b) in enumerate(ws):
            h = h.matmul(w) + b
            if i < len(ws) - 1:
                h = h.relu()
        logp = h - h.exp().sum(1, keepdim=True).log()   # logits stay small at this init
        loss = -(logp * onehot).sum() / batch
        loss.backward()
        with m.no_grad():
            for p in flat:
                p.sub_(p.grad * lr)
                p.grad = None
        return loss
    step.variant = "plain ops: matmul, relu, exp/log/sum log-softmax, manual SGD"
    return step


@workload("matmul 1024x1024 fwd+bwd", "matmul-bound", floor=floors.matmul,
          note="(a @ b).sum().backward(): three 1024^3 GEMMs; the floor is numpy's own three (issue 17's "
               "matmul-bound goal: at least 97% of the array library's GEMM, floor/tapelab >= 0.97)")
def matmul_1024(m, ctx):
    a = ctx.tensor(ctx.rng.standard_normal((1024, 1024)), True)
    b = ctx.tensor(ctx.rng.standard_normal((1024, 1024)), True)

    def step():
        a.grad = b.grad = None
        (a @ b).sum().backward()
    return step


@workload("MLP 784-512-512-10 step, batch 64", "training step", floor=lambda rng: floors.mlp(rng, 64),
          note="forward, cross-entropy, backward, SGD update")
def mlp_b64(m, ctx):
    return _mlp_step(m, ctx, 64)


@workload("MLP 784-512-512-10 step, batch 512", "training step", floor=lambda rng: floors.mlp(rng, 512))
def mlp_b512(m, ctx):
    return _mlp_step(m, ctx, 512)


def _copy_weights(m, ctx, model):
    """Identical initial weights on both sides: each parameter drawn from the shared seeded rng."""
    with m.no_grad():
        for _, p in model.named_parameters():
            p.copy_(ctx.tensor(ctx.rng.uniform(-0.1, 0.1, tuple(p.shape))))


def _train_step(m, model, inputs, target):
    opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(model(inputs), target)
        loss.backward()
        opt.step()
        return loss
    return step


@workload("CNN step, batch 32", "training step", floor=floors.cnn,
          requires=("nn.Conv2d", "nn.BatchNorm2d", "nn.MaxPool2d", "optim.SGD"),
          note="conv-bn-relu-pool x2 + linear on 1x28x28, cross-entropy, SGD momentum")
def cnn_b32(m, ctx):
    nn = m.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    _copy_weights(m, ctx, model)
    x = ctx.tensor(ctx.rng.standard_normal((32, 1, 28, 28)))
    y = m.tensor(ctx.rng.integers(0, 10, 32).astype(np.int64))
    return _train_step(m, model, x, y)


@workload("Transformer block step, batch 16x64", "training step",
          requires=("nn.TransformerEncoderLayer", "optim.SGD"),
          note="one TransformerEncoderLayer (d=128, 4 heads, ff 256, causal mask), token loss, SGD")
def transformer_block(m, ctx):
    nn = m.nn
    d, seq, batch, vocab = 128, 64, 16, 100

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(d, 4, 256, dropout=0.0, batch_first=True)
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, x):
            return self.head(self.layer(x, src_mask=self.mask, is_causal=True)).reshape(-1, vocab)

    model = Block()
    _copy_weights(m, ctx, model)
    x = ctx.tensor(ctx.rng.standard_normal((batch, seq, d)))
    y = m.tensor(ctx.rng.integers(0, vocab, batch * seq).astype(np.int64))
    return _train_step(m, model, x, y)


# =============================================================================================
# (f) the programs researchers run, one step each on a fixed batch (bench/programs/models.py;
#     the scripts in bench/programs/ run the same steps as whole programs)
# =============================================================================================

def _program_step(m, ctx, build, batch):
    step = build(m, ctx.rng, ctx.tensor)
    return lambda: step(batch)


@workload("GPT block step d128, batch 16x64", "real programs", floor=lambda rng: floors.gpt(rng, 128),
          requires=("nn.functional.scaled_dot_product_attention", "optim.AdamW"),
          note="embeddings, pre-LN block (causal SDPA, GELU MLP), head; AdamW with two parameter groups")
def gpt_d128(m, ctx):
    batch = next(models.gpt_batches(np.random.default_rng(1), 128, 1))
    return _program_step(m, ctx, lambda m, r, t: models.gpt_step(m, r, t, 128), batch)


@workload("GPT block step d384, batch 8x64", "real programs", floor=lambda rng: floors.gpt(rng, 384),
          requires=("nn.functional.scaled_dot_product_attention", "optim.AdamW"), note="as above, d=384, 6 heads")
def gpt_d384(m, ctx):
    batch = next(models.gpt_batches(np.random.default_rng(1), 384, 1))
    return _program_step(m, ctx, lambda m, r, t: models.gpt_step(m, r, t, 384), batch)


@workload("LSTM LM step, 2x200, bptt 35, batch 20", "real programs", floor=floors.lstm,
          requires=("nn.LSTM", "nn.utils.clip_grad_norm_"),
          note="embedding, 2-layer LSTM, decoder (vocab 256); detached carried state, clip 0.25, SGD")
def lstm_lm(m, ctx):
    batch = next(models.lstm_batches(np.random.default_rng(1), 1))
    return _program_step(m, ctx, models.lstm_step, batch)


@workload("ResNet basic-block step, batch 16, 32ch 16x16", "real programs", floor=floors.resnet,
          requires=("nn.Conv2d", "nn.BatchNorm2d", "nn.AdaptiveAvgPool2d"),
          note="stem conv-BN-ReLU, two basic blocks with BatchNorm, pool, linear; SGD momentum")
def resnet_blocks(m, ctx):
    batch = next(models.resnet_batches(np.random.default_rng(1), 1))
    return _program_step(m, ctx, models.resnet_step, batch)


@workload("GCN step, 2000 nodes, sparse adjacency", "real programs", floor=floors.gcn,
          requires=("sparse_coo_tensor", "sparse.mm"),
          note="2-layer GCN over a COO adjacency (sparse.mm), cross-entropy on every node, Adam")
def gcn(m, ctx):
    return _program_step(m, ctx, models.gcn_step, None)


# =============================================================================================
# (e) recording for the notebook: each MLP step inside a tapelab.tape() (as %%tape records a
#     cell), and a loop of steps inside the LiveTape that `%tape on` streams to the inspector
#     (sampled value/grad summaries, deltas to a sink); torch runs the plain step, so read these
#     rows against "MLP ... batch 64" above
# =============================================================================================

def _recorded(m, ctx, make_scope):
    step = _mlp_step(m, ctx, 64)
    if ctx.side != "tapelab":
        return step

    def recorded():
        with make_scope():
            return step()
    return recorded


@workload("MLP 784-512-512-10 step, batch 64, tape", "notebook recording", requires=("tape",),
          note="tapelab: each step inside tapelab.tape(); torch: plain step")
def mlp_taped(m, ctx):
    return _recorded(m, ctx, lambda: m.tape())


@workload("MLP 784-512-512-10 step, batch 64, profiled", "notebook recording", requires=("profiler.profile",),
          note="each step inside profiler.profile() (tapelab) / torch.profiler.profile() (torch), defaults")
def mlp_profiled(m, ctx):
    step = _mlp_step(m, ctx, 64)

    def profiled():
        with m.profiler.profile():
            return step()
    return profiled


@workload("MLP 784-512-512-10 step, batch 64, inspector streaming", "notebook recording",
          requires=("tape",), note="tapelab: the timed loop runs inside one widgets.LiveTape, as a "
                                   "training cell does under %tape on; torch: plain step")
def mlp_streamed(m, ctx):
    step = _mlp_step(m, ctx, 64)
    if ctx.side != "tapelab":
        yield step
        return
    from tapelab.widgets.live import LiveTape
    with LiveTape(sinks=[lambda delta: None]):
        yield step


# =============================================================================================
# (d) capture and replay (tapelab.graphs, CUDA Graph semantics on cpu): tapelab replays the
#     captured step; PyTorch has no cpu graphs, so its side is the eager step
# =============================================================================================

def _replayed(m, step):
    """tapelab: warm up, capture ``step`` once, time ``replay()``; torch: time ``step`` itself."""
    if m.__name__ != "tapelab":
        return step
    for _ in range(3):
        step()
    g = m.graphs.Graph()
    with m.graphs.graph(g):
        step()
    return g.replay


@workload("chain16 fwd+bwd, replayed", "capture and replay", requires=("graphs.Graph",),
          note="tapelab: captured once, Graph.replay() timed; torch: eager (no cpu graphs)")
def chain_replayed(m, ctx):
    x, w = _chain_inputs(ctx)

    def step():
        x.grad = w.grad = None
        _chain(x, w).backward()
    return _replayed(m, step)


@workload("MLP 784-512-512-10 step, batch 64, replayed", "capture and replay", requires=("graphs.Graph",),
          note="forward, cross-entropy, backward, SGD momentum; tapelab replays, torch runs eager")
def mlp_replayed(m, ctx):
    rng = ctx.rng
    model = m.nn.Sequential(m.nn.Linear(784, 512), m.nn.ReLU(), m.nn.Linear(512, 512), m.nn.ReLU(),
                            m.nn.Linear(512, 10))
    _copy_weights(m, ctx, model)
    x = ctx.tensor(rng.standard_normal((64, 784)))
    y = m.tensor(rng.integers(0, 10, 64).astype(np.int64))
    opt = m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = m.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return _replayed(m, step)


# =============================================================================================
# ADD NEW WORKLOADS HERE, e.g.
#
# @workload("CNN step, batch 32", "training step", requires=("nn.Conv2d", "nn.MaxPool2d", "optim.SGD"))
# def cnn_b32(m, ctx):
#     model = m.nn.Sequential(m.nn.Conv2d(1, 16, 3, padding=1), m.nn.ReLU(), ...)
#     ...copy identical weights with ctx.tensor(...) under m.no_grad()...
#     def step(): opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step()
#     return step
#
# Rows whose `requires` tapelab lacks print "n/a (needs ...)" until it grows them.
# =============================================================================================

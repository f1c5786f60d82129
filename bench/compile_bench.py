"""tapelab.compile against eager tapelab, PyTorch eager, torch.compile and JAX jit, in one run.

    .venv/bin/python bench/compile_bench.py                 # all workloads, all sides found
    .venv/bin/python bench/compile_bench.py --quick         # fewer repeats
    .venv/bin/python bench/compile_bench.py --no-torch-compile --no-jax
    .venv/bin/python bench/compile_bench.py --quick --cpu-time   # CPU seconds: steadier on a loaded machine
    .venv/bin/python bench/compile_bench.py --gemm-share --cpu-time   # the matmuls' share of each step
    .venv/bin/python bench/compile_bench.py --check-jax   # JAX's models give tapelab's losses
    .venv/bin/python bench/compile_bench.py --ab-jax mlp_b64,gcn   # alternating rounds against JAX
    .venv/bin/python bench/compile_bench.py --ab-jax "chain1M captured,chain1M"
    .venv/bin/python bench/compile_bench.py --ab-jax chain16,mlp_b64 --mode reduce-overhead
    .venv/bin/python bench/compile_bench.py --ab-modes chain16,mlp_b64   # eager, compiled, reduce-overhead
    .venv/bin/python bench/compile_bench.py --ab-sgd      # whole SGD steps: eager, compiled, JAX, alternating
    JAX_PYTHON=/path/to/jaxvenv/bin/python .venv/bin/python bench/compile_bench.py --ab-sgd gpt_block,mlp_b64

``--ab-sgd`` times whole training steps as a researcher writes them (``opt.zero_grad()``, forward, loss,
``backward()``, ``optim.SGD`` step) against JAX's ``jit(value_and_grad)`` with the update in the same jit
(parameters donated), from the same parameters and data (the first step's losses are printed side by side);
the chain rows also replay the compiled step captured whole by ``tapelab.graphs`` ("captured", the issue's
compiled + captured chain, against JAX as "captured/jax").
Otherwise each workload is a training step's forward and backward into fresh gradients (no optimizer, on every
side; ``.grad`` set to None first, as ``jax.grad`` returns new ones) on float32,
on one thread unless ``--threads N`` (numpy's BLAS and torch by their variables, XLA by the CPUs the process
may use, ``_pin``), timed as
the best of several repeats of a loop (ratios matter, not absolute times; tapelab's eager and
compiled loops alternate, so both see the same load). The chain rows are also timed captured
(``tapelab.graphs``: the forward+backward step recorded once, then replayed: "chain16 captured").
Compile time is measured in child processes, after one eager step (imports and first use are not
compile time): cold (an empty kernel cache directory) and warm (the same directory again: the
kernels' shared libraries load without numba), as the first compiled step's seconds and its
excess over an eager step (the first call returns its traced eager run; the compiled graph runs
from the next). JAX runs in a subprocess (``$JAX_PYTHON``, /work/jaxvenv, or this Python if it imports jax) with
the same models written in jax.numpy (LayerNorms with their weight and bias, the GPT block's
causal mask, the encoder layer's post-norm and erf-GELU, the parameters differentiated, the input
not); torch.compile needs a C compiler.

The other training rows of bench/run.py, at its shapes (bench/workloads.py, bench/programs/models.py):
mlp_b64/mlp_b512 (784-512-512-10, cross-entropy), cnn_b32 (conv-BN-ReLU-pool x2), lstm_lm (embedding,
2-layer LSTM 200/200, bptt 35, batch 20, vocab 256), resnet (stem and two basic blocks, BatchNorm in
training mode) and gcn (2000 nodes, sparse adjacency): each a module returning its loss, built once
for tapelab and torch; JAX gets tapelab's parameters and inputs (lax.conv_general_dilated, lax.scan for
the recurrence, a segment sum for the sparse products), and ``--check-jax`` compares the loss and every
parameter's gradient on them.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings


def _threads() -> int:
    """``--threads N`` (default 1), read before numpy starts its BLAS threads."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
    return 1


THREADS = _threads()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)


def _pin(threads: int) -> None:
    """Run this process and its children (JAX's and torch's) on ``threads`` of the usable CPUs. XLA's CPU
    client sizes its thread pools from the CPUs this process may run on, not from a flag: under jax 0.10
    ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` still ran a GEMM-bound grad on ~1.35 cores (wall 9.6 ms,
    CPU 13.2 ms) where one pinned CPU took 13.2 ms of wall time."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads < len(cpus):
        os.sched_setaffinity(0, cpus[:threads])


_pin(THREADS)

import numpy as np  # noqa: E402 - after the thread variables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

SHAPES = {"chain16": (16,), "chain1M": (1024, 1024), "gelu_mlp": (256, 512, 2048), "transformer": (8, 64, 128, 4),
          "gpt_block": (8, 64, 128, 4), "tiny_mlp": (8, 32, 64, 10)}


CLOCK = [time.perf_counter]     # --cpu-time: time.process_time (this process's CPU seconds, all threads)
ONLY: list = []                  # -k: the row names to run (substrings); empty runs all


def best(step, repeats: int, inner: int) -> float:
    """Best seconds per call of ``step`` over ``repeats`` loops of ``inner`` calls."""
    step()
    step()
    times = []
    for _ in range(repeats):
        t0 = CLOCK[0]()
        for _ in range(inner):
            step()
        times.append((CLOCK[0]() - t0) / inner)
    return min(times)


def _tapelab_workloads(T):
    from tapelab import nn
    from _compile_models import GPTBlock
    rng = np.random.default_rng(0)
    out = {}

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    for name in ("chain16", "chain1M"):
        shape = SHAPES[name]
        x = T.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        w = T.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        out[name] = (chain6, (x, w))
    b, d, h = SHAPES["gelu_mlp"]
    mlp = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
    out["gelu_mlp"] = (mlp, (T.tensor(rng.standard_normal((b, d)).astype(np.float32)),))
    b, t, d, heads = SHAPES["transformer"]
    enc = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                     activation="gelu")
    out["transformer"] = (enc, (T.tensor(rng.standard_normal((b, t, d)).astype(np.float32)),))
    gpt = GPTBlock(d, heads)
    out["gpt_block"] = (gpt, (T.tensor(rng.standard_normal((b, t, d)).astype(np.float32)),))
    b, i, h, o = SHAPES["tiny_mlp"]     # dispatch-bound: what mode="reduce-overhead" is for on cpu

    class Tiny(nn.Module):
        """Linear, GELU, Linear, LayerNorm, SiLU, Linear and the squared mean: the loss inside the module,
        so the whole step is the compiled (and replayed) call, as JAX's jit sees it."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(i, h), nn.GELU(), nn.Linear(h, h), nn.LayerNorm(h), nn.SiLU(),
                                     nn.Linear(h, o))

        def forward(self, x):
            y = self.net(x)
            return (y * y).mean()
    out["tiny_mlp"] = (Tiny(), (T.tensor(rng.standard_normal((b, i)).astype(np.float32)),))
    return out


# ---------------------------------------------------------------- the other bench/run.py training rows
# bench/workloads.py's MLP and CNN steps and bench/programs/models.py's LSTM, ResNet and GCN steps,
# the same shapes, as modules returning the loss (forward + loss; the step adds backward, no optimizer)
sys.path.insert(0, os.path.join(ROOT, "bench", "programs"))
import models as programs  # noqa: E402 - bench/programs/models.py: the shapes and the GCN graph

TRAINING = {"mlp_b64": (64, 784, 512, 10), "mlp_b512": (512, 784, 512, 10), "cnn_b32": (32, 1, 28, 28),
            "lstm_lm": (programs.LSTM["bptt"], programs.LSTM["batch"], programs.LSTM["hidden"]),
            "resnet": (programs.RESNET["batch"], programs.RESNET["channels"], programs.RESNET["size"]),
            "gcn": (programs.GCN["nodes"], programs.GCN["features"], programs.GCN["hidden"])}
SHAPES.update(TRAINING)


def _training_rows(m, rng) -> dict:
    """name -> (module, inputs) for library ``m`` (tapelab or torch); each module returns the loss."""
    nn, F = m.nn, m.nn.functional
    m.manual_seed(0)                      # the layers' default initialisation, the same on every run

    def f32(a):
        return m.tensor(np.asarray(a, np.float32))

    def labels(n, k):
        return m.tensor(rng.integers(0, k, n).astype(np.int64))

    class Loss(nn.Module):
        """cross_entropy(net(x), y)."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    class LSTMLM(nn.Module):
        """programs.lstm_step's model and loss: the hidden state is an input (zeros), not a parameter."""

        def __init__(self):
            super().__init__()
            c = programs.LSTM
            self.encoder = nn.Embedding(c["vocab"], c["emb"])
            self.rnn = nn.LSTM(c["emb"], c["hidden"], c["layers"])
            self.decoder = nn.Linear(c["hidden"], c["vocab"])

        def forward(self, x, y, h0, c0):
            out, _ = self.rnn(self.encoder(x), (h0, c0))
            return F.cross_entropy(self.decoder(out).reshape(-1, programs.LSTM["vocab"]), y.reshape(-1))

    class BasicBlock(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch)
            self.conv2, self.bn2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch)

        def forward(self, x):
            return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + x)

    class GCN(nn.Module):
        """programs.gcn_step's two layers: A relu(A X W1) W2, cross-entropy on every node."""

        def __init__(self):
            super().__init__()
            c = programs.GCN
            self.w1 = nn.Parameter(f32(rng.standard_normal((c["features"], c["hidden"])) * 0.1))
            self.w2 = nn.Parameter(f32(rng.standard_normal((c["hidden"], c["classes"])) * 0.1))

        def forward(self, adj, x, y):
            h = F.relu(m.sparse.mm(adj, x @ self.w1))
            return F.cross_entropy(m.sparse.mm(adj, h @ self.w2), y)

    out = {}
    for name in ("mlp_b64", "mlp_b512"):
        b, i, h, o = TRAINING[name]
        net = nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))
        out[name] = (Loss(net), (f32(rng.standard_normal((b, i))), labels(b, o)))
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    out["cnn_b32"] = (Loss(cnn), (f32(rng.standard_normal(TRAINING["cnn_b32"])), labels(32, 10)))
    c = programs.LSTM
    zeros = np.zeros((c["layers"], c["batch"], c["hidden"]), np.float32)
    tokens = rng.integers(0, c["vocab"], (c["bptt"] + 1, c["batch"])).astype(np.int64)
    out["lstm_lm"] = (LSTMLM(), (m.tensor(tokens[:-1]), m.tensor(tokens[1:]), f32(zeros), f32(zeros)))
    c = programs.RESNET
    ch = c["channels"]
    resnet = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                           BasicBlock(ch), BasicBlock(ch), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                           nn.Linear(ch, c["classes"]))
    out["resnet"] = (Loss(resnet), (f32(rng.standard_normal((c["batch"], 3, c["size"], c["size"]))),
                                    labels(c["batch"], c["classes"])))
    idx, values, feats, ys = programs.gcn_graph(rng)
    n = programs.GCN["nodes"]
    with warnings.catch_warnings():   # torch: "Sparse invariant checks are implicitly disabled"
        warnings.simplefilter("ignore")
        adj = m.sparse_coo_tensor(m.tensor(idx.astype(np.int64)), f32(values), (n, n)).coalesce()
    out["gcn"] = (GCN(), (adj, f32(feats), m.tensor(ys.astype(np.int64))))
    return out


def _saved(rows: dict) -> dict:
    """The JAX side's copy of tapelab's training rows: ``row/param`` and ``row/@i`` (the i-th input;
    a sparse adjacency as ``@i.indices`` and ``@i.values``)."""
    saved = {}
    for name, (model, args) in rows.items():
        for n, p in (model.named_parameters() if hasattr(model, "named_parameters") else ()):
            saved[f"{name}/{n}"] = p.detach().numpy()
        for i, a in enumerate(args):
            if a.is_sparse:
                saved[f"{name}/@{i}.indices"] = a.indices().numpy()
                saved[f"{name}/@{i}.values"] = a.values().numpy()
            else:
                saved[f"{name}/@{i}"] = a.detach().numpy()
    return saved


@functools.lru_cache(maxsize=None)
def _tapelab_training() -> dict:
    """tapelab's training rows, built once: run_tapelab times them, the JAX side gets their parameters."""
    import tapelab as T
    return _training_rows(T, np.random.default_rng(1))


def _step(fn, args):
    """Forward and backward into fresh gradients, as ``jax.grad`` returns them (a training loop's
    ``zero_grad(set_to_none=True)``): no step pays an accumulation into the last step's ``.grad``."""
    leaves = [*(fn.parameters() if hasattr(fn, "parameters") else ()),
              *(a for a in args if getattr(a, "requires_grad", False))]

    def step():
        for p in leaves:
            p.grad = None
        y = fn(*args)
        (y if y.ndim == 0 else (y * y).mean()).backward()
    return step


def _wanted(name: str) -> bool:
    return not ONLY or any(k in name for k in ONLY)


def run_tapelab(repeats: int) -> dict:
    import tapelab as T
    res = {}
    for name, (fn, args) in {**_tapelab_workloads(T), **_tapelab_training()}.items():
        if not _wanted(name):
            continue
        inner = 200 if name == "chain16" else 5
        compiled = T.compile(fn)
        t0 = time.perf_counter()
        _step(compiled, args)()
        first = time.perf_counter() - t0
        pairs = [(best(_step(fn, args), 1, inner), best(_step(compiled, args), 1, inner))   # interleaved: both
                 for _ in range(repeats)]                                                   # see the same load
        res[name] = {"tapelab eager": min(p[0] for p in pairs), "tapelab compiled": min(p[1] for p in pairs),
                     "first compiled call": first}
        if name.startswith("chain"):
            plain, fused = _captured(T, _step(fn, args)), _captured(T, _step(compiled, args))
            pairs = [(best(plain, 1, inner), best(fused, 1, inner)) for _ in range(repeats)]
            res[name + " captured"] = {"tapelab eager": min(p[0] for p in pairs),
                                       "tapelab compiled": min(p[1] for p in pairs)}
    return res


# the workload modules that return activations: ``_step`` squares and averages them (the loss) eagerly
ACTIVATIONS = ("gelu_mlp", "transformer", "gpt_block")


def _with_loss(T, name: str, fn):
    """What JAX's jit compiles for row ``name``: its forward and its loss. JAX's models end in the squared
    mean inside the jit, where ``_step`` adds it to a module returning activations eagerly (two ops and
    their backward outside the compiled call: 3-6% of the Transformer and GPT blocks' compiled steps),
    so ``--ab-jax`` and ``--ab-modes`` compile a module holding the row's module and ending in that mean."""
    if name not in ACTIVATIONS:
        return fn

    class WithLoss(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = fn

        def forward(self, *args):
            y = self.inner(*args)
            return (y * y).mean()
    return WithLoss()


def _captured(T, step):
    """``step`` (forward and backward) captured once by ``tapelab.graphs``: the replay runs the
    recorded kernels into the same buffers, gradients accumulating as the step's own would."""
    from tapelab.graphs import Graph, graph
    step()
    g = Graph()
    with graph(g):
        step()
    return g.replay


def run_torch(repeats: int, with_compile: bool) -> dict:
    import torch
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    nn = torch.nn
    rng = np.random.default_rng(0)
    res = {}

    def t(a, grad=False):
        return torch.tensor(a, requires_grad=grad)

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    work = {}
    for name in ("chain16", "chain1M"):
        shape = SHAPES[name]
        work[name] = (chain6, (t(rng.standard_normal(shape).astype(np.float32), True),
                               t(rng.standard_normal(shape).astype(np.float32), True)))
    b, d, h = SHAPES["gelu_mlp"]
    work["gelu_mlp"] = (nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)),
                        (t(rng.standard_normal((b, d)).astype(np.float32)),))
    b, tt, d, heads = SHAPES["transformer"]
    work["transformer"] = (nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                                      activation="gelu"),
                           (t(rng.standard_normal((b, tt, d)).astype(np.float32)),))
    work.update(_training_rows(torch, np.random.default_rng(1)))
    for name, (fn, args) in work.items():
        if not _wanted(name):
            continue
        inner = 200 if name == "chain16" else 5
        res[name] = {"torch eager": best(_step(fn, args), repeats, inner)}
        if with_compile:
            try:
                cfn = torch.compile(fn)
                t0 = time.perf_counter()
                _step(cfn, args)()
                res[name]["torch.compile first call"] = time.perf_counter() - t0
                res[name]["torch.compile"] = best(_step(cfn, args), repeats, inner)
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                res[name]["torch.compile"] = f"failed: {type(e).__name__}: {str(e)[:100]}"
    return res


JAX_MODELS = textwrap.dedent("""
    import math
    import jax, jax.numpy as jnp
    def chain6(x, w): return jax.nn.sigmoid(jnp.tanh(x * w + 1.0) * x).sum()
    def mlp(p, x):
        (w1, b1), (w2, b2) = p
        y = jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2 + b2
        return (y * y).mean()
    def ln(p, x):
        m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * p[0] + p[1]
    def attn(p, x, heads, causal):
        (wq, bq), (wo, bo) = p
        b, t, d = x.shape
        q, k, v = jnp.split(x @ wq + bq, 3, axis=-1)
        sh = lambda z: z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
        q, k, v = sh(q), sh(k), sh(v)
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
        if causal:
            s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        return a @ wo + bo
    def block(p, x, heads):   # tests/_compile_models.GPTBlock: pre-norm, causal, tanh-GELU
        a, n1, n2, (w1, b1), (w2, b2) = p
        x = x + attn(a, ln(n1, x), heads, True)
        y = x + jax.nn.gelu(ln(n2, x) @ w1 + b1, approximate=True) @ w2 + b2
        return (y * y).mean()
    def tiny(p, x):            # _tapelab_workloads' tiny_mlp: Linear, GELU, Linear, LayerNorm, SiLU, Linear
        (w1, b1), (w2, b2), n, (w3, b3) = p
        y = jax.nn.silu(ln(n, jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2 + b2)) @ w3 + b3
        return (y * y).mean()
    def encoder(p, x, heads):  # nn.TransformerEncoderLayer(batch_first, norm_first=False, gelu, no mask)
        a, n1, n2, (w1, b1), (w2, b2) = p
        x = ln(n1, x + attn(a, x, heads, False))
        y = ln(n2, x + jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2 + b2)
        return (y * y).mean()
""")

# the workload rows (_tapelab_workloads' gelu_mlp, gpt_block, transformer, tiny_mlp) as JAX steps, for
# both the one-shot script and the A/B worker: random parameters (timing only; --check-jax checks the models)
JAX_WORKLOADS = textwrap.dedent("""
    import numpy as np
    def workload_rows(shapes, rng):
        '''name -> (jitted gradient of the loss, parameters, inputs): the parameters differentiated, the input not.'''
        def lin(i, o):
            w = rng.standard_normal((i, o)).astype(np.float32) / math.sqrt(i)
            return (jnp.asarray(w), jnp.zeros(o, jnp.float32))
        def norm(d): return (jnp.ones(d, jnp.float32), jnp.zeros(d, jnp.float32))
        def x(*shape): return jnp.asarray(rng.standard_normal(shape).astype(np.float32))
        b, d, h = shapes["gelu_mlp"]
        rows = {"gelu_mlp": (jax.jit(jax.grad(mlp)), (lin(d, h), lin(h, d)), (x(b, d),))}
        for name, model in (("gpt_block", block), ("transformer", encoder)):
            b, t, d, heads = shapes[name]
            p = ((lin(d, 3 * d), lin(d, d)), norm(d), norm(d), lin(d, 4 * d), lin(4 * d, d))
            loss = jax.grad(lambda p, x, model=model, heads=heads: model(p, x, heads))
            rows[name] = (jax.jit(loss), p, (x(b, t, d),))
        b, i, h, o = shapes["tiny_mlp"]
        rows["tiny_mlp"] = (jax.jit(jax.grad(tiny)), (lin(i, h), lin(h, h), norm(h), lin(h, o)), (x(b, i),))
        return rows
""")

# the training rows (compile_bench._training_rows) in jax.numpy: p maps tapelab's parameter names to
# arrays (weights in PyTorch's layout), batch norm in training mode (the batch's biased variance)
JAX_TRAINING = textwrap.dedent("""
    from jax import lax
    def linear(p, k, x): return x @ p[k + ".weight"].T + p[k + ".bias"]
    def xent(z, y): return (jax.nn.logsumexp(z, -1) - jnp.take_along_axis(z, y[:, None], -1)[:, 0]).mean()
    def conv(p, k, x):
        y = lax.conv_general_dilated(x, p[k + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p[k + ".bias"][None, :, None, None] if k + ".bias" in p else y
    def bn(p, k, x):
        m = x.mean((0, 2, 3), keepdims=True); v = ((x - m) ** 2).mean((0, 2, 3), keepdims=True)
        ch = lambda a: a[None, :, None, None]
        return (x - m) / jnp.sqrt(v + 1e-5) * ch(p[k + ".weight"]) + ch(p[k + ".bias"])
    def pool2(x): return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    def mlp_loss(p, x, y):
        h = jax.nn.relu(linear(p, "net.0", x)); h = jax.nn.relu(linear(p, "net.2", h))
        return xent(linear(p, "net.4", h), y)
    def cnn_loss(p, x, y):
        h = pool2(jax.nn.relu(bn(p, "net.1", conv(p, "net.0", x))))
        h = pool2(jax.nn.relu(bn(p, "net.5", conv(p, "net.4", h))))
        return xent(linear(p, "net.9", h.reshape(h.shape[0], -1)), y)
    def lstm_layer(p, l, xs, h, c):
        pre = xs @ p[f"rnn.weight_ih_l{l}"].T + p[f"rnn.bias_ih_l{l}"] + p[f"rnn.bias_hh_l{l}"]
        whh = p[f"rnn.weight_hh_l{l}"].T
        def cell(carry, g):
            h, c = carry
            i, f, gg, o = jnp.split(g + h @ whh, 4, -1)   # PyTorch's gate order
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        return lax.scan(cell, (h, c), pre)[1]
    def lstm_loss(p, x, y, h0, c0):
        h = p["encoder.weight"][x]
        for l in range(h0.shape[0]):
            h = lstm_layer(p, l, h, h0[l], c0[l])
        return xent(linear(p, "decoder", h).reshape(-1, p["decoder.bias"].shape[0]), y.reshape(-1))
    def resnet_loss(p, x, y):
        h = jax.nn.relu(bn(p, "net.1", conv(p, "net.0", x)))
        for k in ("net.3", "net.4"):
            o = jax.nn.relu(bn(p, k + ".bn1", conv(p, k + ".conv1", h)))
            h = jax.nn.relu(bn(p, k + ".bn2", conv(p, k + ".conv2", o)) + h)
        return xent(linear(p, "net.7", h.mean((2, 3))), y)
    def spmm(adj, d):   # the coalesced COO adjacency (rows sorted) times a dense matrix: a segment sum
        (row, col), val = adj
        return jax.ops.segment_sum(val[:, None] * d[col], row, d.shape[0], indices_are_sorted=True)
    def gcn_loss(p, adj, x, y):
        h = jax.nn.relu(spmm(adj, x @ p["w1"]))
        return xent(spmm(adj, h @ p["w2"]), y)
    TRAINING = {"mlp_b64": mlp_loss, "mlp_b512": mlp_loss, "cnn_b32": cnn_loss, "lstm_lm": lstm_loss,
                "resnet": resnet_loss, "gcn": gcn_loss}
    def training_rows(path):
        '''name -> (loss, params, inputs) from compile_bench._saved's npz.'''
        W, rows = np.load(path), {}
        for name in TRAINING:
            p = {k.split("/", 1)[1]: jnp.asarray(W[k]) for k in W.files if k.startswith(name + "/") and "/@" not in k}
            ins = []
            for i in range(4):
                k = f"{name}/@{i}"
                if k in W.files:
                    ins.append(jnp.asarray(W[k]))
                elif k + ".indices" in W.files:
                    ins.append((jnp.asarray(W[k + ".indices"]), jnp.asarray(W[k + ".values"])))
            rows[name] = (TRAINING[name], p, ins)
        return rows
""")

JAX_SCRIPT = JAX_MODELS + JAX_WORKLOADS + JAX_TRAINING + textwrap.dedent("""
    import json, sys, time
    import numpy as np
    SHAPES = json.loads(sys.argv[1]); repeats = int(sys.argv[2])
    clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
    def best(step, inner):
        step(); step(); ts = []
        for _ in range(repeats):
            t0 = clock()
            for _ in range(inner): step()
            ts.append((clock() - t0) / inner)
        return min(ts)
    rng = np.random.default_rng(0); res = {}
    for name in ("chain16", "chain1M"):
        x, w = (jnp.asarray(rng.standard_normal(SHAPES[name]).astype(np.float32)) for _ in range(2))
        g = jax.jit(jax.value_and_grad(chain6, argnums=(0, 1)))
        res[name] = best(lambda: jax.block_until_ready(g(x, w)), 200 if name == "chain16" else 5)
    for name, (g, p, ins) in workload_rows(SHAPES, rng).items():
        res[name] = best(lambda: jax.block_until_ready(g(p, *ins)), 200 if name == "tiny_mlp" else 5)
    for name, (loss, p, ins) in training_rows(sys.argv[4]).items():
        g = jax.jit(jax.grad(loss))       # the parameters differentiated, the inputs not
        res[name] = best(lambda: jax.block_until_ready(g(p, *ins)), 5)
    print(json.dumps({"version": jax.__version__, "times": res}))
""")

# the same models on tapelab's parameters (saved by check_jax): their losses must agree
JAX_CHECK = JAX_MODELS + JAX_TRAINING + textwrap.dedent("""
    import json, sys
    import numpy as np
    W = np.load(sys.argv[1]); heads = int(sys.argv[2])
    L = lambda k: (jnp.asarray(W[k + ".weight"]).T, jnp.asarray(W[k + ".bias"]))
    N = lambda k: (jnp.asarray(W[k + ".weight"]), jnp.asarray(W[k + ".bias"]))
    x = jnp.asarray(W["x"])
    gpt = ((L("gpt.qkv"), L("gpt.proj")), N("gpt.ln1"), N("gpt.ln2"), L("gpt.fc"), L("gpt.out"))
    enc = (((jnp.asarray(W["enc.self_attn.in_proj_weight"]).T, jnp.asarray(W["enc.self_attn.in_proj_bias"])),
            L("enc.self_attn.out_proj")), N("enc.norm1"), N("enc.norm2"), L("enc.linear1"), L("enc.linear2"))
    mlp_p = (L("mlp.0"), L("mlp.2"))
    out = {"gpt_block": float(block(gpt, x, heads)), "transformer": float(encoder(enc, x, heads)),
           "gelu_mlp": float(mlp(mlp_p, x.reshape(-1, x.shape[-1])))}
    grads = {}
    for name, (loss, p, ins) in training_rows(sys.argv[3]).items():
        value, g = jax.value_and_grad(loss)(p, *ins)
        out[name] = float(value)
        grads.update({f"{name}/{k}": np.asarray(v) for k, v in g.items()})
    np.savez(sys.argv[4], **grads)
    print(json.dumps(out))
""")


def check_jax() -> dict | None:
    """tapelab's GPT block, encoder layer and GELU MLP (small shapes, random parameters) against the
    bench's JAX models given the same parameters: the loss each side differentiates, both ways."""
    import tapelab as T
    from tapelab import nn
    from _compile_models import GPTBlock
    py = _jax_python()
    if py is None:
        return None
    rng = np.random.default_rng(0)
    b, t, d, heads = 2, 8, 32, 4
    x = rng.standard_normal((b, t, d)).astype(np.float32)
    models = {"gpt": GPTBlock(d, heads), "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)),
              "enc": nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                                activation="gelu")}
    saved, ours = {"x": x}, {}
    for key, m in models.items():
        for n, p in m.named_parameters():
            with T.no_grad():
                p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
            saved[f"{key}.{n}"] = p.detach().numpy()
        y = m(T.tensor(x) if key != "mlp" else T.tensor(x.reshape(-1, d)))
        ours[{"gpt": "gpt_block", "enc": "transformer", "mlp": "gelu_mlp"}[key]] = (y * y).mean().item()
    grads = {}
    for name, (model, args) in _tapelab_training().items():     # the bench's own shapes and parameters
        model.zero_grad()
        loss = model(*args)
        loss.backward()
        ours[name], grads[name] = loss.item(), {n: p.grad.numpy() for n, p in model.named_parameters()}
    with tempfile.TemporaryDirectory() as tmp:
        path, training = os.path.join(tmp, "params.npz"), os.path.join(tmp, "training.npz")
        np.savez(path, **saved)
        np.savez(training, **_saved(_tapelab_training()))
        p = subprocess.run([py, "-c", JAX_CHECK, path, str(heads), training, os.path.join(tmp, "grads.npz")],
                           capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        if not p.returncode:
            theirs_grads = dict(np.load(os.path.join(tmp, "grads.npz")))
    if p.returncode:
        return {"error": p.stderr[-300:]}
    theirs = json.loads(p.stdout.strip().splitlines()[-1])
    res = {k: {"tapelab": ours[k], "jax": theirs[k], "relative difference": abs(ours[k] - theirs[k]) / abs(ours[k])}
           for k in ours}
    for name, gs in grads.items():    # and every parameter's gradient: the worst relative (norm) difference,
        floor = 1e-3 * max(np.linalg.norm(g) for g in gs.values())   # a floor for the zero gradient of a
        res[name]["gradient relative difference"] = max(              # conv bias feeding a batch norm
            float(np.linalg.norm(g - theirs_grads[f"{name}/{n}"]) / max(np.linalg.norm(g), floor))
            for n, g in gs.items())
    return res


def _jax_python() -> str | None:
    """The Python that runs the JAX side: ``$JAX_PYTHON``, else ``/work/jaxvenv/bin/python``, else this
    interpreter when it can import jax (e.g. ``pip install --target DIR "jax[cpu]"`` and ``PYTHONPATH=DIR``);
    None when JAX is not installed (the bench then prints ``jax: not installed``). JAX stays optional."""
    for py in (os.environ.get("JAX_PYTHON"), "/work/jaxvenv/bin/python"):
        if py and os.path.exists(py):
            return py
    import importlib.util
    return sys.executable if importlib.util.find_spec("jax") is not None else None


def run_jax(repeats: int) -> dict | None:
    py = _jax_python()
    if py is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "training.npz")
        np.savez(path, **_saved(_tapelab_training()))
        p = subprocess.run([py, "-c", JAX_SCRIPT, json.dumps(SHAPES), str(repeats),
                            "cpu" if CLOCK[0] is time.process_time else "wall", path], capture_output=True,
                           text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if p.returncode:
        return {"error": p.stderr[-300:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# a JAX process that times one training row on request: "name n" -> seconds per step (argv[3]: "cpu", the
# process's CPU seconds, or "wall")
JAX_WORKER = JAX_MODELS + JAX_WORKLOADS + JAX_TRAINING + textwrap.dedent("""
    import json, sys, time
    import numpy as np
    clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
    rows = {name: (jax.jit(jax.grad(loss)), p, ins) for name, (loss, p, ins) in training_rows(sys.argv[1]).items()}
    rng = np.random.default_rng(0)
    for name, shape in json.loads(sys.argv[2]).items():       # the chain rows: fwd and both gradients
        if name.startswith("chain"):
            xw = [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in range(2)]
            rows[name] = (jax.jit(jax.value_and_grad(lambda xw: chain6(*xw))), xw, ())
    rows.update(workload_rows(json.loads(sys.argv[2]), rng))
    print("ready", flush=True)
    for line in sys.stdin:
        name, n = line.split()
        g, p, ins = rows[name]
        jax.block_until_ready(g(p, *ins))
        t0 = clock()
        for _ in range(int(n)):
            jax.block_until_ready(g(p, *ins))
        print((clock() - t0) / int(n), flush=True)
""")


def _settling_calls(mode: str | None) -> int:
    """Calls before a row is timed: trace and warm up; a replaying mode also captures and then runs
    its trial (``overhead.TRIALS`` calls each way) before it keeps the replay or the compiled call.
    Timed rounds that still held trial calls made reduce-overhead look slower than either side."""
    from tapelab.compiler.frontend import REPLAYED
    from tapelab.compiler.overhead import TRIALS, WARMUP
    return 2 + (WARMUP + 1 + 2 * TRIALS if mode in REPLAYED else 0)


def _ab_clock() -> tuple:
    """(clock, its name for the JAX worker, seconds a side a round) for ``--ab-jax``. One thread: each
    process's CPU seconds in ~50 ms rounds (steady on a loaded host). Above one thread, wall time in
    ~200 ms rounds: CPU seconds would count libgomp's and XLA's pool threads spinning between calls, and a
    round starts by waking the other process's halted vCPU (milliseconds here), so rounds are longer and
    need a quiet host."""
    if THREADS == 1:
        return time.process_time, "cpu", 0.05
    return time.perf_counter, "wall", 0.2


def ab_jax(names: list, rounds: int, mode: str | None = None):
    """tapelab's compiled step and JAX's jitted one on the same row, alternating in rounds (each
    side timed in its own process, so both see the same load; ``_ab_clock``): per round compiled / JAX;
    yields each row's name and the median and quartiles of its rounds as it ends (a long run shows
    its rows as they come), steadier than two best-ofs taken a minute apart.
    A training row, ``chain16``/``chain1M``, or ``"chain1M captured"`` (the compiled step replayed);
    ``mode``: ``tapelab.compile``'s mode (``"reduce-overhead"`` captures and replays the compiled call)."""
    import tapelab as T
    py = _jax_python()
    if py is None:
        sys.exit("--ab-jax: jax: not installed (set JAX_PYTHON, or make jax importable)")
    rows = _tapelab_training()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "training.npz")
        np.savez(path, **_saved(rows))
        rows = {**rows, **_tapelab_workloads(T)}
        clock, clock_name, seconds = _ab_clock()
        worker = subprocess.Popen([py, "-c", JAX_WORKER, path, json.dumps(SHAPES), clock_name],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "JAX_PLATFORMS": "cpu"})
        try:
            assert worker.stdout.readline().strip() == "ready"
            for name in names:
                row, captured = name.split()[0], name.endswith(" captured")
                fn, args = rows[row]
                step = _step(T.compile(_with_loss(T, row, fn), mode=mode), args)
                for _ in range(_settling_calls(mode)):
                    step()
                if captured:
                    step = _captured(T, step)
                inner = max(1, int(seconds / best(step, 1, 1)))
                ratios, ms = [], []
                for _ in range(rounds):
                    step()                       # untimed, as the worker's first call of a round
                    t0 = clock()
                    for _ in range(inner):
                        step()
                    ours = (clock() - t0) / inner
                    worker.stdin.write(f"{row} {inner}\n")
                    worker.stdin.flush()
                    theirs = float(worker.stdout.readline())
                    ratios.append(ours / theirs)
                    ms.append((ours * 1e3, theirs * 1e3))
                ratios.sort()
                n = len(ratios)
                yield name, (ratios[n // 2], ratios[n // 4], ratios[(3 * n) // 4]), sorted(ms)[n // 2]
        finally:
            worker.stdin.close()
            worker.wait()


def ab_modes(names: list, rounds: int) -> dict:
    """Eager, compiled and ``mode="reduce-overhead"`` steps of each row in one process, alternating
    rounds of ~50 ms a side on the thread clock (above one thread ~200 ms of wall time: the thread clock
    would miss the other threads' share): per side the median and quartiles of ms per step."""
    import tapelab as T
    rows, res = {**_tapelab_training(), **_tapelab_workloads(T)}, {}
    for name in names:
        fn, args = rows[name]
        whole = _with_loss(T, name, fn)
        steps = {"eager": _step(fn, args), "compiled": _step(T.compile(whole), args),
                 "reduce-overhead": _step(T.compile(whole, mode="reduce-overhead"), args)}
        for k, step in steps.items():
            for _ in range(_settling_calls(k)):
                step()
        clock, seconds = (time.thread_time, 0.05) if THREADS == 1 else (time.perf_counter, 0.2)
        inner = max(1, int(seconds / best(steps["eager"], 1, 1)))
        times: dict = {k: [] for k in steps}
        for _ in range(rounds):
            for k, step in steps.items():
                t0 = clock()
                for _ in range(inner):
                    step()
                times[k].append((clock() - t0) / inner * 1e3)
        res[name] = {k: (sorted(v)[len(v) // 2], sorted(v)[len(v) // 4], sorted(v)[(3 * len(v)) // 4])
                     for k, v in times.items()}
    return res


# ---------------------------------------------------------------- whole training steps: forward, backward, SGD
SGD_ROWS = ("chain16", "chain1M", "mlp_b64", "gelu_mlp", "transformer", "gpt_block")
LR = 0.01


def _sgd_step(fn, args, lr: float = LR):
    """A training step as a researcher writes it: ``opt.zero_grad()``, forward, the loss (the output when
    0-d, else its squared mean), ``backward()``, ``opt.step()`` with ``optim.SGD(lr)`` over the module's
    parameters (the chain's inputs requiring grad); returns the loss."""
    import tapelab as T
    module = getattr(fn, "_orig_mod", fn)
    leaves = list(module.parameters()) if hasattr(module, "parameters") else \
        [a for a in args if getattr(a, "requires_grad", False)]
    opt = T.optim.SGD(leaves, lr=lr)

    def step():
        opt.zero_grad()
        y = fn(*args)
        loss = y if y.ndim == 0 else (y * y).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def _sgd_rows(names) -> dict:
    """name -> (module or function, inputs): the bench's workloads and training rows, tapelab side."""
    import tapelab as T
    rows = {**_tapelab_workloads(T), **_tapelab_training()}
    unknown = [n for n in names if n not in rows]
    if unknown:
        sys.exit(f"--ab-sgd: unknown rows {unknown}; known: {', '.join(rows)}")
    return {n: rows[n] for n in names}


# a JAX process holding each row's jitted SGD step (value_and_grad and the update in one jit, the
# parameters donated): "loss NAME" -> the loss of one step from tapelab's initial parameters;
# "time NAME N" -> CPU seconds per step over N steps
JAX_SGD_WORKER = JAX_MODELS + JAX_TRAINING + textwrap.dedent("""
    import json, sys, time
    import numpy as np
    W, shapes, lr = np.load(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
    def saved(name):
        return {k.split("/", 1)[1]: jnp.asarray(W[k]) for k in W.files if k.startswith(name + "/")}
    def row(name):
        # (loss(p, *inputs), parameters, inputs): tapelab's parameters and data, as compile_bench saved them
        S = saved(name)
        L = lambda k: (S[k + ".weight"].T, S[k + ".bias"])
        N = lambda k: (S[k + ".weight"], S[k + ".bias"])
        if name.startswith("chain"):                   # the chain's inputs are what SGD updates
            return (lambda p: chain6(*p)), (S["@0"], S["@1"]), ()
        if name in TRAINING:
            p = {k: v for k, v in S.items() if not k.startswith("@")}
            return TRAINING[name], p, [S[f"@{i}"] for i in range(4) if f"@{i}" in S]
        if name == "gelu_mlp":
            return mlp, (L("0"), L("2")), (S["@0"],)
        heads = shapes[name][3]
        if name == "gpt_block":
            p = ((L("qkv"), L("proj")), N("ln1"), N("ln2"), L("fc"), L("out"))
            return (lambda p, x: block(p, x, heads)), p, (S["@0"],)
        p = (((S["self_attn.in_proj_weight"].T, S["self_attn.in_proj_bias"]), L("self_attn.out_proj")),
             N("norm1"), N("norm2"), L("linear1"), L("linear2"))
        return (lambda p, x: encoder(p, x, heads)), p, (S["@0"],)
    def sgd(loss):
        def step(p, *ins):
            value, g = jax.value_and_grad(loss)(p, *ins)
            return value, jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g)
        return jax.jit(step, donate_argnums=0)
    rows = {}
    print("ready", flush=True)
    for line in sys.stdin:
        what, name, *n = line.split()
        if name not in rows:
            loss, p, ins = row(name)
            rows[name] = [sgd(loss), p, ins]
        r = rows[name]
        if what == "loss":
            value, r[1] = r[0](r[1], *r[2])
            print(float(value), flush=True)
            continue
        value, r[1] = r[0](r[1], *r[2]); jax.block_until_ready(value)      # warm (compiled at "loss")
        t0 = time.process_time()
        for _ in range(int(n[0])):
            value, r[1] = r[0](r[1], *r[2])
        jax.block_until_ready((value, r[1]))
        print((time.process_time() - t0) / int(n[0]), flush=True)
""")


def ab_sgd(names: list, rounds: int):
    """Whole SGD training steps (forward, backward, ``optim.SGD`` update) of each row: tapelab eager,
    ``tapelab.compile``d, and JAX's ``jit(value_and_grad)`` with the update in the same jit, started
    from the same parameters and data (tapelab's, copied to JAX; the first step's losses are compared),
    timed in alternating rounds of ~50 ms a side, each side's process CPU seconds (one thread).
    Yields (row, {side: (median, q1, q3) ms per step}, {ratio: (median, q1, q3)}, (tapelab's first loss,
    JAX's or None)); the ratios are per round (the same moment's load for all three sides)."""
    import tapelab as T
    py = _jax_python()
    rows = _sgd_rows(names)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sgd_rows.npz")
        np.savez(path, **_saved(rows))        # before any step: the initial parameters
        worker = None
        if py is not None:
            worker = subprocess.Popen([py, "-c", JAX_SGD_WORKER, path, json.dumps(SHAPES), str(LR)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env={**os.environ, "JAX_PLATFORMS": "cpu"})
            assert worker.stdout.readline().strip() == "ready"

        def ask(line: str) -> float:
            worker.stdin.write(line + "\n")
            worker.stdin.flush()
            return float(worker.stdout.readline())
        try:
            for name, (fn, args) in rows.items():
                steps = {"eager": _sgd_step(fn, args)}
                first = steps["eager"]().item()           # from the saved parameters, as JAX's first step
                losses = (first, ask(f"loss {name}") if worker is not None else None)
                steps["compiled"] = _sgd_step(T.compile(fn), args)
                for _ in range(3):
                    steps["compiled"]()
                if name.startswith("chain"):      # the compiled + captured chain: the whole step replayed
                    steps["captured"] = _captured(T, steps["compiled"])
                inner = max(1, int(0.05 / best(steps["compiled"], 1, 1)))
                times: dict = {k: [] for k in (*steps, *(["jax"] if worker else []))}
                for _ in range(rounds):
                    for k, step in steps.items():
                        t0 = time.process_time()
                        for _ in range(inner):
                            step()
                        times[k].append((time.process_time() - t0) / inner * 1e3)
                    if worker is not None:
                        times["jax"].append(ask(f"time {name} {inner}") * 1e3)
                ratios = {"eager/compiled": [e / c for e, c in zip(times["eager"], times["compiled"])]}
                if worker is not None:
                    ratios["compiled/jax"] = [c / j for c, j in zip(times["compiled"], times["jax"])]
                    ratios["eager/jax"] = [e / j for e, j in zip(times["eager"], times["jax"])]
                    if "captured" in times:
                        ratios["captured/jax"] = [c / j for c, j in zip(times["captured"], times["jax"])]
                yield name, {k: _quartiles(v) for k, v in times.items()}, \
                    {k: _quartiles(v) for k, v in ratios.items()}, losses
        finally:
            if worker is not None:
                worker.stdin.close()
                worker.wait()


def _quartiles(v: list) -> tuple:
    v = sorted(v)
    return v[len(v) // 2], v[len(v) // 4], v[(3 * len(v)) // 4]


COMPILE_TIME = textwrap.dedent("""
    import sys, time, json
    sys.path.insert(0, sys.argv[1])
    import numpy as np, tapelab as T
    from tapelab import nn
    b, t, d, heads = 8, 64, 128, 4
    enc = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True, activation="gelu")
    x = T.randn(b, t, d)
    import tapelab.compiler.cpu, numba, scipy.special   # imports are not compile time,
    (enc(x) ** 2).mean().backward()       # nor eager first use (BLAS start-up, numba's own start-up)
    t0 = time.perf_counter()
    y = enc(x)
    (y * y).mean().backward()
    t1 = time.perf_counter()
    y = T.compile(enc)(x)
    (y * y).mean().backward()
    t2 = time.perf_counter()
    print(json.dumps({"first step": t2 - t1, "over eager": (t2 - t1) - (t1 - t0)}))
""")


def compile_times() -> dict:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "TAPELAB_CACHE_DIR": d}
        out = {}
        for what in ("cold", "warm"):
            p = subprocess.run([sys.executable, "-c", COMPILE_TIME, os.path.join(ROOT, "tests")], capture_output=True,
                               text=True, env=env)
            out[what] = json.loads(p.stdout.strip().splitlines()[-1]) if not p.returncode else p.stderr[-300:]
        return out


def _linear_gemms(n: int, i: int, o: int, need_dx: bool = True) -> list:
    """A linear layer's GEMMs in a training step as ``(a shape, b shape, transpose a, transpose b)``:
    forward ``x wᵀ``, input gradient ``gy w`` (when needed), weight gradient ``gyᵀ x``."""
    return [((n, i), (o, i), False, True)] + ([((n, o), (o, i), False, False)] if need_dx else []) + \
        [((n, o), (n, i), True, False)]


def _gemm_specs() -> dict:
    """Each workload's matmuls: its linear layers' (and the attention's batched products)."""
    b, t, d, h = SHAPES["gpt_block"]
    q, p = (b * h, t, d // h), (b * h, t, t)
    attention = [(q, q, False, True), (p, q, False, False), (p, q, False, False), (p, q, True, False),
                 (p, q, True, False), (q, q, False, True)]

    def block(first_dx):     # qkv, out projection, MLP up and down; the encoder's input needs no gradient
        return [*_linear_gemms(b * t, d, 3 * d, first_dx), *_linear_gemms(b * t, d, d),
                *_linear_gemms(b * t, d, 4 * d), *_linear_gemms(b * t, 4 * d, d), *attention]
    bm, dm, hm = SHAPES["gelu_mlp"]
    specs = {"gelu_mlp": _linear_gemms(bm, dm, hm, False) + _linear_gemms(bm, hm, dm),
             "transformer": block(False), "gpt_block": block(True)}
    for name in ("mlp_b64", "mlp_b512"):
        n, i, hid, o = TRAINING[name]
        specs[name] = _linear_gemms(n, i, hid, False) + _linear_gemms(n, hid, hid) + _linear_gemms(n, hid, o)
    n, f, hid = TRAINING["gcn"]       # x W1 and h W2 with their weight gradients, and h's gradient
    specs["gcn"] = [((n, f), (f, hid), False, False), ((n, f), (n, hid), True, False),
                    *_linear_gemms(n, hid, programs.GCN["classes"])]
    return specs


def _gemm_calls(spec: list, rng) -> list:
    """Each product through the engine's own GEMM entry (``kernels.gemm``: our float32 GEMM where it
    takes the shape, numpy's elsewhere), as the step runs it."""
    from tapelab.kernels.gemm import gemm

    def one(sa, sb, ta, tb):
        a, b = (rng.standard_normal(x).astype(np.float32) for x in (sa, sb))
        a, b = (a.swapaxes(-1, -2) if ta else a), (b.swapaxes(-1, -2) if tb else b)
        return lambda: gemm(np, a, b)
    return [one(*g) for g in spec]


JAX_GEMMS = textwrap.dedent("""
    import json, sys, time
    import numpy as np, jax, jax.numpy as jnp
    specs, repeats = json.loads(sys.argv[1]), int(sys.argv[2])
    clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
    rng, res = np.random.default_rng(0), {}
    T = lambda x, t: x.swapaxes(-1, -2) if t else x
    for name, spec in specs.items():
        arrays = [tuple(jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in g[:2]) for g in spec]
        f = jax.jit(lambda arrays: [T(a, g[2]) @ T(b, g[3]) for (a, b), g in zip(arrays, spec)])
        step = lambda: jax.block_until_ready(f(arrays))
        step(); step(); ts = []
        for _ in range(repeats):
            t0 = clock()
            for _ in range(5): step()
            ts.append((clock() - t0) / 5)
        res[name] = min(ts)
    print(json.dumps(res))
""")


def gemm_share(repeats: int) -> dict:
    """Each workload's matmuls alone (the engine's GEMMs, the step's shapes and transposes, no other
    work) against its tapelab eager and compiled step: eager / GEMMs bounds what any compiler keeping
    the engine's GEMMs can gain over eager (the rest of the step at zero cost). With JAX, the same matmuls jitted (XLA's
    own GEMMs) beside its whole step: where JAX's GEMMs are faster than numpy's, that is the gap."""
    import tapelab as T
    rng = np.random.default_rng(0)
    specs = _gemm_specs()
    work, res = {**_tapelab_workloads(T), **_tapelab_training()}, {}
    for name, spec in specs.items():
        calls = _gemm_calls(spec, rng)
        fn, args = work[name]
        eager, compiled = _step(fn, args), _step(T.compile(fn), args)
        res[name] = {"GEMMs": best(lambda: [c() for c in calls], repeats, 5), "eager": best(eager, repeats, 3),
                     "compiled": best(compiled, repeats, 3)}
    py = _jax_python()
    if py is not None:
        clock = "cpu" if CLOCK[0] is time.process_time else "wall"
        p = subprocess.run([py, "-c", JAX_GEMMS, json.dumps(specs), str(repeats), clock], capture_output=True,
                           text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        jx = run_jax(repeats) if not p.returncode else None
        for name, r in res.items():
            if jx and "times" in jx:
                r["jax GEMMs"], r["jax step"] = json.loads(p.stdout.strip().splitlines()[-1])[name], jx["times"][name]
    return res


def fastmath_ab(base: str | None, rounds: int = 60) -> dict:
    """Per 1M float32: thread time of numba loops over ``tapelab.kernels.fastmath``'s functions (and, with
    ``base``, over another copy of that file, e.g. ``git show HEAD~2:engine/kernels/fastmath.py``),
    alternating in one process, beside numpy's own ufuncs. Returns name -> [(median, q1, q3) ms, ...]."""
    import importlib.util
    from numba import njit
    from tapelab.kernels import fastmath as new
    sides = [new]
    if base:
        spec = importlib.util.spec_from_file_location("fastmath_base", base)
        old = importlib.util.module_from_spec(spec)
        sys.modules["fastmath_base"] = old
        spec.loader.exec_module(old)
        sides.insert(0, old)

    def loop(f):
        @njit(error_model="numpy")
        def run(x, out):
            for i in range(x.size):
                out[i] = f(x[i])
        return run
    rng = np.random.default_rng(0)
    x = rng.uniform(-5, 5, 1 << 20).astype(np.float32)
    pos = np.abs(x) + np.float32(0.1)
    out = np.empty_like(x)
    cases = {n: (a, [loop(getattr(m, n)) for m in sides]) for n, a in
             (("exp32", x), ("log32", pos), ("tanh32", x), ("erf32", x))}
    cases.update({f"np.{f.__name__}": (a, [lambda a, o, f=f: f(a, out=o)]) for f, a in
                  ((np.exp, x), (np.log, pos), (np.tanh, x))})
    res = {}
    for name, (a, fns) in cases.items():
        ts = [[] for _ in fns]
        for f in fns:
            f(a, out)
        for _ in range(rounds):
            for k, f in enumerate(fns):
                t0 = time.thread_time()
                f(a, out)
                ts[k].append((time.thread_time() - t0) * 1e3)
        res[name] = [tuple(np.percentile(v, [50, 25, 75])) for v in ts]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for numpy's BLAS, torch and XLA (default 1: every side gets one core; with "
                         "more, --cpu-time counts BLAS threads spinning while they wait)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time CPU seconds of the process (all its threads) instead of wall time: steadier "
                         "ratios on a shared, loaded machine; not a latency")
    ap.add_argument("--check-jax", action="store_true",
                    help="only check that the JAX models compute tapelab's losses on the same parameters")
    ap.add_argument("--gemm-share", action="store_true",
                    help="only time each step's matmuls alone against the eager and compiled step")
    ap.add_argument("--ab-jax", metavar="ROWS",
                    help="only: compiled against JAX on these training rows (comma-separated), alternating "
                         "rounds; the median and quartiles of compiled/jax")
    ap.add_argument("--rounds", type=int, default=21, help="rounds for --ab-jax and --ab-modes")
    ap.add_argument("--mode", default=None, help="tapelab.compile's mode for --ab-jax (e.g. reduce-overhead)")
    ap.add_argument("--ab-sgd", metavar="ROWS", nargs="?", const=",".join(SGD_ROWS),
                    help="only: whole SGD training steps (forward, backward, optim.SGD) on these rows (default "
                         f"{','.join(SGD_ROWS)}): tapelab eager, compiled and JAX jit(value_and_grad) with the "
                         "update, alternating rounds; medians, quartiles and per-round ratios")
    ap.add_argument("--ab-modes", metavar="ROWS",
                    help="only: eager, compiled and mode='reduce-overhead' on these rows, alternating rounds")
    ap.add_argument("--fastmath", nargs="?", const="", metavar="BASE",
                    help="only: per-1M time of fastmath's functions (against another copy of fastmath.py if given)")
    ap.add_argument("-k", action="append", default=[], metavar="SUBSTR",
                    help="only the rows whose name contains SUBSTR (repeatable; skips the compile-time row)")
    a = ap.parse_args()
    ONLY[:] = a.k
    if a.cpu_time:
        CLOCK[0] = time.process_time
    repeats = 3 if a.quick else 7
    if a.check_jax:
        print(json.dumps(check_jax(), indent=1))
        return
    if a.fastmath is not None:
        for name, sides in fastmath_ab(a.fastmath or None).items():
            cells = "  ".join(f"{m:.2f} ms ({lo:.2f}-{hi:.2f})" for m, lo, hi in sides)
            ratio = f"  base/now {sides[0][0] / sides[1][0]:.2f}x" if len(sides) == 2 else ""
            print(f"{name:<9}{cells}{ratio}")
        return
    if a.ab_jax:
        print(f"compiled/jax time, {THREADS} thread(s), {_ab_clock()[1]} clock")
        for name, (med, lo, hi), (ours, theirs) in ab_jax(a.ab_jax.split(","), a.rounds, a.mode):
            print(f"{name:<17} compiled/jax {med:.3f} (quartiles {lo:.3f}-{hi:.3f}, {a.rounds} rounds; "
                  f"{ours:.3f} / {theirs:.3f} ms in the median compiled round)"
                  + (f" mode={a.mode}" if a.mode else ""), flush=True)
        return
    if a.ab_sgd:
        print(f"SGD step (lr {LR}), CPU ms per step: median (quartiles) of {a.rounds} alternating rounds; "
              f"{THREADS} thread(s)")
        if _jax_python() is None:
            print("jax: not installed (set JAX_PYTHON, or make jax importable): tapelab's sides only")
        for name, sides, ratios, (ours, theirs) in ab_sgd(a.ab_sgd.split(","), a.rounds):
            cells = "  ".join(f"{k} {m:.3f} ({lo:.3f}-{hi:.3f})" for k, (m, lo, hi) in sides.items())
            rs = "  ".join(f"{k} {m:.2f}x ({lo:.2f}-{hi:.2f})" for k, (m, lo, hi) in ratios.items())
            check = f"  first loss {ours:.7g}" + (f", jax {theirs:.7g}" if theirs is not None else "")
            print(f"{name:<12}{cells}\n{'':<12}{rs}{check}", flush=True)
        return
    if a.ab_modes:
        for name, sides in ab_modes(a.ab_modes.split(","), a.rounds).items():
            print(f"{name:<10}" + "  ".join(f"{k} {m:.3f} ms ({lo:.3f}-{hi:.3f})" for k, (m, lo, hi) in sides.items()))
        return
    if a.gemm_share:
        print(f"{'workload':<12}{'GEMMs':>10}{'eager':>10}{'compiled':>10}{'GEMM share':>12}{'compiled/eager':>16}"
              f"{'bound eager/GEMMs':>19}{'jax GEMMs':>11}{'jax step':>10}{'GEMMs ours/jax':>17}")
        for name, r in gemm_share(repeats).items():
            jx = (f"{r['jax GEMMs'] * 1e3:>8.2f} ms{r['jax step'] * 1e3:>7.2f} ms{r['GEMMs'] / r['jax GEMMs']:>16.2f}x"
                  if "jax GEMMs" in r else "")
            print(f"{name:<12}{r['GEMMs'] * 1e3:>7.2f} ms{r['eager'] * 1e3:>7.2f} ms{r['compiled'] * 1e3:>7.2f} ms"
                  f"{r['GEMMs'] / r['compiled']:>11.0%}{r['eager'] / r['compiled']:>15.2f}x"
                  f"{r['eager'] / r['GEMMs']:>18.2f}x{jx}")
        return
    res = {"tapelab": run_tapelab(repeats), "torch": run_torch(repeats, not a.no_torch_compile)}
    if not a.no_jax:
        res["jax"] = run_jax(repeats)
    res["compile time, Transformer block first step"] = {} if ONLY else compile_times()
    cols = ["tapelab eager", "tapelab compiled", "torch eager", "torch.compile", "jax jit"]
    print(f"{'workload':<17}" + "".join(f"{c:>18}" for c in cols) + f"{'compiled/eager':>16}{'compiled/jax':>14}")
    rows = [n for base in SHAPES for n in (base, base + " captured") if n in res["tapelab"]]
    for name in rows:
        row = dict(res["tapelab"].get(name, {}))
        row.update(res["torch"].get(name, {}))
        jx = (res.get("jax") or {}).get("times", {}).get(name.split()[0])
        row["jax jit"] = jx
        cells = "".join(f"{row[c] * 1e3:>15.3f} ms" if isinstance(row.get(c), float) else f"{'-':>18}" for c in cols)
        sp = row["tapelab eager"] / row["tapelab compiled"]
        vs = f"{row['tapelab compiled'] / jx:>13.2f}x" if jx else f"{'-':>14}"
        print(f"{name:<17}{cells}{sp:>15.2f}x{vs}")
    for k, v in res["torch"].items():
        if isinstance(v.get("torch.compile"), str):
            print(f"torch.compile {k}: {v['torch.compile']}")
    print("compile time (Transformer block, first step and its excess over an eager step, s):",
          json.dumps(res["compile time, Transformer block first step"]))
    if res.get("jax"):
        print("jax:", res["jax"].get("version", res["jax"]))
    elif not a.no_jax:
        print("jax: not installed")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()

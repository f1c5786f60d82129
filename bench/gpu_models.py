"""The models, data and timing the GPU checks share (``gpu_check.py``, ``gpu_compile.py``): each model
written once for tapelab and PyTorch (``m`` is either library), seeded from numpy so both start equal."""
from __future__ import annotations

import time

import numpy as np


def make_mlp(m, rng, sizes=(784, 512, 512, 10), act="ReLU"):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(m.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(getattr(m.nn, act)())
    return _seeded(m, m.nn.Sequential(*layers), rng)


def make_gelu_mlp(m, rng):
    return make_mlp(m, rng, (784, 1024, 1024, 10), "GELU")


def make_cnn(m, rng):
    nn = m.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    return _seeded(m, model, rng)


def make_block(m, rng, d=128, heads=4, ff=256, vocab=100, seq=64, **layer):
    nn = m.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, **layer)
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

        def forward(self, x):
            return self.head(self.layer(x, src_mask=self.mask, is_causal=True)).reshape(-1, vocab)
    return _seeded(m, Block(), rng)


def make_gpt_block(m, rng):
    return make_block(m, rng, activation="gelu", norm_first=True)


def _seeded(m, model, rng):
    with m.no_grad():
        for _, p in model.named_parameters():
            p.copy_(m.tensor(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))
    return model


MODELS = {  # name -> (builder, input shape, classes)
    "MLP 784-512-512-10, batch 64": (make_mlp, (64, 784), 10),
    "GELU MLP 784-1024-1024-10, batch 64": (make_gelu_mlp, (64, 784), 10),
    "CNN conv-bn-relu-pool x2, batch 16": (make_cnn, (16, 1, 28, 28), 10),
    "Transformer block d128, batch 8x64": (make_block, (8, 64, 128), 100),
    "GPT block d128 (pre-norm, GELU), batch 8x64": (make_gpt_block, (8, 64, 128), 100),
}


def _data(shape, classes, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    n = shape[0] * (shape[1] if len(shape) == 3 else 1)
    return x, rng.integers(0, classes, n).astype(np.int64)


def _setup(m, name, device):
    """Model ``name`` (seeded weights), its data and an SGD-momentum optimizer, in library ``m`` on ``device``."""
    build, shape, classes = MODELS[name]
    model = build(m, np.random.default_rng(0)).to(device)
    x_np, y_np = _data(shape, classes)
    x, y = m.tensor(x_np).to(device), m.tensor(y_np).to(device)
    return model, x, y, m.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def sgd_step(m, built, model=None):
    """One training step of ``built`` (model, x, y, opt from ``_setup``) as a function returning the
    loss: ``zero_grad``, cross-entropy through ``model`` (the module itself, or its compiled form),
    ``backward``, ``step``."""
    model = built[0] if model is None else model
    _, x, y, opt = built

    def step():
        opt.zero_grad(set_to_none=True)
        loss = m.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _max_diff(a, b) -> float:
    """Largest |a - b|, counting equal entries (infinities of a mask too) as 0 and NaN vs number as inf."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return float(np.max(np.where(same, 0.0, np.nan_to_num(np.abs(a - b), nan=np.inf)), initial=0.0))


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _median_step_ms(step, sync, warmup=3, reps=20):
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))



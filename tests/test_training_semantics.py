"""Training behaviour that tests/scripts cannot compare number by number.

The scripts in tests/scripts train with ``shuffle=False`` and dropout ``p=0.0`` because shuffled
orders and dropout masks come from each library's own RNG. Here the random parts are checked by
their properties, in torch and in tapelab alike: a seeded shuffling loader, dropout masks and
their gradients, and a model that still learns with both switched on.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import tapelab
from test_pytorch_scripts import SHIM

LIBS = [pytest.param(torch, id="torch"), pytest.param(tapelab, id="tapelab")]


def test_ordinary_submodule_imports_under_the_harness(tmp_path):
    # sys.modules['torch'] = tapelab alone is not enough: `import torch.nn` would then load a second
    # copy of tapelab under torch.* names (whose Tensor lacks the installed methods); SHIM aliases them all
    script = tmp_path / "imports.py"
    script.write_text(
        "import torch\n"
        "import torch.nn as nn\n"
        "import torch.nn.functional as F\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "assert nn.Linear is torch.nn.Linear and F.relu is torch.nn.functional.relu\n"
        "x = torch.ones(4, 2)\n"
        "out = nn.Linear(2, 3)(x)\n"
        "assert isinstance(out, torch.Tensor)\n"
        "batches = list(DataLoader(TensorDataset(x), batch_size=2))\n"
        "assert len(batches) == 2 and isinstance(batches[0][0], torch.Tensor)\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", SHIM, str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


@pytest.mark.parametrize("m", LIBS)
def test_shuffled_loader_is_a_seeded_permutation_each_epoch(m):
    ds = m.utils.data.TensorDataset(m.arange(20), m.arange(20) * 10)

    def epochs(seed, n=3):
        loader = m.utils.data.DataLoader(ds, batch_size=6, shuffle=True, generator=m.Generator().manual_seed(seed))
        out = []
        for _ in range(n):
            order = []
            for xb, yb in loader:
                assert xb.shape[0] <= 6 and (yb == xb * 10).all()      # pairs stay together
                order += xb.tolist()
            out.append(order)
        return out

    first = epochs(0)
    assert all(sorted(order) == list(range(20)) for order in first)      # every sample once per epoch
    assert first[0] != first[1] and first[0] != list(range(20))          # reshuffled every epoch
    assert epochs(0) == first                                            # reproducible from the seed
    assert epochs(1) != first


@pytest.mark.parametrize("m", LIBS)
def test_dropout_masks_scale_and_gradients(m):
    m.manual_seed(0)
    drop = m.nn.Dropout(p=0.5)
    x = m.ones(50000, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.5) < 0.02
    assert set(y.detach().unique().tolist()) == {0.0, 2.0}             # survivors scaled by 1/(1-p)
    y.sum().backward()
    assert (x.grad == kept.float() * 2).all()                           # gradient only through survivors
    assert not m.equal(drop(x), drop(x))                                 # a fresh mask per call
    drop.eval()
    assert m.equal(drop(x), x)                                           # identity in eval mode
    assert m.equal(m.nn.Dropout(p=0.0).train()(x), x)


@pytest.mark.parametrize("m", LIBS)
def test_cnn_learns_with_shuffling_and_dropout(m):
    rng = np.random.default_rng(0)
    n = 192
    labels = np.arange(n) % 3
    images = 0.3 * rng.standard_normal((n, 1, 8, 8))
    for i, c in enumerate(labels):
        k = rng.integers(1, 7)
        if c == 0:
            images[i, 0, k, :] += 1.0
        elif c == 1:
            images[i, 0, :, k] += 1.0
        else:
            images[i, 0] += np.eye(8, k=int(k) - 3)
    x = m.from_numpy(images.astype(np.float32))
    y = m.from_numpy(labels.astype(np.int64))
    m.manual_seed(0)
    nn = m.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dropout(0.3), nn.Linear(8 * 4 * 4, 3))
    loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True,
                                     generator=m.Generator().manual_seed(0))
    optimizer = m.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = m.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(5):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        scheduler.step()
    model.eval()
    with m.no_grad():
        out = model(x)
        assert m.equal(out, model(x))                                    # eval: no dropout, running stats
        accuracy = (out.argmax(dim=1) == y).float().mean().item()
    assert accuracy > 0.9, accuracy

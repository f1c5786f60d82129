"""One helper for table-driven tests of composites: run ``fn(m, *tensors)`` under torch and tapelab
on the same numpy inputs and compare outputs and the gradients of every float input (float64)."""
from __future__ import annotations

import numpy as np
import torch

import tapelab


def _to(m, a, grad):
    if isinstance(a, np.ndarray):
        t = m.tensor(a)
        if grad and a.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    return a


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _np(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


def compare(fn, *inputs, grad=True, atol=1e-7, rtol=1e-6, seed=0):
    """Assert that ``fn`` gives torch's values (and gradients, when ``grad``) under tapelab."""
    t_in = [_to(torch, a, grad) for a in inputs]
    l_in = [_to(tapelab, a, grad) for a in inputs]
    t_out, l_out = _flat(fn(torch, *t_in)), _flat(fn(tapelab, *l_in))
    assert len(t_out) == len(l_out)
    for t, l in zip(t_out, l_out):
        if not isinstance(t, torch.Tensor):
            assert t == l, (t, l)
            continue
        assert isinstance(l, tapelab.Tensor), type(l)
        assert tuple(l.shape) == tuple(t.shape), (tuple(l.shape), tuple(t.shape))
        assert str(l.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (l.dtype, t.dtype)
        np.testing.assert_allclose(_np(l), _np(t), atol=atol, rtol=rtol)
    if not grad:
        return
    pairs = [(t, l) for t, l in zip(t_out, l_out) if isinstance(t, torch.Tensor) and t.requires_grad]
    t_leaves = [t for t in t_in if isinstance(t, torch.Tensor) and t.requires_grad]
    l_leaves = [t for t in l_in if isinstance(t, tapelab.Tensor) and t.requires_grad]
    if not pairs or not t_leaves:
        return
    rng = np.random.default_rng(seed)
    cot = [rng.standard_normal(tuple(t.shape)) for t, _ in pairs]
    t_loss = sum((t * torch.tensor(c)).sum() for (t, _), c in zip(pairs, cot))
    l_loss = sum((l * tapelab.tensor(c)).sum() for (_, l), c in zip(pairs, cot))
    t_g = torch.autograd.grad(t_loss, t_leaves, allow_unused=True)
    l_g = tapelab.autograd.grad(l_loss, l_leaves, allow_unused=True)
    for k, (tg, lg) in enumerate(zip(t_g, l_g)):
        if tg is None:
            assert lg is None or np.allclose(_np(lg), 0), f"grad {k} should be None/zero"
            continue
        assert lg is not None, f"missing gradient for input {k}"
        np.testing.assert_allclose(_np(lg), _np(tg), atol=max(atol, 1e-7) * 10, rtol=rtol * 10,
                                   err_msg=f"grad of input {k}")

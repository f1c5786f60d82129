"""One op-database case on a device, against the same case on cpu (not against torch).

Shared by tests/test_ops.py (meta, the simulated cuda device, a real GPU where present) and
bench/gpu_check.py. On cuda, values and gradients must match cpu; on meta, which has no values,
their shapes, dtypes and devices must.
"""
from __future__ import annotations

import numpy as np

import tapelab

from .core import build as _build, leaves as _leaves


# ---------------------------------------------------------------- the module seen by an OpInfo
class OnDevice:
    """``module`` (tapelab, or torch) with factories defaulting to ``device`` (as
    ``torch.set_default_device``), so an OpInfo's ``fn(m, ...)`` that creates tensors itself
    creates them on the device under test."""

    _FACTORIES = {"tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace",
                  "logspace", "eye", "rand", "randn", "randint", "randperm", "normal", "scalar_tensor"}

    def __init__(self, dev, module=tapelab):
        self._dev, self._module = dev, module

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if name in self._FACTORIES:
            dev = self._dev

            def factory(*args, **kwargs):
                kwargs.setdefault("device", dev)
                return attr(*args, **kwargs)
            return factory
        return attr


def host(t):
    return np.asarray(t.detach().cpu())


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _tol(op, dtype):
    if dtype == "float64":
        return dict(atol=max(op.atol, 1e-7), rtol=max(op.rtol, 1e-6))
    return dict(atol=max(op.atol, 1e-4), rtol=max(op.rtol, 1e-4))


def _real(t):
    return tapelab.view_as_real(t) if t.is_complex() else t


def run_case(op, sample, dtype, dev):
    """Forward (and gradients) of one sample on cpu and on ``dev``; raises AssertionError on a mismatch."""
    want_grad = op.grad
    c_args, c_kw = _build(tapelab, op, sample, dtype, want_grad)
    d_args, d_kw = _build(OnDevice(dev), op, sample, dtype, want_grad)
    c_out, d_out = _flat(op.fn(tapelab, *c_args, **c_kw)), _flat(op.fn(OnDevice(dev), *d_args, **d_kw))
    assert len(c_out) == len(d_out), f"{len(d_out)} outputs on {dev}, {len(c_out)} on cpu"
    for c, d in zip(c_out, d_out):
        if not isinstance(c, tapelab.Tensor):
            assert c == d, f"non-tensor output {d!r} != cpu {c!r}"
            continue
        assert d.device == dev, f"output on {d.device}, expected {dev}"
        assert tuple(d.shape) == tuple(c.shape) and d.dtype == c.dtype, \
            f"shape/dtype {tuple(d.shape)} {d.dtype} != cpu {tuple(c.shape)} {c.dtype}"
        if op.compare_values and dev.type != "meta":
            np.testing.assert_allclose(host(d), host(c), **_tol(op, dtype), err_msg="forward")
    if not want_grad:
        return
    pairs = [(c, d) for c, d in zip(c_out, d_out) if isinstance(c, tapelab.Tensor) and c.requires_grad]
    c_leaves, d_leaves = _leaves(c_args), _leaves(d_args)
    if not pairs or not c_leaves or not op.compare_values:
        return
    # complex outputs enter the loss as (real, imaginary) pairs: a real loss
    pairs = [(_real(c), _real(d)) for c, d in pairs]
    cots = [np.random.default_rng(1).standard_normal(tuple(c.shape)) for c, _ in pairs]
    c_loss = sum((c * tapelab.tensor(k, dtype=c.dtype)).sum() for (c, _), k in zip(pairs, cots))
    d_loss = sum((d * tapelab.tensor(k, dtype=d.dtype, device=dev)).sum() for (_, d), k in zip(pairs, cots))
    c_grads = tapelab.autograd.grad(c_loss, c_leaves, allow_unused=True)
    d_grads = tapelab.autograd.grad(d_loss, d_leaves, allow_unused=True)
    for k, (cg, dg) in enumerate(zip(c_grads, d_grads)):
        if cg is None:
            assert dg is None or dev.type == "meta" or np.allclose(host(dg), 0), f"grad {k}: cpu has none, {dev} does"
            continue
        assert dg is not None, f"grad {k} missing on {dev}"
        assert dg.device == dev, f"grad {k} on {dg.device}"
        assert tuple(dg.shape) == tuple(cg.shape) and dg.dtype == cg.dtype, \
            f"grad {k} shape/dtype {tuple(dg.shape)} {dg.dtype} != cpu {tuple(cg.shape)} {cg.dtype}"
        if dev.type == "meta":
            continue
        tol = _tol(op, dtype)
        tol["atol"] = max(tol["atol"], op.grad_atol if dtype == "float32" else 1e-7)
        np.testing.assert_allclose(host(dg), host(cg), **tol, err_msg=f"grad of input {k}")

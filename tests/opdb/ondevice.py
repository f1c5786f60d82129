"""One op-database case on a device, against the same case on cpu (not against torch).

Shared by tests/test_ops.py (meta, the simulated cuda device, a real GPU where present) and
bench/gpu_check.py. On cuda, values and gradients must match cpu; on meta, which has no values,
their shapes, dtypes and devices must.
"""
from __future__ import annotations

import numpy as np

import tapelab

DT = {"float32": (tapelab.float32, np.float32), "float64": (tapelab.float64, np.float64)}


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


def _convert(m, value, dtype_name, requires_grad, noncontig):
    """numpy sample value -> tensor through ``m`` (same rules as tests/test_ops.py)."""
    if isinstance(value, np.ndarray):
        a = value.astype(DT[dtype_name][1]) if value.dtype.kind == "f" else value
        if noncontig and a.ndim >= 2:
            t = m.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).transpose(-1, -2)
        else:
            t = m.tensor(a)
        if requires_grad and a.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return type(value)(_convert(m, v, dtype_name, requires_grad, noncontig) for v in value)
    return value


def _build(m, op, sample, dtype_name, requires_grad):
    args = [_convert(m, v, dtype_name, requires_grad and (op.differentiable_args is None or i in op.differentiable_args),
                     sample.noncontig) for i, v in enumerate(sample.args)]
    kwargs = {k: _convert(m, v, dtype_name, False, False) for k, v in sample.kwargs.items()}
    return args, kwargs


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_leaves(a))
        elif isinstance(a, tapelab.Tensor) and a.requires_grad:
            out.append(a)
    return out


def host(t):
    return np.asarray(t.detach().cpu())


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _tol(op, dtype):
    if dtype == "float64":
        return dict(atol=max(op.atol, 1e-7), rtol=max(op.rtol, 1e-6))
    return dict(atol=max(op.atol, 1e-4), rtol=max(op.rtol, 1e-4))


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

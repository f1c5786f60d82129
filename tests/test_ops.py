"""Tests generated from the op database (tests/opdb): PyTorch CPU is the oracle.

WHAT'S TESTED, for every OpInfo and sample:
- forward values and dtypes against torch, in float32 and float64;
- gradients of every differentiable input against torch (a random cotangent);
- gradcheck (finite differences) and gradgradcheck in float64;
- error inputs raise PyTorch's exception type with a clear message;
- on other devices (opdb/ondevice.py), against the same case on cpu: on meta (everywhere) shapes,
  dtypes and devices of outputs and gradients, or PyTorch's error where the output shape needs
  values; on the simulated cuda device (everywhere) and a real GPU (where present) values too;
  and error inputs on meta raise what PyTorch raises on meta.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import tapelab
from opdb import OP_DB
from opdb.core import build as _build, leaves as _leaves
from opdb.ondevice import OnDevice, run_case
from tapelab._backend import simulated_cuda

def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return np.asarray(t.detach())


def _as_real(m, t):
    return m.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _flat_outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _cases():
    for op in OP_DB:
        for i, s in enumerate(op.samples()):
            for dt in op.dtypes:
                yield pytest.param(op, s, dt, id=f"{op.name}-{s.name or i}-{dt}")


CASES = list(_cases())


def test_op_db_coverage():
    names = [op.name for op in OP_DB]
    print(f"\nop database: {len(names)} ops, {len(CASES)} cases")
    assert len(set(names)) == len(names), sorted(n for n in set(names) if names.count(n) > 1)
    per_op = collections.Counter(case.values[0].name for case in [*CASES, *_error_cases()])
    assert not [n for n in names if not per_op[n]], "ops with neither a sample (with a dtype) nor an error input"
    assert len(names) >= 300 and len(CASES) >= 5 * len(names)     # the database as it stands, not shrinking


@pytest.mark.parametrize("op,sample,dtype", CASES)
def test_forward_and_grad_match_torch(op, sample, dtype):
    want_grad = op.grad
    t_args, t_kw = _build(torch, op, sample, dtype, want_grad)
    l_args, l_kw = _build(tapelab, op, sample, dtype, want_grad)
    t_out = _flat_outputs(op.fn(torch, *t_args, **t_kw))
    l_out = _flat_outputs(op.fn(tapelab, *l_args, **l_kw))
    assert len(t_out) == len(l_out)
    for t, l in zip(t_out, l_out):
        if not isinstance(t, torch.Tensor):
            assert t == l
            continue
        assert isinstance(l, tapelab.Tensor), f"{op.name} returned {type(l).__name__}"
        assert tuple(l.shape) == tuple(t.shape), f"{op.name}: shape {tuple(l.shape)} != torch {tuple(t.shape)}"
        assert str(l.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{op.name}: dtype {l.dtype} != {t.dtype}"
        if op.compare_values:
            tol = dict(atol=op.atol, rtol=op.rtol) if dtype == "float64" else dict(atol=max(op.atol, 1e-5), rtol=max(op.rtol, 1e-4))
            np.testing.assert_allclose(_np(l), _np(t), **tol, err_msg=f"{op.name} forward")
    if not want_grad:
        return
    t_leaves, l_leaves = _leaves(t_args), _leaves(l_args)
    pairs = [(t, l) for t, l in zip(t_out, l_out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not pairs or not t_leaves:
        return
    # a complex output enters the loss through its (real, imaginary) pairs: a real loss, as PyTorch needs
    cot = [np.random.default_rng(1).standard_normal(tuple(t.shape) + ((2,) if t.is_complex() else ()))
           for t, _ in pairs]
    t_loss = sum((_as_real(torch, t) * torch.tensor(c, dtype=_as_real(torch, t).dtype)).sum()
                 for (t, _), c in zip(pairs, cot))
    l_loss = sum((_as_real(tapelab, l) * tapelab.tensor(c, dtype=_as_real(tapelab, l).dtype)).sum()
                 for (_, l), c in zip(pairs, cot))
    t_grads = torch.autograd.grad(t_loss, t_leaves, allow_unused=True)
    l_grads = tapelab.autograd.grad(l_loss, l_leaves, allow_unused=True)
    for k, (tg, lg) in enumerate(zip(t_grads, l_grads)):
        if tg is None:
            assert lg is None or np.allclose(_np(lg), 0), f"{op.name}: grad {k} should be None/zero"
            continue
        assert lg is not None, f"{op.name}: missing gradient for input {k}"
        tol = 1e-7 if dtype == "float64" else op.grad_atol
        np.testing.assert_allclose(_np(lg), _np(tg), atol=tol, rtol=tol * 10, err_msg=f"{op.name} grad of input {k}")


def _has_float_input(op, sample) -> bool:
    """gradcheck needs a floating array among the differentiable arguments (integer samples
    exercise dtype handling in the forward test instead)."""
    def floats(v):
        if isinstance(v, np.ndarray):
            return v.dtype.kind in "fc"
        return isinstance(v, (list, tuple)) and any(floats(x) for x in v)
    return any(floats(v) for i, v in enumerate(sample.args)
               if op.differentiable_args is None or i in op.differentiable_args)


def _gradcheck_cases():
    for op in OP_DB:
        if op.gradcheck and op.grad and "float64" in op.dtypes:
            for i, s in enumerate(op.samples()):
                if _has_float_input(op, s):
                    yield pytest.param(op, s, id=f"{op.name}-{s.name or i}")


@pytest.mark.parametrize("op,sample", list(_gradcheck_cases()))
def test_gradcheck(op, sample):
    args, kwargs = _build(tapelab, op, sample, "float64", True)
    assert _leaves(args), f"{op.name}: a float sample must give differentiable inputs"

    def fn(*a):
        return op.fn(tapelab, *a, **kwargs)
    assert tapelab.autograd.gradcheck(fn, tuple(args), eps=1e-6, atol=1e-5, rtol=1e-3)
    if op.gradgrad:
        assert tapelab.autograd.gradgradcheck(fn, tuple(args), eps=1e-6, atol=1e-4, rtol=1e-3)


def _error_cases():
    for op in OP_DB:
        for i, e in enumerate(op.errors()):
            yield pytest.param(op, e, id=f"{op.name}-err{i}")


@pytest.mark.parametrize("op,err", list(_error_cases()))
def test_error_inputs_match_torch(op, err):
    t_args, t_kw = _build(torch, op, err.sample, "float32", False)
    with pytest.raises(err.exc):
        op.fn(torch, *t_args, **t_kw)
    l_args, l_kw = _build(tapelab, op, err.sample, "float32", False)
    with pytest.raises(err.exc, match=err.match):
        op.fn(tapelab, *l_args, **l_kw)


# ---------------------------------------------------------------- devices (issue 9)
DEVICES = [
    pytest.param("meta", id="meta"),
    pytest.param("sim", id="cuda_simulated"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
        not tapelab.cuda.is_available(), reason=f"needs a CUDA GPU: {tapelab.cuda.unavailable_reason()}")),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,sample,dtype", CASES)
def test_on_device_matches_cpu(op, sample, dtype, device):
    if device == "sim":
        with simulated_cuda(0) as dev:
            run_case(op, sample, dtype, dev)
        return
    dev = tapelab.device(device)
    expected = (sample.meta_error or op.meta_error) if device == "meta" else None
    if expected is None:
        run_case(op, sample, dtype, dev)
        return
    with pytest.raises(expected, match="[Mm]eta"):
        run_case(op, sample, dtype, dev)


# Error inputs PyTorch's meta kernels accept (they skip a dtype or empty-reduction check its cpu
# kernels make) and tapelab refuses on meta as on cpu: named here, so any other case where torch
# accepts on meta must be accepted by tapelab too.
STRICTER_ON_META = {
    "index_select-err1": "float index: dtype check", "matmul_int-err0": "mixed dtypes",
    "max-err0": "empty reduction", "max-err1": "empty reduction", "min-err0": "empty reduction",
    "min-err1": "empty reduction", "var-err0": "integer dtype", "sort-err0": "dim out of range",
    "argsort-err0": "dim out of range", "median-err0": "empty reduction",
    "nn.smooth_l1_loss-err0": "negative beta: an argument check (torch's is in its cpu kernel)",
}


@pytest.mark.parametrize("op,err", list(_error_cases()))
def test_error_inputs_on_meta_match_torch(op, err, request):
    """PyTorch's meta kernels check shapes, dtypes and arguments, not values: where torch raises
    on meta, tapelab raises the same type; where it does not, neither does tapelab."""
    t_args, t_kw = _build(OnDevice("meta", torch), op, err.sample, "float32", False)
    l_args, l_kw = _build(OnDevice("meta"), op, err.sample, "float32", False)
    try:
        op.fn(torch, *t_args, **t_kw)
    except Exception as e:  # noqa: BLE001 - its type is the expectation
        torch_error = type(e)
    else:
        torch_error = None
    if torch_error is None:          # a value check (meta has no values): tapelab does not raise either
        if request.node.callspec.id in STRICTER_ON_META:
            with pytest.raises(err.exc):
                op.fn(tapelab, *l_args, **l_kw)
        else:
            op.fn(tapelab, *l_args, **l_kw)
        return
    if err.sample.noncontig and op.name == "view":
        pytest.skip("a tapelab meta tensor has no memory layout (engine/_meta.py): view() cannot fail on strides")
    with pytest.raises((err.exc, torch_error)):   # (torch's meta kernel may raise another class than its cpu one)
        op.fn(tapelab, *l_args, **l_kw)

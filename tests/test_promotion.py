"""Type promotion against PyTorch: tensors with dims, 0-d tensors and Python numbers, through public ops.

Each case builds the same operands in tapelab and torch and checks the result dtype and values,
or that both libraries refuse the combination.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
# (kind, dtype or value): a tensor with dims, a 0-d tensor, or a Python number
OPERANDS = ([("dim", d) for d in DTYPES] + [("0d", d) for d in DTYPES]
            + [("py", True), ("py", 3), ("py", 2.5)])


def _make(m, kind, spec):
    if kind == "py":
        return spec
    dt = getattr(m, spec)
    if kind == "0d":
        return m.tensor(True if spec == "bool" else 2, dtype=dt)
    return m.tensor([True, True, True] if spec == "bool" else [1, 2, 3], dtype=dt)


def _label(kind, spec) -> str:
    return f"{kind}:{spec}"


BINARY = {
    "add": lambda m, a, b: m.add(a, b) if _is_tensor(a) else a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "floordiv": lambda m, a, b: a // b,
    "mod": lambda m, a, b: a % b,
    "pow": lambda m, a, b: a ** b,
    "eq": lambda m, a, b: a == b,
    "lt": lambda m, a, b: a < b,
    "bitwise_and": lambda m, a, b: a & b,
    "where": lambda m, a, b: m.where(m.tensor([True, False, True]), a, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b),
    "clamp": lambda m, a, b: m.clamp(a, min=b) if _is_tensor(a) else m.clamp(b, max=a),
}
TENSORS_ONLY = {"atan2", "maximum"}  # torch refuses Python numbers here; tapelab may accept them


def _is_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, tapelab.Tensor))


def _run(fn, m, a, b):
    try:
        return fn(m, _make(m, *a), _make(m, *b)), None
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return None, e


def _check_pair(name, a, b) -> str | None:
    fn = BINARY[name]
    want, t_err = _run(fn, torch, a, b)
    got, l_err = _run(fn, tapelab, a, b)
    pair = f"{name}({_label(*a)}, {_label(*b)})"
    if t_err is not None:
        base = RuntimeError if isinstance(t_err, RuntimeError) else type(t_err)
        if l_err is None:
            return f"{pair}: torch raised {type(t_err).__name__}, tapelab returned {got.dtype}"
        if not isinstance(l_err, (base, TypeError, RuntimeError)):
            return f"{pair}: torch raised {type(t_err).__name__}, tapelab {type(l_err).__name__}: {l_err}"
        return None
    if l_err is not None:
        return f"{pair}: tapelab raised {type(l_err).__name__}: {l_err}; torch gives {want.dtype}"
    if str(got.dtype).split(".")[-1] != str(want.dtype).split(".")[-1]:
        return f"{pair}: tapelab {got.dtype}, torch {want.dtype}"
    if tuple(got.shape) != tuple(want.shape):
        return f"{pair}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    rtol = 1e-3 if "float16" in (a[1], b[1]) else 1e-6  # float16 results may round differently
    if not np.allclose(np.asarray(got).astype(np.float64), want.numpy().astype(np.float64), rtol=rtol,
                       equal_nan=True):
        return f"{pair}: values {np.asarray(got)} vs {want.numpy()}"
    return None


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("lhs", OPERANDS, ids=lambda o: _label(*o))
def test_binary_promotion_matches_torch(name, lhs):
    problems = []
    for rhs in OPERANDS:
        if lhs[0] == "py" and rhs[0] == "py":
            continue
        if name in TENSORS_ONLY and "py" in (lhs[0], rhs[0]):
            continue
        p = _check_pair(name, lhs, rhs)
        if p:
            problems.append(p)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("a,b", [(a, b) for a in OPERANDS for b in OPERANDS if not (a[0] == b[0] == "py")],
                         ids=lambda o: _label(*o))
def test_result_type_matches_torch(a, b):
    got = tapelab.result_type(_make(tapelab, *a), _make(tapelab, *b))
    want = torch.result_type(_make(torch, *a), _make(torch, *b))
    assert got.name == str(want).split(".")[-1]


@pytest.mark.parametrize("expr,dtype", [
    (lambda m: m.tensor([1, 2]) * 0.5, "float32"),
    (lambda m: m.tensor([1.0, 2.0]) + m.tensor(1.0, dtype=m.float64), "float32"),
    (lambda m: m.tensor([1], dtype=m.int32) + m.tensor([1]), "int64"),
    (lambda m: m.tensor([1], dtype=m.int32) + m.tensor(1), "int32"),
    (lambda m: m.tensor([1], dtype=m.uint8) + m.tensor([1], dtype=m.int8), "int16"),
    (lambda m: m.tensor([True]) + m.tensor([True]), "bool"),
    (lambda m: m.tensor([True]) + 1, "int64"),
    (lambda m: m.tensor([True]) * 1.5, "float32"),
    (lambda m: m.tensor([3]) / m.tensor([2]), "float32"),
    (lambda m: m.tensor([3], dtype=m.int8) / 2, "float32"),
    (lambda m: m.tensor([1.0], dtype=m.float16) + 2.5, "float16"),
    (lambda m: m.tensor([1.0], dtype=m.float16) + m.tensor(1.0), "float16"),
    (lambda m: m.tensor([1.0], dtype=m.float16) + m.tensor([1]), "float16"),
    (lambda m: m.tensor([1.0], dtype=m.float16) * m.tensor([1.0]), "float32"),
    (lambda m: m.tensor(1.0, dtype=m.float16) * m.tensor([1]), "float16"),
    (lambda m: m.tensor([1]) + m.tensor(1.5, dtype=m.float64), "float64"),
    (lambda m: m.tensor(1, dtype=m.int8) + m.tensor(1.5, dtype=m.float16), "float16"),
    (lambda m: m.tensor([1, 2]) < m.tensor(1.5, dtype=m.float64), "bool"),
    (lambda m: m.tensor([1, 2], dtype=m.uint8) == m.tensor([1.0, 2.5], dtype=m.float16), "bool"),
    (lambda m: m.exp(m.tensor([1, 2])), "float32"),
    (lambda m: m.sqrt(m.tensor([True])), "float32"),
    (lambda m: m.abs(m.tensor([-1], dtype=m.int16)), "int16"),
    (lambda m: m.floor(m.tensor([3])), "int64"),
    (lambda m: m.square(m.tensor([True])), "int64"),
    (lambda m: m.pow(2, m.tensor([1, 2], dtype=m.int32)), "int32"),
    (lambda m: m.pow(2.0, m.tensor([1, 2], dtype=m.int32)), "float32"),
    (lambda m: m.where(m.tensor([True]), 1.0, 0), "float32"),
    (lambda m: m.where(m.tensor([True]), m.tensor([1], dtype=m.int32), 0.5), "float32"),
    (lambda m: m.clamp(m.tensor([1, 5]), min=m.tensor(1.5)), "float32"),
    (lambda m: m.xlogy(m.tensor([1, 2]), m.tensor([1, 2])), "float32"),
    (lambda m: m.div(m.tensor([7, -7]), 2, rounding_mode="floor"), "int64"),
    (lambda m: m.div(m.tensor([7, -7]), 2.0, rounding_mode="trunc"), "float32"),
    (lambda m: m.tensor([6], dtype=m.int16) & m.tensor([3], dtype=m.int32), "int32"),
    (lambda m: m.tensor([1, 2]).float() // m.tensor(2, dtype=m.float64), "float32"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_named_promotions(expr, dtype):
    want = expr(torch)
    got = expr(tapelab)
    assert str(want.dtype) == f"torch.{dtype}", "the expectation itself is wrong"
    assert got.dtype.name == dtype
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want.numpy().astype(np.float64))


def test_default_dtype_governs_int_with_python_float():
    tapelab.set_default_dtype(tapelab.float64)
    torch.set_default_dtype(torch.float64)
    try:
        assert (tapelab.tensor([1, 2]) * 0.5).dtype is tapelab.float64
        assert (torch.tensor([1, 2]) * 0.5).dtype is torch.float64
        assert (tapelab.tensor([1, 2]) / tapelab.tensor([2, 2])).dtype is tapelab.float64
        assert (tapelab.tensor([1.0], dtype=tapelab.float32) * 0.5).dtype is tapelab.float32
    finally:
        tapelab.set_default_dtype(tapelab.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("target,other,method", [
    ("int64", 0.5, "add_"), ("int32", 2.5, "mul_"), ("int64", "float32", "sub_"), ("bool", 2, "add_"),
    ("int64", 2, "div_"), ("int16", "float16", "clamp_min_"),
])
def test_inplace_refuses_narrowing_category(target, other, method):
    """An in-place op cannot store a float result into an integer tensor (or an int into bool)."""
    def run(m):
        t = m.tensor([1, 2], dtype=getattr(m, target))
        o = m.tensor([1, 2], dtype=getattr(m, other)) if isinstance(other, str) else other
        return getattr(t, method)(o)
    with pytest.raises(RuntimeError):
        run(torch)
    with pytest.raises(RuntimeError, match="can't be cast"):
        run(tapelab)


@pytest.mark.parametrize("target,other", [("float32", "float64"), ("float16", "float32"), ("int32", "int64"),
                                          ("int8", "int64"), ("float32", "int64"), ("uint8", "bool")])
@pytest.mark.parametrize("other_kind", ["dim", "0d"])
def test_inplace_keeps_the_target_dtype(target, other, other_kind):
    def run(m):
        t = m.tensor([1, 2, 3], dtype=getattr(m, target))
        o = _make(m, other_kind, other)
        t += o
        t.mul_(o)
        return t
    want, got = run(torch), run(tapelab)
    assert got.dtype.name == str(want.dtype).split(".")[-1] == target
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), want.numpy().astype(np.float64))


def test_promoted_gradients_have_the_input_dtype():
    a = tapelab.tensor([1.0, 2.0], dtype=tapelab.float32, requires_grad=True)
    b = tapelab.tensor([3.0, 4.0], dtype=tapelab.float64, requires_grad=True)
    out = a * b
    assert out.dtype is tapelab.float64
    out.sum().backward()
    assert a.grad.dtype is tapelab.float32 and b.grad.dtype is tapelab.float64
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 2.0])


# Python ints outside an integer tensor's range wrap, and numpy float64 scalars act like Python floats
# (weak), as in PyTorch. Comparisons are the exception: numpy compares the true values (uint8 < -1 is
# False), PyTorch wraps -1 to 255 first; tapelab keeps numpy's mathematically correct answer.
@pytest.mark.parametrize("expr", [lambda m: m.tensor([1, 2], dtype=m.uint8) + -1,
                                  lambda m: m.tensor([1, 2], dtype=m.int8) * 1000,
                                  pytest.param(lambda m: m.tensor([1, 2], dtype=m.uint8) < -1,
                                               marks=pytest.mark.xfail(strict=True, reason="kept numpy's "
                                                                       "exact comparison"))])
def test_out_of_range_python_int_wraps(expr):
    want, got = expr(torch), expr(tapelab)
    np.testing.assert_array_equal(np.asarray(got), want.numpy())


def test_numpy_float64_scalar_is_weak():
    assert (tapelab.tensor([1.0, 2.0]) * np.float64(2.0)).dtype is tapelab.float32

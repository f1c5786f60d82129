"""__setitem__ and in-place indexing: values, autograd through writes, version counters, views.

PyTorch is the oracle: each scenario runs the same code on torch and tapelab and compares.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))


def _both(fn):
    """Run ``fn(m)`` with m = torch and m = tapelab; return both results as numpy."""
    return [np.asarray(r.detach()) if hasattr(r, "detach") else r for r in (fn(torch), fn(tapelab))]


def _close(fn):
    want, got = _both(fn)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


KEYS = {
    "int": lambda m: 1,
    "slice": lambda m: (slice(1, 3), slice(None, None, 2)),
    "ellipsis": lambda m: (Ellipsis, 2),
    "int_tensor": lambda m: m.tensor([3, 0]),
    "mask": lambda m: m.tensor(X > 0),
    "mixed": lambda m: (m.tensor([0, 2]), slice(1, 4)),
    "int_then_adv": lambda m: (1, m.tensor([0, 4])),
}


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["number", "tensor0d", "broadcast_row"])
def test_setitem_values(key, value):
    def run(m):
        x = m.tensor(X.copy())
        region = x[KEYS[key](m)]
        if value == "number":
            v = 7.5
        elif value == "tensor0d":
            v = m.tensor(-2.0, dtype=m.float64)
        else:
            v = m.arange(region.shape[-1] if region.ndim else 1, dtype=m.float64).reshape(-1) if region.ndim else 3.0
        x[KEYS[key](m)] = v
        return x
    _close(run)


def test_setitem_casts_value_to_target_dtype():
    def run(m):
        x = m.zeros(2, 3, dtype=m.int64)
        x[0] = m.tensor([1.5, 2.7, -3.2])
        x[1, 1] = 9.9
        return x
    want, got = _both(run)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64


def test_setitem_shape_mismatch_raises():
    for m in (torch, tapelab):
        x = m.zeros(2, 3)
        with pytest.raises(RuntimeError):
            x[0] = m.ones(2)


def test_setitem_bumps_version_and_views_share_it():
    for m in (torch, tapelab):
        x = m.zeros(3, 4)
        row = x[1]
        v0 = x._version
        x[0, 0] = 1.0
        assert x._version == v0 + 1
        assert row._version == x._version
        row[2] = 5.0                      # write through a view: the base sees value and version
        assert x[1, 2].item() == 5.0
        assert x._version == v0 + 2
        x[m.tensor([0, 2])] = 2.0         # advanced write bumps too
        assert x._version == v0 + 3


def _grads(fn):
    """fn(m, a, v) builds a loss; returns (grad a, grad v) for torch and tapelab."""
    out = []
    for m in (torch, tapelab):
        a = m.tensor(X.copy(), requires_grad=True)
        v = m.tensor([1.0, -2.0, 3.0], dtype=m.float64, requires_grad=True)
        loss = fn(m, a, v)
        loss.backward()
        out.append((np.asarray(a.grad), np.asarray(v.grad)))
    return out


@pytest.mark.parametrize("key", ["slice", "adv", "mask_rows"])
def test_gradient_flows_to_target_and_value(key):
    keys = {"slice": lambda m: (slice(0, 3), 1), "adv": lambda m: (m.tensor([3, 0, 1]), 2),
            "mask_rows": lambda m: (m.tensor([True, False, True, True]), 4)}

    def fn(m, a, v):
        y = a * 2.0
        y[keys[key](m)] = v * v
        w = m.tensor(np.arange(20.0).reshape(4, 5))
        return (y * w).sum()
    (ta, tv), (la, lv) = _grads(fn)
    np.testing.assert_allclose(la, ta)
    np.testing.assert_allclose(lv, tv)


def test_augmented_assignment_through_index():
    def fn(m, a, v):
        y = a * 1.0
        y[1:4, 0] += v
        y[m.tensor([0, 0, 2]), 1] *= 3.0
        return (y ** 2).sum()
    (ta, tv), (la, lv) = _grads(fn)
    np.testing.assert_allclose(la, ta)
    np.testing.assert_allclose(lv, tv)


def test_setitem_on_leaf_requiring_grad_raises():
    for m in (torch, tapelab):
        a = m.zeros(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            a[0] = 1.0
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            a[m.tensor([0, 1])] = 1.0
        with m.no_grad():
            a[1] = 4.0
        assert a[1].item() == 4.0 and a.grad_fn is None


def test_setitem_value_requiring_grad_into_plain_tensor():
    for m in (torch, tapelab):
        v = m.tensor([1.0, 2.0], requires_grad=True)
        buf = m.zeros(2, 3)
        buf[:, 1] = v
        assert buf.requires_grad and buf.grad_fn is not None
        (buf * 3).sum().backward()
        np.testing.assert_allclose(np.asarray(v.grad), [3.0, 3.0])


def test_setitem_double_backward():
    def run(m):
        a = m.tensor([1.0, 2.0, 3.0], dtype=m.float64, requires_grad=True)
        y = m.zeros(2, 3, dtype=m.float64)
        y[1] = a ** 3
        (g,) = m.autograd.grad(y.sum(), a, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), a)
        return gg
    _close(run)


def test_setitem_saved_value_modified_is_detected():
    for m in (torch, tapelab):
        a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = a.exp()
        y[0] = 0.0          # exp saved its output: modifying it must fail at backward
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_index_put_accumulate_with_duplicates():
    def run(m):
        x = m.zeros(5, dtype=m.float64)
        x.index_put_((m.tensor([0, 1, 1, 4, 1]),), m.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=m.float64),
                     accumulate=True)
        return x
    _close(run)


def test_index_put_dtype_mismatch_raises():
    for m in (torch, tapelab):
        with pytest.raises(RuntimeError, match="dtypes match"):
            m.zeros(3).index_put_((m.tensor([0]),), m.ones(1, dtype=m.float64))


@pytest.mark.parametrize("name", ["masked_fill_", "index_fill_", "index_add_", "index_copy_", "scatter_", "scatter_add_"])
def test_inplace_index_ops_match_torch_and_bump_version(name):
    calls = {
        "masked_fill_": lambda m, x: x.masked_fill_(m.tensor(X > 0), -1.0),
        "index_fill_": lambda m, x: x.index_fill_(1, m.tensor([0, 3]), 2.0),
        "index_add_": lambda m, x: x.index_add_(0, m.tensor([1, 1]), m.ones(2, 5, dtype=m.float64)),
        "index_copy_": lambda m, x: x.index_copy_(0, m.tensor([3, 0]), m.ones(2, 5, dtype=m.float64)),
        "scatter_": lambda m, x: x.scatter_(1, m.tensor([[0, 4], [1, 1]]), m.ones(2, 2, dtype=m.float64)),
        "scatter_add_": lambda m, x: x.scatter_add_(0, m.tensor([[0, 0, 3]]), m.ones(1, 3, dtype=m.float64)),
    }

    def run(m):
        x = m.tensor(X.copy())
        v = x._version
        assert calls[name](m, x) is x
        assert x._version > v
        return x
    _close(run)


def test_inplace_index_op_gradient():
    def fn(m, a, v):
        y = a * 1.0
        y.index_add_(1, m.tensor([4, 0, 4]), v.expand(4, 3))
        y.masked_fill_(m.tensor(X > 1.0), 0.0)
        return (y * y).sum()
    (ta, tv), (la, lv) = _grads(fn)
    np.testing.assert_allclose(la, ta)
    np.testing.assert_allclose(lv, tv)


def test_slice_backward_writes_a_slice_and_masks_assign():
    """Basic slicing's backward is zeros plus a slice write; only integer indices scatter-add."""
    a = tapelab.tensor(X.copy(), requires_grad=True)
    y = (a[1:3, ::2] * 2).sum() + a[0].sum() + a[..., 1].sum() + a[a > 0].sum() + a[tapelab.tensor([0, 0])].sum()
    seen = []
    with tapelab.events.subscribe("op", lambda e: seen.append(e.op)):
        y.backward()
    assert seen.count("slice_backward") == 3
    assert seen.count("index_backward") == 2
    unique = sorted(n.params["unique"] for n in _nodes(y) if n.name() == "IndexBackward0")
    assert unique == [False, True]
    want = np.zeros_like(X)
    want[1:3, ::2] += 2
    want[0] += 1
    want[:, 1] += 1
    want += X > 0
    want[0] += 2
    np.testing.assert_allclose(np.asarray(a.grad), want)


def _nodes(t):
    out, stack = [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in out:
            continue
        out.append(n)
        stack.extend(e[0] for e in n.edges if e is not None)
    return out

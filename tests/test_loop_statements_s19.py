"""Statements a training or inference loop runs many times, against torch: the in-place updates
made outside autograd (``zero_``/``fill_`` of gradients and buffers, a model-EMA ``lerp_``) write
straight into the tensor's memory with torch's values, version counters and errors (under a tape, a
view or grad mode they keep the general path); recorded in-place adds; a beam search's
``index_select`` refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _both(fn):
    return fn(torch), fn(tapelab)


def test_zero_and_fill_write_in_place_with_torchs_values_and_versions():
    def run(lib):
        t = lib.arange(12, dtype=lib.float32).reshape(3, 4)
        ptr = t.data_ptr()
        v0 = t._version
        t.zero_()
        t.fill_(2.5)
        i = lib.arange(5)
        i.zero_()
        i.fill_(7)            # a nonzero number into an integer tensor: the general path
        h = lib.ones(3, dtype=lib.float16).fill_(1 / 3)
        b = lib.ones(2, dtype=lib.bool).zero_()
        return t.tolist(), t.data_ptr() == ptr, t._version - v0, i.tolist(), h.tolist(), b.tolist()
    assert run(torch) == run(tapelab)


def test_fill_keeps_torchs_errors_and_graph_rules():
    for lib in (torch, tapelab):
        leaf = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            leaf.zero_()
        with lib.no_grad():
            leaf.zero_()           # allowed outside grad mode, as torch's
        assert leaf.tolist() == [0.0, 0.0, 0.0]
        base = lib.ones(4, requires_grad=True) * 2
        base[:2].zero_()           # a view of a graph: recorded, gradient zero there
        assert base.tolist() == [0.0, 0.0, 2.0, 2.0]
        assert base.grad_fn is not None


def test_ema_lerp_in_place_equals_torch_bit_for_bit_and_is_seen_by_a_tape():
    rng = np.random.default_rng(0)
    ema, p = rng.standard_normal((2, 1000)).astype(np.float32)
    out = {}
    for lib in (torch, tapelab):
        e, q = lib.tensor(ema), lib.tensor(p)
        with lib.no_grad():
            for w in (0.001, 0.7, 0.5):
                e.lerp_(q, w)
            lib._foreach_lerp_([e], [q], 0.01)
        out[lib] = e.numpy()
    np.testing.assert_array_equal(out[tapelab].view(np.int32), out[torch].view(np.int32))
    e, q = tapelab.tensor(ema), tapelab.tensor(p)
    with tapelab.tape() as tp, tapelab.no_grad():
        e.lerp_(q, 0.1)
        e.zero_()
    assert [n.op for n in tp.nodes] == ["lerp", "fill"]


def test_recorded_in_place_adds_and_scales_write_straight_in_with_torchs_gradients_and_version_checks():
    """``out += identity``, ``h *= 0.5``, ``h -= b``: nodes that keep no value of the target, so the
    ufunc writes into it; gradients, versions and the saved-tensor error stay torch's."""
    rng = np.random.default_rng(4)
    xa, ra, ba = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (4, 6), (6,)))

    def run(lib):
        x, r, b = (lib.tensor(a, requires_grad=True) for a in (xa, ra, ba))
        out = x * 2
        ptr, v0 = out.data_ptr(), out._version
        out += r
        out *= 0.5
        out -= b
        out.add_(1)
        (out * out).sum().backward()
        return (out.detach().numpy(), x.grad.numpy(), r.grad.numpy(), b.grad.numpy(), out.data_ptr() == ptr,
                out._version - v0, type(out.grad_fn).__name__ if lib is torch else out.grad_fn.name())
    want, got = run(torch), run(tapelab)
    for w, g in zip(want[:4], got[:4]):
        np.testing.assert_array_equal(g, w)
    assert want[4:] == got[4:]
    for lib in (torch, tapelab):
        y = lib.tensor(xa, requires_grad=True) * 2
        z = y * y                  # saves y
        y += 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_index_select_refuses_out_of_range_and_negative_indices_as_torch():
    """A beam search's ``index_select``: a negative index wrapped silently (numpy's indexing) where
    torch refuses it; along dim 1 torch 2.13 raises its gather kernel's RuntimeError naming the index."""
    def refusal(f):
        try:
            f()
        except Exception as e:  # noqa: BLE001 - the exception itself is compared
            return type(e).__name__, str(e)
        return None
    for shape, dim, idx in (((4,), 0, [-1]), ((4, 5), 1, [1, -3]), ((4, 5), 1, [2, 7, 9]), ((2, 4, 5), 1, [1, 9]),
                            ((2, 4, 5, 3), 2, [1, 9]), ((4, 5), 0, [4])):
        want = refusal(lambda: torch.zeros(shape).index_select(dim, torch.tensor(idx)))
        assert want is not None and refusal(lambda: tapelab.zeros(shape).index_select(dim, tapelab.tensor(idx))) == want
    got = tapelab.arange(20.).reshape(4, 5).index_select(1, tapelab.tensor([4, 0]))
    assert got.tolist() == torch.arange(20.).reshape(4, 5).index_select(1, torch.tensor([4, 0])).tolist()

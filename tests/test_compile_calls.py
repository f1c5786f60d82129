"""A compiled function's steady-state call: the fused op's own dispatch path (``FusedOp.fast``), the
backward applied as one kernel, what the forward saves; and ``mode="reduce-overhead"`` (the compiled
step captured after warm-up and replayed). Values and gradients against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.compiler import fused

RTOL, ATOL = 1e-5, 1e-6


def _chain(m, x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _pair(shape=(16,), grads=(True, True), seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    ours = [tapelab.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    theirs = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    return ours, theirs


def _check(got, want, ours, theirs):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)
    for a, b in zip(ours, theirs):
        if b.grad is None:
            assert a.grad is None
        else:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=RTOL, atol=ATOL)


def _fused_op(compiled):
    (entry,) = compiled.cache.values()
    (op,) = entry.graph.fused_ops
    return op


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
def test_a_steady_call_takes_the_fused_ops_own_path(monkeypatch, grads):
    """After the tracing call, the forward and the one-kernel backward go through ``FusedOp.fast``,
    never the dispatcher's general ``eager``; each input's gradient is its own kernel output (None
    where not wanted), equal to PyTorch's."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    ours, theirs = _pair(grads=grads)
    c(*ours)
    calls = []
    real = fused.eager
    monkeypatch.setattr(fused, "eager", lambda *a: calls.append(a[0]) or real(*a))
    for _ in range(3):
        for t in ours:
            t.grad = None
        got = c(*ours)
        got.backward()
    assert calls == []
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)


def test_a_fused_sum_saves_nothing_its_backward_does_not_read():
    """The fused ``sum`` kernel's backward recomputes the group from the inputs and reads the 0-d
    gradient, not the forward's result, so the forward keeps no output for it (the backward graph's
    input guard once counted as a reader of that output)."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    ours, theirs = _pair()
    c(*ours)
    got = c(*ours)
    op = _fused_op(c)
    assert op.save_output is False and got.grad_fn.out_data is None
    got.backward()
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)


def test_operands_the_fast_path_does_not_take_run_through_eager(monkeypatch):
    """A float64 operand (the kernel reads float32) reaches the kernel through ``eager``, which casts
    it; a strided view takes the fast path, whose loop reads a contiguous copy: both give the float32
    contiguous call's value."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    (x, w), _ = _pair()
    c(x, w)
    c(x, w)
    op = _fused_op(c)
    apply = tapelab.core.dispatch.apply
    want = apply(op, x, w).item()
    calls = []
    real = fused.eager
    monkeypatch.setattr(fused, "eager", lambda *a: calls.append(a[1][0].dtype) or real(*a))
    wide = tapelab.tensor(np.stack([x.detach().numpy(), np.zeros(16, np.float32)], 1)).reshape(-1)
    assert apply(op, wide[::2], w).item() == want and calls == []
    assert apply(op, x.double(), w).item() == pytest.approx(want, rel=RTOL) and calls == [tapelab.float64]

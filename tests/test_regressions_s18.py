"""Regressions that session 18's sweep over earlier sessions' program drivers found (a program whose
tapelab output had matched PyTorch's and no longer did), each against PyTorch itself."""
import pytest
import torch

import tapelab


def _cases(m):
    p = m.arange(1., 25.).reshape(2, 3, 4).permute(2, 0, 1)      # strides (1, 12, 4)
    t = m.arange(15.).reshape(5, 3).t()                           # strides (1, 3)
    tall = m.arange(600.).reshape(3, 200).t()                     # topk's heap path (k * 64 <= n)
    return {
        "sort": lambda: p.sort(1), "sort_desc": lambda: p.sort(1, descending=True),
        "sort_stable": lambda: p.sort(dim=1, stable=True), "sort_last": lambda: p.sort(-1),
        "argsort": lambda: (p.argsort(1),), "msort": lambda: (p.msort(),), "sort_t": lambda: t.sort(1),
        "topk": lambda: p.topk(2, 1), "topk_unsorted": lambda: p.topk(2, 1, sorted=False),
        "topk_smallest": lambda: p.topk(2, 0, largest=False), "topk_heap": lambda: tall.topk(2, 0),
        "topk_t0": lambda: t.topk(2, 0), "kthvalue": lambda: p.kthvalue(1, 1),
        "kthvalue_keepdim": lambda: p.kthvalue(2, 1, keepdim=True), "median": lambda: p.median(1),
    }


@pytest.mark.parametrize("case", list(_cases(torch)))
def test_sort_and_topk_results_are_laid_out_as_pytorchs(case):
    """sort/argsort give their results the input's layout (ATen's empty_like of a permuted input keeps its
    strides), topk and kthvalue contiguous ones. The libstdc++-order loops (session 17) sort rows along the
    last axis and handed back a moved-axis view: a permuted input's topk had strides (6, 1, 2) where
    PyTorch's are (6, 3, 1) (s16k/sumlay2.py had printed PyTorch's)."""
    want = [(tuple(r.shape), r.stride(), r.tolist()) for r in _cases(torch)[case]()]
    got = [(tuple(r.shape), r.stride(), r.tolist()) for r in _cases(tapelab)[case]()]
    assert got == want


def _nograd_view_leaves(m):
    """A reversible block's backward (linear_attention_transformer, revtorch): inside a custom Function's
    backward (no_grad mode) it chunks the saved output, sets ``requires_grad = True`` on a chunk and runs a
    nested backward through the recomputed layer, then reads the chunk's ``.grad``."""
    class Rev(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.y = (x * 3).detach()
            return x * 3

        @staticmethod
        def backward(ctx, dy):
            y1, _ = m.chunk(ctx.y, 2, dim=1)
            dy1, dy2 = m.chunk(dy, 2, dim=1)
            with m.enable_grad():
                y1.requires_grad = True
                m.autograd.backward((y1 * y1).sin(), dy2)
            return m.cat([dy1 + y1.grad, dy2], 1)

    x = m.arange(8.).reshape(2, 4).requires_grad_()
    (Rev.apply(x) * m.arange(8.).reshape(2, 4)).sum().backward()
    out = [x.grad.tolist()]
    y = m.arange(8.).reshape(2, 4)
    a = m.arange(3.).requires_grad_()
    for mk in (lambda: m.chunk(y, 2, dim=1)[0], lambda: y[:, :2], lambda: y.view(8), lambda: y.t(),
               lambda: y.unbind(0)[0], lambda: a[1:], lambda: a.view(3)):
        with m.no_grad():
            v = mk()
        if not v.requires_grad:
            v.requires_grad = True       # a leaf of the program's: its gradient accumulates
        (v * v).sum().backward()         # a view of ``a`` requires grad through its base: it goes nowhere
        out.append((v.is_leaf, v.requires_grad, None if v.grad is None else v.grad.tolist(), a.grad is None))
    return out


def test_a_no_grad_view_given_requires_grad_accumulates_its_grad():
    """A view made in no_grad mode of a tensor that needs no grad, given ``requires_grad = True``, is a leaf
    whose ``.grad`` accumulates, as PyTorch's; only a no_grad view that requires grad through its base
    (its own flag never set) drops its gradient. Session 18 had sent both nowhere, so the reversible
    LinearAttentionTransformerLM's backward failed (``dy1 + y1.grad``: add() got None)."""
    assert _nograd_view_leaves(tapelab) == _nograd_view_leaves(torch)

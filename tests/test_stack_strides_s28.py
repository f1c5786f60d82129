"""Stacked products whose batch dims take two strides (``kernels/blas.py``'s ``_batch_axes``): attention's
heads cut from one projection, ``x.view(b, l, h, d).transpose(1, 2)`` as a GPT block makes them, go to MKL
as they lie (no copy of q, k or v), at one and two threads, with torch's floats; the attention output is
written straight into the layout torch's flash kernel gives it."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import blas
from _mkl_bits import assert_torchs_floats
from _threads import thread_counts

gemm_module = importlib.import_module("tapelab.kernels.gemm")
RNG = np.random.default_rng(28)

pytestmark = pytest.mark.skipif(not blas.available(), reason="MKL is not installed (the [mkl] extra)")


threads = thread_counts([1, 2], ids=["one-thread", "two-threads"])


def _heads(dtype, b=16, length=64, h=4, d=32, parts=3):
    """``parts`` (b, h, length, d) views of one (b, length, parts * h * d) projection, as GPT cuts q, k, v."""
    src = RNG.standard_normal((b, length, parts * h * d)).astype(dtype)
    return [src[..., i * h * d:(i + 1) * h * d].reshape(b, length, h, d).transpose(0, 2, 1, 3) for i in range(parts)]


def _spy(monkeypatch, dtype):
    """Record the operands each stack call (or its ``_parts`` form) receives."""
    seen = []
    ready = blas._calls(np.dtype(dtype))

    def watch(call):
        return lambda *args: seen.append(args) or call(*args)

    monkeypatch.setitem(blas._READY, np.dtype(dtype), ready[:2] + (watch(ready[2]), ready[3], watch(ready[4])))
    return seen


def _torch(a, b):
    return torch.from_numpy(np.ascontiguousarray(a)).matmul(torch.from_numpy(np.ascontiguousarray(b))).numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_heads_cut_from_one_projection_go_to_mkl_uncopied(threads, dtype, monkeypatch):
    q, k = _heads(dtype, parts=2)
    seen = _spy(monkeypatch, dtype)
    got = gemm_module.gemm(np, q, k.swapaxes(-1, -2))
    assert_torchs_floats(got, _torch(q, k.swapaxes(-1, -2)))
    (args,) = seen
    a, b = args[6], args[10]           # the operands as passed: the projection's memory, not copies
    assert a.ctypes.data == q.ctypes.data and b.ctypes.data == k.ctypes.data
    count, inner = args[19], args[20]
    assert (count, inner) == (64, 4)   # batch 16 x heads 4: two axes, the heads the inner one


def test_the_output_may_be_strided_over_two_axes(threads, monkeypatch):
    p = RNG.standard_normal((16, 4, 64, 64)).astype(np.float32)
    (v,) = _heads(np.float32, parts=1)
    out = np.full((16, 64, 4, 32), np.nan, np.float32)
    seen = _spy(monkeypatch, np.float32)
    res = gemm_module.gemm(np, p, v, out=out.transpose(0, 2, 1, 3))
    assert len(seen) == 1 and np.shares_memory(res, out)
    np.testing.assert_array_equal(out.transpose(0, 2, 1, 3), _torch(p, v))


@pytest.mark.parametrize("case", ["three axes", "broadcast", "reversed", "ones"])
def test_other_batch_layouts_keep_torchs_floats(threads, case):
    """More than two axes that do not join (the inputs then copied), a stride-0 broadcast batch, negative
    strides, and dims of length one all give torch's product."""
    if case == "three axes":
        a = RNG.standard_normal((2, 3, 5, 64, 32)).astype(np.float32).transpose(1, 0, 2, 3, 4)
        b = RNG.standard_normal((3, 2, 5, 32, 40)).astype(np.float32)
    elif case == "broadcast":
        a = np.broadcast_to(RNG.standard_normal((1, 64, 32)).astype(np.float32), (8, 64, 32))
        b = RNG.standard_normal((8, 32, 64)).astype(np.float32)
    elif case == "reversed":
        a = RNG.standard_normal((6, 64, 32)).astype(np.float32)[::-1]
        b = RNG.standard_normal((12, 32, 48)).astype(np.float32)[::-2]
    else:
        a = RNG.standard_normal((1, 6, 1, 64, 32)).astype(np.float32)
        b = RNG.standard_normal((1, 6, 1, 32, 64)).astype(np.float32)
    np.testing.assert_array_equal(gemm_module.gemm(np, a, b), _torch(a, b))


def test_gpt_attention_output_layout_values_and_gradients_match_torch(threads):
    """``scaled_dot_product_attention`` on GPT's head views: the output's strides are torch's (so
    ``y.transpose(1, 2).view(b, l, h * d)`` works), values and gradients torch's to float32 rounding."""
    src = RNG.standard_normal((4, 64, 384)).astype(np.float32)
    grad = RNG.standard_normal((4, 64, 128)).astype(np.float32)
    results = []
    for lib in (tapelab, torch):
        x = lib.tensor(src, requires_grad=True)
        q, k, v = (t.view(4, 64, 4, 32).transpose(1, 2) for t in x.split(128, dim=2))
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        strides = y.stride()
        y.transpose(1, 2).view(4, 64, 128).backward(lib.tensor(grad))
        results.append((strides, y.detach().numpy(), x.grad.numpy()))
    (ts, ty, tg), (rs, ry, rg) = results
    assert ts == rs
    np.testing.assert_allclose(ty, ry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tg, rg, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(blas.mkl.threading_layer() != "gnu", reason="MKL is not on GNU OpenMP (PyTorch's layer)")
def test_a_threaded_product_does_not_round_by_where_its_output_lies():
    """MKL's threaded GEMM rounds a 1x512x4096 product by its output's alignment (14-16 outputs differed
    between a 16- and a 64-byte aligned one): outputs made here are 64-byte aligned and a caller's
    output that is not goes through an aligned buffer, so every call gives torch's floats (its
    allocator aligns to 64) and a linear layer's backward is the same from call to call."""
    torch.set_num_threads(2)
    tapelab.set_num_threads(2)
    g = RNG.standard_normal((1, 512)).astype(np.float32)
    w = RNG.standard_normal((512, 4096)).astype(np.float32)
    want = torch.from_numpy(g).mm(torch.from_numpy(w)).numpy()
    for offset in range(0, 64, 4):
        raw = np.empty(4096 + 32, np.float32)
        start = (-raw.ctypes.data // 4) % 16 + offset // 4
        out = raw[start:start + 4096].reshape(1, 4096)
        assert blas.matmul_into(g, w, out, threads=2)
        np.testing.assert_array_equal(out, want)
    assert blas.empty((3, 5), np.float32, 2).ctypes.data % 64 == 0
    x = RNG.standard_normal((1, 4096)).astype(np.float32)
    first = None
    for _ in range(8):
        xs, ws = tapelab.tensor(x, requires_grad=True), tapelab.tensor(w, requires_grad=True)
        tapelab.nn.functional.linear(xs, ws).backward(tapelab.tensor(g))
        first = xs.grad.numpy() if first is None else first
        np.testing.assert_array_equal(xs.grad.numpy(), first)

"""scaled_dot_product_attention's forward as one region of heads (``kernels.gemm.attention``): where MKL
runs both products as stacks of single-threaded calls (float32, no mask or dropout, sizes from
``MKL_MIN``), each head's scores, softmax and ``p v`` run on one thread in turn. The same calls in the
same order per head as the three passes (``_weights`` then ``_attend``), so the same floats bit for bit,
at one thread and at two, in every layout the passes write (GPT's strided heads, contiguous ones,
multi-head attention's); values and gradients torch's within float32 rounding."""
import importlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import blas
from tapelab.nn import _fused_attention as fused

gemm = importlib.import_module("tapelab.kernels.gemm")

needs_mkl = pytest.mark.skipif(not blas.available(), reason="the region runs MKL's products (the [mkl] extra)")


def _gpt_heads(b=16, n=64, h=4, d=32, seed=0):
    qkv = np.random.default_rng(seed).standard_normal((b, n, 3 * h * d)).astype(np.float32)
    return tuple(qkv[..., i * h * d:(i + 1) * h * d].reshape(b, n, h, d).transpose(0, 2, 1, 3) for i in range(3))


def _contiguous_heads():
    return tuple(np.ascontiguousarray(x) for x in _gpt_heads(seed=1))


def _mha_heads():
    x = np.random.default_rng(2).standard_normal((64, 16, 3, 4, 32)).astype(np.float32)   # (length, batch, qkv, heads, dim)
    return tuple(x[:, :, i].reshape(64, 16 * 4, 32).transpose(1, 0, 2) for i in range(3))


def _other_lengths():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((8, 6, 64, 64)).astype(np.float32), rng.standard_normal((8, 6, 48, 64)).astype(np.float32),
            rng.standard_normal((8, 6, 48, 16)).astype(np.float32))


LAYOUTS = {"gpt": _gpt_heads, "contiguous": _contiguous_heads, "mha": _mha_heads, "S!=L, dv!=d": _other_lengths}


@needs_mkl
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_region_is_the_three_passes_bit_for_bit(layout, causal, threads):
    tapelab.set_num_threads(threads)
    q, k, v = LAYOUTS[layout]()
    scale = 1 / np.sqrt(q.shape[-1])
    region = fused._fused(np, q, k, v, scale=scale, causal=causal, masked="", dropped=False)
    assert region is not None, "the region did not take a product MKL runs"
    p = fused._weights(np, q, k, None, scale=scale, causal=causal, masked="")
    out = fused._attend(np, q, p, v, False)
    np.testing.assert_array_equal(region[1], p)
    np.testing.assert_array_equal(region[0], out)
    assert region[0].strides == out.strides


@needs_mkl
def test_region_leaves_what_it_does_not_take():
    """Below ``MKL_MIN``, with broadcast batches, or with an output that overlaps an input: None, nothing written."""
    q, k, v = (x[:1, :1, :8] for x in _gpt_heads())
    out = np.zeros(q.shape[:-1] + v.shape[-1:], np.float32)
    assert gemm.attention(np, q, k, v, 0.5, False, out) is None
    q, k, v = _contiguous_heads()
    out = np.zeros_like(q)
    assert gemm.attention(np, q, k[:1], v[:1], 0.5, False, out) is None
    assert gemm.attention(np, q, k, v, 0.5, False, q) is None
    assert not out.any()


@needs_mkl
@pytest.mark.parametrize("threads", [1, 2])
def test_gpt_attention_values_and_gradients_are_torch(threads):
    """The step's attention (GPT's heads cut from one projection, causal) through the public call."""
    qkv = np.random.default_rng(4).standard_normal((16, 64, 384)).astype(np.float32)
    g = np.random.default_rng(5).standard_normal((16, 4, 64, 32)).astype(np.float32)
    res = []
    for lib in (tapelab, torch):
        lib.set_num_threads(threads)
        x = lib.tensor(qkv, requires_grad=True)
        q, k, v = (z.view(16, 64, 4, 32).transpose(1, 2) for z in x.split(128, dim=2))
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y.backward(lib.tensor(g))
        res.append((y.detach().numpy().copy(), tuple(y.stride()), x.grad.numpy().copy()))
    (y, stride, gx), (ty, tstride, tgx) = res
    assert stride == tstride
    np.testing.assert_allclose(y, ty, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(gx, tgx, rtol=2e-5, atol=2e-5)


def _passes_backward(g, q, k, v, p, scale, as_flash):
    """The backward as separate passes (``kernels.gemm``'s stacked products, the softmax's row loop, numpy's scaling)."""
    from tapelab import kernels
    dv = gemm.gemm(np, np.swapaxes(p, -1, -2), g, out=fused._grad_out(v.shape, v.dtype, as_flash))
    ds = gemm.gemm(np, g, np.swapaxes(v, -1, -2))
    rows = ds.reshape(-1, ds.shape[-1])
    kernels.parallel(kernels.loops("rowwise").softmax_backward, 3, rows, p.reshape(rows.shape), rows)
    dq = gemm.gemm(np, ds, k, out=fused._grad_out(q.shape, q.dtype, as_flash))
    dq *= np.float32(scale)
    dk = gemm.gemm(np, np.swapaxes(ds, -1, -2), q, out=fused._grad_out(k.shape, k.dtype, as_flash))
    dk *= np.float32(scale)
    return dq, dk, dv, ds


@needs_mkl
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_region_is_the_passes_bit_for_bit(layout, causal, threads):
    tapelab.set_num_threads(threads)
    q, k, v = LAYOUTS[layout]()
    scale = 1 / np.sqrt(q.shape[-1])
    g = np.random.default_rng(6).standard_normal(q.shape[:-1] + v.shape[-1:]).astype(np.float32)
    as_flash = fused._grads_as_flash(np, q, k, v, False)
    if as_flash:    # the upstream gradient of GPT's heads: the output's layout
        g = np.ascontiguousarray(g.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    p = fused._weights(np, q, k, None, scale=scale, causal=causal, masked="")
    outs = tuple(np.empty(x.shape, np.float32) for x in (q, k, v))
    assert gemm.attention_grad(np, g, q, k, v, p, *outs) is not None, "the region did not take the products"
    region = fused._bwd_fwd(np, g, q, k, v, p, scale=scale, causal=causal, masked="", dropped=False, saved=True)
    for ours, passes, x in zip(region, _passes_backward(g, q, k, v, p, scale, as_flash), (q, k, v, p)):
        np.testing.assert_array_equal(ours, passes)
        # GPT's heads: the flash layout on both paths; else the region's laid out as its input (session 35)
        assert ours.strides == (passes.strides if as_flash else np.empty_like(x).strides)

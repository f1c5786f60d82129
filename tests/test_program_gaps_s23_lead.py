"""Gaps found in session 23 (lead) running labml's annotated paper implementations (transformers,
normalization, optimizers, GANs, diffusion, RL, capsules, graphs) under tapelab, each pattern written
here directly and checked against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _channels_last(lib, x):
    return x.contiguous(memory_format=torch.channels_last) if lib is torch else \
        x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)


# ---------------------------------------------------------------- cat / stack memory format
# Transformer-XL's relative shift pads an einsum result with a zero column and views the cat as
# (j + 1, i, ...): PyTorch's cat is contiguous there, numpy's concatenate kept the einsum's permuted
# strides and the view raised.
_JOIN_CASES = {
    "einsum_pad": lambda L, t: L.cat([L.einsum("ibhd,jhd->ijbh", t(10, 3, 4, 8), t(26, 4, 8)),
                                      L.zeros(10, 1, 3, 4)], 1),
    "einsum_both": lambda L, t: (lambda b: L.cat([b, b], 1))(L.einsum("ibhd,jhd->ijbh", t(5, 2, 3, 4), t(7, 3, 4))),
    "transposed_dim0": lambda L, t: L.cat([t(3, 4).t(), t(3, 4).t()], 0),
    "transposed_dim1": lambda L, t: L.cat([t(3, 4).t(), t(3, 4).t()], 1),
    "hstack": lambda L, t: L.hstack([t(3, 4).t(), t(3, 4).t()]),
    "vstack": lambda L, t: L.vstack([t(3, 4).t(), t(3, 2).t()]),
    "empty_1d_skipped": lambda L, t: L.cat([L.zeros(0), t(3, 4).t()], 0),
    "ints": lambda L, t: L.cat([L.arange(12).reshape(3, 4).t(), L.arange(12).reshape(3, 4).t()], 1),
    "channels_last_dim0": lambda L, t: L.cat([_channels_last(L, t(2, 3, 4, 5)), _channels_last(L, t(2, 3, 4, 5))], 0),
    "channels_last_dim1": lambda L, t: L.cat([_channels_last(L, t(2, 3, 4, 5)), _channels_last(L, t(2, 3, 4, 5))], 1),
    "channels_last_and_contiguous": lambda L, t: L.cat([_channels_last(L, t(2, 3, 4, 5)), t(2, 3, 4, 5)], 1),
    "one_channel_ambiguous": lambda L, t: L.cat([_channels_last(L, t(2, 1, 4, 5)), _channels_last(L, t(2, 1, 4, 5))], 1),
    "n111_ambiguous": lambda L, t: L.cat([_channels_last(L, t(2, 3, 1, 1)), _channels_last(L, t(2, 3, 1, 1))], 0),
    "channels_last_3d": lambda L, t: L.cat([t(2, 3, 4, 5, 6).permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)] * 2, 2),
    "stack_dim1": lambda L, t: L.stack([t(3, 4).t(), t(3, 4).t()], 1),
    "stack_last": lambda L, t: L.stack([t(3, 4).t(), t(3, 4).t()], 2),
    "stack_permuted_3d": lambda L, t: L.stack([t(2, 3, 4).permute(1, 2, 0)] * 2, 0),
    "stack_3d_end": lambda L, t: L.stack([t(2, 3, 4).permute(2, 0, 1)] * 3, 3),
}


@pytest.mark.parametrize("case", sorted(_JOIN_CASES))
def test_cat_and_stack_strides_as_pytorch(case):
    got = {}
    for lib in (torch, tapelab):
        rng = np.random.default_rng(0)
        y = _JOIN_CASES[case](lib, lambda *s: lib.tensor(rng.standard_normal(s).astype(np.float32)))
        got[lib] = (y.stride(), y.is_contiguous(), y.detach().numpy())
    assert got[tapelab][:2] == got[torch][:2]
    np.testing.assert_allclose(got[tapelab][2], got[torch][2], rtol=1e-6, atol=1e-6)   # einsum sums in its own order


def _relative_shift(lib, x):
    """Transformer-XL's shift of row i by i columns: pad, view as (j + 1, i, ...), drop a row."""
    padded = lib.cat([x, x.new_zeros(x.shape[0], 1, *x.shape[2:])], dim=1)
    padded = padded.view(x.shape[1] + 1, x.shape[0], *x.shape[2:])
    return padded[:-1].view_as(x)


def test_relative_shift_of_an_einsum_as_pytorch():
    out = {}
    for lib in (torch, tapelab):
        rng = np.random.default_rng(1)
        q = lib.tensor(rng.standard_normal((6, 2, 3, 4)).astype(np.float32), requires_grad=True)
        r = lib.tensor(rng.standard_normal((10, 3, 4)).astype(np.float32))
        y = _relative_shift(lib, lib.einsum("ibhd,jhd->ijbh", q, r))
        (y * y).sum().backward()
        out[lib] = (y.detach().numpy(), q.grad.numpy())
    for a, b in zip(out[tapelab], out[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_cat_gradient_of_permuted_inputs_as_pytorch():
    out = {}
    for lib in (torch, tapelab):
        rng = np.random.default_rng(2)
        a = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
        b = lib.tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
        y = lib.cat([a.t(), b.t()], 0)
        (y * lib.arange(y.numel()).reshape(y.shape)).sum().backward()
        out[lib] = (a.grad.numpy(), b.grad.numpy())
    for x, y in zip(out[tapelab], out[torch]):
        np.testing.assert_array_equal(x, y)


def test_group_norm_module_names_its_sizes_as_pytorch():
    for lib in (torch, tapelab):
        with pytest.raises(ValueError, match=r"^num_channels \(8\) must be divisible by num_groups \(32\)$"):
            lib.nn.GroupNorm(32, 8)


# ---------------------------------------------------------------- index_put's shape mismatch
# RWKV's state update writes a (B, T, C) value into state[layer, :, [channel], :]: PyTorch names the
# value's and the indexing result's shapes; tapelab named numpy's arrays or a broadcast of the operands.
_PUT_CASES = {
    "list_after_slice": lambda L, s, v: s.__setitem__((0, slice(None), [1], slice(None)), v(2, 8, 3)),
    "two_positions": lambda L, s, v: s.__setitem__((1, slice(None), [2, 3], slice(None)), v(3, 3)),
    "value_requires_grad": lambda L, s, v: s.__setitem__((0, slice(None), [1], slice(None)),
                                                         v(2, 8, 3).requires_grad_()),
    "target_requires_grad": lambda L, s, v: s.requires_grad_().clone().__setitem__((L.tensor([0, 1]),), v(4, 5, 3)),
    "bool_mask": lambda L, s, v: s.__setitem__(s > 0.5, v(7)),
    "index_put_accumulate": lambda L, s, v: s.index_put_((L.tensor([0, 1]),), v(3, 2, 5, 3), accumulate=True),
    "index_put": lambda L, s, v: s.index_put_((L.tensor([0, 1]), L.tensor([1, 1])), v(3, 5, 3)),
}


@pytest.mark.parametrize("case", sorted(_PUT_CASES))
def test_index_put_shape_mismatch_as_pytorch(case):
    got = {}
    for lib in (torch, tapelab):
        rng = np.random.default_rng(0)
        s = lib.tensor(rng.random((2, 2, 5, 3)).astype(np.float32))
        with pytest.raises(RuntimeError) as info:
            _PUT_CASES[case](lib, s, lambda *shape: lib.ones(*shape))
        got[lib] = str(info.value)
    assert got[tapelab] == got[torch]


def test_index_put_writes_as_pytorch_after_the_change():
    out = {}
    for lib in (torch, tapelab):
        s = lib.zeros(2, 2, 5, 3)
        s[0, :, [1], :] = lib.ones(2, 1, 3)
        s[1, :, [2, 3], :] = lib.arange(12.).reshape(2, 2, 3)
        s[:, 1, [0, 4]] += 2.0
        s.index_put_((lib.tensor([1, 1]), lib.tensor([0, 0])), lib.ones(5, 3), accumulate=True)
        out[lib] = s.numpy()
    np.testing.assert_array_equal(out[tapelab], out[torch])


# ---------------------------------------------------------------- clone and *_like keep the memory order
# PyTorch's clone and zeros_like/ones_like/full_like/empty_like keep a dense input's strides
# (preserve_format, empty_like's infer_dense_strides otherwise), so an in-place draw into the result
# (``torch.zeros_like(logits.t()).bernoulli_(p)``, ``empty_like(x).normal_()``) fills memory in that
# order; tapelab's row-major results drew the same numbers into other places.
def _layouts(L):
    x = L.arange(12.).reshape(3, 4)
    return {"transposed": x.t(), "permuted": L.arange(24.).reshape(2, 3, 4).permute(2, 0, 1),
            "expanded": L.arange(4.).expand(3, 4), "sliced_transposed": L.arange(24.).reshape(4, 6).t()[::2],
            "contiguous": x, "vector": L.arange(5.)}


_MAKERS = {
    "clone": lambda L, x: x.clone(),
    "clone_preserve": lambda L, x: x.clone(memory_format=L.preserve_format),
    "clone_contiguous": lambda L, x: x.clone(memory_format=L.contiguous_format),
    "contiguous": lambda L, x: x.contiguous(),
    "zeros_like": lambda L, x: L.zeros_like(x),
    "ones_like_float64": lambda L, x: L.ones_like(x, dtype=L.float64),
    "full_like": lambda L, x: L.full_like(x, 2.5),
    "empty_like": lambda L, x: L.empty_like(x).fill_(1.0),
}


@pytest.mark.parametrize("maker", sorted(_MAKERS))
@pytest.mark.parametrize("layout", sorted(_layouts(torch)))
def test_clone_and_like_keep_pytorch_memory_order(maker, layout):
    got = {}
    for lib in (torch, tapelab):
        y = _MAKERS[maker](lib, _layouts(lib)[layout])
        lib.manual_seed(0)
        drawn = y.clone().bernoulli_(0.5)
        got[lib] = (y.stride(), y.is_contiguous(), y.numpy().tolist(), drawn.numpy().tolist())
    assert got[tapelab] == got[torch]


def test_draws_into_like_tensors_as_pytorch():
    got = {}
    for lib in (torch, tapelab):
        x = lib.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)
        lib.manual_seed(0)
        got[lib] = [lib.zeros_like(x).bernoulli_(0.3), lib.empty_like(x.transpose(0, 1)).normal_(),
                    x.clone().uniform_(), lib.ones_like(x).exponential_()]
    for a, b in zip(got[tapelab], got[torch]):
        assert a.stride() == b.stride()
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_clone_of_a_transposed_view_differentiates_as_pytorch():
    got = {}
    for lib in (torch, tapelab):
        a = lib.arange(12., requires_grad=True)
        b = a.reshape(3, 4).t().clone()
        (b * lib.arange(12.).reshape(4, 3)).sum().backward()
        got[lib] = (b.stride(), a.grad.numpy().tolist())
    assert got[tapelab] == got[torch]


# ---------------------------------------------------------------- attention weights under autocast
# nn.MultiheadAttention(need_weights=True) joins a float mask to the scores with baddbmm, which
# autocast runs in bfloat16: the weights are bfloat16 in PyTorch; tapelab added the float32 mask
# afterwards and returned float32 weights (and other outputs).
@pytest.mark.parametrize("mask", ["none", "float", "bool", "padding"])
@pytest.mark.parametrize("autocast", [False, True])
def test_multihead_attention_weights_as_pytorch(mask, autocast):
    got = {}
    for lib in (torch, tapelab):
        rng = np.random.default_rng(0)
        x = lib.tensor(rng.standard_normal((3, 6, 16)).astype(np.float32))
        lib.manual_seed(0)
        m = lib.nn.MultiheadAttention(16, 4, batch_first=True)
        kw = {"none": {}, "float": {"attn_mask": lib.triu(lib.full((6, 6), float("-inf")), 1)},
              "bool": {"attn_mask": lib.triu(lib.ones(6, 6, dtype=lib.bool), 1)},
              "padding": {"key_padding_mask": lib.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]])}}[mask]
        with lib.autocast("cpu", dtype=lib.bfloat16, enabled=autocast):
            out, w = m(x, x, x, **kw)
            out2, w2 = m(x, x, x, average_attn_weights=False, **kw)
        got[lib] = [(str(t.dtype).split(".")[-1], t.detach().float().numpy()) for t in (out, w, out2, w2)]
    for (da, a), (db, b) in zip(got[tapelab], got[torch]):
        assert da == db
        # float32: the GEMMs' sums of a 4-wide head differ in order from MKL's; bfloat16: one ulp
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6) if da == "float32" else \
            np.testing.assert_allclose(a, b, rtol=0, atol=2 ** -7)


def test_clone_of_sparse_tensors_as_pytorch():
    got = {}
    for lib in (torch, tapelab):
        i = lib.tensor([[0, 1, 2], [2, 0, 1]])
        coo = lib.sparse_coo_tensor(i, lib.tensor([1.0, 2.0, 3.0]), (3, 3))
        csr = lib.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr()
        got[lib] = [coo.clone().to_dense().numpy(), csr.clone().to_dense().numpy(), str(coo.clone().layout).split(".")[-1]]
    for a, b in zip(got[tapelab], got[torch]):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- a size argument left out
_NO_SIZE = {
    "view": lambda L, x: x.view(), "reshape": lambda L, x: x.reshape(), "permute": lambda L, x: x.permute(),
    "repeat": lambda L, x: x.repeat(), "flip": lambda L, x: x.flip(), "torch.flip": lambda L, x: L.flip(x),
    "torch.reshape": lambda L, x: L.reshape(x), "torch.permute": lambda L, x: L.permute(x),
}


@pytest.mark.parametrize("call", sorted(_NO_SIZE))
def test_a_missing_size_is_pytorchs_type_error(call):
    got = {}
    for lib in (torch, tapelab):
        with pytest.raises(TypeError) as info:
            _NO_SIZE[call](lib, lib.ones(2, 3))
        got[lib] = str(info.value).split("\n")[0]
    assert got[tapelab] == got[torch]


def test_empty_sizes_still_work_as_pytorch():
    for lib in (torch, tapelab):
        x, s = lib.ones(2, 3), lib.tensor(5.0)
        assert tuple(x.flip(()).shape) == (2, 3) and tuple(s.reshape(()).shape) == () and tuple(s.view(()).shape) == ()
        assert tuple(s.permute(()).shape) == () and tuple(s.expand(()).shape) == () and tuple(s.repeat(()).shape) == ()
        assert tuple(x.view(size=(3, 2)).shape) == (3, 2) and tuple(x.reshape(shape=(6,)).shape) == (6,)


# ---------------------------------------------------------------- equal dtypes that are other objects
# A float32 dtype object that equals numpy's but is not it (unpickled from a checkpoint, deep-copied):
# the ordered sum and sigmoid's exact loop tested the dtype by identity and fell back to numpy's order.
def test_sum_and_sigmoid_of_an_unpickled_dtype_as_pytorch():
    import pickle
    other = pickle.loads(pickle.dumps(np.dtype(np.float32)))
    assert other is not np.dtype(np.float32) and other == np.dtype(np.float32)
    data = np.random.default_rng(3).standard_normal((64, 30)).astype(other)
    assert data.dtype is other
    got = {}
    for lib in (torch, tapelab):
        x = lib.tensor(data) if lib is torch else lib.from_numpy(data)
        got[lib] = [x.sum().numpy(), x.sum(0).numpy(), x.mean().numpy(), x.sigmoid().numpy()]
    for a, b in zip(got[tapelab], got[torch]):
        np.testing.assert_array_equal(a, b)

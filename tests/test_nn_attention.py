"""scaled_dot_product_attention, multi_head_attention_forward and nn.MultiheadAttention against PyTorch.

Modules are built in both libraries, torch's state dict is loaded into tapelab's (so key
lists, shapes and loading are checked on the way), both run on the same inputs, and the
outputs plus the gradients w.r.t. every input and parameter are compared. The helpers
here are shared with test_nn_rnn.py and test_nn_transformer.py.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tapelab as tl

RNG = np.random.default_rng(0)
TOL = {"float64": dict(rtol=1e-9, atol=1e-10), "float32": dict(rtol=2e-4, atol=2e-5)}


def randn(*shape, dtype="float64") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- shared parity helpers

def twin(tmod: torch.nn.Module, lmod):
    """Give ``lmod`` torch's weights through load_state_dict, after checking the key lists agree."""
    sd = tmod.state_dict()
    assert list(lmod.state_dict()) == list(sd)
    assert [tuple(v.shape) for v in lmod.state_dict().values()] == [tuple(v.shape) for v in sd.values()]
    lmod.load_state_dict({k: tl.tensor(v.detach().numpy()) for k, v in sd.items()})
    lmod.train(tmod.training)
    return lmod


def _convert(lib, value, grad: bool, memo: dict):
    """numpy arrays -> tensors of ``lib`` (the same array gives the same tensor, so ``q is k`` survives)."""
    if isinstance(value, np.ndarray):
        if id(value) not in memo:
            memo[id(value)] = lib.tensor(value, requires_grad=grad and value.dtype.kind == "f")
        return memo[id(value)]
    if isinstance(value, (tuple, list)):
        return type(value)(_convert(lib, v, grad, memo) for v in value)
    if isinstance(value, dict):
        return {k: _convert(lib, v, grad, memo) for k, v in value.items()}
    return value


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [] if out is None else [out]


def _np(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def assert_parity(tfn, lfn, *args, kwargs=None, params=(), dtype="float64", grad_args=True, backward=True):
    """Run ``tfn(*args, **kwargs)`` (torch) and ``lfn`` (tapelab) on copies of the same numpy
    inputs; compare outputs, then the gradients of a random weighted sum of the outputs with
    respect to every float positional input (when ``grad_args``) and every ``(torch, tapelab)``
    parameter pair in ``params``."""
    kwargs = kwargs or {}
    tol = TOL[dtype]
    tmemo, lmemo = {}, {}
    t_args = _convert(torch, args, grad_args, tmemo)
    l_args = _convert(tl, args, grad_args, lmemo)
    t_out = _flat(tfn(*t_args, **_convert(torch, kwargs, False, {})))
    l_out = _flat(lfn(*l_args, **_convert(tl, kwargs, False, {})))
    assert len(t_out) == len(l_out)
    for t, l in zip(t_out, l_out):
        assert tuple(l.shape) == tuple(t.shape)
        assert str(l.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(l), _np(t), **tol)
    if not backward:
        return
    cots = [randn(*t.shape, dtype=dtype) for t in t_out]
    sum((t * torch.tensor(c)).sum() for t, c in zip(t_out, cots) if t.requires_grad).backward()
    sum((l * tl.tensor(c)).sum() for l, c in zip(l_out, cots) if l.requires_grad).backward()
    pairs = [(tmemo[k], lmemo[k]) for k in tmemo if tmemo[k].requires_grad] + list(params)
    for tp, lp in pairs:
        if tp.grad is None:
            assert lp.grad is None or not np.any(_np(lp.grad))
            continue
        assert lp.grad is not None
        np.testing.assert_allclose(_np(lp.grad), _np(tp.grad), **tol)


def module_parity(tmod, lmod, *args, kwargs=None, dtype="float64", grad_args=True, call=None, backward=True):
    """``assert_parity`` for a pair of modules (weights already shared through ``twin``)."""
    call = call or (lambda m, *a, **k: m(*a, **k))
    params = list(zip(dict(tmod.named_parameters()).values(), dict(lmod.named_parameters()).values()))
    assert list(dict(tmod.named_parameters())) == list(dict(lmod.named_parameters()))
    assert_parity(lambda *a, **k: call(tmod, *a, **k), lambda *a, **k: call(lmod, *a, **k), *args,
                  kwargs=kwargs, params=params, dtype=dtype, grad_args=grad_args, backward=backward)


def same_error(tcall, lcall, prefix: str | None = None):
    """Both calls fail with the same exception type and message (``torch.`` read as ``tapelab.``),
    or only the same leading ``prefix`` where torch's message names C++ types."""
    with pytest.raises(Exception) as texc:
        tcall()
    msg = str(texc.value).replace("torch.", "tapelab.")
    if prefix is not None:
        assert msg.startswith(prefix)
        msg = prefix
    with pytest.raises(texc.type, match=re.escape(msg)):
        lcall()


def pair(tcls, lcls, *args, dtype="float64", **kwargs):
    """The same module in both libraries with torch's weights, in float64 unless told otherwise."""
    tmod = tcls(*args, **kwargs)
    lmod = lcls(*args, **kwargs)
    if dtype == "float64":
        tmod, lmod = tmod.double(), lmod.double()
    return tmod, twin(tmod, lmod)


# ---------------------------------------------------------------- scaled_dot_product_attention

def sdpa(lib):
    return lib.nn.functional.scaled_dot_product_attention


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("L,S", [(3, 5), (4, 4), (5, 2)])
def test_sdpa_plain_and_causal(dtype, L, S):
    q, k, v = randn(2, 3, L, 4, dtype=dtype), randn(2, 3, S, 4, dtype=dtype), randn(2, 3, S, 6, dtype=dtype)
    assert_parity(sdpa(torch), sdpa(tl), q, k, v, dtype=dtype)
    assert_parity(lambda *a: sdpa(torch)(*a, is_causal=True), lambda *a: sdpa(tl)(*a, is_causal=True),
                  q, k, v, dtype=dtype)
    assert_parity(lambda *a: sdpa(torch)(*a, scale=0.3), lambda *a: sdpa(tl)(*a, scale=0.3), q, k, v, dtype=dtype)


def test_sdpa_bool_mask_with_fully_masked_row_gives_zeros():
    q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
    mask = RNG.random((3, 5)) > 0.4
    mask[1] = False  # query 1 may attend nothing: output and gradient are 0, never NaN
    assert_parity(sdpa(torch), sdpa(tl), q, k, v, mask)
    out = sdpa(tl)(tl.tensor(q), tl.tensor(k), tl.tensor(v), tl.tensor(mask))
    assert not np.any(out.numpy()[:, 1])


def test_sdpa_float_mask_gets_gradient():
    q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
    mask = randn(3, 5)
    mask[2] = -np.inf
    assert_parity(sdpa(torch), sdpa(tl), q, k, v, mask)


def test_sdpa_broadcast_mask_and_unbatched():
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 4)
    mask = RNG.random((2, 1, 3, 5)) > 0.3
    assert_parity(sdpa(torch), sdpa(tl), q, k, v, mask)
    assert_parity(sdpa(torch), sdpa(tl), q[0, 0], k[0, 0], v[0, 0])


def test_sdpa_grouped_query_attention():
    q, k, v = randn(2, 4, 3, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 6)
    assert_parity(lambda *a: sdpa(torch)(*a, enable_gqa=True), lambda *a: sdpa(tl)(*a, enable_gqa=True), q, k, v)


def test_sdpa_dropout_one_zeroes_everything():
    q, k, v = (tl.tensor(randn(2, 3, 4)) for _ in range(3))
    assert not np.any(sdpa(tl)(q, k, v, dropout_p=1.0).numpy())


def test_sdpa_float32_mask_on_float64_query():
    q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
    assert_parity(sdpa(torch), sdpa(tl), q, k, v, randn(3, 5, dtype="float32"), backward=False)


@pytest.mark.parametrize("case", ["causal_and_mask", "int_mask", "double_mask", "rank1", "dtypes", "dropout"])
def test_sdpa_errors(case):
    q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
    args, kw = {
        "causal_and_mask": ((q, k, v), dict(attn_mask=np.ones((3, 5), bool), is_causal=True)),
        "int_mask": ((q, k, v), dict(attn_mask=np.zeros((3, 5), np.int64))),
        "double_mask": (tuple(a.astype("float32") for a in (q, k, v)), dict(attn_mask=np.zeros((3, 5)))),
        "rank1": ((q[0, 0], k[0], v[0]), {}),
        "dtypes": ((q.astype("float32"), k, v), {}),
        "dropout": ((q, k, v), dict(dropout_p=1.5)),
    }[case]
    prefix = {"int_mask": "Expected attn_mask dtype to be bool or float",
              "double_mask": "Expected attn_mask dtype to be bool or float",
              "dtypes": "Expected query, key, and value to have the same dtype"}.get(case)
    same_error(lambda: sdpa(torch)(*_convert(torch, args, False, {}), **_convert(torch, kw, False, {})),
               lambda: sdpa(tl)(*_convert(tl, args, False, {}), **_convert(tl, kw, False, {})), prefix)


# ---------------------------------------------------------------- nn.MultiheadAttention

def mha_pair(*args, **kwargs):
    return pair(torch.nn.MultiheadAttention, tl.nn.MultiheadAttention, *args, **kwargs)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_mha_self_attention(batch_first, need_weights, average):
    tm, lm = mha_pair(8, 2, batch_first=batch_first)
    x = randn(3, 4, 8)
    module_parity(tm, lm, x, x, x, kwargs=dict(need_weights=need_weights, average_attn_weights=average))


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_cross_attention_and_separate_kv(need_weights):
    tm, lm = mha_pair(8, 4)
    q, mem, v = randn(3, 2, 8), randn(5, 2, 8), randn(5, 2, 8)
    module_parity(tm, lm, q, mem, mem, kwargs=dict(need_weights=need_weights))
    module_parity(tm, lm, q, mem, v, kwargs=dict(need_weights=need_weights))


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_kdim_vdim(need_weights):
    tm, lm = mha_pair(8, 2, kdim=5, vdim=3, batch_first=True)
    assert lm.in_proj_weight is None and lm.q_proj_weight is not None
    module_parity(tm, lm, randn(2, 3, 8), randn(2, 4, 5), randn(2, 4, 3), kwargs=dict(need_weights=need_weights))


@pytest.mark.parametrize("options", [dict(bias=False), dict(add_bias_kv=True), dict(add_zero_attn=True),
                                     dict(add_bias_kv=True, add_zero_attn=True)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_options(options, need_weights):
    tm, lm = mha_pair(8, 2, **options)
    x = randn(3, 2, 8)
    kpm = np.array([[False, False, True], [False, False, False]])
    module_parity(tm, lm, x, x, x, kwargs=dict(need_weights=need_weights, key_padding_mask=kpm))


MASKS = {
    "bool_2d": lambda: RNG.random((3, 3)) > 0.7,
    "float_2d": lambda: randn(3, 3),
    "bool_3d": lambda: RNG.random((4, 3, 3)) > 0.7,   # (batch * heads, L, S)
    "float_3d": lambda: randn(4, 3, 3),
}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("with_kpm", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_masks(mask, with_kpm, need_weights):
    tm, lm = mha_pair(8, 2)
    x = randn(3, 2, 8)
    attn_mask = MASKS[mask]()
    if attn_mask.dtype == bool:
        attn_mask[..., 0] = False   # no fully masked row: the explicit-weights path gives NaN there, as torch
    kw = dict(attn_mask=attn_mask, need_weights=need_weights)
    if with_kpm:
        kpm = np.array([[False, False, True], [False, False, False]])
        kw["key_padding_mask"] = kpm if attn_mask.dtype == bool else np.where(kpm, -np.inf, 0.0)
    module_parity(tm, lm, x, x, x, kwargs=kw)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_is_causal_hint(need_weights):
    tm, lm = mha_pair(8, 2, batch_first=True)
    x = randn(2, 4, 8)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64).numpy()
    module_parity(tm, lm, x, x, x, kwargs=dict(attn_mask=causal, is_causal=True, need_weights=need_weights))


def test_mha_unbatched():
    tm, lm = mha_pair(8, 2, batch_first=True)
    x, mem = randn(3, 8), randn(5, 8)
    module_parity(tm, lm, x, mem, mem, kwargs=dict(key_padding_mask=np.array([0, 0, 1, 0, 1], bool)))
    module_parity(tm, lm, x, x, x, kwargs=dict(need_weights=False, attn_mask=randn(2, 3, 3)))


def test_mha_float32_defaults_and_eval_dropout():
    tm, lm = mha_pair(8, 2, dropout=0.3, dtype="float32")
    tm.eval(), lm.eval()
    x = randn(3, 2, 8, dtype="float32")
    module_parity(tm, lm, x, x, x, dtype="float32")


def test_mha_train_dropout_is_random_and_seeded():
    lm = tl.nn.MultiheadAttention(8, 2, dropout=0.5)
    x = tl.tensor(randn(3, 2, 8, dtype="float32"))
    tl.manual_seed(1)
    a = lm(x, x, x)[0].detach().numpy()
    tl.manual_seed(1)
    b = lm(x, x, x)[0].detach().numpy()
    lm.eval()
    c = lm(x, x, x)[0].detach().numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_mha_state_dict_keys_and_init():
    for kw in (dict(), dict(bias=False), dict(kdim=3, vdim=5), dict(add_bias_kv=True)):
        t, l = torch.nn.MultiheadAttention(8, 2, **kw), tl.nn.MultiheadAttention(8, 2, **kw)
        assert [(k, tuple(v.shape)) for k, v in l.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
        assert repr(l) == repr(t)
    lm = tl.nn.MultiheadAttention(8, 2)
    bound = np.sqrt(6 / (8 + 24))   # xavier_uniform on (3E, E)
    w = lm.in_proj_weight.detach().numpy()
    assert np.all(np.abs(w) <= bound) and w.std() > bound / 3
    assert not np.any(lm.in_proj_bias.detach().numpy()) and not np.any(lm.out_proj.bias.detach().numpy())


@pytest.mark.parametrize("case", ["heads", "zero", "mask_shape", "mask_rank", "kpm_shape", "int_mask", "query_rank",
                                  "embed"])
def test_mha_errors(case):
    x = randn(3, 2, 8)
    build = {"heads": ((8, 3), {}), "zero": ((0, 2), {})}
    if case in build:
        a, kw = build[case]
        same_error(lambda: torch.nn.MultiheadAttention(*a, **kw), lambda: tl.nn.MultiheadAttention(*a, **kw))
        return
    call = {
        "mask_shape": ((x, x, x), dict(attn_mask=np.zeros((3, 4), bool))),
        "mask_rank": ((x, x, x), dict(attn_mask=np.zeros((1, 1, 3, 3), bool))),
        "kpm_shape": ((x, x, x), dict(key_padding_mask=np.zeros((2, 4), bool))),
        "int_mask": ((x, x, x), dict(attn_mask=np.zeros((3, 3), np.int64))),
        "query_rank": ((x[0, 0], x[0, 0], x[0, 0]), {}),
        "embed": ((randn(3, 2, 6),) * 3, {}),
    }
    args, kw = call[case]
    tm, lm = mha_pair(8, 2)
    same_error(lambda: tm(*_convert(torch, args, False, {}), **_convert(torch, kw, False, {})),
               lambda: lm(*_convert(tl, args, False, {}), **_convert(tl, kw, False, {})))


def test_multi_head_attention_forward_functional():
    tm, _ = mha_pair(8, 2)
    w = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    x = randn(3, 2, 8)

    def run(lib):
        def f(q, in_w, in_b, out_w, out_b):
            return lib.nn.functional.multi_head_attention_forward(q, q, q, 8, 2, in_w, in_b, None, None, False, 0.0,
                                                                 out_w, out_b, training=True)
        return f

    assert_parity(run(torch), run(tl), x, w["in_proj_weight"], w["in_proj_bias"], w["out_proj.weight"],
                  w["out_proj.bias"])

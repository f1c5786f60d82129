"""Gaps met in session 16 by programs run under real torch and under tapelab, each against PyTorch."""
import warnings

import numpy as np
import pytest
import torch

import tapelab


@pytest.mark.parametrize("other", ["bfloat16", "float16", "int32", "float64", "bool"])
def test_lerp_refuses_another_dtype_with_torchs_words(other):
    """A bfloat16 ``end`` (an EMA update under autocast) raised KeyError naming numpy's dtype."""
    messages = []
    for lib in (torch, tapelab):
        x = lib.ones(3)
        with pytest.raises(RuntimeError) as e:
            lib.lerp(x, x.to(getattr(lib, other)), 0.5)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def _autocast_calls(lib):
    F = lib.nn.functional
    x, w, b = lib.randn(4, 8), lib.randn(8, 8), lib.randn(3, 8, 8)
    img = lib.randn(1, 2, 4, 4)
    return {
        "dot": lambda: lib.dot(x[0], x[1]), "mv": lambda: lib.mv(w, x[0]), "inner 1-d": lambda: lib.inner(x[0], x[1]),
        "inner 2-d": lambda: lib.inner(x, x), "vecdot": lambda: lib.linalg.vecdot(x, x), "addbmm": lambda: lib.addbmm(w, b, b),
        "addmv": lambda: lib.addmv(x[0], w, x[1]), "addr": lambda: lib.addr(w, x[0], x[1]), "prelu": lambda: F.prelu(x, lib.ones(1)),
        "nearest": lambda: F.interpolate(img, scale_factor=2), "bilinear": lambda: F.interpolate(img, scale_factor=2, mode="bilinear"),
        "bicubic bf16": lambda: F.interpolate(img.bfloat16(), scale_factor=2, mode="bicubic"),
        "linear": lambda: F.linear(x, w), "matmul": lambda: x @ w, "bmm": lambda: lib.bmm(b, b), "multi_dot": lambda: lib.linalg.multi_dot([x, w, w]),
        "tensordot": lambda: lib.tensordot(x, w, 1), "outer": lambda: lib.outer(x[0], x[1]),
        "bilinear layer": lambda: F.bilinear(x[:, :3], x[:, :3], lib.randn(2, 3, 3)),
    }


@pytest.mark.parametrize("name", list(_autocast_calls(torch)))
def test_cpu_autocast_lowers_what_torchs_lists_name(name):
    """PyTorch's CPU autocast lowers addbmm, prelu and linalg.vecdot and leaves dot, mv, addmv, addr and
    upsampling alone; tapelab composes these from its matmul op, which autocast lowered (a float32
    dot came out bfloat16, a float32 upsampling too). A composing front end now names PyTorch's op
    (``dispatch.composite``) and autocast decides for the whole."""
    dtypes = []
    for lib in (torch, tapelab):
        lib.manual_seed(0)
        call = _autocast_calls(lib)[name]
        with lib.autocast("cpu", dtype=lib.bfloat16):
            dtypes.append(str(call().dtype).split(".")[1])
    assert dtypes[0] == dtypes[1]


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN", "LSTM stacked", "LSTM proj"])
def test_cpu_autocast_lowers_an_lstm_as_torchs_onednn_layer(layer):
    """PyTorch's cpu LSTM is oneDNN's ``mkldnn_rnn_layer``, which autocast lowers as a whole (output
    and states bfloat16); its GRU stays float32 and its RNN lowers per linear."""
    dtypes = []
    for lib in (torch, tapelab):
        lib.manual_seed(0)
        make = {"LSTM": lambda: lib.nn.LSTM(8, 4), "GRU": lambda: lib.nn.GRU(8, 4), "RNN": lambda: lib.nn.RNN(8, 4),
                "LSTM stacked": lambda: lib.nn.LSTM(8, 4, num_layers=2, bidirectional=True, batch_first=True),
                "LSTM proj": lambda: lib.nn.LSTM(8, 4, proj_size=2)}[layer]
        with lib.autocast("cpu", dtype=lib.bfloat16), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # torch: "LSTM with projections is not supported with oneDNN"
            out, state = make()(lib.randn(5, 2, 8))
        states = state if isinstance(state, tuple) else (state,)
        dtypes.append([str(t.dtype).split(".")[1] for t in (out, *states)])
    assert dtypes[0] == dtypes[1]


def test_a_composites_ops_still_reach_the_other_modes():
    """Autocast steps aside for a composite's ops; a tape below it still records each of them."""
    x = tapelab.randn(1, 2, 4, 4)
    with tapelab.tape() as t, tapelab.autocast("cpu", dtype=tapelab.bfloat16):
        y = tapelab.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")
        z = tapelab.dot(x.flatten(), x.flatten())
    assert y.dtype == z.dtype == tapelab.float32
    ops = [n.op for n in t.nodes]
    assert ops.count("upsample_linear") == 1 and ops.count("matmul") == 1 and "cast" not in ops


def test_inner_refuses_two_dtypes_with_torchs_words():
    for lib in (torch, tapelab):
        with pytest.raises(RuntimeError, match="^both inputs should have same dtype$"):
            lib.inner(lib.randn(2, 3), lib.randn(2, 3).double())


@pytest.mark.parametrize("shape,dims", [((1000, 1000), None), ((1000, 1000), (1,)), ((1000, 1000), (0,)), ((7, 5, 3), (0, 2)),
                                        ((64, 256), (-1,)), ((40000,), None), ((5, 1), (0,))])
def test_float32_var_and_1_norm_equal_torchs_bits(shape, dims):
    """var's float64 accumulation and the 1-norm's one-term-at-a-time order (ATen's), run as one pass
    per row (a float64 copy of the input made var 5x slower, a cumsum the 1-norm 13x); a whole
    tensor's 1-norm past 32768 terms is split as PyTorch splits it among its threads."""
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 3 + 1).astype(np.float32)
    tapelab.set_num_threads(torch.get_num_threads())
    kw = {} if dims is None else {"dim": dims}
    for lib_call in (lambda lib, t: t.var(**kw, correction=1), lambda lib, t: t.var(**kw, correction=0),
                     lambda lib, t: t.norm(1, **kw), lambda lib, t: t.double().norm(1, **kw)):
        ours, theirs = (lib_call(lib, lib.tensor(x)).numpy() for lib in (tapelab, torch))
        np.testing.assert_array_equal(ours, theirs)

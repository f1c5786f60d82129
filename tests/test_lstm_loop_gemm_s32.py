"""The layer loops' step products (engine/kernels/gemm.py ``loop_gemm``): MKL's GEMM only where MKL runs
its AVX-512 code on this CPU (``mkl.avx512``), else our GEMM (an AMD EPYC: 57 us against MKL's 74 for
20 x 200 x 800). Either route gives PyTorch's values and gradients at the bench's LSTM size, and our
GEMM gives a row the same floats whatever the batch part, so the parts of two threads are the whole loop."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import tapelab as tl
from tapelab import kernels
from tapelab.kernels import blas, mkl
from test_lstm_speed_paths import _compare

gemm = importlib.import_module("tapelab.kernels.gemm")
LM_SIZE = (256, 200, 200, 35, 20)        # vocabulary, embedding, hidden, steps, batch: the LSTM LM row's


@pytest.fixture(params=[True, False], ids=["mkl_avx512", "not_avx512"])
def route(request, monkeypatch):
    """Whether MKL is taken to run AVX-512 code here (the two routes of ``loop_gemm``)."""
    monkeypatch.setattr(mkl, "_AVX512", [request.param])
    return request.param


def test_avx512_is_mkls_branch():
    """``avx512`` reads MKL's own dispatch: True exactly where its auto branch is AVX512 or later (one of
    ``mkl_cbwr.h``'s branches, 2 to 14), never on a CPU without AVX-512, False without MKL."""
    from llvmlite import binding
    if not binding.get_host_cpu_features().get("avx512f", False):
        assert mkl.avx512() is False
    if mkl.library() is None:
        assert mkl.avx512() is False
        return
    branch = mkl.library().mkl_cbwr_get_auto_branch()
    assert 2 <= branch <= 14
    assert mkl.avx512() is (branch >= mkl.MKL_CBWR_AVX512)


def test_loop_gemm_takes_mkl_only_where_it_runs_avx512(route):
    """A 20 x 200 x 800 step product: MKL's address where MKL is on and runs AVX-512, else our GEMM."""
    tl.set_num_threads(1)
    address, _, threads = gemm.loop_gemm(20, 200, 800)
    if route and blas.available():
        assert address != 0 and threads == 1
    else:
        assert (address, threads) == (0, 1)
    assert gemm.loop_gemm(2, 16, 32) == (0, 0, 1)         # below MKL_MIN: ours either way


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("embed", [True, False])
def test_lm_size_matches_torch_on_either_route(route, threads, embed):
    """The LSTM LM row's two layers (hidden 200, 35 steps, batch 20), values and every gradient as
    PyTorch's, with the step products on MKL or on our GEMM, at one and two threads."""
    tl.set_num_threads(threads)
    try:
        _compare("LSTM", 2, False, embed, size=LM_SIZE)
    finally:
        tl.set_num_threads(1)


@pytest.mark.parametrize("reverse", [False, True])
def test_our_gemm_parts_are_the_whole_loop_bitwise(reverse):
    """Forward and backward of a layer on our GEMM (``mkl`` (0, 0, 1)): batch rows 0:10 and 10:20 run as
    two parts give the whole 20-row loop's outputs, states and gate gradients bit for bit (what lets the
    two-thread parts keep the one-thread floats)."""
    loop, sgemm = kernels.loops("rnn"), kernels.loops("sgemm")
    rng = np.random.default_rng(5)
    T, B, H = 7, 20, 200
    xw = (rng.standard_normal((T * B, 4 * H)) * 0.5).astype(np.float32)
    rows = np.arange(T * B).reshape(T, B)
    bias = (rng.standard_normal(4 * H) * 0.1).astype(np.float32)
    w_hh = (rng.standard_normal((4 * H, H)) * 0.07).astype(np.float32)
    w_t, w = sgemm.pad_columns(np.ascontiguousarray(w_hh.T)), sgemm.pad_columns(w_hh)
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gy = rng.standard_normal((T + 1, B, H)).astype(np.float32)
    own, empty, no_sums = (0, 0, 1), np.empty((0,), np.float32), np.empty((0, 4 * H), np.float32)
    results = []
    for cuts in ((0, B), (0, 10, B)):
        y, ws = np.empty((T + 1, B, H), np.float32), np.empty((T, B, 6 * H), np.float32)
        d = np.empty((T, B, 4 * H), np.float32)
        c, dh, dc = c0.copy(), np.zeros((B, H), np.float32), gy[T].copy()
        for lo, hi in zip(cuts, cuts[1:]):
            loop.lstm_layer(xw, rows, bias, h0, c, w_t, y, ws, reverse, own, lo, hi)
        for lo, hi in zip(cuts, cuts[1:]):
            loop.lstm_layer_backward(gy, dh, dc, c0, w, ws, d, empty, rows, no_sums, reverse, True, own, lo, hi)
        results.append((y[:T], ws, c, d, dh, dc))
    for whole, parts in zip(*results):
        np.testing.assert_array_equal(whole, parts)
    assert np.abs(results[0][3]).max() > 0

"""The LSTM and GRU layers' fast paths (engine/nn/_fused_rnn.py, engine/kernels/rnn.py) against PyTorch:
an embedding's repeated rows projected once (and their weight-gradient terms summed first), the
whole-layer compiled loops over our GEMM, and the per-step loop where our GEMM does not take the
step products."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab import kernels
from test_nn_attention import twin

V, E, H, T, B = 24, 40, 48, 9, 6          # 54 tokens of 24 words: an embedding output with repeated rows


class _LM:
    """Embedding -> LSTM or GRU -> a weighted sum of the output and the final states, under ``lib``."""

    def __init__(self, lib, mode: str, layers: int, bidirectional: bool, size: tuple):
        v, e, h = size
        self.emb = lib.nn.Embedding(v, e)
        self.rnn = getattr(lib.nn, mode)(e, h, layers, bidirectional=bidirectional)

    def modules(self):
        return (self.emb, self.rnn)


def _run(lib, lm, tokens, state, embed: bool):
    """Every output and gradient as numpy arrays (the input's own gradient where it is a leaf)."""
    x = lm.emb(lib.tensor(tokens)) if embed else lib.tensor(state[2], requires_grad=True)
    h0, c0 = (lib.tensor(a, requires_grad=True) for a in state[:2])
    lstm = isinstance(lm.rnn, lib.nn.LSTM)
    out, finals = lm.rnn(x, (h0, c0) if lstm else h0)
    hn, cn = finals if lstm else (finals, finals)
    weights = lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(np.float32))
    ((out * weights).sum() + hn.sum() * 0.5 + cn.sum() * 0.25).backward()
    grads = {f"{i}.{n}": p.grad for i, m in enumerate(lm.modules()) for n, p in m.named_parameters()}
    grads.update(h0=h0.grad, c0=c0.grad if lstm else None, x=None if embed else x.grad)
    return ([t.detach().numpy() for t in (out, hn, cn)],
            {k: None if g is None else g.detach().numpy() for k, g in grads.items()})


def _compare(mode: str, layers: int, bidirectional: bool, embed: bool, size: tuple = (V, E, H, T, B)):
    v, e, h, steps, batch = size
    torch.manual_seed(0)
    t_lm, l_lm = (_LM(lib, mode, layers, bidirectional, (v, e, h)) for lib in (torch, tl))
    for tm, lm in zip(t_lm.modules(), l_lm.modules()):
        twin(tm, lm)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, v, (steps, batch))
    dirs = layers * (1 + bidirectional)
    state = [rng.standard_normal(s).astype(np.float32) for s in ((dirs, batch, h), (dirs, batch, h), (steps, batch, e))]
    (t_outs, t_grads), (l_outs, l_grads) = (_run(lib, lm, tokens, state, embed)
                                            for lib, lm in ((torch, t_lm), (tl, l_lm)))
    for a, b in zip(l_outs, t_outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert t_grads.keys() == l_grads.keys()
    for name, tg in t_grads.items():
        assert (tg is None) == (l_grads[name] is None), name
        if tg is not None:
            np.testing.assert_allclose(l_grads[name], tg, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("embed", [True, False])
def test_embedding_rows_and_whole_layer_loops_match_torch(mode, bidirectional, embed):
    """Repeated input rows (an embedding's, 54 tokens of 24 words) and distinct ones (a random
    input), two layers, both directions: values and every gradient, the embedding's included."""
    _compare(mode, 2, bidirectional, embed)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("embed", [True, False])
def test_per_step_loop_where_our_gemm_does_not_take_the_steps(monkeypatch, mode, embed):
    """With our GEMM limited to fewer rows than the batch (as against OpenBLAS's AVX-512 kernels
    past 32 rows) the step products are numpy's, one Python step at a time: the same results."""
    monkeypatch.setattr(kernels.loops("sgemm"), "MAX_ROWS", B - 1)
    _compare(mode, 2, True, embed)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_two_threads(mode):
    """At two intra-op threads (the end GEMMs through the pool, 700 x 256 x 64 for dx) with an
    embedding of 64 words under 700 tokens: the same results."""
    tl.set_num_threads(2)
    _compare(mode, 2, False, True, size=(64, 64, 64, 35, 20))


def test_distinct_rows_as_bits():
    """``distinct_rows`` against numpy's unique rows: ids in order of first appearance, rows equal
    in their first columns kept apart, +0.0 and -0.0 two values (compared as bits)."""
    rng = np.random.default_rng(2)
    table = rng.standard_normal((7, 33)).astype(np.float32)
    table[1, :32] = table[0, :32]                    # differs from row 0 in its last column only
    table[3] = -0.0
    table[4] = 0.0
    x = np.ascontiguousarray(table[rng.integers(0, 7, 50)])
    inverse, first = np.empty(50, np.int64), np.empty(50, np.int64)
    count = kernels.loops("rnn").distinct_rows(x.view(np.uint32), inverse, first)
    values, index = np.unique(x.view(np.uint32), axis=0, return_index=True)
    assert count == len(values)
    np.testing.assert_array_equal(np.sort(first[:count]), np.sort(index))
    np.testing.assert_array_equal(first[:count], np.sort(first[:count]))
    np.testing.assert_array_equal(x[first[:count]][inverse], x)

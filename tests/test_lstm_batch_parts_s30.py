"""The LSTM and GRU layer loops over parts of the batch at once (engine/nn/_fused_rnn.py ``_batch_cuts``,
engine/kernels/rnn.py): a batch row's recurrence reads no other row, so at two threads each part runs
every step on one thread, and the bias and distinct-row sums (``gate_sums``) follow after, in the
whole loop's order."""
from __future__ import annotations

import numpy as np
import pytest

import tapelab as tl
from tapelab import kernels
from tapelab.nn import _fused_rnn
from test_lstm_speed_paths import _compare


def _parts_on() -> bool:
    tl.set_num_threads(2)
    return _fused_rnn._batch_cuts(20) is not None


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("distinct", [True, False])
def test_gate_sums_are_the_whole_loops_sums(reverse, distinct):
    """The LSTM's bias gradient and the distinct rows' sums added after the loop, over column ranges, are
    bitwise those the whole loop adds step by step (rows repeated within a step included)."""
    rng = np.random.default_rng(3)
    T, B, H, rows_n = 6, 5, 8, 4
    G = 4 * H
    ws = rng.uniform(0.05, 0.95, (T, B, 6 * H)).astype(np.float32)
    gy = rng.standard_normal((T + 1, B, H)).astype(np.float32)
    c0 = rng.standard_normal((B, H)).astype(np.float32)
    rows = rng.integers(0, rows_n, (T, B)) if distinct else np.arange(T * B).reshape(T, B)
    w = rng.standard_normal((G, H)).astype(np.float32)
    loop = kernels.loops("rnn")
    whole = []
    for parts in (False, True):
        d = np.zeros((T, B, G), np.float32)
        db = np.zeros(G, np.float32)
        dsum = np.zeros((rows_n if distinct else 0, G), np.float32)
        dh, dc = np.zeros((B, H), np.float32), gy[T].copy()
        loop.lstm_layer_backward(gy, dh, dc, c0, w, ws, d, db[:0] if parts else db, rows,
                                 dsum[:0] if parts else dsum, reverse, True, (0, 0, 1), 0, B)
        if parts:
            for lo, hi in ((0, 7), (7, 20), (20, G)):
                loop.gate_sums(d, rows, db, dsum, reverse, lo, hi)
        whole.append((d, db, dsum))
    for a, b in zip(*whole):
        np.testing.assert_array_equal(a, b)
    assert np.any(whole[0][1] != 0)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_distinct_row_sums_are_the_whole_loops(reverse):
    """The GRU's distinct-row sums (no bias gradient in its loop: ``gate_sums`` with an empty ``db``)
    are bitwise those its whole loop adds."""
    rng = np.random.default_rng(4)
    T, B, H, rows_n = 6, 5, 8, 3
    G = 3 * H
    ws = rng.uniform(0.05, 0.95, (T, B, 4 * H)).astype(np.float32)
    gy, y = (rng.standard_normal((T, B, H)).astype(np.float32) for _ in range(2))
    h0 = rng.standard_normal((B, H)).astype(np.float32)
    rows = rng.integers(0, rows_n, (T, B))
    w = rng.standard_normal((G, H)).astype(np.float32)
    loop = kernels.loops("rnn")
    sums = []
    for parts in (False, True):
        di, dg = np.zeros((T, B, G), np.float32), np.zeros((T, B, G), np.float32)
        dsum = np.zeros((rows_n, G), np.float32)
        dh, dhz = np.zeros((B, H), np.float32), np.zeros((B, H), np.float32)
        loop.gru_layer_backward(gy, dh, dhz, h0, w, y, ws, di, dg, rows, dsum[:0] if parts else dsum, reverse, True,
                                (0, 0, 1), 0, B)
        if parts:
            for lo, hi in ((0, 5), (5, G)):
                loop.gate_sums(di, rows, dsum[0, :0], dsum, reverse, lo, hi)
        sums.append(dsum)
    np.testing.assert_array_equal(*sums)
    assert np.any(sums[0] != 0)


def test_two_threads_run_the_batch_in_parts():
    """At two threads with the regions on numba's threads a batch of 20 is cut in two parts of 10
    rows (and a batch of 3 is not cut: a part needs at least two rows)."""
    if not _parts_on():
        pytest.skip("no OpenMP regions on numba's threads here")
    np.testing.assert_array_equal(_fused_rnn._batch_cuts(20), [0, 10, 20])
    np.testing.assert_array_equal(_fused_rnn._batch_cuts(5), [0, 2, 5])
    assert _fused_rnn._batch_cuts(3) is None
    tl.set_num_threads(1)
    assert _fused_rnn._batch_cuts(20) is None


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch", [20, 7])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("embed", [True, False])
def test_parts_match_torch(mode, batch, bidirectional, embed):
    """Two layers in parts of the batch (even and uneven), both directions, an embedding's repeated
    rows or distinct ones: values and every gradient as PyTorch's."""
    if not _parts_on():
        pytest.skip("no OpenMP regions on numba's threads here")
    _compare(mode, 2, bidirectional, embed, size=(64, 64, 64, 35, batch))

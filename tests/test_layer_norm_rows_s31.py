"""layer_norm's float32 moments run ``_ROWS`` rows at a time through the cascade's merges (issue 17, session
31): each row's arithmetic is ATen's still, so the forward, its kept statistics and the backward from them
stay PyTorch's bit for bit on row counts around and across the blocks, and a row of inf or nan changes no
other row of its block."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tapelab  # noqa: E402
from tapelab.kernels import rowwise  # noqa: E402


def _rows(rows: int, cols: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, cols)) * 3 + 0.5).astype(np.float32)


@pytest.mark.parametrize("rows", [1, 7, rowwise._ROWS - 1, rowwise._ROWS, rowwise._ROWS + 1, 3 * rowwise._ROWS + 5])
@pytest.mark.parametrize("cols", [5, 128, 384, 1000, 4100])
def test_forward_and_statistics_are_torchs_on_every_row_of_every_block(rows, cols):
    """4100 columns: 32 chunks, a cascade five levels deep, and a tail of four columns."""
    x = _rows(rows, cols, rows * 7 + cols)
    w = np.random.default_rng(1).standard_normal(cols).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(cols).astype(np.float32)
    out, mean, rstd = torch.native_layer_norm(torch.tensor(x), [cols], torch.tensor(w), torch.tensor(b), 1e-5)
    got = tapelab.nn.functional.layer_norm(tapelab.tensor(x), (cols,), tapelab.tensor(w), tapelab.tensor(b), eps=1e-5)
    np.testing.assert_array_equal(got.numpy(), out.numpy())
    m, r = np.empty(rows, np.float32), np.empty(rows, np.float32)
    rowwise.layer_norm_stats(x, np.float32(1e-5), m, r)
    np.testing.assert_array_equal(m, mean.numpy().reshape(-1))
    np.testing.assert_array_equal(r, rstd.numpy().reshape(-1))


def test_a_row_of_inf_or_nan_leaves_the_others_of_its_block_alone():
    x = _rows(2 * rowwise._ROWS + 3, 384, 5)
    x[3, 17] = np.inf
    x[rowwise._ROWS + 1, 200] = np.nan
    x[rowwise._ROWS + 2, -1] = -np.inf
    want = torch.nn.functional.layer_norm(torch.tensor(x), (384,)).numpy()
    got = tapelab.nn.functional.layer_norm(tapelab.tensor(x), (384,)).numpy()
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got[[0, 4, rowwise._ROWS, rowwise._ROWS + 3]]).all()


@pytest.mark.parametrize("rows", [rowwise._ROWS + 1, 3 * rowwise._ROWS + 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_backward_from_the_kept_statistics_is_torchs(rows, threads):
    x, g = _rows(rows, 384, 3), _rows(rows, 384, 4)
    tapelab.set_num_threads(threads)   # the conftest restores both counts
    torch.set_num_threads(threads)
    grads = []
    for m in (torch, tapelab):
        xt = m.tensor(x, requires_grad=True)
        ln = m.nn.LayerNorm(384)
        ln(xt).backward(m.tensor(g))
        grads.append([t.detach().numpy() for t in (xt.grad, ln.weight.grad, ln.bias.grad)])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_array_equal(got, want)

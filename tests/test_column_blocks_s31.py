"""Column sums (a bias gradient) block by block with the accumulators in registers (``sum_order._blocks``):
the same floats as torch's ``sum(0)`` at one and two threads, across the row tiles, the level flushes
(every 16 rows; every 32 past 2**19 rows) and the columns left over after the blocks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from _threads import thread_counts

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="the column sums are numba loops")


threads = thread_counts([1, 2], ids=lambda t: f"threads{t}")


def _assert_torch_sum(g):
    got = tapelab.tensor(g).sum(0).numpy()
    want = torch.from_numpy(g).sum(0).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("rows,cols", [(1, 64), (15, 32), (16, 33), (17, 64), (257, 130), (1024, 128),
                                       (1024, 512), (4097, 40), (300, 1000), (70000, 32)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_blocks_match_torch(threads, rows, cols, dtype):
    rng = np.random.default_rng(rows + cols)
    g = (rng.standard_normal((rows, cols)) * np.exp(rng.standard_normal((rows, cols)) * 3)).astype(dtype)
    _assert_torch_sum(g)


def test_column_blocks_past_two_to_the_19_rows_match_torch():
    rng = np.random.default_rng(5)
    _assert_torch_sum(rng.standard_normal((600_000, 32)).astype(np.float32))

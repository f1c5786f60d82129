"""``kernels.parallel`` and ``parallel_ranges`` keep a split's cuts (and the int64 array an OpenMP region
reads) per rows or items, size, threads and grain: the blocks a call runs follow the thread count and the
grain of the call, as when the cuts were made each call."""
import numpy as np
import pytest
from numba import njit

import tapelab
from tapelab import kernels
from tapelab.kernels import loops


@njit(nogil=True)
def _block_rows(out):
    """Each row of the block gets the block's row count."""
    for r in range(out.shape[0]):
        for c in range(out.shape[1]):
            out[r, c] = out.shape[0]


@njit(nogil=True)
def _block_span(out, lo, hi):
    for i in range(lo, hi):
        out[i] = hi - lo


@pytest.fixture
def native_two():
    old_threads, old_native = tapelab.get_num_threads(), kernels.set_native(True)
    if loops("regions").parts(2) < 2:
        kernels.set_native(old_native)
        pytest.skip("numba's threading layer is not OpenMP or TBB here")
    yield
    tapelab.set_num_threads(old_threads)
    kernels.set_native(old_native)


def _rows_seen(out):
    kernels.parallel(_block_rows, 1, out)
    return sorted(set(out[:, 0].tolist()))


def test_row_blocks_follow_the_thread_count(native_two):
    out = np.zeros((1001, 256), np.float32)        # over REGION_SPLIT_MIN: split untimed
    assert out.size >= kernels.REGION_SPLIT_MIN
    for threads, blocks in ((2, [500, 501]), (1, [1001]), (2, [500, 501]), (3, [333, 334]), (2, [500, 501])):
        tapelab.set_num_threads(threads)
        assert _rows_seen(out) == blocks, threads


def test_row_blocks_follow_the_grain(native_two, monkeypatch):
    tapelab.set_num_threads(4)
    out = np.zeros((1001, 256), np.float32)        # 2^18 elements or so: 8 grains, four threads
    assert _rows_seen(out) == [250, 251]
    monkeypatch.setattr(kernels, "PARALLEL_MIN", out.size // 2)   # now two tasks of ATen's grain
    assert _rows_seen(out) == [500, 501]


def test_ranges_follow_the_thread_count(native_two):
    out = np.zeros(1001, np.float32)
    size = kernels.REGION_SPLIT_MIN
    for threads, spans in ((2, [500, 501]), (1, [1001]), (2, [500, 501])):
        tapelab.set_num_threads(threads)
        kernels.parallel_ranges(_block_span, out.shape[0], size, lambda first, lo, hi: (out, lo, hi), shared=True)
        assert sorted(set(out.tolist())) == spans, threads

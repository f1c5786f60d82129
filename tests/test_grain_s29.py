"""A loop's thread count follows ATen's grain (``at::internal::GRAIN_SIZE``, ``kernels.PARALLEL_MIN``):
``parallel_for`` makes ``ceil(size / grain)`` tasks, capped by the threads, so up to the grain a loop runs
on the calling thread (a 64 x 512 layer's bias fill and relu, as torch runs them)."""
import numpy as np
import pytest

import tapelab
from tapelab import kernels
from tapelab.base import pool
from tapelab.kernels import loops


@pytest.mark.parametrize("n_threads, size, expected", [
    (2, 1, 1), (2, kernels.PARALLEL_MIN, 1), (2, kernels.PARALLEL_MIN + 1, 2), (2, 10 * kernels.PARALLEL_MIN, 2),
    (4, kernels.PARALLEL_MIN + 1, 2), (4, 2 * kernels.PARALLEL_MIN + 1, 3), (4, 100 * kernels.PARALLEL_MIN, 4),
    (1, 100 * kernels.PARALLEL_MIN, 1)])
def test_split_count_is_atens_task_count(n_threads, size, expected):
    tapelab.set_num_threads(n_threads)
    assert kernels.split_count(size) == expected


def test_a_loop_at_the_grain_runs_whole():
    """``kernels.parallel`` over exactly ``PARALLEL_MIN`` elements calls the loop once, on all the rows;
    a row more is split work, which the pool times (split against whole) under one of its two keys."""
    tapelab.set_num_threads(2)
    fill = loops("pointwise").fill_rows
    row = np.arange(512, dtype=np.float32)
    for rows, timed in ((kernels.PARALLEL_MIN // 512, False), (kernels.PARALLEL_MIN // 512 + 1, True)):
        assert kernels.PARALLEL_MIN < rows * 512 < kernels.REGION_SPLIT_MIN or not timed
        out = np.zeros((rows, 512), np.float32)
        size = out.size
        keys = [(fill, 2), (fill, 2, "region")]
        before = [dict(pool.timings(k)).get(size.bit_length()) for k in keys]
        kernels.parallel(fill, 1, out, row)
        np.testing.assert_array_equal(out, np.broadcast_to(row, out.shape))
        after = [pool.timings(k).get(size.bit_length()) for k in keys]
        assert (after != before) == timed

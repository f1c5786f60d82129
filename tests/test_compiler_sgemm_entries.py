"""sgemm's one-call entries for a transposed B (``x @ w.T``: ``_sgemm_transposed``, ``_sgemm_few_rows``)
give the floats the three separate compiled calls gave, bit for bit, and equal numpy's product."""
from __future__ import annotations

import numpy as np
import pytest

from tapelab.kernels import switch

pytestmark = pytest.mark.skipif(not switch.enabled(), reason="our GEMM is a numba loop")


@pytest.mark.parametrize("m, k, n", [(8, 32, 64), (8, 64, 64), (64, 784, 512), (64, 512, 10), (3, 17, 40),
                                     (200, 300, 33), (20, 200, 800), (1000, 64, 64)])
def test_transposed_b_is_the_separate_calls_bit_for_bit(m, k, n):
    S = switch.loops("sgemm")
    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    got = S.matmul_into(a, w.T, np.empty((m, n), np.float32))
    want = np.empty((m, n), np.float32)
    if m * (k + n) < n * k:                      # matmul_into's few-rows branch: (w @ a.T).T
        result_t = np.empty((n, m), np.float32)
        S._sgemm(w, S._transposed(a), result_t)
        S._transpose_into(result_t, want)
    else:
        S._sgemm(a, S._transposed(w), want)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)

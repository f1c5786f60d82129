"""``kernels.rowwise.attention_softmax`` (the fused scale, causal cut and softmax of attention's scores,
its max and normalisation as masked 8-float vectors: ``kernels.row_masks``) against the formula in
float64: every row length 1..S, widths that are and are not multiples of 8, and nan/inf rows."""
import numpy as np
import pytest

from tapelab.kernels import rowwise

F = np.float32


def _reference(s, L, scale, causal):
    """softmax(s scale) over each row's first ``n`` keys in float64, the rest 0 (nan as numpy's)."""
    x = s.astype(np.float64) * np.float64(F(scale))
    R, S = s.shape
    n = np.minimum(np.arange(R) % L + 1, S) if causal else np.full(R, S)
    live = np.arange(S)[None, :] < n[:, None]
    x = np.where(live, x, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(x - x.max(axis=1, keepdims=True))
        p = p / p.sum(axis=1, keepdims=True)
    return np.where(live, p, 0.0)


@pytest.mark.parametrize("S", [1, 3, 8, 13, 16, 37, 64, 70])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [0.125, -0.7])
def test_matches_float64_formula(S, causal, scale):
    L = S + 3 if S % 2 else S              # causal rows longer than the row too (n capped at S)
    s = (np.random.default_rng(S).standard_normal((3 * L, S)) * 4).astype(F)
    out = s.copy()
    rowwise.attention_softmax(out, L, F(scale), causal)
    ref = _reference(s, L, scale, causal)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(out[ref == 0], 0.0)        # the cut keys: exact zeros


def test_masked_keys_are_zero_whatever_the_scores():
    """The causal cut is exact zeros, even where the cut scores are huge or nan."""
    L = S = 40
    s = np.full((L, S), np.nan, F)
    i, j = np.indices((L, S))
    s[j <= i] = 1.0
    rowwise.attention_softmax(s, L, F(1.0), True)
    np.testing.assert_array_equal(s[j > i], 0.0)
    np.testing.assert_allclose(s[j <= i], np.repeat(1.0 / (np.arange(L) + 1), np.arange(L) + 1), rtol=1e-6)


@pytest.mark.parametrize("S", [5, 24, 29])
def test_nan_and_inf_rows(S):
    """A nan among the live keys makes its row nan; +inf with finite keys gives nan (inf - inf), as
    numpy's formula does; -inf keys get weight 0."""
    s = np.random.default_rng(0).standard_normal((4, S)).astype(F)
    s[0, S - 1] = np.nan
    s[1, 2] = np.float32(-np.nan)            # the sign bit set: still a nan row
    s[2, 1] = np.inf
    s[3, ::2] = -np.inf
    out = s.copy()
    rowwise.attention_softmax(out, 4, F(0.5), False)
    assert np.isnan(out[:3]).all()
    np.testing.assert_allclose(out[3], _reference(s, 4, 0.5, False)[3], rtol=2e-6, atol=1e-7)
    assert np.all(out[3, ::2] == 0)

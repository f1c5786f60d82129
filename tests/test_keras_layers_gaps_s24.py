"""Gaps Keras 3's own layer/optimizer/loss/metric/model/trainer tests met on its torch backend under
``install_aliases()``, each written here as the torch call pattern Keras uses and checked against
PyTorch 2.13 (Keras itself is not imported)."""
import numpy as np
import pytest
import torch

import tapelab


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_np_array_of_a_tensor_is_a_copy_and_asarray_shares(m):
    # Keras's convert_to_numpy is np.array(x); its seed generator then assigns the seed Variable in place
    # (copy_), which must not rewrite the numpy seed read before
    t = m.zeros(3, dtype=m.int32)
    copied, shared = np.array(t), np.asarray(t)
    same_dtype, other_dtype = np.array(t, dtype=np.int32), np.array(t, dtype=np.float64)
    with m.no_grad():
        t.copy_(m.tensor([5, 6, 7], dtype=m.int32))
    np.testing.assert_array_equal(copied, [0, 0, 0])
    np.testing.assert_array_equal(same_dtype, [0, 0, 0])
    np.testing.assert_array_equal(other_dtype, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(shared, [5, 6, 7])
    assert copied.dtype == np.int32 and other_dtype.dtype == np.float64


def test_np_array_matches_torch_on_views_and_0d():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = []
    for m in (torch, tapelab):
        t = m.tensor(base)
        v, s = t[:, 1], t[1, 2]
        a_v, a_s = np.array(v), np.array(s)
        t.mul_(-1)
        out.append((a_v, a_s, np.asarray(v).copy()))
    for got, want in zip(out[1], out[0]):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape

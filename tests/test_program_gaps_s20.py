"""Gaps found in session 20, each against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


@pytest.mark.parametrize("index", [[0], 0])
def test_index_select_of_a_scalar_stays_a_scalar(index):
    xt, xl = torch.tensor(5.0, requires_grad=True), tapelab.tensor(5.0, requires_grad=True)
    yt, yl = xt.index_select(0, torch.tensor(index)), xl.index_select(0, tapelab.tensor(index))
    assert tuple(yl.shape) == tuple(yt.shape) == () and float(yl) == float(yt.detach())
    yt.backward()
    yl.backward()
    assert float(xl.grad) == float(xt.grad) == 1.0


@pytest.mark.parametrize("index", [[0, 0], []])
def test_index_select_of_a_scalar_takes_one_index(index):
    with pytest.raises(RuntimeError) as want:
        torch.tensor(5.0).index_select(0, torch.tensor(index, dtype=torch.long))
    with pytest.raises(RuntimeError) as got:
        tapelab.tensor(5.0).index_select(0, tapelab.tensor(index, dtype=tapelab.long))
    assert str(got.value) == str(want.value)


def test_index_select_of_a_scalar_out_of_range():
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.tensor(5.0).index_select(0, torch.tensor([1]))
    with pytest.raises(IndexError, match="index out of range in self"):
        tapelab.tensor(5.0).index_select(0, tapelab.tensor([1]))
    np.testing.assert_array_equal(tapelab.tensor(5.0).index_select(0, tapelab.tensor([0])).numpy(), 5.0)

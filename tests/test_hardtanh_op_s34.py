"""``F.hardtanh`` (and ``relu6``, ``nn.ReLU6(inplace=True)``) as one op with ``hardtanh_backward``, as
ATen's: values and gradients bit for bit against PyTorch's, 0 gradient at the bounds and at nan, in place,
bfloat16, and second derivatives (gradgradcheck in float64)."""
import numpy as np
import pytest
import torch

import tapelab


def _grads(lib, x, g, fn, dtype=None):
    t = lib.tensor(x)
    if dtype is not None:
        t = t.to(getattr(lib, dtype))
    t.requires_grad_(True)
    y = fn(lib, t)
    y.backward(lib.tensor(g).to(y.dtype))
    return y.detach().float().numpy(), t.grad.float().numpy()


def _data(n=5000):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    x[:6] = [-1.0, 1.0, 0.0, 6.0, np.nan, -np.inf]        # the bounds of both forms, nan, inf
    return x, rng.standard_normal(n).astype(np.float32)


CASES = {
    "hardtanh": lambda lib, t: lib.nn.functional.hardtanh(t),
    "hardtanh(-2, 0.5)": lambda lib, t: lib.nn.functional.hardtanh(t, -2.0, 0.5),
    "relu6": lambda lib, t: lib.nn.functional.relu6(t),
    "ReLU6 in place": lambda lib, t: lib.nn.ReLU6(inplace=True)(t * 1.0),
    "Hardtanh module": lambda lib, t: lib.nn.Hardtanh(-3.0, 3.0)(t),
}


@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_are_torchs_bit_for_bit(case):
    x, g = _data()
    ours, theirs = _grads(tapelab, x, g, CASES[case]), _grads(torch, x, g, CASES[case])
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_bfloat16():
    x, g = _data()
    fn = CASES["relu6"]
    for a, b in zip(_grads(tapelab, x, g, fn, "bfloat16"), _grads(torch, x, g, fn, "bfloat16")):
        np.testing.assert_array_equal(a, b)


def test_one_node_named_as_torchs():
    t = tapelab.randn(4, requires_grad=True)
    y = tapelab.nn.functional.relu6(t)
    assert type(y.grad_fn).__name__ == type(torch.nn.functional.relu6(torch.randn(4, requires_grad=True)).grad_fn).__name__
    assert y.grad_fn.next_functions[0][0] is not None and len(y.grad_fn.next_functions) == 1


def test_gradgradcheck_float64():
    x = tapelab.tensor(np.array([-1.5, -0.3, 0.2, 0.9, 2.5], np.float64), requires_grad=True)
    assert tapelab.autograd.gradcheck(lambda t: tapelab.nn.functional.hardtanh(t) * t, (x,))
    assert tapelab.autograd.gradgradcheck(lambda t: tapelab.nn.functional.hardtanh(t) * t, (x,))


def test_integer_input_keeps_its_dtype():
    a = tapelab.nn.functional.hardtanh(tapelab.tensor([-5, 0, 3, 9]), -2, 4)
    b = torch.nn.functional.hardtanh(torch.tensor([-5, 0, 3, 9]), -2, 4)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1] and a.tolist() == b.tolist()

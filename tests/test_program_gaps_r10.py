"""Gaps found in session 13 (helper R) running time-series research programs unchanged: thuml's
Time-Series-Library (DLinear, PatchTST, iTransformer, TimesNet, Autoformer, FEDformer, Informer,
Crossformer, TimeMixer, SegRNN, ...) driven through its own run.py, yuqinie98/PatchTST and
cure-lab/LTSF-Linear. Each test states the behaviour on small inputs, against real torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


BINARY = {"add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
          "div": lambda m, a, b: a / (b.abs() + 1), "maximum": lambda m, a, b: m.maximum(a, b),
          "where": lambda m, a, b: m.where(a > b, a, b), "add_alpha": lambda m, a, b: m.add(a, b, alpha=2)}


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("layouts", ["t+c", "c+t", "t+bias", "bias+t", "t+t", "slice+c"])
def test_an_elementwise_result_is_laid_out_as_atens_tensor_iterator_lays_it_out(op, layouts):
    """numpy lays ``a + b`` out row-major when the operands' orders disagree; ATen follows the first
    operand that orders two dimensions (``conv(x).transpose(1, 2) + linear(marks)`` is transposed)."""
    def operands(m):
        t = m.tensor(_data(2, 5, 3)).transpose(1, 2)
        c = m.tensor(_data(2, 3, 5, seed=1))
        bias = m.tensor(_data(5, seed=2))
        s = m.tensor(_data(2, 6, 5, seed=3))[:, ::2]
        return {"t+c": (t, c), "c+t": (c, t), "t+bias": (t, bias), "bias+t": (bias, t), "t+t": (t, t * 2),
                "slice+c": (s, c)}[layouts]
    want = BINARY[op](torch, *operands(torch))
    got = BINARY[op](tapelab, *operands(tapelab))
    assert got.stride() == want.stride() and got.is_contiguous() == want.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@BOTH
def test_an_elementwise_gradient_is_laid_out_as_torchs(m):
    a = m.tensor(_data(2, 5, 3)).transpose(1, 2).requires_grad_()
    b = m.tensor(_data(2, 3, 5, seed=1), requires_grad=True)
    (a * b).sum().backward()
    assert (a + b).stride() == (15, 1, 3)
    np.testing.assert_array_equal(a.grad.numpy(), _data(2, 3, 5, seed=1))


def test_dropout_after_a_transposed_convolution_plus_a_linear_draws_torchs_mask():
    """TSLib's DataEmbedding: ``Conv1d(x.permute(0, 2, 1)).transpose(1, 2) + Linear(marks)``, then dropout:
    the mask is drawn in the sum's memory order, so the sum must be laid out as torch's."""
    def run(m):
        m.manual_seed(0)
        conv = m.nn.Conv1d(7, 16, 3, padding=1, padding_mode="circular", bias=False)
        lin = m.nn.Linear(4, 16, bias=False)
        x, marks = m.tensor(_data(2, 12, 7)), m.tensor(_data(2, 12, 4, seed=1))
        m.manual_seed(1)
        out = m.nn.functional.dropout(conv(x.permute(0, 2, 1)).transpose(1, 2) + lin(marks), 0.5)
        return out.detach().numpy()
    np.testing.assert_allclose(run(tapelab), run(torch), rtol=1e-5, atol=1e-6)


@BOTH
def test_checkpoint_device_states_on_cpu_tensors_are_empty(m):
    """reformer_pytorch (TSLib's Reformer) imports get_device_states/set_device_states to replay a
    forward with the same random state; cpu tensors have no device state."""
    from importlib import import_module
    cp = import_module(f"{m.__name__}.utils.checkpoint")
    devices, states = cp.get_device_states(m.ones(2), [m.zeros(1)], 3)
    assert devices == [] and states == []
    cp.set_device_states(devices, states)


@pytest.mark.parametrize("make", [lambda m: m.ones(3, 1, 4).expand(3, 6, 4),
                                  lambda m: m.arange(16.).view(2, 1, 8).expand(2, 5, 8).view(2, 5, 2, 4),
                                  lambda m: m.ones(4, 6).t()[::2], lambda m: m.ones(6, 4)[::2]],
                         ids=["expand", "expand-view", "transposed-slice", "slice"])
def test_dropout_of_a_broadcast_or_strided_input_draws_torchs_mask(make):
    """dropout's noise is ``empty_like(input)``: a broadcast axis (stride 0) keeps its place in the
    layout (``infer_dense_strides``), it is not the fastest axis. ETSformer's damping layer drops
    ``einops.repeat(x, 'b 1 d -> b t d')``."""
    def run(m):
        m.manual_seed(0)
        return m.nn.functional.dropout(make(m), 0.5).numpy()
    np.testing.assert_array_equal(run(tapelab), run(torch))


@BOTH
def test_tensor_keeps_the_dtype_numpy_and_pandas_items_carry(m):
    """``torch.tensor(series)``, ``torch.tensor([np.float64(...), ...])`` (metrics collected as numpy
    scalars) are float64 under torch: numpy scalars and arrays keep their dtype, Python floats take the
    default, the items' dtypes promote (``infer_scalar_type``)."""
    pd = pytest.importorskip("pandas")
    s = pd.Series([1.5, 2.5])
    f64, f32 = m.float64, m.float32
    cases = [(m.tensor(s), f64), (m.as_tensor(s), f64), (m.tensor(np.float64(1.5)), f64),
             (m.tensor([np.float64(1.5), 2.0]), f64), (m.tensor([np.float32(1.5), 2.0]), f32),
             (m.tensor([np.float16(1.5), 2.0]), f32), (m.tensor([np.float16(1.5)]), m.float16),
             (m.tensor([s.values, s.values]), f64), (m.tensor([[1.5, 2.5], [3.0, 4.0]]), f32),
             (m.tensor([m.tensor([1.0], dtype=f64), m.tensor([2.0], dtype=f64)]), f64),
             (m.tensor([1 + 2j, np.float64(1.0)]), m.complex128), (m.tensor([1 + 2j, 1.0]), m.complex64),
             (m.tensor([np.complex64(1j), 1.0]), m.complex64), (m.tensor([1, 2]), m.int64)]
    for t, want in cases:
        assert t.dtype == want
    assert m.tensor([np.float64(1.5), 2.0]).tolist() == [1.5, 2.0]


@pytest.mark.parametrize("op", ["layer_norm", "softmax", "log_softmax"])
def test_row_kernels_return_row_major_results_and_dropout_after_them_draws_torchs_mask(op):
    """ATen's layer_norm and softmax compute on ``input.contiguous()``: a transposed input gives a
    row-major result, and a dropout after it draws its mask in that order (TimesNet's classifier:
    ``dropout(gelu(layer_norm(block(x))))``, the block's output transposed)."""
    def run(m):
        x = m.tensor(_data(2, 8, 6)).transpose(1, 2).requires_grad_()
        f = {"layer_norm": lambda t: m.nn.functional.layer_norm(t, (8,)),
             "softmax": lambda t: t.softmax(-1), "log_softmax": lambda t: t.log_softmax(-1)}[op]
        y = f(x)
        m.manual_seed(0)
        out = m.nn.functional.dropout(m.nn.functional.gelu(y), 0.5)
        out.sum().backward()
        return y.stride(), out.detach().numpy(), x.grad.numpy()
    (ws, wo, wg), (gs, go, gg) = run(torch), run(tapelab)
    assert gs == ws
    assert ((go == 0) == (wo == 0)).all()   # the same mask
    np.testing.assert_allclose(go, wo, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gg, wg, rtol=1e-4, atol=1e-5)

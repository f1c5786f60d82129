"""Gaps that recent-architecture research scripts (Mamba, MoE, RWKV, KAN, NeRF ...) met in session 16,
each against PyTorch itself."""
import numpy as np
import pytest
import torch

import tapelab


def _randn(m, *shape, seed=0):
    return m.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("eq, shapes", [
    ("bld,dn->bldn", [(2, 3, 4), (4, 5)]),             # Mamba's discretisation: an outer product, a mul
    ("bld,bln,bld->bldn", [(2, 3, 4), (2, 3, 5), (2, 3, 4)]),
    ("ij->i", [(3, 4)]),                                # a sum
    ("ij,k->k", [(3, 4), (5,)]),                        # labels summed alone, then a mul
    ("bdn,bn->bd", [(2, 4, 5), (2, 5)]),                # a contraction: ATen's bmm
    ("ij,ij->", [(3, 4), (3, 4)]),
])
def test_cpu_autocast_lowers_an_einsum_only_when_it_runs_a_bmm(eq, shapes):
    """A Mamba selective scan's ``einsum('b l d, d n -> b l d n', delta, A)`` under cpu autocast:
    PyTorch's CPU list names bmm, not einsum, so an einsum that contracts nothing stays float32."""
    got = {}
    for m in (torch, tapelab):
        ops = [_randn(m, *s, seed=i) for i, s in enumerate(shapes)]
        with m.autocast("cpu", dtype=m.bfloat16):
            out = m.einsum(eq, *ops)
        got[m.__name__] = (str(out.dtype).split(".")[-1], out.float().numpy())
    assert got["tapelab"][0] == got["torch"][0]
    np.testing.assert_allclose(got["tapelab"][1], got["torch"][1], rtol=1e-6)  # bfloat16 would be 4e-3 off


_CONVS = {
    "conv1d_depthwise": (lambda F, x, w, b: F.conv1d(x, w, b, padding=3, groups=8), (2, 8, 11), (8, 1, 4), 8),
    "conv1d": (lambda F, x, w, b: F.conv1d(x, w, b, padding=1), (2, 8, 9), (6, 8, 3), 6),
    "conv2d_grouped": (lambda F, x, w, b: F.conv2d(x, w, b, padding=1, groups=2), (2, 8, 5, 5), (6, 4, 3, 3), 6),
    "conv_transpose2d": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2), (2, 8, 4, 4), (8, 6, 3, 3), 6),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_CONVS))
def test_half_convolution_adds_its_bias_before_rounding(name, dtype):
    """Mamba's depthwise causal ``nn.Conv1d`` in bfloat16: ATen adds the bias to the float32
    accumulator and rounds once (a half transposed convolution adds it after rounding); adding it
    to the rounded product moved a third of the outputs by an ulp."""
    f, xs, ws, nb = _CONVS[name]
    got = {}
    for m in (torch, tapelab):
        dt = getattr(m, dtype)
        x, w, b = (_randn(m, *s, seed=i).to(dt).requires_grad_() for i, s in enumerate((xs, ws, (nb,))))
        y = f(m.nn.functional, x, w, b)
        y.float().pow(2).sum().backward()
        got[m.__name__] = [y.float().detach().numpy(), b.grad.float().numpy(), y.grad_fn.name()]
    if dtype == "bfloat16":
        np.testing.assert_array_equal(got["tapelab"][0], got["torch"][0])
    else:  # ATen's half grouped kernel sums in another order: a rare ulp (rounding twice moved ~25%)
        np.testing.assert_allclose(got["tapelab"][0], got["torch"][0], rtol=1e-3)
        assert (got["tapelab"][0] != got["torch"][0]).mean() < 0.02
    np.testing.assert_allclose(got["tapelab"][1], got["torch"][1], rtol=1e-2)
    assert got["tapelab"][2] == got["torch"][2] == "ConvolutionBackward0"


def test_autocast_conv_module_rounds_once_and_its_gradients_match():
    """``nn.Conv2d`` under ``torch.autocast('cpu', torch.bfloat16)``: the float32 bias is cast with the
    input and weight and enters the bfloat16 convolution itself."""
    got = {}
    for m in (torch, tapelab):
        m.manual_seed(0)
        conv = m.nn.Conv2d(4, 3, 3, padding=1)
        x = m.randn(2, 4, 5, 5)
        with m.autocast("cpu", dtype=m.bfloat16):
            y = conv(x)
        y.float().sum().backward()
        got[m.__name__] = [y.float().detach().numpy(), conv.bias.grad.numpy(), conv.weight.grad.numpy()]
    np.testing.assert_array_equal(got["tapelab"][0], got["torch"][0])
    np.testing.assert_allclose(got["tapelab"][1], got["torch"][1], rtol=1e-6)
    np.testing.assert_allclose(got["tapelab"][2], got["torch"][2], rtol=2e-2, atol=1e-2)


def test_float16_linear_adds_its_bias_before_rounding():
    """``F.linear`` in float16 is ATen's addmm: the bias joins the float32 accumulator, one rounding."""
    got = []
    for m in (torch, tapelab):
        x, w, b = (_randn(m, *s, seed=i).half() for i, s in enumerate(((2, 7, 8), (6, 8), (6,))))
        got.append(m.nn.functional.linear(x, w, b).float().numpy())
    np.testing.assert_array_equal(got[1], got[0])


@pytest.mark.parametrize("case", ["bias_dtype", "weight_dtype", "bias_size", "bias_size_transposed"])
def test_convolution_refuses_what_aten_refuses(case):
    """A float64 bias (or weight) on a float32 convolution is refused, not promoted; a bias of the wrong
    length names the weight's size."""
    errs = []
    for m in (torch, tapelab):
        F = m.nn.functional
        x, w = _randn(m, 1, 4, 5), _randn(m, 6, 4, 2)
        call = {"bias_dtype": lambda: F.conv1d(x, w, _randn(m, 6).double()),
                "weight_dtype": lambda: F.conv1d(x, w.double()),
                "bias_size": lambda: F.conv1d(x, w, _randn(m, 4)),
                "bias_size_transposed": lambda: F.conv_transpose1d(x, w[:4], _randn(m, 4, 1), groups=2)}[case]
        with pytest.raises(RuntimeError) as e:
            call()
        errs.append(str(e.value))
    assert errs[1].startswith(errs[0])


def test_compiled_rmsnorm_step_saves_its_narrow_factor_at_its_own_shape():
    """A Mamba ``RMSNorm`` under ``torch.compile``: the one-node step's forward kernel wrote
    ``rsqrt(mean(x*x) + eps)`` (N, 1), which its backward reads, at the (N, D) loop's shape, and the
    second call's backward refused it."""
    got = {}
    for m in (torch, tapelab):
        w = m.nn.Parameter(m.linspace(0.5, 1.5, 4))

        def rms(x):
            return x * m.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
        f = m.compile(rms) if m is tapelab else rms     # torch's eager numbers: inductor takes seconds
        x = _randn(m, 2, 3, 4).requires_grad_()
        rows = []
        for _ in range(3):
            y = f(x)
            (y * y).sum().backward()
            rows.append([y.detach().numpy(), w.grad.numpy().copy(), x.grad.numpy().copy()])
            w.grad = x.grad = None
        got[m.__name__] = rows
    for ours, theirs in zip(got["tapelab"], got["torch"]):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compiled_kernel_with_an_infinite_constant():
    """A log-space selective scan's ``masked_fill(~tril, -float('inf'))`` then ``exp`` under
    ``torch.compile``: the generated loop spelled the constant ``np.float32(-inf)``, no name there."""
    got = []
    for m in (torch, tapelab):
        def seg(x):
            mask = m.tril(m.ones(5, 5, dtype=m.bool))
            s = (x.unsqueeze(2) - x.unsqueeze(1)).masked_fill(~mask, -float("inf"))
            return m.exp(s).sum(2) * x
        x = _randn(m, 2, 5).requires_grad_()
        y = (m.compile(seg) if m is tapelab else seg)(x)
        y.sum().backward()
        got.append([y.detach().numpy(), x.grad.numpy()])
    for a, b in zip(got[1], got[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("eq, shapes", [
    ("bld,dn->bldn", [(2, 3, 4), (4, 5)]),
    ("bld,bln,bld->bldn", [(2, 3, 4), (2, 3, 5), (2, 3, 4)]),   # mamba-minimal's deltaB_u
    ("bld,dn->nbld", [(2, 3, 4), (4, 5)]),
    ("bld,n->bn", [(2, 3, 4), (5,)]),
    ("ii,j->ij", [(3, 3), (4,)]),
])
def test_einsum_without_a_contraction_is_atens_chain_of_muls(eq, shapes, dtype):
    """Mamba's ``einsum('b l d, b l n, b l d -> b l d n', delta, B, u)`` in bfloat16: ATen multiplies
    the operands pairwise (the first product rounded before the next) and differentiates the muls;
    one einsum rounding once, and its contraction-shaped backward, moved values and gradients."""
    got = {}
    for m in (torch, tapelab):
        xs = [_randn(m, *s, seed=i).to(getattr(m, dtype)).requires_grad_() for i, s in enumerate(shapes)]
        y = m.einsum(eq, *xs)
        y.backward(_randn(m, *y.shape, seed=9).to(y.dtype))
        got[m.__name__] = [y.stride(), y.grad_fn.name(), y.detach().float().numpy()] + [x.grad.float().numpy() for x in xs]
    assert got["tapelab"][:2] == got["torch"][:2]
    for a, b in zip(got["tapelab"][2:], got["torch"][2:]):
        np.testing.assert_allclose(a, b, rtol=1e-6 if dtype == "float32" else 0, atol=1e-6 if dtype == "float32" else 0)


def test_einsum_of_one_operand_is_a_view_and_a_diagonal_view_is_tracked():
    """``einsum('ij->ji', x)`` is a view of ``x``; ``x.diagonal()`` is a view whose base is ``x``, so
    ``K.diagonal().add_(eps)`` on a non-leaf is differentiated (tapelab refused it as an untracked view)."""
    res = {}
    for m in (torch, tapelab):
        x = _randn(m, 3, 3)
        a = m.ones(3, 3, requires_grad=True)
        k = a * 2
        k.diagonal().add_(m.tensor([1.0, 2.0, 3.0]))
        (k * k).sum().backward()
        res[m.__name__] = (m.einsum("ij->ji", x)._base is x, x.diagonal()._base is x, k.grad_fn.name(),
                           k.detach().numpy(), a.grad.numpy())
    assert res["tapelab"][:3] == res["torch"][:3] == (True, True, "torch::autograd::CopySlices")
    np.testing.assert_array_equal(res["tapelab"][3], res["torch"][3])
    np.testing.assert_array_equal(res["tapelab"][4], res["torch"][4])


@pytest.mark.parametrize("name", ["sum", "sumk", "mean", "prod", "amax", "var", "std", "logsumexp", "norm",
                                  "all", "count_nonzero", "cumsum", "cumprod", "cummax", "nansum", "aminmax"])
def test_reductions_and_scans_of_a_permuted_tensor_are_contiguous(name):
    """ATen allocates a reduction's (and a scan's) result contiguous; numpy's follows the input's memory
    order, so ``x.transpose(1, 2).sum(-1).view(b, -1)`` raised where torch's runs."""
    got = []
    for m in (torch, tapelab):
        p = m.arange(1.0, 25.0).reshape(2, 3, 4).permute(2, 0, 1)
        r = {"sum": lambda: p.sum(1), "sumk": lambda: p.sum([1, 2], keepdim=True), "mean": lambda: p.mean(1),
             "prod": lambda: p.prod(1), "amax": lambda: p.amax(1), "var": lambda: p.var(1), "std": lambda: p.std(1),
             "logsumexp": lambda: p.logsumexp(1), "norm": lambda: p.norm(dim=1), "all": lambda: (p > 5).all(1),
             "count_nonzero": lambda: m.count_nonzero(p, 1), "cumsum": lambda: p.cumsum(1),
             "cumprod": lambda: p.cumprod(1), "cummax": lambda: p.cummax(1).values,
             "nansum": lambda: p.nansum(2, keepdim=True), "aminmax": lambda: m.aminmax(p, dim=1).max}[name]()
        got.append((r.stride(), r.is_contiguous(), tuple(r.view(-1).shape), r.double().numpy()))
    assert got[1][:3] == got[0][:3]
    np.testing.assert_allclose(got[1][3], got[0][3], rtol=1e-6)


def test_elementwise_result_strides_one_element_dimensions_as_aten():
    """ATen orders an elementwise result's dimensions by its operands' strides, those of one-element
    dimensions included (numpy's contiguity ignores them): an einsum's unsqueezed, permuted operands
    multiplied came out in another memory order (observable in ``stride()`` and in ``dropout``'s mask)."""
    got = []
    for m in (torch, tapelab):
        d = m.ones(2)
        for _ in range(4):
            d = d.unsqueeze(d.ndim)
        d = d.permute(1, 2, 3, 0, 4)                                    # (1, 1, 1, 2, 1)
        e = m.ones(1, 2, 4).unsqueeze(3).unsqueeze(4).permute(1, 3, 0, 4, 2)   # (2, 1, 1, 1, 4)
        c = m.ones(3).unsqueeze(1).unsqueeze(2).unsqueeze(3).unsqueeze(4).permute(1, 0, 2, 3, 4)
        got.append([(d * e).stride(), (d * e * c).stride(), m.einsum("d,bea,c->ecbda", m.ones(2), m.ones(1, 2, 4),
                                                                      m.ones(3)).stride()])
    assert got[1] == got[0]


def test_bfloat16_division_gradient_rounds_as_atens_formula():
    """RWKV's ``(e1 * aa + e2 * vv) / (e1 * bb + e2)`` in bfloat16: PyTorch differentiates the divisor
    as ``-g * ((a / b) / b)``, each step rounded; ``-(g / b) * a / b`` rounded elsewhere."""
    got = []
    for m in (torch, tapelab):
        a, b = (_randn(m, 4, 16, seed=i).bfloat16().requires_grad_() for i in range(2))
        (a / (b.abs() + 1)).backward(_randn(m, 4, 16, seed=9).bfloat16())
        got.append([a.grad.float().numpy(), b.grad.float().numpy()])
    for x, y in zip(got[1], got[0]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("shape, normalized", [((2, 5, 6), (6,)), ((2, 3, 100), (100,)), ((2, 3, 4), (3, 4))])
def test_bfloat16_layer_norm_input_gradient_uses_its_bfloat16_statistics(shape, normalized):
    """A bfloat16 ``nn.LayerNorm`` (a model cast with ``.bfloat16()``): ATen keeps the forward's mean and
    1/std in bfloat16 and forms the input's gradient from them; float32 statistics moved about half
    of the gradient's values by an ulp."""
    got = []
    for m in (torch, tapelab):
        x = _randn(m, *shape).bfloat16().requires_grad_()
        w = _randn(m, *normalized, seed=5).bfloat16()
        m.nn.functional.layer_norm(x, normalized, w).backward(_randn(m, *shape, seed=9).bfloat16())
        got.append(x.grad.float().numpy())
    np.testing.assert_array_equal(got[1], got[0])


def test_bfloat16_tanh_gradient_is_computed_in_float32():
    """RWKV-style and RNN scripts in bfloat16: ATen's tanh_backward computes ``g (1 - y^2)`` in
    float32 and rounds once; numpy's bfloat16 arithmetic rounded each product."""
    got = []
    for m in (torch, tapelab):
        x = (_randn(m, 4000) * 3).bfloat16().requires_grad_()
        y = m.tanh(x)
        (gx,) = m.autograd.grad(y, x, _randn(m, 4000, seed=1).bfloat16())
        got.append(gx.float().numpy())
    np.testing.assert_array_equal(got[1], got[0])


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_hardswish_and_hardsigmoid_gradients_as_atens_kernels(name, dtype):
    """MobileNetV3-style activations: ATen's backward takes the slope x/3 + 1/2 (1/6) on the open
    interval (-3, 3) only, so at x = -3 and 3 (common in bfloat16) the gradient is 0 and 1 (0), where
    the clamp composite gave -1/2 and 3/2 (1/6); its products round as the kernel's."""
    got = []
    for m in (torch, tapelab):
        x = m.tensor([-4.0, -3.0, -2.5, -1.0, 0.0, 1.0, 2.5, 3.0, 3.5, 5.0])
        x = m.cat([x, _randn(m, 200) * 3]).to(getattr(m, dtype)).requires_grad_()
        y = getattr(m.nn.functional, name)(x)
        (g,) = m.autograd.grad(y, x, _randn(m, 210, seed=1).to(y.dtype), create_graph=name == "hardswish")
        row = [y.detach().float().numpy(), g.detach().float().numpy(), y.grad_fn.name()]
        if name == "hardswish":
            row.append(m.autograd.grad((g * g).sum(), x)[0].float().numpy())
        got.append(row)
    assert got[1][2] == got[0][2]
    for a, b in zip(got[1][:2] + got[1][3:], got[0][:2] + got[0][3:]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_logsigmoid_is_atens_op_with_its_bfloat16_buffer(dtype):
    """DPO-style ``F.logsigmoid(beta * margin)`` losses: PyTorch's log_sigmoid keeps exp(-|x|) in the input's
    dtype for its backward, ``(1 - z/(1+z)) g`` below 0 and ``z/(1+z) g`` above; its node is
    LogSigmoidBackward0 (the composite -softplus(-x) was NegBackward0 and moved bfloat16 gradients)."""
    got = []
    for m in (torch, tapelab):
        x = (_randn(m, 2000) * 3).to(getattr(m, dtype)).requires_grad_()
        y = m.nn.functional.logsigmoid(x)
        (g,) = m.autograd.grad(y, x, _randn(m, 2000, seed=1).to(y.dtype), create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), x)
        got.append([y.grad_fn.name(), y.detach().double().numpy(), g.detach().double().numpy(), gg.double().numpy()])
    assert got[1][0] == got[0][0] == "LogSigmoidBackward0"
    rtol = 1e-6 if dtype == "float32" else 0      # float32: libm's last bits (ATen's vectorised exp/log1p)
    for a, b in zip(got[1][1:3], got[0][1:3]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-7 if rtol else 0)
    np.testing.assert_allclose(got[1][3], got[0][3], rtol=1e-5 if dtype == "float32" else 2e-2, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_silu_is_atens_op_and_its_differentiable_backward_rounds_in_the_input_dtype(dtype):
    """Mamba / SwiGLU gating: ``F.silu`` is x / (1 + exp(-x)) with ATen's silu_backward in float32; a
    gradient penalty's ``create_graph=True`` takes PyTorch's infinitely_differentiable_silu_backward,
    Tensor ops in the input's dtype (bfloat16 rounded at each), which the float32 composite did not."""
    got = []
    for m in (torch, tapelab):
        x = (_randn(m, 2000) * 3).to(getattr(m, dtype)).requires_grad_()
        y = m.nn.functional.silu(x)
        (g,) = m.autograd.grad(y, x, _randn(m, 2000, seed=1).to(y.dtype), create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        got.append([y.grad_fn.name(), y.detach().double().numpy(), g.detach().double().numpy(), gg.double().numpy()])
    assert got[1][0] == got[0][0] == "SiluBackward0"
    for a, b in zip(got[1][1:], got[0][1:]):
        if dtype == "bfloat16":
            np.testing.assert_array_equal(a, b)
        else:                                     # libm's last bits (ATen's vectorised exp)
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


def test_indexing_with_none_strides_the_new_axis_as_unsqueeze():
    """``a[:, None] * b[None, :]`` outer products (NeRF's ``x[..., None, :] * freqs[:, None]``): ATen's
    indexing unsqueezes, striding the new axis as the dim after it spans; numpy strides it 0, which
    showed in ``stride()`` and fed ATen's one-element-dim ordering of later elementwise results."""
    got = []
    for m in (torch, tapelab):
        a = m.arange(6.0).view(2, 3)
        views = [a[:, None], a[None], a[..., None], a[None, :, None], a[None, None], a[0, None], a[:, None, 1]]
        y = m.ones(2, 3, requires_grad=True) * 1
        y[:, None].mul_(3)
        got.append([v.stride() for v in views] + [y.detach().numpy().tolist()])
    assert got[1] == got[0]

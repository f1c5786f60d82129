"""Gaps found in session 25 (helper A) running libraries unchanged under ``install_aliases()``:
stable-baselines3 and sb3-contrib on gymnasium (PPO, A2C, DQN, SAC, TD3, DDPG, HER, gSDE, CNN and
Dict policies, VecNormalize, QR-DQN, TQC, TRPO, ARS, MaskablePPO, RecurrentPPO, CrossQ; save/load),
gymnasium's NumpyToTorch wrappers, x-transformers (decoders and encoders over sixty attention and
layer options, XTransformer, continuous, XL, xval, DPO, belief-state, non-autoregressive wrappers,
generation), vector-quantize-pytorch (VQ, residual, grouped, FSQ, LFQ, SimVQ, latent quantization),
ema-pytorch (EMA, Karras/post-hoc EMA), BackPACK (first- and second-order extensions on MLPs, CNNs,
RNNs, the fx converter, Hessian-free products) and pytorch_msssim ran as under PyTorch; einx's own
test suite under ``torch.compile`` found the two gaps below. Each pattern is written here directly
(none of those libraries is imported) and checked against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.compiler import cuda as cuda_backend
from tapelab.fx.proxy import TraceError
from tapelab.fx.trace_from_tape import trace_from_tape

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


def _compile(m, fn):
    # dynamo's "eager" backend keeps PyTorch's side quick; tapelab's default backend fuses
    return m.compile(fn, backend="eager") if m is torch else m.compile(fn)


# ---------------------------------------------------------------- an untraceable op inside a library's try block
def _scatter_into_view(a, idx, v):
    """einx's generated ``index_put_`` code: an in-place write into a reshaped view of the input, the
    error wrapped by the library (einx raises its own CallOperationError from it)."""
    try:
        flat = a.reshape(-1)
        out = flat.index_put_((idx,), v)
        return out.reshape(a.shape) * 2
    except Exception as e:
        raise ValueError("the library's own wrapper") from e


@BOTH
def test_compiled_call_writing_a_view_of_its_input_inside_a_try_block(m):
    """tapelab's trace raised its TraceError into the traced code (at the read of the written view), so
    the library's ``except`` turned it into its own error; the trace now stops recording there and
    the call runs eagerly to its end, as PyTorch's compile runs it."""
    f = _compile(m, _scatter_into_view)
    idx, v = m.tensor([0, 4]), m.tensor([1.0, 2.0])
    for _ in range(2):                      # the first call traces, the second runs the cached entry
        a = m.zeros(2, 3)
        out = f(a, idx, v)
        assert out.tolist() == [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0]]
        assert a.tolist() == [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]   # the input was written once


@BOTH
def test_compiled_call_whose_except_branch_would_hide_a_trace_error(m):
    """A library that falls back inside ``except Exception`` must not see the tracer's error: it would
    return its fallback instead of the value."""
    def f(x):
        y = x.reshape(-1)
        y.mul_(3)
        try:
            return (y.view(x.shape) + x).sum()
        except Exception:
            return x.new_zeros(())

    x = m.ones(2, 2, requires_grad=False)
    assert _compile(m, f)(x).item() == 24.0


def test_trace_from_tape_raises_its_trace_error_after_the_run():
    """The public tracer raises the same TraceError, once the function has run to its end (its
    eager result on ``.result``)."""
    seen = []

    def f(a):
        flat = a.reshape(-1)
        flat.add_(1)
        try:
            out = flat.view(2, 2) * 2
        except TraceError:
            seen.append("caught in the traced code")
            raise
        return out

    with pytest.raises(TraceError, match="modified in place after it was recorded") as info:
        trace_from_tape(f, tapelab.zeros(2, 2))
    assert seen == [] and info.value.result.tolist() == [[2.0, 2.0], [2.0, 2.0]]


# ---------------------------------------------------------------- fused ufuncs without a CUDA form
def _logaddexp_chain(m, x, y):
    return (m.logaddexp(x * 2, y) - m.logaddexp2(y, x).square()).exp()


@BOTH
def test_compiled_logaddexp_chain_values_and_gradients(m):
    """einx's ``logaddexp`` compiled on the cpu: building the fused group's node metadata wrote its
    CUDA source too, which has no form for logaddexp (NotImplementedError on a cpu tensor)."""
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((4, 5)).astype("float32"), rng.standard_normal(5).astype("float32")
    ys[0] = xs[0, 0] * 2                   # equal operands: numpy's and ATen's x + log 2 branch
    x, y = m.tensor(xs, requires_grad=True), m.tensor(ys)
    out = _compile(m, lambda a, b: _logaddexp_chain(m, a, b))(x, y)
    out.sum().backward()
    xr = torch.tensor(xs, requires_grad=True)
    ref = _logaddexp_chain(torch, xr, torch.tensor(ys))
    ref.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), xr.grad.numpy(), rtol=1e-4, atol=1e-6)


def _fused_meta(f):
    gm = next(iter(f.cache.values())).graph
    return [n.meta["fused"] for n in gm.graph.nodes if "fused" in n.meta]


def test_fused_node_metadata_names_no_cuda_source_for_a_cpu_only_ufunc():
    """nextafter fuses on the cpu as the numpy chain: numba's loop calls its helper library's
    ``numba_nextafterf``, which the kernel's shared library left unresolved (OSError at load)."""
    xs, ys = np.random.default_rng(3).standard_normal((2, 3, 4)).astype("float32")
    f = tapelab.compile(lambda a, b: (tapelab.nextafter(a * 2, b) + 1).tanh())
    out = f(tapelab.tensor(xs), tapelab.tensor(ys))
    ref = (torch.nextafter(torch.tensor(xs) * 2, torch.tensor(ys)) + 1).tanh()
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    metas = _fused_meta(f)
    assert metas and all(meta["cuda_source"] is None for meta in metas)
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0):   # on the cpu log1p stays out of fused kernels (numba's scalar libm): cuda fuses it
        g = tapelab.compile(lambda a, b: _logaddexp_chain(tapelab, a, b))
        g(tapelab.randn(3, 4, device="cuda"), tapelab.randn(4, device="cuda"))
        src = "\n".join(meta["cuda_source"] for meta in _fused_meta(g))
    assert "log1pf(expf(-fabsf(" in src and "logf(2.0f)" in src


def test_simulated_cuda_runs_a_group_without_a_cuda_form_op_by_op():
    """On a cuda device a group holding a ufunc that has no CUDA form is left unfused (it raised
    NotImplementedError from the compile); the compiled call's values are eager's."""
    from tapelab._backend import simulated_cuda

    def f(m, a, b):
        return (m.nextafter(a * 2, b) + 1).tanh() * b

    rng = np.random.default_rng(1)
    xs, ys = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")
    ref = f(torch, torch.tensor(xs), torch.tensor(ys)).numpy()
    with simulated_cuda(0):
        c = tapelab.compile(lambda a, b: f(tapelab, a, b))
        x, y = tapelab.tensor(xs, device="cuda"), tapelab.tensor(ys, device="cuda")
        for _ in range(2):
            out = c(x, y)
            assert out.device.type == "cuda"
            np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)
        assert not any("nextafter" in meta["name"] for meta in _fused_meta(c))


@BOTH
def test_compiled_nan_tests_fmax_and_inverse_hyperbolics(m):
    """ufuncs the fused groups meet on cpu and cuda alike (their CUDA forms: ``isnan``, ``fmaxf``,
    ``asinhf``); values against PyTorch's, nan and inf among the inputs."""
    def g(mod, a, b):
        keep = mod.isnan(a) | mod.isinf(b)
        return mod.where(keep, b.asinh(), mod.fmax(a, b).tanh().atanh() + mod.fmin(a, b))

    def f(a, b):
        return g(m, a, b)

    xs = np.array([0.5, np.nan, -2.0, 3.0, np.nan], "float32")
    ys = np.array([1.0, 2.0, np.inf, np.nan, -np.inf], "float32")
    out = _compile(m, f)(m.tensor(xs), m.tensor(ys))
    np.testing.assert_allclose(out.numpy(), g(torch, torch.tensor(xs), torch.tensor(ys)).numpy(),
                               rtol=1e-5)
    if m is tapelab:
        from tapelab._backend import simulated_cuda
        with simulated_cuda(0):   # on the cpu asinh/atanh stay out of fused kernels (numba's scalar libm)
            c = tapelab.compile(f)
            c(tapelab.tensor(xs, device="cuda"), tapelab.tensor(ys, device="cuda"))
            fused = [n.target.op for n in next(iter(c.cache.values())).graph.graph.nodes if "fused" in n.meta]
        assert fused and all(cuda_backend.supported(op.kernel) for op in fused)
        src = "\n".join(cuda_backend.source(op.kernel) for op in fused)
        assert all(s in src for s in ("isnan(", "isinf(", "fmaxf(", "fminf(", "asinhf(", "atanhf("))


# ---------------------------------------------------------------- the fused groups' whole vocabulary
_FLOAT_CASES = {
    "heaviside": lambda m, a, b: m.heaviside(a * 2, b) + 1,
    "signbit": lambda m, a, b: m.signbit(a * 2).float() + b,
    "digamma": lambda m, a, b: m.digamma(a.abs() + 1) + b,
    "lgamma": lambda m, a, b: m.lgamma(a.abs() + 1) + b,
    "erfcx": lambda m, a, b: m.special.erfcx(a) + b,
    "ndtri": lambda m, a, b: m.special.ndtri(a.sigmoid()) + b,
    "log_ndtr": lambda m, a, b: m.special.log_ndtr(a * 2) + b,
    "erfinv": lambda m, a, b: m.special.erfinv(a.tanh() * 0.5) * b.erfc(),
    "xlog1py": lambda m, a, b: m.special.xlog1py(a, b.abs()) + 1,
    "bessel_j0": lambda m, a, b: m.special.bessel_j0(a) + b,
    "i0": lambda m, a, b: m.special.i0(a) * b,
    "nextafter": lambda m, a, b: m.nextafter(a * 2, b) * 3,
}


@pytest.mark.parametrize("name", sorted(_FLOAT_CASES))
def test_compiled_groups_of_scipy_and_special_ufuncs_match_torch(name):
    """Each group compiles on the cpu and gives PyTorch's values: a SciPy ufunc outside numpy's
    namespace (erfinv, gammaln, ndtri) is no kernel statement (numba and the numpy chain wrote
    ``np.erfinv``: AttributeError), numpy's own ufuncs fuse, and building a group's CUDA text no longer
    raises for a ufunc without a CUDA form (heaviside, isnan, signbit)."""
    fn = _FLOAT_CASES[name]
    rng = np.random.default_rng(4)
    xs, ys = rng.standard_normal((6, 5)).astype("float32"), rng.standard_normal(5).astype("float32")
    ref = fn(torch, torch.tensor(xs), torch.tensor(ys)).numpy()
    c = tapelab.compile(lambda a, b: fn(tapelab, a, b))
    for _ in range(2):
        out = c(tapelab.tensor(xs), tapelab.tensor(ys)).numpy()
        assert out.dtype == ref.dtype
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", ["gcd", "lcm", "floor_divide"])
def test_compiled_integer_groups_match_torch(name):
    fns = {"gcd": lambda m, a, b: m.gcd(a * 2, b) + 1, "lcm": lambda m, a, b: m.lcm(a, b) + 1,
           "floor_divide": lambda m, a, b: (a * 3) // b + a % b}
    rng = np.random.default_rng(5)
    xs, ys = rng.integers(-20, 20, (6, 5)), rng.integers(1, 20, 5)
    ref = fns[name](torch, torch.tensor(xs), torch.tensor(ys)).numpy()
    out = tapelab.compile(lambda a, b: fns[name](tapelab, a, b))(tapelab.tensor(xs), tapelab.tensor(ys)).numpy()
    assert out.dtype == ref.dtype and (out == ref).all()


# ---------------------------------------------------------------- a fused group no gradient reaches
def _lookup_free_codes(m, x):
    """LFQ's quantizer: the codes are a sign of the input (no gradient reaches them), the output passes
    the gradient straight through to the input."""
    codes = m.where(x > 0, 1.0, -1.0) * 0.5
    q = x + (codes - x).detach()
    return (q * q.sigmoid()).sum() + codes.sum(), codes


@BOTH
def test_compiled_group_without_a_gradient_path_beside_a_straight_through_one(m):
    """vector-quantize-pytorch's LFQ under ``torch.compile``: the compiled group of ``where(x > 0)``
    was declared differentiable (its input requires grad) and tracing its backward raised "element 0
    of tensors does not require grad" at compile time."""
    xs = np.random.default_rng(6).standard_normal((4, 6)).astype("float32")
    x = m.tensor(xs, requires_grad=True)
    loss, codes = _compile(m, lambda t: _lookup_free_codes(m, t))(x)
    loss.backward()
    xr = torch.tensor(xs, requires_grad=True)
    ref_loss, ref_codes = _lookup_free_codes(torch, xr)
    ref_loss.backward()
    assert codes.requires_grad is ref_codes.requires_grad is False
    np.testing.assert_allclose(codes.numpy(), ref_codes.numpy())
    np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- a constant table beside real inputs
def _positional_net(m):
    """x-transformers' memory key/values and relative-position tables: a tensor the module holds as a
    plain attribute (a graph constant, not a parameter), looked up with computed positions."""
    table = m.randn(16, 4, generator=m.Generator().manual_seed(0))

    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = m.nn.Linear(4, 4)
            with m.no_grad():
                self.lin.weight.copy_(m.full((4, 4), 0.1))
                self.lin.bias.fill_(0.1)

        def forward(self, x):
            e = m.nn.functional.embedding(m.arange(x.shape[1]) + 1, table)
            return self.lin(x + e.expand(x.shape[0], -1, -1)).tanh().sum()
    return Net()


@BOTH
def test_compiled_step_reading_a_constant_table_with_computed_indices(m):
    """The one-node step's forward half propagated shapes with its real examples beside meta
    constants: the embedding met a meta table and cpu positions (RuntimeError: Expected all tensors
    to be on the same device ... embedding: meta [16, 4], cpu [5])."""
    xs = np.random.default_rng(7).standard_normal((2, 5, 4)).astype("float32")
    x = m.tensor(xs, requires_grad=True)
    loss = _compile(m, _positional_net(m))(x)
    loss.backward()
    xr = torch.tensor(xs, requires_grad=True)
    ref = _positional_net(torch)(xr)
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- axis= and keepdims= wherever a native function has dim
def _numpy_named_calls(m):
    x = m.tensor([[3.0, -1.0, 2.5, 0.5], [0.5, 4.0, -2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    return [m.linalg.vector_norm(x, ord=3, axis=1, keepdims=True), m.linalg.matrix_norm(x, keepdims=True),
            m.linalg.norm(x, axis=0), m.linalg.vecdot(x, x, axis=0), m.linalg.cross(x[:, :3], x[:, 1:], axis=0),
            m.fft.rfft(x, axis=0).abs(), m.fft.fft2(x, axis=(0, 1)).real, m.fft.fftshift(x, axis=1),
            m.fft.ifftshift(x, axis=(0,)), m.fft.irfftn(m.fft.rfftn(x), axis=(0, 1)),
            m.index_select(x, axis=1, index=m.tensor([2, 0])), m.gather(x, axis=1, index=m.tensor([[1], [0], [3]])),
            m.cumsum(x, axis=0), m.logsumexp(x, axis=1, keepdims=True)]


def test_fft_and_linalg_take_numpy_argument_names():
    """gymnasium's array conversion imports array-api-compat, whose torch namespace calls
    ``torch.linalg.vector_norm(x, axis=...)`` and ``torch.fft.rfftn(x, dim=...)``; PyTorch's argument
    parser takes ``axis=`` for ``dim`` and ``keepdims=`` for ``keepdim`` in every native function."""
    got, want = _numpy_named_calls(tapelab), _numpy_named_calls(torch)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


@BOTH
def test_dim_given_twice_as_dim_and_axis_is_a_type_error(m):
    x = m.ones(2, 3)
    for call in (lambda: m.linalg.vector_norm(x, dim=0, axis=1), lambda: m.fft.rfft(x, dim=0, axis=1),
                 lambda: m.index_select(x, 0, m.tensor([0]), axis=1)):
        with pytest.raises(TypeError):
            call()

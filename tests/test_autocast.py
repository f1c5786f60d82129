"""tapelab.autocast against torch.autocast: per-op dtypes of PyTorch's cast lists, nesting,
enabled=False, decorators, thread-local state, gradients in the parameters' dtype, the deprecated
aliases, and the Mode composing with other modes."""
from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab.amp import policy
from tapelab.base.backend import simulated_cuda


def _data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


_X, _Y, _B = _data((4, 4)), _data((4, 4), 1), _data((2, 4, 4), 2)
_SPD = (_X @ _X.T + 4 * np.eye(4)).astype(np.float32)

# ops on float32 (and mixed) inputs whose output dtype PyTorch's cpu lists decide
CPU_CASES = {
    "matmul": lambda m, x, y, b: x @ y,
    "mm": lambda m, x, y, b: m.mm(x, y),
    "bmm": lambda m, x, y, b: m.bmm(b, b),
    "matmul-mixed": lambda m, x, y, b: x.bfloat16() @ y,
    "einsum": lambda m, x, y, b: m.einsum("ij,jk->ik", x, y),
    "linear-no-bias": lambda m, x, y, b: m.nn.functional.linear(x, y),
    "linear-bias": lambda m, x, y, b: m.nn.functional.linear(b, y, x[0]),
    "conv1d": lambda m, x, y, b: m.nn.functional.conv1d(b, m.ones(3, 4, 2)),
    "exp-of-lower": lambda m, x, y, b: m.exp(x @ y),
    "sum-of-lower": lambda m, x, y, b: (x @ y).sum(),
    "add-mixed": lambda m, x, y, b: x + (x @ y),
    "cat-mixed": lambda m, x, y, b: m.cat([x, x @ y]),
    "stack-mixed": lambda m, x, y, b: m.stack([x @ y, x]),
    "prod-of-lower": lambda m, x, y, b: (x @ y).prod(),
    "cholesky-of-lower": lambda m, x, y, b: m.linalg.cholesky(m.tensor(_SPD).bfloat16()),
    "float64-stays": lambda m, x, y, b: x.double() @ y.double(),
    "int-untouched": lambda m, x, y, b: m.ones(2, 2, dtype=m.int64) @ m.ones(2, 2, dtype=m.int64),
}


def _run(m, fn, **autocast_kw):
    x, y, b = m.tensor(_X), m.tensor(_Y), m.tensor(_B)
    with m.autocast("cpu", **autocast_kw):
        return fn(m, x, y, b)


@pytest.mark.parametrize("name", list(CPU_CASES))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cpu_output_dtypes_match_torch(name, dtype):
    fn = CPU_CASES[name]
    got = _run(tapelab, fn, dtype=getattr(tapelab, dtype))
    want = _run(torch, fn, dtype=getattr(torch, dtype))
    assert got.dtype.name == str(want.dtype).split(".")[1], name
    np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=2e-2, atol=2e-2)


def test_cuda_lists_on_the_simulated_device():
    """PyTorch's cuda lists: matmul in float16, exp/log/pow/sum in float32, addcmul promotes."""
    with simulated_cuda():
        x = tapelab.tensor(_X, device="cuda")
        with tapelab.autocast("cuda"):
            assert tapelab.get_autocast_dtype("cuda") is tapelab.float16
            h = x @ x
            assert h.dtype is tapelab.float16 and h.device.type == "cuda"
            assert tapelab.exp(h).dtype is tapelab.float32 and tapelab.log(h.abs()).dtype is tapelab.float32
            assert (h ** 2).dtype is tapelab.float32 and h.sum().dtype is tapelab.float32
            assert h.sum(dtype=tapelab.float16).dtype is tapelab.float16     # an explicit dtype wins
            assert tapelab.addcmul(x, h, h).dtype is tapelab.float32
            assert tapelab.tanh(h).dtype is tapelab.float16                 # on no list: runs as it comes
        with pytest.raises(RuntimeError, match="does not support bfloat16"):
            tapelab.autocast("cuda", dtype=tapelab.bfloat16)


# ops PyTorch declares as one op and tapelab may declare as one too: their lists apply once declared
DECLARED_LATER = {
    "softmax": lambda m, h: m.softmax(h, -1),
    "log_softmax": lambda m, h: m.log_softmax(h, -1),
    "layer_norm": lambda m, h: m.nn.functional.layer_norm(h, (4,)),
    "gelu": lambda m, h: m.nn.functional.gelu(h),
    "cross_entropy": lambda m, h: m.nn.functional.cross_entropy(h, m.tensor([0, 1, 2, 3])),
    "nll_loss": lambda m, h: m.nn.functional.nll_loss(h, m.tensor([0, 1, 2, 3])),
    "scaled_dot_product_attention": lambda m, h: m.nn.functional.scaled_dot_product_attention(h[None], h[None],
                                                                                             h[None]),
    "linear": lambda m, h: m.nn.functional.linear(h, h, m.ones(4)),
}


@pytest.mark.parametrize("name", list(DECLARED_LATER))
def test_declared_composites_follow_the_cpu_lists(name):
    if name not in tapelab.ops.REGISTRY:
        pytest.skip(f"{name} is a composite in tapelab today: it gets the policies of its primitives")
    got = _run(tapelab, lambda m, x, y, b: DECLARED_LATER[name](m, x @ y))
    want = _run(torch, lambda m, x, y, b: DECLARED_LATER[name](m, x @ y))
    assert got.dtype.name == str(want.dtype).split(".")[1], name
    np.testing.assert_allclose(got.double().detach().numpy(), want.double().detach().numpy(), rtol=3e-2, atol=3e-2)


class _OpNames(tapelab.dispatch.Mode):
    """Records the name of every op dispatched inside it (outer modes see autocast's casts)."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


def test_linear_is_one_op_with_the_linear_policy():
    """``linear`` is declared: autocast casts input, weight and bias to bfloat16 and the op runs
    once (no float32 bias add after a bfloat16 matmul); gradients reach the float32 parameters."""
    outs, grads, names = {}, {}, []
    for m in (tapelab, torch):
        x, w, bias = m.tensor(_B), m.tensor(_X, requires_grad=True), m.tensor(_Y[0], requires_grad=True)
        with _OpNames() if m is tapelab else contextlib.nullcontext() as seen:
            with m.autocast("cpu"):
                out = m.nn.functional.linear(x, w, bias)
        out.float().square().sum().backward()
        outs[m], grads[m] = out, (w.grad, bias.grad)
        names = names or seen.names
    assert names == ["cast", "cast", "cast", "linear"]
    assert outs[tapelab].dtype is tapelab.bfloat16 and outs[torch].dtype is torch.bfloat16
    np.testing.assert_allclose(outs[tapelab].double().detach().numpy(), outs[torch].double().detach().numpy(),
                               rtol=1e-2, atol=1e-2)
    for got, want in zip(grads[tapelab], grads[torch]):
        assert got.dtype is tapelab.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=3e-2, atol=5e-2)


def test_policy_table_uses_declared_names():
    """Every declared op that PyTorch lists for cpu autocast has its policy (the rest wait for their op)."""
    declared = set(tapelab.ops.REGISTRY)
    assert {"matmul", "einsum", "convolution", "convolution_transpose"} <= declared
    assert policy.POLICIES["cpu"]["matmul"] == policy.LOWER and policy.POLICIES["cpu"]["cat"] == policy.PROMOTE
    assert policy.POLICIES["cuda"]["exp"] == policy.FP32 and policy.POLICIES["cuda"]["sum"] == policy.FP32_UNLESS_DTYPE


def test_nesting_disable_and_state():
    x = tapelab.tensor(_X)
    assert not tapelab.is_autocast_enabled("cpu")
    with tapelab.autocast("cpu"):
        assert tapelab.is_autocast_enabled("cpu") and not tapelab.is_autocast_enabled()
        with tapelab.autocast("cpu", enabled=False):
            assert not tapelab.is_autocast_enabled("cpu") and (x @ x).dtype is tapelab.float32
            with tapelab.autocast("cpu", dtype=tapelab.float16):
                assert (x @ x).dtype is tapelab.float16
        assert (x @ x).dtype is tapelab.bfloat16
        assert tapelab.get_autocast_dtype("cpu") is tapelab.bfloat16
    assert not tapelab.is_autocast_enabled("cpu") and (x @ x).dtype is tapelab.float32
    tapelab.set_autocast_enabled("cpu", True)
    try:
        assert (x @ x).dtype is tapelab.bfloat16
    finally:
        tapelab.set_autocast_enabled("cpu", False)
    assert (x @ x).dtype is tapelab.float32


def test_decorator_and_exceptions_restore_state():
    @tapelab.autocast("cpu")
    def f(a):
        return a @ a

    x = tapelab.tensor(_X)
    assert f(x).dtype is tapelab.bfloat16 and (x @ x).dtype is tapelab.float32
    with pytest.raises(ValueError):
        with tapelab.autocast("cpu"):
            raise ValueError("boom")
    assert not tapelab.is_autocast_enabled("cpu") and (x @ x).dtype is tapelab.float32


def test_state_is_per_thread():
    x = tapelab.tensor(_X)
    seen = {}

    def other():
        seen["enabled"] = tapelab.is_autocast_enabled("cpu")
        seen["dtype"] = (x @ x).dtype

    with tapelab.autocast("cpu"):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert (x @ x).dtype is tapelab.bfloat16
    assert seen == {"enabled": False, "dtype": tapelab.float32}


def test_gradients_match_torch_in_the_parameters_dtype():
    """Forward in bfloat16 where the lists say so; each parameter's gradient in float32."""
    w1, w2 = _data((8, 4), 3), _data((3, 8), 4)
    results = []
    for m in (tapelab, torch):
        a, b = m.tensor(w1, requires_grad=True), m.tensor(w2, requires_grad=True)
        x = m.tensor(_X)
        with m.autocast("cpu"):
            h = m.nn.functional.linear(x, a).relu()
            out = m.nn.functional.linear(h, b)
            loss = m.nn.functional.cross_entropy(out.float(), m.tensor([0, 1, 2, 0]))
        assert out.dtype == m.bfloat16 and loss.dtype == m.float32
        loss.backward()
        assert a.grad.dtype == m.float32 and b.grad.dtype == m.float32
        results.append((loss.item(), a.grad.numpy(), b.grad.numpy()))
    (l1, *g1), (l2, *g2) = results
    assert abs(l1 - l2) <= 1e-2 * abs(l2)
    for got, want in zip(g1, g2):
        np.testing.assert_allclose(got, want, rtol=5e-2, atol=1e-2)


def test_weight_casts_are_cached_within_a_region_and_outer_modes_see_them():
    w = tapelab.tensor(_Y, requires_grad=True)
    x = tapelab.tensor(_X)
    with _OpNames() as seen:
        with tapelab.autocast("cpu"):
            (x @ w) + (x @ w)
        with tapelab.autocast("cpu", cache_enabled=False):
            (x @ w) + (x @ w)
    # cached: w once, x twice (not a leaf that requires grad); uncached: w and x each time
    assert seen.names[:6] == ["cast", "cast", "matmul", "cast", "matmul", "add"]
    assert seen.names[6:].count("cast") == 4


def test_deprecated_aliases_warn_like_torch():
    for m in (tapelab, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ctx = m.cpu.amp.autocast()
            m.cuda.amp.autocast()
            m.cuda.amp.GradScaler()
        messages = [str(x.message) for x in w if x.category is FutureWarning]
        assert "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', " \
               "args...)` instead." in messages, m
        assert any("torch.cuda.amp.autocast" in s for s in messages) and \
            any("torch.cuda.amp.GradScaler" in s for s in messages)
        with ctx:
            assert m.is_autocast_enabled("cpu") and m.get_autocast_dtype("cpu") == m.bfloat16
    assert tapelab.amp.autocast is tapelab.autocast


def test_unsupported_settings_warn_or_raise_like_torch():
    for m in (tapelab, torch):
        with pytest.warns(UserWarning, match="target dtype is not supported"):
            ctx = m.autocast("cpu", dtype=m.float64)
        with ctx:
            assert not m.is_autocast_enabled("cpu")
        with pytest.raises(ValueError, match="device_type"):
            m.autocast(0)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        tapelab.autocast("xpu")
    assert tapelab.amp.is_autocast_available("cpu") and not tapelab.amp.is_autocast_available("xpu")

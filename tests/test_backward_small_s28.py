"""Small float32 backward paths (session 28): tanh's, sigmoid's and relu's array vjps call their fused loop
directly on a 1-D pair, sigmoid's backward op is one loop (``kernels.pointwise.sigmoid_backward``), and
mul's array vjp tests two cpu tensor operands inline. Each must give PyTorch's floats bit for bit (its
``*_backward`` kernels on the same forward output), through the array walk, the tensor walk (a
``backward_step`` subscriber forces it) and the loops switched off, on small and odd sizes and on
inf, nan and -0.0."""
import contextlib

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels

SIZES = (1, 2, 3, 7, 15, 16, 17, 31, 33, 100, 1027)
SPECIAL = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-30, -1e-30, 20.0, -20.0, 88.0], np.float32)
TORCH_BACKWARD = {
    "tanh": lambda g, y: torch.ops.aten.tanh_backward(g, y),
    "sigmoid": lambda g, y: torch.ops.aten.sigmoid_backward(g, y),
    "relu": lambda g, y: torch.ops.aten.threshold_backward(g, y, 0),
}


@contextlib.contextmanager
def _walk(how: str):
    """``arrays``: the array walk (nobody watches); ``tensors``: the tensor walk; ``no loops``: the array
    walk with the fused loops off (numpy's formulas)."""
    if how == "tensors":
        sub = tapelab.events.subscribe("backward_step", lambda step: None)
        try:
            yield
        finally:
            sub.unsubscribe()
    elif how == "no loops":
        old = kernels.set_enabled(False)
        try:
            yield
        finally:
            kernels.set_enabled(old)
    else:
        yield


def _inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * (1, 4, 30)[seed % 3]).astype(np.float32)
    if seed % 2:
        x[: min(n, SPECIAL.size)] = SPECIAL[: min(n, SPECIAL.size)]
    g = rng.standard_normal(n).astype(np.float32)
    if n > 3:
        g[3] = -0.0
    return x, g


def _same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, except that a NaN's payload and sign are free (PyTorch's and numpy's differ)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.int32), want[~nan].view(np.int32))


CASES = [(name, how) for name in sorted(TORCH_BACKWARD) for how in ("arrays", "tensors", "no loops")]


@pytest.mark.parametrize("name, how", CASES)
@pytest.mark.parametrize("n", SIZES)
def test_activation_gradients_are_torchs_kernels_on_the_same_output(name, n, how):
    for seed in (0, 1, 2, 3):
        x_np, g_np = _inputs(n, seed)
        x = tapelab.tensor(x_np, requires_grad=True)
        y = getattr(x, name)()
        with _walk(how):
            y.backward(tapelab.tensor(g_np))
        want = TORCH_BACKWARD[name](torch.tensor(g_np), torch.tensor(y.detach().numpy())).numpy()
        assert x.grad.dtype == tapelab.float32 and x.grad.shape == (n,)
        _same_floats(x.grad.numpy(), want)


@pytest.mark.parametrize("name", sorted(TORCH_BACKWARD))
def test_a_strided_or_2d_gradient_takes_the_general_path_with_the_same_floats(name):
    x_np, g_np = _inputs(48, 1)
    x = tapelab.tensor(x_np.reshape(6, 8), requires_grad=True)
    y = getattr(x, name)()
    (y.t() * tapelab.tensor(g_np.reshape(8, 6))).sum().backward()   # a transposed gradient reaches y
    want = TORCH_BACKWARD[name](torch.tensor(g_np.reshape(8, 6)).t(), torch.tensor(y.detach().numpy())).numpy()
    _same_floats(x.grad.numpy(), want)


@pytest.mark.parametrize("how", ["no loops", "view"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_relu_gradient_off_the_loop_is_torchs_zero_where_the_output_is_not_positive(how, dtype):
    """numpy's formula (the loops off, a gradient not C-contiguous, other dtypes): ``y <= 0 ? 0 : g`` as PyTorch's
    threshold_backward, +0.0 for a negative, infinite or nan g there (``g * mask`` gave -0.0 and nan)."""
    x_np = np.array([-1.0, 2.0, -0.0, 0.0, 3.0, -5.0], dtype)
    g_np = np.array([-1.0, -0.0, np.inf, np.nan, np.nan, -np.inf], dtype)
    x, tx = tapelab.tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    if how == "view":   # a slice of the output: the loop takes float32 only
        y, g, ty, tg = x.relu()[::2], g_np[::2], tx.relu()[::2], torch.tensor(g_np[::2])
    else:
        y, g, ty, tg = x.relu(), g_np, tx.relu(), torch.tensor(g_np)
    with _walk("no loops" if how == "no loops" else "arrays"):
        y.backward(tapelab.tensor(g))
    ty.backward(tg)
    got, want = x.grad.numpy(), tx.grad.numpy()
    assert got.dtype == want.dtype
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))
    np.testing.assert_array_equal(got[~nan], want[~nan])


def test_sigmoid_backward_op_is_torchs_on_odd_shapes():
    """The dispatched op (the tensor vjp's and double backward's) takes the loop on any C-contiguous shape."""
    from tapelab.ops.elementwise import _sigmoid_bw_call
    for shape in ((5,), (3, 7), (2, 3, 5), (0,)):
        rng = np.random.default_rng(len(shape))
        g_np, y_np = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        got = _sigmoid_bw_call(tapelab.tensor(g_np), tapelab.tensor(y_np)).numpy()
        _same_floats(got, torch.ops.aten.sigmoid_backward(torch.tensor(g_np), torch.tensor(y_np)).numpy())


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("how", ["arrays", "tensors"])
def test_mul_gradients_are_torchs_for_either_operand_requiring_grad(grads, how):
    x_np, g_np = _inputs(17, 1)
    w_np, _ = _inputs(17, 2)
    x, w = tapelab.tensor(x_np, requires_grad=grads[0]), tapelab.tensor(w_np, requires_grad=grads[1])
    tx, tw = torch.tensor(x_np, requires_grad=grads[0]), torch.tensor(w_np, requires_grad=grads[1])
    with _walk(how):
        (x * w).backward(tapelab.tensor(g_np))
    (tx * tw).backward(torch.tensor(g_np))
    for got, want in ((x, tx), (w, tw)):
        if want.grad is None:
            assert got.grad is None
        else:
            _same_floats(got.grad.numpy(), want.grad.numpy())


def test_mul_by_a_view_whose_base_changed_reads_the_view_as_the_dispatcher_does():
    """An operand that does not require grad, a view of a base written in place before the product: the
    inline test hands it to the general path (``operand``), whose gradient is still torch's."""
    base_np, g_np = _inputs(32, 0)
    base, tbase = tapelab.tensor(base_np), torch.tensor(base_np)
    x_np, _ = _inputs(16, 2)
    x, tx = tapelab.tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    v, tv = base[::2], tbase[::2]
    base.mul_(2.0)
    tbase.mul_(2.0)
    (x * v).backward(tapelab.tensor(g_np[:16]))
    (tx * tv).backward(torch.tensor(g_np[:16]))
    _same_floats(x.grad.numpy(), tx.grad.numpy())


def test_a_loss_whose_node_feeds_another_node_runs_the_whole_walk():
    """``_one_node`` looks at the loss node's edges first; a loss that sends to another op's node walks."""
    x = tapelab.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    y = x * 2
    y.register_hook(lambda g: seen.append(g.clone()))
    y.sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("outer", ["on", "no_grad", "assigned off"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_mode_inside_the_walk_and_after_it(outer, create_graph):
    """``_run_plain`` sets the grad flag inline: off inside the walk (on with ``create_graph``), as PyTorch's
    engine; the caller's flag back afterwards, however the caller set it."""
    x = tapelab.tensor([1.0, -2.0], requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(tapelab.is_grad_enabled()))
    y = (x * x).sum()
    if outer == "no_grad":
        with tapelab.no_grad():
            y.backward(create_graph=create_graph)
            assert not tapelab.is_grad_enabled()
    elif outer == "assigned off":
        tapelab.set_grad_enabled(False)
        try:
            y.backward(create_graph=create_graph)
            assert not tapelab.is_grad_enabled()
        finally:
            tapelab.set_grad_enabled(True)
    else:
        y.backward(create_graph=create_graph)
    assert seen == [create_graph]
    assert tapelab.is_grad_enabled()

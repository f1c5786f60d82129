"""The one-node step's unit loop (session 34): a 0-d result whose joint graph lowers to one fused loop
computes the result and the gradients for ``g = 1`` in one pass (``Step.unit``). Its floats are the
generated forward's and backward's bit for bit (the same step with ``unit`` off is the reference), and
PyTorch's within float32 rounding; another cotangent, a retained graph, ``no_grad`` and an in-place
write keep their meaning."""
import numpy as np
import pytest
import torch

import tapelab as T


def chain6(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def torch_chain6(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _step_of(compiled):
    entry = next(iter(compiled.cache.values()))
    return entry.run


def _inputs(n: int, dtype=np.float32, seed: int = 0, grads=(True, True)):
    rng = np.random.default_rng(seed)
    return [T.tensor(rng.standard_normal(n).astype(dtype), requires_grad=g) for g in grads]


def _run(fn, xs, unit: bool, gradient=None, retain=False):
    """Loss and gradients of ``fn`` compiled, its step's unit loop on or off (the reference)."""
    c = T.compile(fn)
    c(*xs)                                   # builds the entry
    step = _step_of(c)
    if not unit:
        step.unit = None
    for t in xs:
        t.grad = None
    loss = c(*xs)
    loss.backward(gradient, retain_graph=retain)
    if retain:
        loss.backward(gradient)
    return loss.detach()._data.copy(), [None if t.grad is None else t.grad._data.copy() for t in xs], step


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64).tobytes()


def _assert_torchs(xs, loss, grads, rtol, atol):
    """``loss`` and ``grads`` are PyTorch's for ``chain6`` at ``xs`` (the loss to ``rtol`` alone)."""
    tx, tw = (torch.tensor(t._data, requires_grad=True) for t in xs)
    tl = torch_chain6(tx, tw)
    tl.backward()
    np.testing.assert_allclose(loss, tl.detach().numpy(), rtol=rtol)
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(grads[1], tw.grad.numpy(), rtol=rtol, atol=atol)


N = 1 << 16    # from 64k elements the frontend runs a one-loop graph of two transcendentals as the step


@pytest.mark.parametrize("n", [N, N + 7, 3 * N + 4096 + 5])
def test_unit_loop_is_built_and_bit_equal_to_the_two_loops(n):
    xs = _inputs(n)
    loss, grads, step = _run(chain6, xs, unit=True)
    assert step.unit is not None
    ref_loss, ref_grads, _ = _run(chain6, xs, unit=False)
    assert _bits(loss) == _bits(ref_loss)
    for g, r in zip(grads, ref_grads):
        assert _bits(g) == _bits(r)
    _assert_torchs(xs, loss, grads, rtol=1e-5, atol=1e-6)


def test_float64_against_torch():
    """float64's tanh is libm's scalar call, which the loops do not fuse: no unit loop, torch's values."""
    xs = _inputs(N, np.float64, seed=3)
    loss, grads, step = _run(chain6, xs, unit=True)
    assert step.unit is None
    _assert_torchs(xs, loss, grads, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("g", [2.0, -0.5, 1.0])
def test_another_cotangent_is_the_generated_backward(g):
    xs = _inputs(N, seed=1)
    gradient = T.tensor(g, dtype=T.float32)
    loss, grads, _ = _run(chain6, xs, unit=True, gradient=gradient)
    ref_loss, ref_grads, _ = _run(chain6, xs, unit=False, gradient=gradient)
    assert _bits(loss) == _bits(ref_loss)
    for a, b in zip(grads, ref_grads):
        assert _bits(a) == _bits(b)
    tx, tw = (torch.tensor(t._data, requires_grad=True) for t in xs)
    torch_chain6(tx, tw).backward(torch.tensor(g))
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_retained_graph_second_backward_accumulates_fresh_gradients():
    """The first backward hands out the loop's arrays (``.grad`` becomes them, then is added into in
    place); the second must not hand them out again."""
    xs = _inputs(N, seed=2)
    _, grads, _ = _run(chain6, xs, unit=True, retain=True)
    _, ref_grads, _ = _run(chain6, xs, unit=False, retain=True)
    for a, b in zip(grads, ref_grads):
        assert _bits(a) == _bits(b)
    _, once, _ = _run(chain6, xs, unit=False)
    np.testing.assert_allclose(grads[0], 2 * once[0], rtol=1e-6)


def test_autograd_grad_and_one_leaf():
    x, w = _inputs(N, seed=4, grads=(True, False))
    c = T.compile(chain6)
    c(x, w)
    assert _step_of(c).unit is not None
    (gx,) = T.autograd.grad(c(x, w), [x])
    x.grad = None
    ref = T.compile(chain6)
    ref(x, w)
    _step_of(ref).unit = None
    (rx,) = T.autograd.grad(ref(x, w), [x])
    assert _bits(gx._data) == _bits(rx._data)
    assert w.grad is None


def test_no_grad_call_and_eager_equal():
    xs = _inputs(N, seed=6)
    c = T.compile(chain6)
    with_grad = c(*xs)
    with T.no_grad():
        plain = c(*xs)
    assert not plain.requires_grad
    assert _bits(plain._data) == _bits(with_grad.detach()._data)


def test_in_place_write_before_backward_raises():
    x, w = _inputs(N, seed=7)
    c = T.compile(chain6)
    c(x, w)
    loss = c(x, w)
    with T.no_grad():
        w.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_new_shape_recompiles_with_its_own_unit():
    c = T.compile(chain6, dynamic=False)
    for n in (N, N + 1):
        xs = _inputs(n, seed=n)
        loss = c(*xs)
        loss.backward()
        tx, tw = (torch.tensor(t._data, requires_grad=True) for t in xs)
        torch_chain6(tx, tw).backward()
        np.testing.assert_allclose(xs[0].grad._data, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert len(c.cache) == 2
    assert all(e.run.unit is not None for e in c.cache.values())


def test_graph_with_a_product_has_no_unit():
    lin = T.nn.Linear(8, 4)

    def f(x):
        return lin(x).tanh().sum()
    x = T.tensor(np.random.default_rng(8).standard_normal((3, 8)).astype(np.float32), requires_grad=True)
    c = T.compile(f)
    c(x).backward()
    assert _step_of(c).unit is None


def test_summed_only_value_is_not_written():
    """The unit loop's sigmoid is read outside its group by the sum alone: the loop writes the two
    gradients and the sum, not sigmoid's 4 bytes an element."""
    xs = _inputs(N, seed=9)
    c = T.compile(chain6)
    c(*xs)
    out = _step_of(c).unit(*[t._data for t in xs], np.ones((), np.float32))
    assert len(out) == 3 and out[0].shape == () and out[1].shape == out[2].shape == (N,)


def test_reduce_overhead_mode_matches():
    xs = _inputs(N, seed=10)
    c = T.compile(chain6, mode="reduce-overhead")
    got = []
    for _ in range(3):
        for t in xs:
            t.grad = None
        c(*xs).backward()
        got.append([_bits(t.grad._data) for t in xs])
    _, ref, _ = _run(chain6, xs, unit=False)
    assert got[-1] == [_bits(r) for r in ref]


def test_a_number_argument_and_a_tuple_of_tensors():
    """A step whose arguments hold a number and a tuple of tensors (the input guards read them): the loss
    and gradients are torch's within float32 rounding on every call (the unit loop, where it is built,
    reads only the tensors)."""
    def fn(pair, s):
        a, b = pair
        return ((a * s + b).tanh() * b).sigmoid().sum()
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(4096).astype(np.float32) for _ in range(2)]
    want = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(tuple(want), 2.0).backward()
    ours = [T.tensor(a, requires_grad=True) for a in arrays]
    compiled = T.compile(fn)
    for _ in range(3):
        for t in ours:
            t.grad = None
        loss = compiled(tuple(ours), 2.0)
        loss.backward()
        for t, w in zip(ours, want):
            np.testing.assert_allclose(t.grad.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-7)

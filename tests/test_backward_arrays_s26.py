"""``backward()``'s array walk (``autograd/engine.py`` ``_run_arrays``): while nobody watches, ops that
declare an ``array_vjp`` run their gradients on numpy arrays with no dispatch. Everything observable
stays the tensor walk's: values (bit for bit against the tensor walk, which a ``backward_step``
subscriber forces, and against PyTorch to rounding), ``.grad`` ownership and in-place accumulation,
hooks of every kind with the gradients they see, version checks, retained and freed graphs, and the
vjp ops a watcher sees."""
import contextlib
import pickle

import numpy as np
import pytest
import torch

import tapelab
from tapelab.core.registry import REGISTRY

ARRAY_OPS = ("add", "sub", "mul", "neg", "tanh", "sigmoid", "relu", "exp", "sum", "mean")


def _pair(shape, dtype=np.float32, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return tapelab.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)


@contextlib.contextmanager
def _tensor_vjps_refused():
    """Every array-vjp op's tensor vjp raises: a walk that runs through here took the arrays."""
    saved = {name: REGISTRY[name].vjp for name in ARRAY_OPS}

    def refuse(*args, **params):
        raise AssertionError("the tensor vjp ran")
    try:
        for name in ARRAY_OPS:
            REGISTRY[name].vjp = refuse
        yield
    finally:
        for name, vjp in saved.items():
            REGISTRY[name].vjp = vjp


@contextlib.contextmanager
def _watched():
    """A no-op ``backward_step`` subscriber: the walk is the tensor one."""
    sub = tapelab.events.subscribe("backward_step", lambda step: None)
    try:
        yield
    finally:
        sub.unsubscribe()


CHAINS = {
    "chain16": lambda m, x, w: ((x * w + 1).tanh() * x).sigmoid().sum(),
    "sub_neg_relu_exp": lambda m, x, w: ((x - w).relu() * 0.5 - (-w).exp() * x).sum(),
    "numbers_both_sides": lambda m, x, w: (2 * (x + w) - 3 - x * 1.5).tanh().sum(),
    "value_used_twice": lambda m, x, w: ((x * x).sigmoid() + x * w).sum(),
    "mean_loss": lambda m, x, w: ((x - w) * (x - w)).mean() + (x * 0.25).exp().mean(),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16,), (3, 5)])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_gradients_equal_the_tensor_walks_bit_for_bit_and_torchs(name, shape, dtype):
    chain = CHAINS[name]
    x, tx = _pair(shape, dtype, 0)
    w, tw = _pair(shape, dtype, 1)
    xr, wr = (tapelab.tensor(t.detach().numpy(), requires_grad=True) for t in (x, w))
    for _ in range(2):   # the second pass accumulates into the existing .grad
        with _tensor_vjps_refused():
            chain(tapelab, x, w).backward()
        with _watched():
            chain(tapelab, xr, wr).backward()
        chain(torch, tx, tw).backward()
        for got, ref, tref in ((x, xr, tx), (w, wr, tw)):
            np.testing.assert_array_equal(got.grad.numpy(), ref.grad.numpy())
            np.testing.assert_allclose(got.grad.numpy(), tref.grad.numpy(), rtol=1e-5, atol=1e-6)
            assert got.grad.dtype == ref.grad.dtype and got.grad.shape == ref.grad.shape


def test_two_leaves_fed_one_array_own_separate_grads():
    x, w = _pair(8)[0], _pair(8, seed=1)[0]
    with _tensor_vjps_refused():
        (x + w).sum().backward()   # add passes one gradient array to both leaves
    assert not np.shares_memory(x.grad.numpy(), w.grad.numpy())
    x.grad.mul_(3)
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(8, np.float32))


def test_a_callers_gradient_passed_on_is_copied_into_grad_as_by_torch():
    for m in (tapelab, torch):
        x = m.ones(4, requires_grad=True)
        v = m.full((4,), 2.0)
        (x + 1).backward(v)
        v.mul_(10)   # the caller's tensor changes afterwards; x.grad must not
        np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.0, np.float32))


def test_broadcasting_and_dtype_mixes_decline_to_the_tensor_vjps():
    a, ta = _pair((3, 1))
    b, tb = _pair((1, 4), seed=1)
    c = tapelab.tensor(np.arange(4.0), requires_grad=True)   # float64 against float32: promotion
    tc = torch.tensor(np.arange(4.0), requires_grad=True)
    ((a * b + a - b).tanh() * c).sum().backward()
    ((ta * tb + ta - tb).tanh() * tc).sum().backward()
    for got, ref in ((a, ta), (b, tb), (c, tc)):
        np.testing.assert_allclose(got.grad.numpy(), ref.grad.numpy(), rtol=1e-5)
        assert got.grad.dtype == got.dtype


@pytest.mark.parametrize("shape", [(), (1, 1), (0,), (100, 100)])
def test_zero_dim_one_element_empty_and_large_inputs_of_the_reductions(shape):
    x, tx = _pair(shape)
    for m, t in ((tapelab, x), (torch, tx)):
        (t.tanh() * t + t).sum().backward()
        (t.sigmoid() * t).mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert x.grad.shape == tx.grad.shape


def test_hooks_fire_with_the_gradients_torch_gives_them():
    seen = {}
    for m in (tapelab, torch):
        x, w = (t for t in (_pair(6)[m is torch], _pair(6, seed=1)[m is torch]))
        log = seen[m] = []
        h = x * w
        h.register_hook(lambda g: log.append(("h", g.numpy().copy())))
        t = (h + 1).tanh()
        t.retain_grad()
        s = t.sigmoid()
        s.grad_fn.register_hook(lambda gi, go: log.append(("node", gi[0].numpy().copy())))
        s.grad_fn.register_prehook(lambda go: log.append(("pre", go[0].numpy().copy())))
        w.register_hook(lambda g: log.append(("w", g.numpy().copy())))
        x.register_post_accumulate_grad_hook(lambda p: log.append(("x.grad", p.grad.numpy().copy())))
        s.sum().backward()
        log.append(("t.grad", t.grad.numpy().copy()))
    assert [k for k, _ in seen[tapelab]] == [k for k, _ in seen[torch]]
    for (_, a), (_, b) in zip(seen[tapelab], seen[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_hook_may_replace_the_gradient_midway():
    for m in (tapelab, torch):
        x = m.ones(3, requires_grad=True)
        h = x * 2
        h.register_hook(lambda g: g * 10)
        (h.tanh() * 3).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 60 * (1 - np.tanh(2.0) ** 2), rtol=1e-6)


def test_an_input_written_in_place_is_refused():
    x = tapelab.ones(4, requires_grad=True)
    y = x * 1.0
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_retain_graph_runs_twice_and_a_freed_graph_refuses():
    x, tx = _pair(5)
    for m, t in ((tapelab, x), (torch, tx)):
        loss = (t.sigmoid() * t).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_a_graph_whose_ops_saved_nothing_backwards_twice_as_in_torch():
    for m in (tapelab, torch):
        x = m.ones(3, requires_grad=True)
        y = (x + 1) - x   # add and sub keep only shapes after the first pass
        y.sum().backward()
        y.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3, np.float32))


def test_a_watcher_sees_the_vjp_ops_and_every_step():
    x = _pair(4)[0]
    ops, steps = [], []
    subs = [tapelab.events.subscribe("op", lambda rec: ops.append(rec.op)),
            tapelab.events.subscribe("backward_step", lambda step: steps.append(step.name))]
    try:
        (x * x).tanh().sum().backward()
    finally:
        for sub in subs:
            sub.unsubscribe()
    assert "tanh_backward" in ops and ops.count("mul") == 3   # the forward's, and the vjp's two
    assert steps == ["SumBackward0", "TanhBackward0", "MulBackward0", "AccumulateGrad"]


def test_create_graph_still_differentiates_the_gradient():
    grads = []
    for m in (tapelab, torch):
        x = m.tensor([0.3, -0.7], requires_grad=True)
        (g,) = m.autograd.grad((x.tanh() * x).sum(), x, create_graph=True)
        g.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def _double(m):
    class Double(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return Double


def _shared_then_summed(a, b):
    """The top add hands one array to ``a + b``'s node and to ``q``'s; that node hands it on to ``a`` and
    ``b``; then ``q`` (made earlier, so it runs later) adds its own gradient at ``a``: not into that array."""
    q = a * 3
    return ((a + b) + q).sum()


SHARING = {
    # add hands one array to a custom Function's node (the walk hands over there) and to tanh
    "handover": lambda m, x, w: (_double(m).apply((x * w).tanh()) + (x * w).tanh()).sum(),
    # one array waits at two nodes, and one of them gets a second gradient: no sum in place into it
    "shared_then_summed": lambda m, x, w: _shared_then_summed(x.tanh(), (x * w).sigmoid()),
    "pass_through_to_one_node_twice": lambda m, x, w: ((x * w) + (x * w)).exp().sum(),
}


@pytest.mark.parametrize("name", sorted(SHARING))
def test_shared_gradients_and_the_handover_match_the_tensor_walk_and_torch(name):
    graph = SHARING[name]
    x, tx = _pair(7, seed=2)
    w, tw = _pair(7, seed=3)
    xr, wr = (tapelab.tensor(t.detach().numpy(), requires_grad=True) for t in (x, w))
    for _ in range(2):
        graph(tapelab, x, w).backward()
        with _watched():
            graph(tapelab, xr, wr).backward()
        graph(torch, tx, tw).backward()
        for got, ref, tref in ((x, xr, tx), (w, wr, tw)):
            np.testing.assert_array_equal(got.grad.numpy(), ref.grad.numpy())
            np.testing.assert_allclose(got.grad.numpy(), tref.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.shares_memory(x.grad.numpy(), w.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_half_and_double_chains_equal_the_tensor_walk(dtype):
    x, w = _pair((4, 3), dtype)[0], _pair((4, 3), dtype, seed=1)[0]
    xr, wr = (tapelab.tensor(t.detach().numpy(), requires_grad=True) for t in (x, w))
    for name, chain in sorted(CHAINS.items()):
        chain(tapelab, x, w).backward()
        with _watched():
            chain(tapelab, xr, wr).backward()
        for got, ref in ((x, xr), (w, wr)):
            np.testing.assert_array_equal(got.grad.numpy(), ref.grad.numpy(), err_msg=name)
            assert got.grad.dtype == ref.grad.dtype


def test_a_hook_that_starts_watching_midway_hands_the_rest_to_the_watched_walk():
    def graph(a, b):
        v = (b * b).tanh()
        u = a * 2            # made last, so run first: a's hook runs at the start of the walk
        return u.sum() + (v.sigmoid() + v).sum()

    runs = []
    for midway in (True, False):
        a, b = _pair(5)[0], _pair(5, seed=1)[0]
        steps, subs = [], []

        def start_watching(t):
            if not subs:
                subs.append(tapelab.events.subscribe("backward_step", lambda s: steps.append(s.name)))
        if midway:
            a.register_post_accumulate_grad_hook(start_watching)
        else:
            start_watching(None)
        graph(a, b).backward()
        subs[0].unsubscribe()
        runs.append((steps, a.grad.numpy(), b.grad.numpy()))
    (tail, ga, gb), (full, ra, rb) = runs
    assert 0 < len(tail) < len(full) and tail == full[-len(tail):]
    np.testing.assert_array_equal(ga, ra)
    np.testing.assert_array_equal(gb, rb)


def test_an_array_a_tensor_vjp_passes_to_a_leaf_is_copied_while_another_node_holds_it():
    grads = []
    for m in (tapelab, torch):
        x = m.ones(3, requires_grad=True)
        w = m.ones(3, requires_grad=True)
        v = w * 1.0
        v.register_hook(lambda g: g.mul_(2))   # in place on the gradient it is given, after x's accumulation
        c = x.clone()   # made after v, so it runs first: clone's vjp passes add's gradient on to x
        ((c + v) * 3).sum().backward()   # add hands mul's fresh gradient to both
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    for got, ref in zip(*grads):
        np.testing.assert_array_equal(got, ref)


def test_a_loss_of_an_unpickled_dtype_leaves_the_array_walk_on_for_the_next():
    """numpy's unpickled (or deep-copied) dtypes equal its own but are other objects; the implicit root
    gradient's cache keyed by such a loss's dtype must not hand that object to later losses, whose arrays
    the array vjps compare by identity (one such backward once turned the array walk off for the process)."""
    odd = pickle.loads(pickle.dumps(np.dtype(np.float32)))
    assert odd == np.dtype(np.float32) and odd is not np.dtype(np.float32)
    y = tapelab.tensor(np.ones(3, odd), requires_grad=True)
    (y * 2).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [2, 2, 2])
    x, tx = _pair((16,))
    w, tw = _pair((16,), seed=1)
    with _tensor_vjps_refused():
        CHAINS["chain16"](tapelab, x, w).backward()
    CHAINS["chain16"](torch, tx, tw).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)

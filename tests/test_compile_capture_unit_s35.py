"""A captured compiled step runs its unit loop (session 35): where a compiled call's 0-d result and its
gradients for ``g = 1`` are one fused loop (``Step.unit``), a ``tapelab.graphs`` capture records that loop
as the step's forward and the backward op hands out its gradients (the replay writes them into the
parameters' ``.grad`` buffers in the loop itself). The replay's loss and gradients are the uncaptured
compiled step's bit for bit; another cotangent, an accumulation into ``.grad`` and a retained graph keep
their meaning; PyTorch is the oracle for the values."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.compiler.step import _made
from tapelab.graphs import Graph, graph

from _threads import thread_counts

threads = thread_counts([1, 2])
N = 1 << 16    # from 64k elements a two-transcendental chain runs as the one-node step


def chain6(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32).tobytes()


def _leaves(seed: int, n: int = N):
    rng = np.random.default_rng(seed)
    return [T.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True) for _ in range(2)]


def _fresh(t):
    return T.tensor(np.random.default_rng().standard_normal(t.shape).astype(np.float32))


def _compiled(xs):
    c = T.compile(chain6)
    for _ in range(2):
        for t in xs:
            t.grad = None
        c(*xs).backward()
    step = next(iter(c.cache.values())).run
    assert step.unit is not None and step.unit.out is not None
    return c, step


def _reference(xs, gradient=None):
    """The uncaptured compiled step on copies of ``xs``: loss and gradients."""
    ys = [T.tensor(t.detach()._data.copy(), requires_grad=True) for t in xs]
    c = T.compile(chain6)
    c(*ys)
    loss = c(*ys)
    loss.backward(gradient)
    return loss.detach()._data.copy(), [t.grad._data.copy() for t in ys]


def _torch(xs, gradient=None):
    tx, tw = (torch.tensor(t.detach()._data, requires_grad=True) for t in xs)
    loss = chain6(tx, tw)
    loss.backward(None if gradient is None else torch.tensor(gradient))
    return loss.detach().numpy(), [tx.grad.numpy(), tw.grad.numpy()]


def test_replay_runs_the_unit_loop_bit_equal_to_the_compiled_step(threads):
    xs = _leaves(0)
    c, step = _compiled(xs)
    out = {}

    def train_step():
        for t in xs:
            t.grad = None
        loss = c(*xs)
        loss.backward()
        out["loss"] = loss
    g = Graph()
    with graph(g):
        train_step()
    assert step._unit_op is not None                      # the capture recorded the unit loop's forward
    for _ in range(3):
        with T.no_grad():
            for t in xs:
                t.copy_(_fresh(t))
        g.replay()
        loss, grads = out["loss"].detach()._data, [t.grad._data for t in xs]
        ref_loss, ref_grads = _reference(xs)
        assert _bits(loss) == _bits(ref_loss)
        for got, want in zip(grads, ref_grads):
            assert _bits(got) == _bits(want)
        t_loss, t_grads = _torch(xs)
        np.testing.assert_allclose(loss, t_loss, rtol=1e-5)
        for got, want in zip(grads, t_grads):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_replay_writes_the_gradients_in_the_loop_not_a_copy():
    """The backward op's output buffers are the arrays the unit loop writes: ``.grad`` keeps its memory
    across replays, and the replay's backward step writes nothing (the loop already did)."""
    xs = _leaves(1)
    c, step = _compiled(xs)

    def train_step():
        for t in xs:
            t.grad = None
        c(*xs).backward()
    g = Graph()
    with graph(g):
        train_step()
    arrays = [t.grad._data for t in xs]
    g.replay()
    assert all(t.grad._data is a for t, a in zip(xs, arrays))
    saved = next(v for v in g._program.ns.values() if type(v) is list and _made(v))
    assert all(a is b for a, b in zip(saved[1:], arrays))


def test_another_cotangent_recomputes(threads):
    """``backward(gradient)`` with a static cotangent that is not 1 at replay: the generated forward and
    backward run (the unit loop's gradients assumed 1)."""
    xs = _leaves(2)
    c, _ = _compiled(xs)
    cot = T.tensor(np.float32(1.0))

    def train_step():
        for t in xs:
            t.grad = None
        c(*xs).backward(cot)
    g = Graph()
    with graph(g):
        train_step()
    for value in (2.5, 1.0, -3.0):
        with T.no_grad():
            cot.fill_(value)
            for t in xs:
                t.copy_(_fresh(t))
        g.replay()
        grads = [t.grad._data.copy() for t in xs]
        _, ref_grads = _reference(xs, T.tensor(np.float32(value)))
        for got, want in zip(grads, ref_grads):
            assert _bits(got) == _bits(want)
        _, t_grads = _torch(xs, np.float32(value))
        for got, want in zip(grads, t_grads):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_accumulation_and_retained_graph():
    """``.grad`` kept between steps adds the step's gradients; a retained graph's second backward adds
    them twice, as the uncaptured step's."""
    xs = _leaves(3)
    c, _ = _compiled(xs)
    for t in xs:
        t.grad = None
    c(*xs).backward()                 # a .grad to accumulate into

    def train_step():
        loss = c(*xs)
        loss.backward(retain_graph=True)
        loss.backward()
    g = Graph()
    with graph(g):
        train_step()
    before = [t.grad._data.copy() for t in xs]
    g.replay()
    _, ref = _reference(xs)
    for t, b, r in zip(xs, before, ref):
        np.testing.assert_array_equal(t.grad._data, b + r + r)


@pytest.mark.parametrize("n", [N + 7, 3 * N + 5])
def test_odd_sizes_against_torch(n):
    xs = _leaves(5, n)
    c, _ = _compiled(xs)

    def train_step():
        for t in xs:
            t.grad = None
        c(*xs).backward()
    g = Graph()
    with graph(g):
        train_step()
    with T.no_grad():
        for t in xs:
            t.copy_(_fresh(t))
    g.replay()
    _, ref = _reference(xs)
    for t, r in zip(xs, ref):
        assert _bits(t.grad._data) == _bits(r)
    _, t_grads = _torch(xs)
    for t, want in zip(xs, t_grads):
        np.testing.assert_allclose(t.grad._data, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_sgd_momentum_training_loop_bit_equal(set_to_none):
    """A captured training step (zero_grad, the compiled loss, backward, SGD with momentum) replayed three
    times gives the parameters the uncaptured loop gives, bit for bit (the replay's fused updates read the
    gradients the unit loop wrote, and the capture recorded that loop)."""
    runs = []
    for capture in (True, False):
        xs = _leaves(6)
        c = T.compile(chain6)
        opt = T.optim.SGD(xs, lr=1e-3, momentum=0.9)

        def train_step():
            opt.zero_grad(set_to_none=set_to_none)
            c(*xs).backward()
            opt.step()
        for _ in range(3):
            train_step()
        if capture:
            g = Graph()
            with graph(g):
                train_step()
            assert next(iter(c.cache.values())).run._unit_op is not None
            steps = [g.replay] * 3       # the capture's own run is undone (its parameter writes restored)
        else:
            steps = [train_step] * 3
        for s in steps:
            s()
        runs.append([t.detach()._data.copy() for t in xs])
    for got, want in zip(*runs):
        assert _bits(got) == _bits(want)

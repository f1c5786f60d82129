"""``loss.backward()`` when the loss's one node sends its gradients straight to leaves (a compiled
function's fused node, ``dot``, ``dist``): the engine runs that node and accumulates without building
the walk (``autograd/engine.py`` ``_one_node``). Everything observable stays the walk's: values,
``.grad`` accumulated in place, the order the leaves' post-accumulate hooks fire in, freed buffers,
version checks, hooks. Passing ``gradient=`` explicitly takes the general walk, the reference here."""
import numpy as np
import pytest
import torch

import tapelab


def _leaves(m, k, seed=0):
    rng = np.random.default_rng(seed)
    return [m.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True) for _ in range(k)]


def _sum_of_products(*xs):
    total = xs[0] * xs[-1]
    for a, b in zip(xs, xs[1:]):
        total = total + a * b
    return total.sum()


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7])
def test_a_compiled_node_fires_the_leaves_hooks_in_the_walks_order(k):
    fn = tapelab.compile(_sum_of_products)
    orders = []
    for explicit in (False, True):
        xs = _leaves(tapelab, k)
        seen = []
        for i, x in enumerate(xs):
            x.register_post_accumulate_grad_hook(lambda t, i=i: seen.append(i))
        fn(*xs)   # compiled on the first call
        loss = fn(*xs)
        assert loss.grad_fn is not None and all(e[0].name() == "AccumulateGrad" for e in loss.grad_fn.next_functions)
        if explicit:
            loss.backward(tapelab.tensor(1.0))   # the general walk
        else:
            loss.backward()
        orders.append(seen)
    assert orders[0] == orders[1] and sorted(orders[0]) == list(range(k))


def test_dot_matches_torch_in_values_hook_order_and_accumulation():
    seen = {}
    grads = {}
    for m in (torch, tapelab):
        a, b = _leaves(m, 2)
        order = seen[m] = []
        a.register_post_accumulate_grad_hook(lambda t: order.append("a"))
        b.register_post_accumulate_grad_hook(lambda t: order.append("b"))
        m.dot(a, b).backward()
        first = a.grad
        m.dot(a, b).backward()
        assert a.grad is first   # accumulated in place, as PyTorch's AccumulateGrad
        grads[m] = (a.grad.numpy().copy(), b.grad.numpy().copy())
    assert seen[torch] == seen[tapelab] == ["a", "b", "a", "b"]
    for t, tl in zip(grads[torch], grads[tapelab]):
        np.testing.assert_allclose(tl, t, rtol=1e-6)


def test_one_leaf_twice_sums_before_accumulating():
    for m in (torch, tapelab):
        (a,) = _leaves(m, 1)
        calls = []
        a.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.clone()))
        m.dot(a, a).backward()
        assert len(calls) == 1
        np.testing.assert_allclose(a.grad.numpy(), 2 * a.detach().numpy(), rtol=1e-6)


def test_the_buffers_are_freed_unless_retained():
    fn = tapelab.compile(_sum_of_products)
    x, y = _leaves(tapelab, 2)
    fn(x, y)
    loss = fn(x, y)
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * y.detach().numpy(), rtol=1e-6)
    for m in (torch, tapelab):
        a, b = _leaves(m, 2)
        loss = m.dot(a, b)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


def test_an_input_written_in_place_is_refused_as_by_torch():
    for m in (torch, tapelab):
        a, b = _leaves(m, 2)
        c = b * 1   # not a leaf, so it may be written in place
        loss = m.dot(a, c)
        with m.no_grad():
            c.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_tensor_hooks_and_node_hooks_still_run():
    for m in (torch, tapelab):
        a, b = _leaves(m, 2)
        a.register_hook(lambda g: g * 3)
        loss = m.dot(a, b)
        node_calls = []
        loss.grad_fn.register_hook(lambda gi, go: node_calls.append(len(gi)))
        loss.backward()
        np.testing.assert_allclose(a.grad.numpy(), 3 * b.detach().numpy(), rtol=1e-6)
        assert node_calls == [2]


def test_a_vector_loss_still_asks_for_a_gradient():
    for m in (torch, tapelab):
        a, b = _leaves(m, 2)
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            (a * b).backward()


def test_a_subscriber_sees_every_step():
    a, b = _leaves(tapelab, 2)
    steps = []
    sub = tapelab.events.subscribe("backward_step", steps.append)
    try:
        tapelab.dot(a, b).backward()
    finally:
        sub.unsubscribe()
    assert [s.name for s in steps] == ["DotBackward0", "AccumulateGrad", "AccumulateGrad"]


def test_a_post_accumulate_hook_runs_inside_the_pass():
    from tapelab.autograd.engine import current_graph_task_id, will_engine_execute_node
    a, b = _leaves(tapelab, 2)
    unrelated = _leaves(tapelab, 1)[0] * 2
    seen = []
    a.register_post_accumulate_grad_hook(lambda t: seen.append(
        (current_graph_task_id(), will_engine_execute_node(loss.grad_fn), will_engine_execute_node(unrelated.grad_fn))))
    loss = tapelab.dot(a, b)
    loss.backward()
    loss2 = loss = tapelab.dot(a, b)
    loss2.backward()
    assert [s[1:] for s in seen] == [(True, False), (True, False)]
    assert seen[0][0] >= 0 and seen[1][0] > seen[0][0]
    assert current_graph_task_id() == -1

"""Autograd semantics beyond single ops, checked against PyTorch: grad modes, hooks, the
backward walk (pruning, retain/create graph, resumable steps), custom Functions, anomaly
detection, version counters, the graph walk API and checkpointing."""
import gc
import inspect
import math
import re
import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
import tapelab.utils.checkpoint as tl_cp
import torch.utils.checkpoint as torch_cp
from tapelab import dispatch

RNG = np.random.default_rng(0)


def pair(*shape, requires_grad=True, dtype=np.float64, low=None):
    """The same random values as a (tapelab, torch) pair of leaves."""
    arr = RNG.standard_normal(shape).astype(dtype)
    if low is not None:
        arr = np.abs(arr) + low
    return (tl.tensor(arr, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))


def close(a, b, tol=1e-10):
    if a is None or b is None:
        assert a is None and b is None, (a, b)
        return
    np.testing.assert_allclose(np.asarray(a.detach()), b.detach().numpy(), rtol=tol, atol=tol)


def raised(fn) -> BaseException:
    with pytest.raises(Exception) as e:
        fn()
    return e.value


def same_error(ours, theirs) -> tuple:
    """Both callables raise the same exception type; returns ours (messages are compared by callers)."""
    a, b = raised(ours), raised(theirs)
    assert type(a).__name__ == type(b).__name__, (a, b)
    return a, b


def lineno_of(snippet: str) -> int:
    """Line number in this file of the first line containing ``snippet`` (after this function)."""
    src = inspect.getsource(inspect.getmodule(lineno_of)).splitlines()
    start = inspect.getsourcelines(lineno_of)[1] + 5
    return next(i + 1 for i, line in enumerate(src) if i + 1 > start and snippet in line)


# ---------------------------------------------------------------- grad modes
def test_no_grad_context_and_decorators():
    x, _ = pair(3)
    with tl.no_grad():
        assert not (x * 2).requires_grad
        with tl.enable_grad():
            assert (x * 2).requires_grad
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()

    @tl.no_grad
    def bare(a):
        return a * 2

    @tl.no_grad()
    def called(a):
        return a * 2

    assert not bare(x).requires_grad and not called(x).requires_grad
    assert tl.is_grad_enabled()


def test_set_grad_enabled_takes_effect_at_once_and_restores():
    x, _ = pair(2)
    tl.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        tl.set_grad_enabled(True)
    with tl.set_grad_enabled(False):
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()

    @tl.set_grad_enabled(False)
    def f(a):
        return a * 2

    assert tl.is_grad_enabled(), "decorating must not switch grad off"
    assert not f(x).requires_grad and tl.is_grad_enabled()


def test_inference_mode_and_restore_on_exception():
    x, _ = pair(2)
    with tl.inference_mode():
        assert not (x * 2).requires_grad and tl.is_inference_mode_enabled()

    @tl.inference_mode
    def f(a):
        return a + 1

    assert not f(x).requires_grad
    with pytest.raises(ValueError):
        with tl.no_grad():
            raise ValueError
    assert tl.is_grad_enabled() and not tl.is_inference_mode_enabled()


def test_requires_grad_and_detach():
    x, tx = pair(3)
    y = x * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError):
        (tx * 2).requires_grad_(False)
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None
    d.add_(1)  # shares memory and the version counter
    assert y._version == 1 and np.allclose(np.asarray(d), np.asarray(y))
    z = tl.ones(2)
    assert z.requires_grad_() is z and z.requires_grad


def test_inplace_on_leaf_that_requires_grad_raises():
    x, tx = pair(3)
    ours, theirs = same_error(lambda: x.add_(1), lambda: tx.add_(1))
    assert str(ours) == str(theirs)


# ---------------------------------------------------------------- hooks
def test_leaf_hook_replaces_gradient():
    x, tx = pair(3)
    for t in (x, tx):
        t.register_hook(lambda g: g * 3)
        (t * t).sum().backward()
    close(x.grad, tx.grad)


def test_nonleaf_hook_replaces_gradient_flowing_upstream_and_handle_removes():
    x, tx = pair(3)
    seen = []
    for t in (x, tx):
        y = t.exp()
        h = y.register_hook(lambda g: seen.append(1) or g * 10)
        (y * y).sum().backward(retain_graph=True)
        h.remove()
        y.sum().backward()
    close(x.grad, tx.grad)
    assert len(seen) == 2


def test_retain_grad_keeps_nonleaf_grad():
    x, tx = pair(3)
    ys = []
    for t in (x, tx):
        y = t * 2
        y.retain_grad()
        (y * y).sum().backward()
        ys.append(y)
    assert ys[0].retains_grad
    close(ys[0].grad, ys[1].grad)


def test_retain_grad_sees_hooked_gradient_like_torch():
    x, tx = pair(3)
    ys = []
    for t in (x, tx):
        y = t * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        y.sum().backward()
        ys.append(y)
    close(ys[0].grad, ys[1].grad)


def test_node_hook_and_prehook_values_and_replacement():
    x, tx = pair(3)
    got = {}
    for name, t in (("tl", x), ("torch", tx)):
        y = t * 3
        calls = got[name] = []
        y.grad_fn.register_prehook(lambda go, c=calls: c.append(("pre", go[0].detach().clone())) or (go[0] * 2,))
        y.grad_fn.register_hook(lambda gi, go, c=calls: c.append(("post", gi[0].detach().clone(), gi[1]))
                                or (gi[0] + 1, None))
        y.sum().backward()
    (_, p1), (_, q1, n1) = got["tl"]
    (_, p2), (_, q2, n2) = got["torch"]
    close(p1, p2)
    close(q1, q2)
    assert n1 is None and n2 is None
    close(x.grad, tx.grad)


def test_grad_prunes_nodes_that_cannot_reach_inputs():
    (a, ta), (b, tb) = pair(2), pair(2)
    fired = {"tl": [], "torch": []}
    for name, p, q in (("tl", a, b), ("torch", ta, tb)):
        q.register_hook(lambda g, n=name: fired[n].append("leaf"))
        side = q.exp()
        side.grad_fn.register_prehook(lambda go, n=name: fired[n].append("node"))
        (g,) = (tl if name == "tl" else torch).autograd.grad((p * q).sum() + side.sum(), p)
    assert fired == {"tl": [], "torch": []}


def test_backward_inputs_leaf_and_nonleaf():
    (x, tx), (w, tw) = pair(3), pair(3)
    res = []
    for t, v in ((x, w), (tx, tw)):
        y = t * v
        z = (y * y).sum()
        z.backward(inputs=[y, v])
        res.append((t.grad, y.grad, v.grad))
    assert res[0][0] is None and res[1][0] is None
    close(res[0][1], res[1][1])
    close(res[0][2], res[1][2])
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (x * 2).sum().backward(inputs=[])


# ---------------------------------------------------------------- accumulation, retain_graph
def test_accumulation_and_retain_graph():
    x, tx = pair(3)
    for t in (x, tx):
        y = (t.exp() * t).sum()
        y.backward(retain_graph=True)
        y.backward()
    close(x.grad, tx.grad)


def test_leaf_grad_does_not_alias_user_gradient():
    x, _ = pair(3)
    g = tl.ones(3, dtype=tl.float64)
    (x * 1).backward(g)
    g.add_(5)
    np.testing.assert_allclose(np.asarray(x.grad), 1.0)
    steps = list(tl.autograd.backward_steps((x * 2).sum()))
    recorded = np.asarray(steps[-1].grad_outputs[0]).copy()
    (x * 2).sum().backward()
    np.testing.assert_allclose(np.asarray(steps[-1].grad_outputs[0]), recorded)


def test_backward_twice_names_op_and_fix():
    x, tx = pair(3)
    y, ty = x.exp().sum(), tx.exp().sum()
    y.backward()
    ty.backward()
    ours, theirs = same_error(y.backward, ty.backward)
    assert str(theirs) in str(ours)
    assert "ExpBackward0" in str(ours) and "retain_graph=True" in str(ours)


def test_backward_twice_through_ops_that_save_nothing_works_like_torch():
    x, tx = pair(2, 3)
    for t in (x, tx):
        y = (t + 1).reshape(3, 2).sum()
        y.backward()
        y.backward()
    close(x.grad, tx.grad)


def test_version_counter_error_names_op_and_versions():
    x, tx = pair(3)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    msg = str(e.value)
    assert "modified by an inplace operation" in msg and "ExpBackward0" in msg
    assert "is at version 1; expected version 0 instead" in msg
    ty = tx.exp()
    ty.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        ty.sum().backward()


# ---------------------------------------------------------------- create_graph
def test_double_backward_hessian_vector_product():
    (x, tx), (A, tA) = pair(3), pair(3, 3, requires_grad=False)
    (v, tv) = pair(3, requires_grad=False)
    res = []
    for mod, t, a, vec in ((tl, x, A, v), (torch, tx, tA, tv)):
        f = (mod.tanh(t @ a) ** 2).sum() + (t.exp() * t).sum()
        (g,) = mod.autograd.grad(f, t, create_graph=True)
        assert g.requires_grad
        (hv,) = mod.autograd.grad((g * vec).sum(), t)
        res.append((g, hv))
    close(res[0][0], res[1][0])
    close(res[0][1], res[1][1])


def test_third_derivative_and_backward_create_graph():
    x, tx = pair(4)
    for t in (x, tx):
        y = (t ** 3).sum()
        y.backward(create_graph=True)
        g = t.grad
        t.grad = None
        g.sum().backward(create_graph=True)   # d/dx sum(3x^2) = 6x
    close(x.grad, tx.grad)
    close(x.grad, 6 * tx)


# ---------------------------------------------------------------- autograd.grad and errors
def test_grad_allow_unused_and_materialize():
    (x, tx), (u, tu) = pair(3), pair(2)
    ours, theirs = same_error(lambda: tl.autograd.grad((x * 2).sum(), [x, u]),
                              lambda: torch.autograd.grad((tx * 2).sum(), [tx, tu]))
    assert str(ours) == str(theirs)
    gx, gu = tl.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None
    np.testing.assert_allclose(np.asarray(gx), 2.0)
    gx, gu = tl.autograd.grad((x * 2).sum(), [x, u], materialize_grads=True)
    assert gu.shape == (2,) and not np.asarray(gu).any()
    with pytest.raises(ValueError, match="allow_unused"):
        tl.autograd.grad((x * 2).sum(), [x, u], allow_unused=False, materialize_grads=True)
    assert x.grad is None and u.grad is None


def test_grad_of_nonleaf_and_multiple_outputs_with_grad_outputs():
    x, tx = pair(3)
    (v, tv) = pair(3, requires_grad=False)
    res = []
    for mod, t, vec in ((tl, x, v), (torch, tx, tv)):
        y = t.exp()
        z = y * t
        res.append(mod.autograd.grad([z, y.sum()], [y, t], grad_outputs=[vec, None]))
    for a, b in zip(*res):
        close(a, b)


def test_errors_match_torch():
    x, tx = pair(3)
    for mod, t in ((tl, x), (torch, tx)):
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
            (t * 2).backward()
        with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
            mod.autograd.grad((t * 2).sum(), mod.ones(2))
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            mod.ones(2).sum().backward()
        with pytest.raises(RuntimeError, match="Mismatch in shape"):
            (t * 2).backward(mod.ones(2, dtype=t.dtype))


# ---------------------------------------------------------------- backward_steps
def _torch_execution_order(loss):
    order, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        n.register_hook(lambda gi, go, n=n: order.append(n.name().replace("torch::autograd::", "")))
        stack.extend(c for c, _ in n.next_functions)
    loss.backward()
    return order


def test_backward_steps_order_values_and_resume():
    (x, tx), (w, tw) = pair(2, 3), pair(3, 4)
    def build(mod, a, b):
        h = mod.tanh(a @ b)
        return (h * h.exp()).sum() + (a * 2).mean()
    want = _torch_execution_order(build(torch, tx, tw))
    steps = tl.autograd.backward_steps(build(tl, x, w))
    first = [next(steps) for _ in range(3)]
    assert x.grad is None and w.grad is None, "stopping halfway leaves the rest undone"
    rest = list(steps)
    names = [s.name for s in first + rest]
    assert names == want
    assert [s.index for s in first + rest] == list(range(len(names)))
    close(x.grad, tx.grad)
    close(w.grad, tw.grad)
    root = first[0]
    assert root.name == "AddBackward0" and float(root.grad_outputs[0]) == 1.0
    assert len(root.grad_inputs) == len(root.node.next_functions)


def test_backward_drains_steps_and_emits_events():
    x, _ = pair(3)
    seen = []
    with tl.events.subscribe("backward_step", seen.append):
        (x.exp() * 2).sum().backward()
    assert [s.name for s in seen] == ["SumBackward0", "MulBackward0", "ExpBackward0", "AccumulateGrad"]
    assert all(s.duration_ns >= 0 and s.start_ns > 0 for s in seen)
    mul = seen[1]
    np.testing.assert_allclose(np.asarray(mul.grad_outputs[0]), 1.0)
    np.testing.assert_allclose(np.asarray(mul.grad_inputs[0]), 2.0)


# ---------------------------------------------------------------- graph walk API
def _structure(node):
    if node is None:
        return None
    name = node.name().replace("torch::autograd::", "")
    return (name, tuple((_structure(c), nr) for c, nr in node.next_functions))


def test_next_functions_match_torch_structure():
    (x, tx), (w, tw) = pair(3), pair(3)
    for build in (lambda m, a, b: ((a * b).exp() + 2).sum(),
                  lambda m, a, b: (m.sigmoid(a) / b.sqrt().abs()).mean() - (a * 3).sum(),
                  lambda m, a, b: (m.relu(a - b) * a).sum() / 2):
        assert _structure(build(tl, x, w).grad_fn) == _structure(build(torch, tx, tw).grad_fn)


def test_saved_tensors_and_metadata():
    (x, _), (w, _) = pair(3), pair(3)
    y = x * w
    assert y.grad_fn.saved_tensors[0] is x and y.grad_fn.saved_tensors[1] is w
    e = x.exp()
    (out,) = e.grad_fn.saved_tensors
    np.testing.assert_allclose(np.asarray(out.detach()), np.asarray(e.detach()))
    assert (x + w).grad_fn.saved_tensors == ()
    y.grad_fn.metadata["label"] = "product"
    assert y.grad_fn.metadata == {"label": "product"}
    assert y.grad_fn.tape_seq is None
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors


# ---------------------------------------------------------------- autograd.Function
def _square(mod):
    class Square(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g * ctx.k, None
    return Square


def test_function_forward_backward_ctx_and_node():
    x, tx = pair(3)
    outs = []
    for mod, t in ((tl, x), (torch, tx)):
        Sq = _square(mod)
        y = Sq.apply(t, 3.0)
        assert y.grad_fn.name() == "SquareBackward" and y.grad_fn.k == 3.0
        assert y.grad_fn.needs_input_grad == (True, False)
        assert y.grad_fn.saved_tensors[0] is t
        assert len(y.grad_fn.next_functions) == 1
        y.sum().backward()
        outs.append(y)
    close(outs[0], outs[1])
    close(x.grad, tx.grad)


def test_function_double_backward():
    x, tx = pair(3)
    res = []
    for mod, t in ((tl, x), (torch, tx)):
        y = _square(mod).apply(t.exp(), 2.0)
        (g,) = mod.autograd.grad(y.sum(), t, create_graph=True)
        (h,) = mod.autograd.grad((g * g).sum(), t)
        res.append((g, h))
    close(res[0][0], res[1][0])
    close(res[0][1], res[1][1])


def _split(mod):
    class Split(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            n = x * 0
            ctx.mark_non_differentiable(n)
            return x * 2, x * y, n

        @staticmethod
        def backward(ctx, ga, gb, gn):
            ctx.seen = (ga, gb, gn)
            return ga * 2 + gb, gb
    return Split


def test_function_multiple_and_non_differentiable_outputs():
    (x, tx), (w, tw) = pair(3), pair(3, requires_grad=False)
    res = []
    for mod, t, v in ((tl, x, w), (torch, tx, tw)):
        a, b, n = _split(mod).apply(t, v)
        assert a.grad_fn is b.grad_fn and not n.requires_grad and n.grad_fn is None
        assert a.grad_fn.needs_input_grad == (True, False)
        a.sum().backward()           # b got no gradient: materialized as zeros
        res.append(a.grad_fn.seen)
    for g1, g2 in zip(*res):
        close(g1, g2)
    close(x.grad, tx.grad)


def test_function_setup_context_and_materialize_grads_off():
    x, tx = pair(3)
    got = []
    for mod, t in ((tl, x), (torch, tx)):
        class Two(mod.autograd.Function):
            @staticmethod
            def forward(a):
                return a * 2, a * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.set_materialize_grads(False)
                ctx.n_inputs = len(inputs)

            @staticmethod
            def backward(ctx, g1, g2):
                got.append((g2, ctx.n_inputs))
                return g1 * 2
        p, q = Two.apply(t)
        p.sum().backward()
    assert got == [(None, 1), (None, 1)]
    close(x.grad, tx.grad)


def test_function_mark_dirty_and_returned_input():
    x, tx = pair(3)
    for mod, t in ((tl, x), (torch, tx)):
        class Double(mod.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                a.mul_(2)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 2

        class Ident(mod.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            Double.apply(t)
        y = t * 1
        out = Double.apply(y)
        assert out is y and y.grad_fn.name() == "DoubleBackward"
        alias = Ident.apply(t)
        assert alias is not t and alias.grad_fn.name() == "IdentBackward"
        (out.sum() + alias.sum()).backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("ret, expected", [
    ("one", "returned an incorrect number of gradients (expected 2, got 1)"),
    ("non_tensor", "returned a gradient different than None at position 2, but the corresponding forward "
                   "input was not a Variable"),
    ("bad_shape", "returned an invalid gradient at index 0 - got [1] but expected shape compatible with [3]"),
])
def test_function_backward_validation_messages(ret, expected):
    x, tx = pair(3)
    for mod, t in ((tl, x), (torch, tx)):
        class Bad(mod.autograd.Function):
            @staticmethod
            def forward(ctx, a, k):
                return a * k

            @staticmethod
            def backward(ctx, g):
                return {"one": g, "non_tensor": (g, g), "bad_shape": (g[:1] if mod is torch else
                                                                     g.sum().reshape(1), None)}[ret]
        with pytest.raises(RuntimeError) as e:
            Bad.apply(t, 2).sum().backward()
        assert expected in str(e.value) and "BadBackward" in str(e.value)


def test_function_broadcast_grad_is_summed_and_extra_nones_allowed():
    x, tx = pair(1, 3)
    for mod, t in ((tl, x), (torch, tx)):
        class Wide(mod.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 1

            @staticmethod
            def backward(ctx, g):
                return g.expand(4, 3), None, None
        Wide.apply(t).sum().backward()
    close(x.grad, tx.grad)


def test_function_saved_tensor_version_check_and_freed():
    x, tx = pair(3)
    for mod, t in ((tl, x), (torch, tx)):
        y = t * 1
        out = _square(mod).apply(y, 1.0)
        with mod.no_grad():
            y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
        out = _square(mod).apply(t * 1, 1.0)
        out.sum().backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            out.sum().backward()


def test_once_differentiable_refuses_double_backward():
    x, tx = pair(3)
    for mod, t in ((tl, x), (torch, tx)):
        class Once(mod.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a.exp()

            @staticmethod
            @mod.autograd.function.once_differentiable
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                assert not g.requires_grad or not mod.is_grad_enabled()
                return g * a.exp()
        v = mod.ones(3, dtype=t.dtype, requires_grad=True)
        (g,) = mod.autograd.grad(Once.apply(t), t, grad_outputs=v, create_graph=True)
        assert g.requires_grad
        with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked "
                                               "with @once_differentiable"):
            g.sum().backward()


def test_function_misuse():
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        _square(tl)()
    class Saver(tl.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, 3)
            return a
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type int"):
        Saver.apply(pair(2)[0])


# ---------------------------------------------------------------- anomaly detection
def test_detect_anomaly_names_backward_node_forward_op_and_line():
    """PyTorch's error text, after its warning "Error detected in SqrtBackward0" with the forward
    call's stack (the user's frames, outermost first: this test's line last)."""
    x = tl.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tl.autograd.detect_anomaly():
            assert dispatch.STATE.slow and tl.autograd.is_anomaly_enabled()
            y = x.sqrt()  # the NaN source
            with pytest.raises(RuntimeError) as e:
                (y * 0).sum().backward()
    assert not tl.autograd.is_anomaly_enabled() and not dispatch.STATE.slow
    assert str(e.value) == "Function 'SqrtBackward0' returned nan values in its 0th output."
    detected = [str(m.message) for m in w if str(m.message).startswith("Error detected in")]
    assert len(detected) == 1 and w[-1].category is UserWarning
    head, stack = detected[0].split("\n", 1)
    assert head == "Error detected in SqrtBackward0. Traceback of forward call that caused the error:"
    last = stack.rstrip("\n").split("\n")[-2:]
    assert last == [f'  File "{__file__}", line {lineno_of("y = x.sqrt()  # the NaN source")}, '
                    f"in test_detect_anomaly_names_backward_node_forward_op_and_line",
                    "    y = x.sqrt()  # the NaN source"]
    assert "tapelab" not in stack.replace(__file__, "")


def test_detect_anomaly_raises_for_nan_only_as_torch():
    """An infinite gradient (sqrt's at 0) passes under anomaly detection, as PyTorch checks for NaN
    only; a mask making -inf from finite inputs in the forward is not flagged either."""
    grads = []
    for lib in (tl, torch):
        x = lib.tensor([0.0, 4.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                scores = x.masked_fill(x == 0, float("-inf")).softmax(0)   # -inf on purpose: a mask
                (x.sqrt() + scores).sum().backward()
        assert [str(m.message) for m in w][1:] == []
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == [math.inf, 0.25]


def test_detect_anomaly_without_a_forward_record_warns_torchs_text():
    x = tl.tensor([0.0, 1.0], requires_grad=True)
    y = x.sqrt()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tl.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="returned nan values"):
            (y * 0).sum().backward()
    assert str(w[-1].message) == ("Error detected in SqrtBackward0. No forward pass information available. "
                                  "Enable detect anomaly during forward pass for more information.")


def test_without_anomaly_nan_flows_silently_like_torch():
    x, tx = tl.tensor([0.0, 1.0], requires_grad=True), torch.tensor([0.0, 1.0], requires_grad=True)
    for t in (x, tx):
        (t.sqrt() * 0).sum().backward()
    close(x.grad, tx.grad)
    assert np.isnan(np.asarray(x.grad)[0])


def test_anomaly_forward_warns_first_op_making_nan_from_finite_inputs():
    x = tl.tensor([-1.0, 4.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tl.autograd.set_detect_anomaly(True):
            y = tl.log(x)  # makes the NaN
            z = (y * 2).exp()  # consumes it: not flagged
    assert not tl.autograd.is_anomaly_enabled()
    flagged = [str(m.message) for m in w if issubclass(m.category, tl.autograd.AnomalyWarning)]
    assert len(flagged) == 1, flagged
    assert "log produced NaN from finite inputs" in flagged[0]
    assert f"{__file__}:{lineno_of('y = tl.log(x)  # makes the NaN')}" in flagged[0]
    assert "min=-1" in flagged[0]
    assert y.grad_fn.metadata["anomaly_op"] == "log" and "traceback_" in y.grad_fn.metadata
    assert z.requires_grad


def test_anomaly_annotates_backward_errors_with_forward_line():
    x, _ = pair(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tl.autograd.detect_anomaly():
            y = x.exp()  # saved output
            y.add_(1)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
    detected = str(w[-1].message)
    assert detected.startswith("Error detected in ExpBackward0. Traceback of forward call that caused the error:")
    assert f"line {lineno_of('y = x.exp()  # saved output')}" in detected


def test_anomaly_check_nan_false_records_but_does_not_raise():
    x = tl.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tl.autograd.detect_anomaly(check_nan=False):
            (x.sqrt() * 0).sum().backward()
    assert np.isnan(np.asarray(x.grad)[0])


# ---------------------------------------------------------------- checkpoint
def _segment(mod, W):
    return lambda a: mod.tanh(a @ W).exp() * a.sum()


def test_checkpoint_gradients_equal_plain_and_torch():
    (x, tx), (W, tW) = pair(4, 3), pair(3, 3)
    y = tl_cp.checkpoint(_segment(tl, W), x * 1, use_reentrant=False)
    assert y.grad_fn.name() == "CheckpointBackward"
    (y * y).sum().backward()
    ty = torch_cp.checkpoint(_segment(torch, tW), tx * 1, use_reentrant=False)
    (ty * ty).sum().backward()
    close(y, ty)
    close(x.grad, tx.grad)
    close(W.grad, tW.grad)  # W is read from the closure


def test_checkpoint_double_backward_and_hooks_fire_once():
    (x, tx), (W, tW) = pair(4, 3), pair(3, 3)
    fired = []
    res = []
    for mod, t, w, ck in ((tl, x, W, tl_cp.checkpoint), (torch, tx, tW, torch_cp.checkpoint)):
        a = t * 2
        a.register_hook(lambda g: fired.append(mod.__name__) or g)
        y = ck(_segment(mod, w), a, use_reentrant=False)
        (g,) = mod.autograd.grad((y * y).sum(), t, create_graph=True)
        (h,) = mod.autograd.grad(g.sum(), w)
        res.append((g, h))
    close(res[0][0], res[1][0])
    close(res[0][1], res[1][1])
    assert fired == ["tapelab", "torch"]


def test_checkpoint_replays_random_state_and_frees_after_backward():
    x, _ = pair(5)
    y = tl_cp.checkpoint(lambda a: a * tl.rand_like(a), x, use_reentrant=True)
    y.sum().backward()
    close(x.grad, torch.tensor(np.asarray(y.detach()) / np.asarray(x.detach())))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.sum().backward()
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        tl_cp.checkpoint(lambda a, k=1: a, x, use_reentrant=True, k=2)


def test_checkpoint_frees_segment_graph():
    x, _ = pair(3)
    inner = []
    def seg(a):
        h = a.exp()
        inner.append(h.grad_fn)
        return h * 2
    import weakref
    y = tl_cp.checkpoint(seg, x, use_reentrant=False)
    ref = weakref.ref(inner.pop())
    gc.collect()
    assert ref() is None, "the segment's internal graph must not be kept"
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * np.exp(np.asarray(x.detach())))


def test_backward_steps_respects_grad_mode_changes_between_steps():
    x = tl.ones(3, requires_grad=True)
    walk = tl.autograd.backward_steps((x * 2).sum())
    next(walk)
    with tl.no_grad():
        next(walk)
        assert not tl.is_grad_enabled()
    assert tl.is_grad_enabled()
    for _ in walk:
        pass
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_grad_takes_any_iterable_a_dict_batched_cotangents_and_only_inputs_as_pytorch():
    """MAML-style ``grad(loss, params.values())``, ``inputs`` as a dict (a dict comes back),
    ``is_grads_batched`` (one backward per cotangent row, stacked) and the deprecated ``only_inputs``."""
    from collections import OrderedDict
    results = []
    for lib in (torch, tl):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = (x * w).sin()
        by_name = lib.autograd.grad(y.sum(), {"x": x, "w": w}, retain_graph=True)
        assert isinstance(by_name, dict) and list(by_name) == ["x", "w"]
        values = lib.autograd.grad(y.sum(), OrderedDict(a=x, b=w).values(), retain_graph=True)
        batched = lib.autograd.grad(y, x, lib.eye(3), is_grads_batched=True, retain_graph=True)[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plain = lib.autograd.grad(y.sum(), x, only_inputs=False)[0]
        assert [str(c.message)[:40] for c in caught] == ["only_inputs argument is deprecated and i"]
        results.append([by_name["x"], by_name["w"], *values, batched, plain])
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)

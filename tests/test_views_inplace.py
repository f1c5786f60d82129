"""In-place ops on views (PyTorch's CopySlices semantics), views' version counters, reshape
copies, and the multi-output node of unbind/split/chunk/tensor_split, against PyTorch."""
import inspect

import numpy as np
import pytest
import torch

import tapelab

A = np.arange(12.0).reshape(3, 4) / 7 + 0.5


def _np(t):
    return t.detach().numpy()


def _run(fn, *arrays):
    """Run ``fn(m, *leaves)`` with torch and tapelab; compare outputs and leaf gradients."""
    res = []
    for m in (torch, tapelab):
        leaves = [m.tensor(a, requires_grad=True) for a in arrays]
        out = fn(m, *leaves)
        out.sum().backward()
        res.append((_np(out), [None if x.grad is None else _np(x.grad) for x in leaves]))
    (to, tg), (lo, lg) = res
    np.testing.assert_allclose(lo, to, rtol=1e-6, atol=1e-8)
    for t, g in zip(tg, lg):
        assert (t is None) == (g is None)
        if t is not None:
            np.testing.assert_allclose(g, t, rtol=1e-6, atol=1e-8)
    return res


def _row_mul(m, a):
    x = a.clone()
    v = x[0]
    v.mul_(2)
    return x


def test_inplace_on_view_rebases_base():
    (_, [tg]), (_, [lg]) = _run(_row_mul, A)
    assert lg.tolist() == [[2.0] * 4, [1.0] * 4, [1.0] * 4]


CASES = {
    "row_mul": _row_mul,
    "column_add": lambda m, a, y: _chain(a.clone(), lambda x: x[:, 1].add_(y[:, 0] * y[:, 1])),
    "view_zero": lambda m, a: _chain(a * 1, lambda x: x.view(-1).zero_()) * a,
    "t_mul": lambda m, a: _chain(a.clone(), lambda x: x.t().mul_(3)) ** 2,
    "chained": lambda m, a: _chain(a.clone(), lambda x: x[1:][:, 2:].mul_(a[0, :2])) ** 2,
    "chained_kept": lambda m, a: _kept_chain(a),
    "exp_on_view": lambda m, a: _chain(a.clone(), lambda x: x[1].exp_()) * a,
    "sigmoid_then_read_view": lambda m, a: _view_after(a),
    "narrow_copy": lambda m, a, y: _chain(a.clone(), lambda x: x.narrow(1, 1, 2).copy_(y[:, :2])),
    "setitem_on_view": lambda m, a, y: _chain(a.clone(), lambda x: x[1:].__setitem__((slice(None), 0), y[0, :2])),
    "fill_on_permute": lambda m, a: _fill_permuted(a),
    "twice": lambda m, a: _twice(a),
    "view_of_nonreq_base": lambda m, a: _nonreq_base(m, a),
    "unsqueeze_squeeze": lambda m, a: _chain(a.clone(), lambda x: x.unsqueeze(0).squeeze(0)[2].div_(a[0, 0])),
}


def _chain(x, f):
    f(x)
    return x


def _kept_chain(a):
    x = a.clone()
    v = x[1:]
    w = v[:, 2:]
    w.mul_(2)
    return (x * x).sum() + (w * w).sum()


def _fill_permuted(a):
    x = a.clone()
    x.reshape(3, 2, 2).permute(2, 0, 1)[0].fill_(1.5)
    return x * 2


def _view_after(a):
    x = a * 1
    v = x[0]
    v.sigmoid_()
    return v * x[0] + x.sum()


def _twice(a):
    x = a.clone()
    x[0].mul_(x[1] * 1)
    x[:, 0].add_(x[:, 1])
    return x * x


def _nonreq_base(m, a):
    x = m.zeros(3, 4, dtype=a.dtype)
    v = x[1]
    v.add_(a[0] * a[1])
    return x * 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_on_view_matches_torch(name):
    fn = CASES[name]
    arrays = [A] if len(inspect.signature(fn).parameters) == 2 else [A, A[:, ::-1] * 2]
    _run(fn, *arrays)


def test_inplace_on_view_double_backward():
    def f(m, a):
        x = a.clone()
        x[1].mul_(a[0])
        return (x ** 3).sum()

    grads = []
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        (g,) = m.autograd.grad(f(m, a), a, create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), a)
        grads.append((_np(g), _np(gg)))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-6)


def test_grad_fns_after_inplace_on_view():
    a = tapelab.tensor(A, requires_grad=True)
    x = a.clone()
    v = x[0]
    v.mul_(2)
    assert x.grad_fn.name() == "torch::autograd::CopySlices"   # PyTorch's (type(x.grad_fn).__name__ == "CopySlices")
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert v.grad_fn.next_functions[0][0] is x.grad_fn
    assert x.grad_fn.next_functions[0][0].name() == "CloneBackward0"
    assert v._base is x and x._base is None
    assert v._version == x._version == 1


def test_leaf_view_inplace_errors():
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        for f in (lambda: a[0].mul_(2), lambda: a.view(-1).zero_(), lambda: a.t().add_(1)):
            with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used"):
                f()
        with m.no_grad():
            a[0].mul_(2)  # allowed without grad
        assert float(a[0, 0]) == A[0, 0] * 2


@pytest.mark.parametrize("op", ["unbind", "split", "split_sizes", "chunk"])
def test_multi_output_views_inplace_errors(op):
    msgs = []
    for m in (torch, tapelab):
        x = m.tensor(A, requires_grad=True).clone()
        pieces = {"unbind": lambda: x.unbind(0), "split": lambda: x.split(2), "split_sizes": lambda: x.split([1, 2]),
                  "chunk": lambda: x.chunk(2)}[op]()
        with pytest.raises(RuntimeError, match="returns multiple views") as e:
            pieces[1].mul_(2)
        msgs.append(str(e.value))
        with m.no_grad():
            pieces[0].mul_(2)  # fine without grad
    assert msgs[0] == msgs[1]


def test_multi_output_view_of_nonrequiring_base_errors():
    for m in (torch, tapelab):
        z = m.zeros(4, 3)
        w = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="no_grad mode.*multiple views"):
            z.unbind(0)[0].add_(w)


def test_tensor_split_pieces_may_be_modified_inplace():
    def f(m, a):
        x = a.clone()
        p, q = x.tensor_split(2, dim=1)
        q.mul_(3)
        return x * x + q.sum()
    _run(f, A)


def test_no_grad_view_inplace_errors():
    for m in (torch, tapelab):
        x = m.tensor(A, requires_grad=True).clone()
        with m.no_grad():
            v = x[0]
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being modified inplace"):
            v.mul_(2)


def test_view_version_counter_errors():
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        b = a * 1
        y = b * a            # saves b
        b.t()[0].add_(1)     # in-place on a view of b bumps b's version
        assert b._version == 1 and b.view(-1)._version == 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_view_version_counter_error_through_base():
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        b = a.exp()          # saves its output
        b[1:].mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()


def test_expanded_view_inplace_errors():
    for m in (torch, tapelab):
        a = m.tensor(A[0], requires_grad=True)
        x = a.clone()[None].expand(3, 4)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            x.mul_(2)


# ---------------------------------------------------------------- reshape that copies
def test_reshape_copy_is_not_a_view():
    base = tapelab.tensor(A).t()          # non-contiguous: reshape(-1) must copy
    r = base.reshape(-1)
    assert r._base is None
    r.add_(1)
    assert base._version == 0 and r._version == 1
    np.testing.assert_array_equal(base.numpy(), A.T)
    c = tapelab.tensor(A)
    v = c.reshape(-1)
    assert v._base is c
    v.add_(1)
    assert c._version == 1
    np.testing.assert_array_equal(c.numpy(), A + 1)
    f = tapelab.tensor(A).t().flatten()
    assert f._base is None


def test_reshape_copy_inplace_gradient():
    def f(m, a):
        x = a.clone().t()
        r = x.reshape(-1)   # a copy in both libraries
        r.mul_(2)
        return r * r + x.reshape(-1)
    _run(f, A)


# ---------------------------------------------------------------- multi-output node
SPLITS = {
    "unbind0": lambda x: x.unbind(0),
    "unbind1": lambda x: x.unbind(-1),
    "split": lambda x: x.split(2, dim=1),
    "split_sizes": lambda x: x.split([1, 2], dim=0),
    "chunk": lambda x: x.chunk(3, dim=1),
    "tensor_split": lambda x: x.tensor_split(3, dim=1),
    "tensor_split_idx": lambda x: x.tensor_split([1, 3], dim=1),
}


@pytest.mark.parametrize("used", ["all", "some", "one"])
@pytest.mark.parametrize("name", sorted(SPLITS))
def test_multi_output_gradients(name, used):
    def f(m, a):
        pieces = SPLITS[name](a * 1)
        idx = {"all": range(len(pieces)), "some": range(0, len(pieces), 2), "one": [len(pieces) - 1]}[used]
        return m.stack([(pieces[i] ** 2).sum() * (i + 1) for i in idx])
    _run(f, A)


def test_multi_output_node_is_shared():
    x = tapelab.tensor(A, requires_grad=True)
    pieces = x.unbind(0)
    assert len({id(p.grad_fn) for p in pieces}) == 1
    node = pieces[0].grad_fn
    assert node.name() == "UnbindBackward0" and node.n_outputs == 3
    assert [p._out_nr for p in pieces] == [0, 1, 2]
    assert x.split(2)[0].grad_fn.name() == "SplitBackward0"
    assert x.split([1, 2])[0].grad_fn.name() == "SplitWithSizesBackward0"
    assert all(p._base is x for p in pieces)


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_multi_output_double_backward(name):
    res = []
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        pieces = SPLITS[name](a * 1)
        y = sum(((p ** 3) * (i + 1)).sum() for i, p in enumerate(pieces) if i != 1)
        (g,) = m.autograd.grad(y, a, create_graph=True)
        (gg,) = m.autograd.grad((g * g).sum(), a)
        res.append((_np(g), _np(gg)))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-6)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-6)


def test_multi_output_gradcheck():
    a = tapelab.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    fn = lambda x: tapelab.stack([p * (i + 1) for i, p in enumerate(x.unbind(1)) if i != 1])
    assert tapelab.autograd.gradcheck(fn, (a,))
    assert tapelab.autograd.gradgradcheck(fn, (a,))


def _backward_ops(t):
    return [n.op for n in t.nodes if n.kind == "forward" and n.phase == "backward"]


def test_unbind_backward_cost_is_one_op():
    x = tapelab.tensor(np.ones((1000, 64), np.float32), requires_grad=True)
    pieces = x.unbind(0)
    loss = pieces[0].sum() + pieces[500].sum() * 2 + pieces[999].sum() * 3
    with tapelab.tape() as t:
        loss.backward()
    ops = _backward_ops(t)
    assert "slice_backward" not in ops
    assert ops.count("views_backward") == 1
    assert len(ops) < 10
    g = x.grad.numpy()
    assert g[0].tolist() == [1.0] * 64 and g[500, 0] == 2 and g[999, 0] == 3 and g[1:500].sum() == 0
    pieces = x.unbind(0)
    loss = tapelab.stack(pieces).sum()
    with tapelab.tape() as t:
        loss.backward()       # stack's backward slices once per piece; unbind's is one op
    ops = _backward_ops(t)
    assert ops.count("views_backward") == 1 and "slice_backward" not in ops and len(ops) <= 1003


def test_unbind_under_tape_and_tracing():
    x = tapelab.tensor(A, requires_grad=True)
    with tapelab.tape() as t:
        a, b, c = x.unbind(0)
    assert sum(n.op == "slice" for n in t.nodes if n.kind == "forward") == 3
    assert a.grad_fn is b.grad_fn and a.grad_fn.name() == "UnbindBackward0"
    (a * 2 + c).sum().backward()
    assert x.grad.numpy()[:, 0].tolist() == [2.0, 0.0, 1.0]


# ---------------------------------------------------------------- stale views
def test_view_sees_inplace_on_base():
    def f(m, a):
        x = a.clone()
        v = x[0]
        x.mul_(2)
        return v * 1
    _run(f, A)


def test_inplace_reading_a_view_of_itself_errors():
    for m in (torch, tapelab):
        x = m.tensor(A, requires_grad=True).clone()
        x[0].mul_(x[1])      # x[1] is saved by mul, then x is modified
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            x.sum().backward()


def test_view_of_view_base_after_inplace_on_root():
    def f(m, a):
        x = a.clone().reshape(3, 2, 2)       # a view of the clone
        x.permute(2, 0, 1)[0].fill_(1.5)     # rebases the clone: x's grad_fn is stale
        return x * 2
    _run(f, A)


def test_sibling_view_sees_inplace_on_other_view():
    def f(m, a):
        x = a.clone()
        v, w = x[0], x[:, 1]
        v.mul_(3)
        return w * 1
    _run(f, A)


def test_stale_view_as_backward_root_and_grad_input():
    for m in (torch, tapelab):
        a = m.tensor(A, requires_grad=True)
        x = a.clone()
        v = x[0]
        x.mul_(2)
        v.backward(m.ones(4))            # the root is regenerated over x's new graph
        assert _np(a.grad)[0].tolist() == [2.0] * 4
        x = a.clone()
        v = x[0]
        x.add_(1)
        with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
            m.autograd.grad((x * x).sum(), v)  # v's grad_fn is regenerated after x's: x does not use it


def test_view_of_nonrequiring_base_sees_inplace_with_grad():
    def f(m, a):
        x = m.zeros(3, 4, dtype=a.dtype)
        v = x[1]
        x.add_(a * a)           # x now requires grad; v was made before
        return v * 1
    _run(f, A)


def test_view_of_stale_view_in_place():
    def f(m, a):
        x = a.clone()
        v = x[1:]
        x.mul_(2)
        v[0].add_(a[0])      # v is stale: refreshed before the rebase
        return x * 1
    _run(f, A)


def test_views_of_strided_bases_and_replaced_data():
    # a base that is not C-contiguous (a user array) goes through flat positions
    arr = np.asfortranarray(A)
    w = tapelab.tensor(A[0] * 0 + 2, requires_grad=True)
    x = tapelab.from_numpy(arr) if hasattr(tapelab, "from_numpy") else tapelab.tensor(arr)
    x._data = arr
    x[1].mul_(w)
    (x * x).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * A[1] ** 2 * 2)
    np.testing.assert_allclose(x.detach().numpy()[1], A[1] * 2)
    # a view whose base's data was replaced cannot be related to it: a clear error
    b = tapelab.tensor(A, requires_grad=True).clone()
    v = b[0]
    b.data = tapelab.zeros(3, 4, dtype=b.dtype)
    with pytest.raises(RuntimeError, match="no longer aliases its base"):
        v.mul_(2)

"""Edge cases of session 23's cheaper per-call paths, each against PyTorch 2.13: the compiled path's
node (its edges and the saved values' versions made without ``edge_to``/``_op_node`` frames, the
versions as shared constant tuples while they are 0), an op first run while a tape records (compiled
there), and ``lerp_``'s one-pass write with its weight's float32 choice cached."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _pair(*shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    return a


def _outcome(fn, lib):
    """``fn(lib)``: the gradients it returns (float64, to 5 decimals: exp's last bit may differ), or its
    exception type and the start of its message."""
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).split("\n")[0][:60]
    return [None if g is None else np.round(g.detach().numpy().astype(np.float64), 5).tolist() for g in out]


# ---------------------------------------------------------------- versions of the saved values
def _written_after(lib, make):
    """Record ``make(x, w)``, write in place into what it saved, then backward (PyTorch raises)."""
    x = lib.tensor(_pair(4), requires_grad=True)
    w = lib.tensor(_pair(4, seed=1), requires_grad=True)
    xa, wa = x * 1, w * 1          # non-leaves, written in place below
    y = make(xa, wa)
    with lib.no_grad():
        xa.add_(1)
    y.sum().backward()
    return x.grad, w.grad


def _written_before(lib, make):
    """Inputs at versions above 0 when recorded (a parameter after optimizer steps): no error."""
    x = lib.tensor(_pair(4), requires_grad=True)
    w = lib.tensor(_pair(4, seed=1), requires_grad=True)
    with lib.no_grad():
        x.mul_(2)
        w.add_(1)
        w.add_(1)
    y = make(x, w)
    y.sum().backward()
    return x.grad, w.grad


_MAKERS = {
    "mul_both": lambda x, w: x * w,                       # OTHERS, both need a gradient
    "mul_one": lambda x, w: x * w.detach(),               # OTHERS, one needs it: the other's value only
    "mul_other": lambda x, w: x.detach() * w,
    "mul_number": lambda x, w: x * 3.0,                   # a number operand
    "div_both": lambda x, w: x / (w * w + 1),
    "tanh": lambda x, w: x.tanh() * w,                    # saves its output
    "sigmoid_view": lambda x, w: x[1:].sigmoid() * w[1:],  # a view op's input, output saved
    "exp_of_view": lambda x, w: x.view(2, 2).exp().view(4) * w,
}


@pytest.mark.parametrize("name", sorted(_MAKERS))
@pytest.mark.parametrize("when", ["after", "before"])
def test_saved_versions_against_torch(name, when):
    run = _written_after if when == "after" else _written_before
    make = _MAKERS[name]
    assert _outcome(lambda L: run(L, make), tapelab) == _outcome(lambda L: run(L, make), torch)


def test_written_input_raises_torchs_error():
    def fn(lib):
        x = lib.tensor(_pair(4), requires_grad=True)
        a = x * 1
        y = a.tanh()
        with lib.no_grad():
            y.mul_(2)     # the output tanh saved
        y.sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn(torch)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        fn(tapelab)


def test_saved_tensors_and_names_as_torch():
    outs = {}
    for lib in (tapelab, torch):
        x = lib.tensor(_pair(3), requires_grad=True)
        w = lib.tensor(_pair(3, seed=1), requires_grad=True)
        m = x * w
        t = m.tanh()
        h = x * w.detach()
        outs[lib.__name__] = (
            type(m.grad_fn).__name__, m.grad_fn._saved_self is x, m.grad_fn._saved_other is w,
            type(t.grad_fn).__name__, np.allclose(t.grad_fn._saved_result.detach().numpy(), t.detach().numpy()),
            len(h.grad_fn.next_functions), h.grad_fn.next_functions[1][0] is None,
            [type(f).__name__ for f, _ in m.grad_fn.next_functions])
    assert outs["tapelab"] == outs["torch"]


def test_view_edge_after_its_base_was_written():
    """A view whose base was written in place after the view was made: its edge is regenerated
    (``edge_to``'s path, not the compiled path's inlined one), as PyTorch's grad_fn accessor does."""
    def fn(lib):
        x = lib.tensor(_pair(6), requires_grad=True)
        base = x * 1
        v = base[2:]
        base.mul_(3)          # bumps the view's (shared) version counter
        y = v * v
        y.sum().backward()
        return (x.grad,)
    assert _outcome(fn, tapelab) == _outcome(fn, torch)


# ---------------------------------------------------------------- an op first run under a tape
def test_op_first_run_while_a_tape_records_is_compiled_and_recorded():
    x = tapelab.tensor(_pair(5), requires_grad=True)
    op = (x * x).grad_fn.op
    op.fast = None              # as at the op's first dispatch in a process
    with tapelab.tape() as tp:
        y = x * x
        y.sum().backward()
    assert callable(op.fast)
    assert [n.op for n in tp.nodes if n.kind == "forward"][:2] == ["mul", "sum"]
    xt = torch.tensor(_pair(5), requires_grad=True)
    (xt * xt).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(y.detach().numpy(), (xt * xt).detach().numpy())


# ---------------------------------------------------------------- lerp_ with a number weight
# float32 rounds 0.49999999999 up to 0.5 (ATen's choice then takes the end's formula); 1 and True
# hash equal to 1.0 and share a cache entry with it; a weight past 1 and a negative one extrapolate
_WEIGHTS = [0.001, 0.25, 0.5, 0.49999999999, 0.5000000001, 1, 1.0, True, False, -2, 3.5, 0.9999, 0.0, -0.0, 0]


def test_lerp_signed_zero_weight_bit_for_bit():
    """A weight of -0.0 after one of 0.0 (equal keys): the sign of a -0.0 start's result is PyTorch's."""
    start = np.array([-0.0, 1.0, -0.0, 2.5], np.float32)
    end = np.array([3.0, -1.0, -2.0, 0.0], np.float32)
    for weight in (0.0, -0.0, 0, -0.0):
        got = tapelab.tensor(start).lerp_(tapelab.tensor(end), weight).numpy()
        want = torch.tensor(start).lerp_(torch.tensor(end), weight).numpy()
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("weight", _WEIGHTS, ids=repr)
@pytest.mark.parametrize("shape", [(7,), (33, 5), (2, 3, 4)])
def test_lerp_inplace_bit_for_bit(weight, shape):
    a, b = _pair(*shape), _pair(*shape, seed=1)
    got = tapelab.tensor(a).lerp_(tapelab.tensor(b), weight)
    want = torch.tensor(a).lerp_(torch.tensor(b), weight)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    got2 = tapelab.tensor(a).lerp(tapelab.tensor(b), weight)
    np.testing.assert_array_equal(got2.numpy(), want.numpy())


@pytest.mark.parametrize("weight", [0.001, 0.75, 1])
def test_foreach_lerp_inplace_bit_for_bit_and_versions(weight):
    shapes = [(64, 78), (64,), (10, 64), (10,), (40000,)]   # the last above the loops' parallel size
    ends = [_pair(*s, seed=i + 10) for i, s in enumerate(shapes)]
    starts = [_pair(*s, seed=i) for i, s in enumerate(shapes)]
    tl = [tapelab.tensor(s) for s in starts]
    th = [torch.tensor(s) for s in starts]
    before = [t._version for t in tl]
    tapelab._foreach_lerp_(tl, [tapelab.tensor(e) for e in ends], weight)
    torch._foreach_lerp_(th, [torch.tensor(e) for e in ends], weight)
    for a, b in zip(tl, th):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert [t._version - v for t, v in zip(tl, before)] == [1] * len(tl)


def test_lerp_inplace_float64_and_mixed_layouts():
    """Arrays the float32 loop does not take (float64, a transposed end) keep the formula's path (float64's
    last bit may differ: PyTorch fuses its multiply-add)."""
    a, b = _pair(6, 4, dtype=np.float64), _pair(4, 6, dtype=np.float64, seed=1)
    got = tapelab.tensor(a).lerp_(tapelab.tensor(b).t(), 0.3)
    want = torch.tensor(a).lerp_(torch.tensor(b).t(), 0.3)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15, atol=1e-15)   # float64: no fma here
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got = tapelab.tensor(a32).lerp_(tapelab.tensor(b32).t(), 0.7)
    want = torch.tensor(a32).lerp_(torch.tensor(b32).t(), 0.7)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---------------------------------------------------------------- the view front ends' short ways
def _refusal(fn, lib):
    try:
        fn(lib)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("shapes", [[(2, 3)] * 4 + [(3, 2)], [(2, 3), (2, 3, 1)], [(4,)] * 3 + [(5,)] + [(4,)]])
def test_stack_shape_mismatch_names_the_entry_as_torch(shapes):
    def fn(lib):
        return lib.stack([lib.zeros(*s) for s in shapes])
    got = _refusal(fn, tapelab)
    assert got is not None and got == _refusal(fn, torch)


def test_stack_of_views_values_and_grad_as_torch():
    data = _pair(6, 1, 4)
    outs = []
    for lib in (tapelab, torch):
        x = lib.tensor(data, requires_grad=True)
        s = lib.stack([x[i] for i in range(6)])
        (s * lib.arange(24.0).reshape(6, 1, 4)).sum().backward()
        outs.append((s.detach().numpy().tolist(), x.grad.numpy().tolist(), s.is_contiguous()))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
def test_t_as_torch(shape):
    def fn(lib):
        x = lib.tensor(_pair(*shape) if shape else np.float32(1.5), requires_grad=True)
        y = x.t()
        z = (y * y).sum()
        z.backward()
        return y.shape, y.detach().numpy().tolist(), x.grad.numpy().tolist(), y._base is x if shape == (3, 4) else None
    got = _refusal(fn, tapelab) or fn(tapelab)
    want = _refusal(fn, torch) or fn(torch)
    assert got == want


def test_t_is_a_view_sharing_the_version_counter():
    for lib in (tapelab, torch):
        x = lib.tensor(_pair(3, 4))
        y = x.t()
        y[0, 1] = 7.0
        assert x[1, 0].item() == 7.0 and x._version == y._version == 1


@pytest.mark.parametrize("shape", [(16, 8), (-1, 8), (2, -1, 4), (0, 5), (-2, 64), (3, 5), (-1, -1), (-1,), (5, -1),
                                   (-1, -3), (4, 2, -1, 2, 1)])
@pytest.mark.parametrize("method", ["view", "reshape"])
def test_view_and_reshape_sizes_as_torch(shape, method):
    """The size check's short way (a product and a min): the result's shape, or the refusal's type."""
    def fn(lib):
        x = lib.tensor(_pair(8, 16)) if shape != (0, 5) else lib.zeros(0, 3)
        return tuple(getattr(x, method)(*shape).shape)
    got, want = _refusal(fn, tapelab), _refusal(fn, torch)
    if want is None:
        assert got is None and fn(tapelab) == fn(torch)
    else:
        assert got is not None and got[0] == want[0]

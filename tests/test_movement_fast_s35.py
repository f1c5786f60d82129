"""Session 35's shorter movement paths (expand over a contiguous input's memory, ``x[:, None]`` laid out
directly, permute/squeeze/flatten/cat's one-pass checks, the slice node's name in one loop): shapes,
strides, values, gradients, node names, errors and shared memory as PyTorch's."""
import numpy as np
import pytest
import torch

import tapelab as tl

_RNG = np.random.default_rng(35)
_A = _RNG.standard_normal((2, 3, 1, 5)).astype(np.float32)

# sources: contiguous, transposed, sliced, expanded (read-only, stride 0), selected
SOURCES = ["x", "x.transpose(1, 3)", "x[:, 1:]", "x.expand(2, 3, 4, 5)", "x[0]", "x.permute(3, 0, 2, 1)"]


def _both(expr: str, requires_grad: bool = False):
    out = []
    for m in (torch, tl):
        x = m.tensor(_A, requires_grad=requires_grad)
        out.append((x, eval(expr, {"x": x, "m": m})))
    return out


def _same(t, y, grad_fn=True):
    assert tuple(t.shape) == tuple(y.shape)
    assert t.stride() == y.stride()
    np.testing.assert_array_equal(t.detach().numpy(), y.detach().numpy())
    if grad_fn:
        assert (t.grad_fn is None) == (y.grad_fn is None)
        if t.grad_fn is not None:
            assert type(t.grad_fn).__name__ == type(y.grad_fn).__name__


# every source has a dim 2 of one element; -1 keeps a dim's size
EXPANDS = [(src, size) for src in ("x", "x[:, 1:]", "x.transpose(0, 1)", "x[:1].transpose(0, 3)")
           for size in ("(-1, -1, 4, -1)", "(7, -1, -1, 4, -1)", "(1, -1, -1, 4, -1)", "(2, 1, -1, -1, 4, -1)",
                        "(-1, -1, 1, -1)", "(3, 1, -1, -1, -1, -1)")]
EXPANDS += [("x", size) for size in ("(2, 3, 4, 5)", "(7, 2, 3, 4, 5)", "(1, 2, 3, 4, 5)", "(2, 1, 2, 3, 4, 5)",
                                     "(2, 3, 1, 5)")]


@pytest.mark.parametrize("src,size", EXPANDS)
def test_expand_strides_values_and_grad(src, size):
    (tx, t), (lx, y) = _both(f"{src}.expand{size}", requires_grad=True)
    _same(t, y)
    w = _RNG.standard_normal(tuple(t.shape)).astype(np.float32)
    (t * torch.tensor(w)).sum().backward()
    (y * tl.tensor(w)).sum().backward()
    # (the gradient sums over the expanded dims in another order than ATen's: equal to rounding)
    np.testing.assert_allclose(tx.grad.numpy(), lx.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size", ["(3,)", "(2, 1, 3)", "(1, 3)", "(4, 1, 1)"])
def test_expand_small_and_zero_d(size):
    for src in ("torch.tensor(1.5)", "torch.tensor([2.5])", "torch.arange(3.0)"):
        if src.endswith("(3.0)") and size == "(4, 1, 1)":
            continue
        t = eval(f"{src}.expand{size}", {"torch": torch})
        y = eval(f"{src.replace('torch', 'tl')}.expand{size}", {"tl": tl})
        _same(t, y)


def test_expand_shares_memory_and_refuses_writes():
    for m in (torch, tl):
        x = m.tensor([[1.0], [2.0]])
        y = x.expand(2, 3)
        x.mul_(10)   # the expanded view follows its input
        assert y.tolist() == [[10.0] * 3, [20.0] * 3]
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            y.add_(1)
        y.zero_()   # one value per memory location: allowed, as PyTorch's
        assert x.tolist() == [[0.0], [0.0]]
        assy = x.expand(2, 2).contiguous()
        assy.add_(1)
        assert x.tolist() == [[0.0], [0.0]]


@pytest.mark.parametrize("size,message", [
    ((2, 4), "The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 1"),
    ((-1, 2, 3), "-1 is not allowed in a leading, non-existing dimension"),
    ((3,), "the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)"),
])
def test_expand_errors(size, message):
    for m in (torch, tl):
        with pytest.raises(RuntimeError) as e:
            m.ones(2, 3).expand(*size)
        if m is tl:
            assert message in str(e.value)


KEYS = ["[:, :, None]", "[None]", "[..., None]", "[None, ..., None]", "[:, None, ..., None, :]", "[None, None]",
        "[..., None, :]", "[:, None]", "[:, None, 1:]", "[0, None]", "[None, 0]", "[:, 1:, None]", "[..., 2:]",
        "[:]", "[...]", "[..., :]", "[0]", "[:, 0]", "[None, :, 1:2]"]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("src", SOURCES)
def test_getitem_strides_values_names(src, key):
    (_, t), (_, y) = _both(f"{src}{key}", requires_grad=True)
    _same(t, y)


@pytest.mark.parametrize("key", ["[:, :, None]", "[None]", "[..., None]", "[:, None, 1:]", "[None, :, 0]"])
@pytest.mark.parametrize("src", ["x", "x.transpose(1, 3)", "x[:, 1:]", "x.permute(3, 0, 2, 1)"])
def test_getitem_new_dims_gradient_and_shared_memory(src, key):
    (tx, t), (lx, y) = _both(f"{src}{key}", requires_grad=True)
    w = _RNG.standard_normal(tuple(t.shape)).astype(np.float32)
    (t * torch.tensor(w)).sum().backward()
    (y * tl.tensor(w)).sum().backward()
    np.testing.assert_array_equal(tx.grad.numpy(), lx.grad.numpy())
    for m in (torch, tl):   # a write through the view reaches the input, and both see one version
        x = m.tensor(_A)
        base = eval(src, {"x": x})
        v = eval(f"base{key}", {"base": base})
        before = base._version
        v.add_(1)
        assert base._version == before + 1
        np.testing.assert_array_equal(eval(src, {"x": x}).numpy()[...], base.numpy())
        np.testing.assert_allclose(eval(f"b{key}", {"b": base}).numpy(), v.numpy())
    x = tl.tensor(_A)
    eval(f"{src}{key}", {"x": x}).add_(1)
    tx = torch.tensor(_A)
    eval(f"{src}{key}", {"x": tx}).add_(1)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_new_dims_of_read_only_array_stay_read_only():
    from tapelab.ops import movement
    data = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), np.float32).reshape(2, 3)
    for key in ((None, Ellipsis), (slice(None), None, Ellipsis), (Ellipsis, None)):
        out = movement._slice_fwd(np, data, key=key)
        assert not out.flags.writeable
        np.testing.assert_array_equal(out, data[key])
        assert np.shares_memory(out, data)
    writeable = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert movement._slice_fwd(np, writeable, key=(None, Ellipsis)).flags.writeable


def test_slice_node_names():
    for m in (torch, tl):
        x = m.ones(2, 3, requires_grad=True)
        names = [type(y.grad_fn).__name__ for y in (x[:], x[...], x[..., :], x[0], x[:, 1:], x[None], x[:, None, 1],
                                                      x[1:, None], x[..., None, :])]
        assert names == ["SliceBackward0", "AliasBackward0", "AliasBackward0", "SelectBackward0", "SliceBackward0",
                         "UnsqueezeBackward0", "SelectBackward0", "UnsqueezeBackward0", "UnsqueezeBackward0"], m


@pytest.mark.parametrize("bad", ["x[:, :, :, :, :, None]", "x[:, ..., :, :, :, :, None]", "x[0, 0, 0, 0, 0, None]"])
def test_getitem_too_many_indices(bad):
    for m in (torch, tl):
        x = m.tensor(_A)
        with pytest.raises(IndexError, match="too many indices for tensor of dimension 4"):
            eval(bad, {"x": x})


@pytest.mark.parametrize("expr", ["x.permute(0, 2, 1, 3)", "x.permute(-1, 0, 1, 2)", "x.permute(3, -2, 0, -3)",
                                  "x.permute((1, 0, 3, 2))", "x.squeeze(2)", "x.squeeze(-2)", "x.squeeze(0)",
                                  "x.squeeze()", "x.squeeze((0, 2))", "x.flatten(1)", "x.flatten()",
                                  "x.flatten(1, 2)", "x.flatten(-2)", "x.transpose(1, 3).flatten(2)",
                                  "m.cat([x, x], -1)", "m.cat([x, x[:1]], 0)",
                                  "m.cat((x, x.transpose(1, 2)[:, :, :1]), dim=1)",
                                  "m.cat([x, x, x], 2)", "m.cat([x.flatten(), x.flatten()])",
                                  "m.cat([m.ones(0), x.flatten()])", "m.cat([x, m.ones(0)])", "m.cat([x], -4)",
                                  "m.tensor(2.0).squeeze(0)", "m.tensor(2.0).flatten()"])
def test_shape_ops_as_torch(expr):
    (tx, t), (lx, y) = _both(expr, requires_grad=True)
    # (squeeze's node is ViewBackward0 here, PyTorch's SqueezeBackward1; a flatten that copies ViewBackward0,
    # PyTorch's ReshapeAliasBackward0: as before this session)
    _same(t, y, grad_fn="squeeze" not in expr and "transpose" not in expr)
    w = _RNG.standard_normal(tuple(t.shape)).astype(np.float32)
    if t.requires_grad:
        (t * torch.tensor(w)).sum().backward()
        (y * tl.tensor(w)).sum().backward()
        np.testing.assert_array_equal(tx.grad.numpy(), lx.grad.numpy())


@pytest.mark.parametrize("expr,kind", [
    ("x.permute(0, 0, 1, 2)", RuntimeError), ("x.permute(0, 1, 2)", RuntimeError),
    ("x.permute(0, 1, 2, 4)", IndexError), ("x.permute(0, 1, 2, -5)", IndexError),
    ("x.squeeze(4)", IndexError), ("x.squeeze(-5)", IndexError), ("x.flatten(2, 1)", RuntimeError),
    ("m.cat([x, x[0]])", RuntimeError), ("m.cat([x, x[:, :2]], 0)", RuntimeError),
    ("m.cat([x, x], 4)", IndexError), ("m.cat([x, m.tensor(1.0)])", RuntimeError),
])
def test_shape_op_errors_as_torch(expr, kind):
    msgs = []
    for m in (torch, tl):
        x = m.tensor(_A)
        with pytest.raises(kind) as e:
            eval(expr, {"x": x, "m": m})
        msgs.append(str(e.value))
    if kind is RuntimeError and "cat" in expr and "tensor(1.0)" not in expr:
        assert msgs[0] == msgs[1]


def test_squeeze_in_place_and_views_share_versions():
    for m in (torch, tl):
        x = m.tensor(_A)
        v = x.squeeze(2).permute(2, 0, 1).flatten(1)
        x.add_(1)
        assert v._version == x._version
        np.testing.assert_array_equal(v.numpy(), (_A + 1).squeeze(2).transpose(2, 0, 1).reshape(5, 6))

"""Gaps that research-model libraries (lucidrains-style packages) met in session 15q, each against PyTorch itself."""
import pytest
import torch

import tapelab


def _refusal(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return type(e), str(e)
    return None


def test_an_einsum_contraction_refuses_two_dtypes_as_torchs():
    """vector-quantize-pytorch's LFQ contracts its (float64) input with a float32 codebook buffer in
    ``einsum('... i d, j d -> ... i j')``: PyTorch's batched GEMM refuses the two dtypes; an einsum
    that sums no shared label is a product, which promotes."""
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4)
    ta, tb = tapelab.tensor(a.numpy()), tapelab.tensor(b.numpy())
    for eq, x, y, tx, ty in [("id,jd->ij", a, b, ta, tb), ("id,jd->ij", b, a, tb, ta), ("i,i->", a[0], b[0], ta[0], tb[0]),
                             ("ij,j->i", a, b[0], ta, tb[0])]:
        want = _refusal(lambda: torch.einsum(eq, x, y))
        assert want is not None and _refusal(lambda: tapelab.einsum(eq, tx, ty)) == want
    for eq, x, y, tx, ty in [("i,j->ij", a[0], b[1], ta[0], tb[1]), ("i,i->i", a[0], b[0], ta[0], tb[0])]:
        want, got = torch.einsum(eq, x, y), tapelab.einsum(eq, tx, ty)
        assert got.dtype == tapelab.float64 == getattr(tapelab, str(want.dtype).split(".")[1])
        assert torch.allclose(torch.tensor(got.numpy()), want, rtol=1e-15)
    want = _refusal(lambda: torch.einsum("ij,ij,ij->i", a, b[:3], b[:3]))
    assert _refusal(lambda: tapelab.einsum("ij,ij,ij->i", ta, tb[:3], tb[:3])) == want
    with tapelab.autocast("cpu"):       # autocast casts both operands first
        assert tapelab.einsum("id,jd->ij", ta.bfloat16(), tb).dtype == tapelab.bfloat16


@pytest.mark.parametrize("fn", ["tensordot", "inner"])
def test_tensordot_and_inner_refuse_two_dtypes_as_torchs(fn):
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4)
    args = {"tensordot": lambda m, x, y: m.tensordot(x, y, dims=([1], [1])), "inner": lambda m, x, y: m.inner(x, y)}[fn]
    want = _refusal(lambda: args(torch, a, b))
    assert want == (RuntimeError, "both inputs should have same dtype")
    assert _refusal(lambda: args(tapelab, tapelab.tensor(a.numpy()), tapelab.tensor(b.numpy()))) == want
    assert _refusal(lambda: args(tapelab, tapelab.tensor(a.numpy()).long(), tapelab.tensor(b.numpy()))) == \
        _refusal(lambda: args(torch, a.long(), b))


def test_cdist_refuses_integers_and_two_dtypes_as_torchs():
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    ta, tb = tapelab.tensor(a.numpy()), tapelab.tensor(b.numpy())
    for x, y, tx, ty in [(a.double(), b, ta.double(), tb), (a, b.double(), ta, tb.double()), (a.long(), b, ta.long(), tb),
                         (a, b.long(), ta, tb.long()), (a.long(), b[:, :3], ta.long(), tb[:, :3])]:
        want = _refusal(lambda: torch.cdist(x, y))
        assert want is not None and _refusal(lambda: tapelab.cdist(tx, ty)) == want


@pytest.mark.parametrize("fn", ["dot", "vdot"])
def test_dot_and_vdot_name_two_dtypes_as_torchs(fn):
    a = torch.randn(3)
    ta = tapelab.tensor(a.numpy())
    for x, y, tx, ty in [(a.double(), a, ta.double(), ta), (a.long(), a, ta.long(), ta), (a.to(torch.complex64), a, ta.to(tapelab.complex64), ta)]:
        want = _refusal(lambda: getattr(torch, fn)(x, y))
        assert want is not None and _refusal(lambda: getattr(tapelab, fn)(tx, ty)) == want


def test_a_compiled_call_returns_its_shapes_as_size_on_every_call():
    """einops' ``repeat(...).shape`` returned from a ``torch.compile``d function: torch hands back a
    ``torch.Size`` on every call; the replayed graph's output held a plain tuple from the second on."""
    from collections import namedtuple
    pair = namedtuple("pair", "out shape")

    def f(x):
        return x.sin(), x.shape, {"s": (x * 2).shape, "t": x.cos()}, [x.size(), 1], x.shape[0], pair(x.exp(), x.shape)

    def kinds(res):
        return [type(res[1]).__name__, type(res[2]["s"]).__name__, type(res[3][0]).__name__, type(res[4]).__name__,
                type(res[5]).__name__, type(res[5].shape).__name__]

    want = kinds(f(torch.randn(2, 3)))        # what torch.compile's result holds: the eager call's types
    assert want == ["Size", "Size", "Size", "int", "pair", "Size"]
    x = tapelab.randn(2, 3, requires_grad=True)
    for compiled in (tapelab.compile(f), tapelab.compile(f, mode="reduce-overhead")):
        for _ in range(3):
            res = compiled(x)
            assert kinds(res) == want and res[2]["s"] == (2, 3) and res[3][1] == 1


def test_bool_products_are_refused_and_integer_einsum_sums_widen_as_torchs():
    """ATen has no bool GEMM (each product names the CPU kernel it lowers to), and einsum sums a label
    only one operand holds with ``sum``, which makes a bool or integer operand int64."""
    a, b = torch.randn(2, 3, 4) > 0, torch.randn(2, 4, 5) > 0
    ta, tb = tapelab.tensor(a.numpy()), tapelab.tensor(b.numpy())
    for fn in [lambda m, x, y: x @ y[0], lambda m, x, y: x @ y[0, :, 0], lambda m, x, y: x[0] @ y, lambda m, x, y: x @ y,
               lambda m, x, y: x[0, 0] @ y[0], lambda m, x, y: m.dot(x[0, 0], y[0, :, 0]), lambda m, x, y: m.mv(x[0], y[0, :, 0]),
               lambda m, x, y: m.einsum("ij,jk->ik", x[0], y[0]), lambda m, x, y: m.einsum("id,jd->i", x[0], y[0].T),
               lambda m, x, y: m.tensordot(x[0], y[0], 1), lambda m, x, y: m.inner(x[0], y[0].T)]:
        want = _refusal(lambda: fn(torch, a, b))
        assert want is not None and want[0] is NotImplementedError and _refusal(lambda: fn(tapelab, ta, tb)) == want
    x = torch.randint(-3, 4, (3, 3), dtype=torch.int32)
    for eq, ops in [("ij->i", (x > 0,)), ("ij->i", (x,)), ("ii", (x > 0,)), ("ii->i", (x > 0,)), ("ij->", (x.short(),)),
                    ("i,j->", (x[0], x[1])), ("ij,ij->i", (x, x)), ("ij,ij->ij", (x > 0, x > 0))]:
        want = torch.einsum(eq, *ops)
        got = tapelab.einsum(eq, *(tapelab.tensor(o.numpy()) for o in ops))
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] and got.tolist() == want.tolist(), eq

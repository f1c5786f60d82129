"""einsum of three operands or more contracts in PyTorch's order. PyTorch's Python ``einsum`` asks
``opt_einsum.contract_path`` (where the package is installed and ``torch.backends.opt_einsum.enabled``)
and hands the pairs to ATen, which contracts two operands at a time (each product appended after the
operands left); else ATen goes left to right. The order decides which two operands meet first (a
dtype refusal's message), the result's strides, and the rounding. Each case runs under both settings,
set alike in torch and tapelab; the opt_einsum ones skip where the package is missing.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

HAVE_OE = torch.backends.opt_einsum.is_available()


@pytest.fixture(params=[pytest.param(True, marks=pytest.mark.skipif(not HAVE_OE, reason="opt_einsum is not installed")),
                        False], ids=["opt_einsum", "left_to_right"])
def enabled(request):
    old = (torch.backends.opt_einsum.enabled, tapelab.backends.opt_einsum.enabled)
    torch.backends.opt_einsum.enabled = tapelab.backends.opt_einsum.enabled = request.param
    yield request.param
    torch.backends.opt_einsum.enabled, tapelab.backends.opt_einsum.enabled = old


CASES = {
    "chain3": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    "chain3_transposed": ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
    "chain4": ("ij,jk,kl,lm->im", [(8, 2), (2, 8), (8, 2), (2, 8)]),
    "chain5": ("ab,bc,cd,de,ef->af", [(3, 7), (7, 2), (2, 9), (9, 4), (4, 3)]),
    "bmm_chain": ("bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 6)]),
    "ellipsis": ("...ij,...jk,kl->...il", [(2, 1, 3, 4), (5, 4, 2), (2, 3)]),
    "ellipsis_summed": ("...i,...i,i->i", [(2, 3, 4), (3, 4), (4,)]),
    "repeated": ("iij,jk,kl->il", [(3, 3, 4), (4, 5), (5, 2)]),
    "implicit": ("ij,jk,kl", [(2, 3), (3, 4), (4, 5)]),
    "bilinear": ("bn,anm,bm->ba", [(2, 5), (3, 5, 4), (2, 4)]),
    "no_contraction": ("bld,bln,bld->bldn", [(2, 3, 4), (2, 3, 5), (2, 3, 4)]),
    "size_one": ("ab,ab,ab,ab->b", [(3, 1), (1, 4), (3, 4), (3, 4)]),
    "alone": ("i,ij,j,k->k", [(2,), (2, 3), (3,), (4,)]),
    "star": ("ai,bi,ci,di->abcd", [(2, 6), (3, 6), (4, 6), (5, 6)]),
}


def _operands(m, shapes, dtype="float64", grad=False):
    rs = np.random.RandomState(sum(map(sum, shapes)))
    return [m.tensor(rs.standard_normal(s).astype(dtype), requires_grad=grad) for s in shapes]


def _nontrivial_strides(t) -> list:
    return [s for s, n in zip(t.stride(), t.shape) if n != 1]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_einsum_matches_torch_values_layout_and_gradients(enabled, case, dtype):
    eq, shapes = CASES[case]
    got = {}
    for m in (torch, tapelab):
        xs = _operands(m, shapes, dtype, grad=True)
        y = m.einsum(eq, *xs)
        g = m.tensor(np.random.RandomState(7).standard_normal(tuple(y.shape)).astype(dtype))
        y.backward(g)
        got[m.__name__] = (str(y.dtype).split(".")[-1], tuple(y.shape), _nontrivial_strides(y),
                           y.detach().numpy(), [x.grad.numpy() for x in xs])
    t, w = got["tapelab"], got["torch"]
    assert t[:3] == w[:3]
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t[3], w[3], **tol)
    for a, b in zip(t[4], w[4]):
        np.testing.assert_allclose(a, b, **tol)


def _pairwise(eq: str, xs: list, path) -> tapelab.Tensor:
    """The contraction as a chain of two-operand einsums in the given order (``None``: left to right),
    each keeping the labels the output or an operand left still holds."""
    ins, out = eq.split("->")
    order = out + "".join(sorted(set(ins.replace(",", "")) - set(out)))
    ops = list(zip(ins.split(","), xs))
    for i, j in path or [(0, 1)] * (len(xs) - 1):
        i, j = sorted((i, j))
        (la, a), (lb, b) = ops[i], ops[j]
        del ops[j], ops[i]
        rest = out + "".join(lab for lab, _ in ops)
        kept = "".join(c for c in order if c in la + lb and c in rest)
        r = tapelab.einsum(f"{la},{lb}->{kept}", a, b)
        if path is None:
            ops.insert(0, (kept, r))
        else:
            ops.append((kept, r))
    ((lab, r),) = ops
    return r.permute([lab.index(c) for c in out])


@pytest.mark.parametrize("case", ["chain3", "chain4", "chain5", "bmm_chain", "bilinear", "star"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_einsum_contracts_in_torchs_order_bit_for_bit(enabled, case, dtype):
    """The pairs are torch's: the result is, bit for bit, the chain of two-operand einsums in the
    order torch contracts (opt_einsum's path, or left to right). chain4/chain5/star contract in
    another order under opt_einsum, whose values differ in the last bits."""
    eq, shapes = CASES[case]
    xs = _operands(tapelab, shapes, dtype)
    path = None
    if enabled:
        import opt_einsum
        path = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=torch.backends.opt_einsum.strategy)[0]
    np.testing.assert_array_equal(tapelab.einsum(eq, *xs).numpy(), _pairwise(eq, xs, path).numpy())


@pytest.mark.skipif(not HAVE_OE, reason="opt_einsum is not installed")
def test_the_order_changes_the_rounding():
    """What the bit-for-bit test above tells apart: the other order rounds otherwise."""
    import opt_einsum
    eq, shapes = CASES["chain5"]
    xs = _operands(tapelab, shapes, "float32")
    path = opt_einsum.contract_path(eq, *shapes, shapes=True)[0]
    assert list(path) != [(0, 1)] * 4
    assert not np.array_equal(_pairwise(eq, xs, path).numpy(), _pairwise(eq, xs, None).numpy())


@pytest.mark.parametrize("eq, shapes", [("bld,bln,bld->bldn", [(2, 3, 4), (2, 3, 5), (2, 3, 4)]),
                                        ("bl,bl,bl,bl->bl", [(3, 5)] * 4),
                                        ("ij,i,j,ij->ij", [(3, 4), (3,), (4,), (3, 4)])])
def test_bfloat16_products_round_in_torchs_order(enabled, eq, shapes):
    """No label is summed across operands: ATen multiplies pairwise, each bfloat16 product rounded
    before the next; the values, strides and gradients equal torch's bit for bit."""
    got = {}
    for m in (torch, tapelab):
        xs = [x.detach().to(m.bfloat16).requires_grad_() for x in _operands(m, shapes, "float32")]
        y = m.einsum(eq, *xs)
        y.backward(m.tensor(np.random.RandomState(3).standard_normal(tuple(y.shape)).astype("float32")).to(y.dtype))
        got[m.__name__] = [y.stride(), y.grad_fn.name(), y.detach().float().numpy()] + [x.grad.float().numpy() for x in xs]
    assert got["tapelab"][:2] == got["torch"][:2]
    for a, b in zip(got["tapelab"][2:], got["torch"][2:]):
        np.testing.assert_array_equal(a, b)


def _outcome(fn):
    """The result's dtype (or the value, for what is no tensor), or the refusal's type and message."""
    try:
        y = fn()
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return type(e).__name__, str(e)
    return str(y.dtype).split(".")[-1] if hasattr(y, "dtype") else y


@pytest.mark.parametrize("eq, shapes, dtypes", [
    ("ij,ij,ij->i", [(3, 4)] * 3, ["float64", "float32", "float32"]),
    ("ij,ij,ij->i", [(3, 4)] * 3, ["float32", "float32", "float64"]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], ["float32", "float64", "float32"]),
    ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)], ["float64", "float32", "float32"]),
    ("ij,jk,kl,lm->im", [(8, 2), (2, 8), (8, 2), (2, 8)], ["float32", "float32", "float64", "float32"]),
    ("bld,bln,bld->bldn", [(2, 3, 4), (2, 3, 5), (2, 3, 4)], ["float32", "bfloat16", "float64"]),
    ("i,ij,j->", [(3,), (3, 4), (4,)], ["int32", "float32", "float32"]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], ["bool", "bool", "bool"]),
])
def test_mixed_dtypes_meet_as_in_torch(enabled, eq, shapes, dtypes):
    """Which two operands meet first decides the batched GEMM's refusal ('expected scalar type
    Float but found Double' or the other way round) or a product's promotion."""
    out = {}
    for m in (torch, tapelab):
        xs = [x.to(getattr(m, d)) for x, d in zip(_operands(m, shapes), dtypes)]
        out[m.__name__] = _outcome(lambda: m.einsum(eq, *xs))
    assert out["tapelab"] == out["torch"]


def test_forms_and_errors_as_torchs(enabled):
    """The sublist and list forms contract in the same order; opt_einsum's own refusal of sizes that
    do not match comes before ATen's (a ValueError instead of a RuntimeError)."""
    (ta, tb, tc), (la, lb, lc) = (_operands(m, CASES["chain4"][1][:3], "float64") for m in (torch, tapelab))
    want = torch.einsum(ta, [0, 1], tb, [1, 2], tc, [2, 3], [0, 3])
    for got in (tapelab.einsum(la, [0, 1], lb, [1, 2], lc, [2, 3], [0, 3]), tapelab.einsum("ij,jk,kl->il", [la, lb, lc])):
        assert got.stride() == want.stride()
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    bad = {m.__name__: _outcome(lambda: m.einsum("ij,jk,kl->il", *_operands(m, [(2, 3), (4, 4), (4, 5)])))
           for m in (torch, tapelab)}
    assert bad["torch"][0] == ("ValueError" if enabled else "RuntimeError")
    if enabled:     # ATen's message tapelab ends with the equation (ops/linalg.py: _einsum_error)
        assert bad["tapelab"] == bad["torch"]
    else:
        assert bad["tapelab"][0] == bad["torch"][0] and bad["tapelab"][1].startswith(bad["torch"][1])


@pytest.mark.skipif(not HAVE_OE, reason="opt_einsum is not installed")
@pytest.mark.parametrize("strategy", ["greedy", "optimal"])
def test_strategy_set_by_flags_is_followed(strategy):
    eq, shapes = "ab,bc,cd,de,ef,fg->ag", [(5, 2), (2, 7), (7, 3), (3, 9), (9, 2), (2, 6)]
    got = {}
    for m in (torch, tapelab):
        with m.backends.opt_einsum.flags(enabled=True, strategy=strategy):
            y = m.einsum(eq, *_operands(m, shapes, "float64"))
        got[m.__name__] = (y.stride(), y.numpy())
    assert got["tapelab"][0] == got["torch"][0]
    np.testing.assert_allclose(got["tapelab"][1], got["torch"][1], rtol=1e-12)


def test_backends_opt_einsum_as_torchs():
    """is_available, get_opt_einsum, enabled, strategy and set_flags/flags as PyTorch's: the checks
    and messages of set_flags, its old values returned, flags restoring them."""
    def story(m):
        oe = m.backends.opt_einsum
        seen = [oe.is_available(), oe.get_opt_einsum() is not None, oe.enabled, oe.strategy]
        for args in [(None, "auto-hq"), (False, "greedy")]:
            seen.append(_outcome(lambda: oe.set_flags(*args)))
        seen.append(_outcome(lambda: oe.set_flags(True)))
        with oe.flags(strategy="optimal" if oe.is_available() else None):
            seen.append(oe.strategy)
        seen.append((oe.enabled, oe.strategy))
        return seen
    assert story(tapelab) == story(torch)
    assert tapelab.backends.opt_einsum.get_opt_einsum() is torch.backends.opt_einsum.get_opt_einsum()


@pytest.mark.skipif(not HAVE_OE, reason="opt_einsum is not installed")
def test_a_plain_assignment_stands_over_flags_as_in_torch():
    """``opt_einsum.enabled = False`` is PyTorch's module attribute: unchecked, read by einsum, and
    standing over what ``flags()`` sets (which sets and checks the module's own value)."""
    def story(m):
        oe = m.backends.opt_einsum
        old = oe.enabled
        try:
            oe.enabled = False
            seen = [oe.enabled]
            with oe.flags(enabled=True):
                seen.append(oe.enabled)
            seen.append(oe.set_flags())
            return seen
        finally:
            oe.enabled = old
    assert story(tapelab) == story(torch)

"""Gaps found in session 16 running scientific libraries on top of PyTorch unchanged (e3nn,
torchsde, geomloss), each checked against real torch."""
from __future__ import annotations

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


def test_torch_functional_module_holds_the_public_composites():
    """opt_einsum_fx (e3nn's dependency) builds ``{torch.functional.einsum, torch.einsum}`` at import:
    torch.functional is a module whose names are the very top-level functions."""
    import torch.functional as theirs
    import tapelab.functional as ours
    assert ours.__all__ == theirs.__all__
    for name in theirs.__all__:
        assert getattr(ours, name) is getattr(tapelab, name), name


@BOTH
@pytest.mark.parametrize("form", ["flat", "list", "sublist"])
def test_fx_records_einsum_with_flat_operands(m, form):
    """e3nn's tensor products call ``torch.einsum(eq, (a, b))``; PyTorch turns a list of operands
    into ``(equation, *operands)`` before __torch_function__, so opt_einsum_fx's shape propagation
    finds each operand's ``.shape`` in the node's args. The sublist form on Proxies is recorded as
    written and converted when the graph runs."""
    def f(a, b):
        if form == "flat":
            return m.einsum("ij,jk->ik", a, b)
        if form == "list":
            return m.einsum("ij,jk->ik", [a, b])
        return m.einsum(a, [0, 1], b, [1, 2], [0, 2])
    g = m.fx.symbolic_trace(f)
    (node,) = [n for n in g.graph.nodes if n.op == "call_function"]
    if form == "sublist":
        assert node.args[0].name == "a" and node.args[1] == [0, 1] and node.args[4] == [0, 2]
    else:
        assert node.args[0] == "ij,jk->ik" and [a.name for a in node.args[1:]] == ["a", "b"]
    a, b = m.ones(2, 3), m.ones(3, 4)
    assert g(a, b).tolist() == m.full((2, 4), 3.0).tolist()


@BOTH
def test_einsum_sublist_implicit_output_is_in_subscript_order(m):
    """Subscripts 0-25 are 'A'-'Z' and 26-51 'a'-'z' in PyTorch: the implicit output keeps
    ``[0, 30]`` in that order (lowercase-first letters would transpose it)."""
    x = m.arange(6.0).reshape(2, 3)
    assert m.einsum(x, [0, 30]).tolist() == x.tolist()
    assert m.einsum(x, [30, 0]).tolist() == x.T.tolist()


@BOTH
def test_assert_raises_on_false_and_is_traced_on_a_proxy(m):
    """e3nn's Extract checks ``torch._assert(x.shape[-1] == dim, msg)``: eager it is ``assert``, under
    fx the comparison's Proxy makes it a call_function node that runs when the graph runs."""
    m._assert(True, "fine")
    m._assert(m.tensor(1.0), "fine")
    with pytest.raises(AssertionError, match="bad shape"):
        m._assert(False, "bad shape")

    def f(x):
        m._assert(x.shape[-1] == 3, "bad shape")
        return x * 2
    g = m.fx.symbolic_trace(f)
    assert m._assert in [n.target for n in g.graph.nodes]
    assert g(m.ones(2, 3)).sum().item() == 12.0
    with pytest.raises(AssertionError, match="bad shape"):
        g(m.ones(2, 4))

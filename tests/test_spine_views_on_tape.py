"""Every view is born in ``apply``: each view function leaves a record of a registered view op on
the tape and is seen by a ``Mode`` (issue 13: no path wraps an array outside the dispatcher
while anyone watches)."""
from __future__ import annotations

import pytest

import tapelab as tl
from tapelab.dispatch import Mode
from tapelab.ops.registry import REGISTRY

_FLAT = tl.zeros(24)
VIEW_OPS = {name for name, op in REGISTRY.items() if op.is_view}

CASES = {
    "reshape": lambda x: x.reshape(4, 6),
    "view": lambda x: x.view(6, 4),
    "flatten": lambda x: x.flatten(),
    "permute": lambda x: x.permute(1, 0),
    "transpose": lambda x: x.transpose(0, 1),
    "t": lambda x: x.t(),
    "getitem": lambda x: x[1:3, ::2],
    "select": lambda x: x.select(0, 1),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "expand": lambda x: x[:1].expand(5, 6),
    "squeeze": lambda x: x[:1].squeeze(0),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "diagonal": lambda x: x.diagonal(),
    "movedim": lambda x: x.movedim(0, 1),
    "split": lambda x: x.split(2)[1],
    "chunk": lambda x: x.chunk(2, dim=1)[0],
    "unbind": lambda x: x.unbind(0)[2],
    "detach": lambda x: x.detach(),
    "view_as": lambda x: x.view_as(_FLAT),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_view_is_a_dispatched_view_op_on_the_tape(name):
    x = tl.randn(4, 6, requires_grad=True)
    with tl.tape() as t:
        out = CASES[name](x)
    ops = [n.op for n in t.nodes]
    assert ops and set(ops) <= VIEW_OPS, f"{name}: recorded {ops}, expected only view ops {sorted(VIEW_OPS)}"
    assert out._base is x or out._base is x._base or name == "detach"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_mode_sees_every_view(name):
    seen = []

    class Seen(Mode):
        def dispatch(self, op, args, params):
            seen.append(op.name)
            return super().dispatch(op, args, params)

    x = tl.randn(4, 6, requires_grad=True)
    with Seen():
        out = CASES[name](x)
    eager = CASES[name](x)
    assert seen and set(seen) <= VIEW_OPS, seen
    assert out.shape == eager.shape
    assert tl.equal(out, eager)

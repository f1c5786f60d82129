"""Every view takes its engine object directly (issue 15): TapeView(t) with a tape, a LiveTape,
a grad_fn or a tensor, as TapeView.from_tape(t) does; a wrong type says what it takes."""
from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

import tapelab as torch  # noqa: E402
from tapelab import nn  # noqa: E402
from tapelab.widgets import TapeView  # noqa: E402
from tapelab.widgets.viewmodel import graph_from_tape  # noqa: E402


def _tape():
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    with torch.tape() as t:
        loss = net(torch.ones(2, 3)).sum()
        loss.backward()
    return t, loss


def test_tape_view_takes_a_tape_like_from_tape():
    t, _ = _tape()
    v = TapeView(t, title="mine")
    assert v.graph["nodes"] and v.graph == TapeView.from_tape(t, title="mine").graph
    assert v.graph == graph_from_tape(t, title="mine", max_nodes=5000)
    assert TapeView(list(t.nodes)).graph["nodes"] == v.graph["nodes"]


def test_tape_view_takes_a_grad_fn_a_tensor_and_a_live_tape():
    from tapelab.widgets.live import LiveTape

    _, loss = _tape()
    a, b = TapeView(loss.grad_fn), TapeView(loss)
    assert a.graph["nodes"] and [n["op"] for n in a.graph["nodes"]] == [n["op"] for n in b.graph["nodes"]]
    with pytest.raises(ValueError, match="no grad_fn"):
        TapeView(torch.ones(2))
    net = nn.Linear(2, 1)
    with LiveTape() as live:
        net(torch.ones(1, 2)).sum().backward()
    assert TapeView(live).graph["meta"]["forward"] >= 2
    with pytest.raises(TypeError, match="TapeView takes"):
        TapeView(42)

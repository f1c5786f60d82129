"""A steady loop under a LiveTape records a step only as often as keeps recording under
``OVERHEAD`` of the loop's CPU time (the steps between are counted), whatever the delta rate:
checked with a fake clock in which a recorded step costs 10 units and a counted one 1."""
from __future__ import annotations

import sys

import tapelab as torch
from tapelab import nn
from tapelab.widgets.live import OVERHEAD, LiveTape

live_module = sys.modules["tapelab.widgets.live"]


class Clock:
    def __init__(self):
        self.t = 0.0

    def perf_counter(self) -> float:
        return self.t

    thread_time = perf_counter


def test_recorded_steps_keep_the_overhead_budget(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(live_module, "time", clock)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 1, 0, 1, 0])
    recorded = []
    with LiveTape(rate=1e9) as live:          # the delta rate never holds a step back here
        for _ in range(400):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            recorded.append(not live._skip)
            clock.t += 1.0 if live._skip else 10.0
    m = live.graph()["meta"]
    assert (m["steps"], m["folded"]) == (400, 399)             # every step counted
    steady = recorded[10:]
    extra = 9.0 * sum(steady)                                   # what recording added to those steps
    assert 0 < sum(steady) and extra / (len(steady) + extra) <= OVERHEAD * 1.1


def test_counts_match_a_plain_tape():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 1, 0, 1, 0])

    def loop():
        for _ in range(30):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    with LiveTape() as live:
        loop()
    with torch.tape() as t:
        loop()
    m = live.graph()["meta"]
    c = t.counts()
    fwd_ops = sum(r.kind == "forward" and r.phase == "forward" for r in t)
    assert m["forward"] == fwd_ops and m["backward"] == sum(r.kind == "backward" for r in t)
    assert c["forward"] == fwd_ops


def test_listen_ops_pauses_op_records_only():
    x = torch.ones(3, requires_grad=True)
    with torch.tape() as t:
        y = (x * 2).sum()
        t.listen_ops(False)
        z = (x * 3).sum()                       # unheard
        t.listen_ops(True)
        (y + z).backward()
    ops = [r.op for r in t if r.kind == "forward" and r.phase == "forward"]
    assert ops == ["mul", "sum", "add"] and any(r.kind == "backward" for r in t)

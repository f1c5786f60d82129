"""Tape records carry the user's source line (taken only while a tape records), views show it
as ``source``, and loose no-grad runs are named by their line instead of "no-grad ops"."""
from __future__ import annotations

import sys

import tapelab as torch
from tapelab import nn
from tapelab.widgets.viewmodel import graph_from_tape


def test_records_carry_the_callers_line():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with torch.tape() as t:
        y = model(torch.ones(4, 3)).sum()   # the line
        y.backward()
    fwd = [r for r in t if r.kind == "forward" and r.phase == "forward"]
    assert fwd and all(r.source.startswith("test_source_lines.py:") for r in fwd)
    assert all(r.source.endswith("y = model(torch.ones(4, 3)).sum()   # the line") for r in fwd if r.op == "sum")
    assert all(r.source == "" for r in t if r.phase == "backward")      # the walk's ops: no user line
    g = graph_from_tape(t)
    bwd = [n for n in g["nodes"] if n["kind"] == "backward" and n["op"] == "SumBackward0"]
    assert bwd and "model(torch.ones(4, 3))" in bwd[0]["source"]           # a backward node: its op's line


def test_source_is_taken_only_while_recording(monkeypatch):
    tape_mod = sys.modules["tapelab.tape"]
    calls = []
    real = tape_mod.source_line
    monkeypatch.setattr(tape_mod, "source_line", lambda f: calls.append(1) or real(f))
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    assert calls == []                       # an unobserved eager run walks no stack
    with torch.tape():
        (x * 2).sum()
    assert len(calls) == 2


def test_no_grad_runs_are_named_by_their_line():
    w = torch.ones(3, requires_grad=True)
    with torch.tape() as t:
        (w * 2).sum().backward()
        with torch.no_grad():
            w.mul_(0.5)
            w.add_(1.0)
            w.add_(2.0); w.mul_(3.0)
    g = graph_from_tape(t)
    runs = [gr["label"] for gr in g["groups"] if gr["id"].startswith("g:~") and "backward" not in gr["label"]]
    assert [r.split("  ", 1)[1] for r in runs] == ["w.mul_(0.5)", "w.add_(1.0)", "w.add_(2.0); w.mul_(3.0)"]
    assert all(r.startswith("test_source_lines.py:") for r in runs)


def test_summaries_and_explain_count_zeros_and_non_finite_values():
    from tapelab import debug
    from tapelab.tape import sample, summarize, summarize_samples
    x = torch.tensor([0.0] * 16 + [1.0] * 14 + [float("nan"), float("inf")])
    s = summarize(x)
    assert (s["zero"], s["nan"], s["inf"]) == (16, 1, 1)
    assert [r["zero"] for r in summarize_samples([sample(x), sample(torch.zeros(5)), sample(torch.ones(3))])] == [16, 5, 0]
    p = torch.tensor([[0.0, 1.0], [0.5, 0.5]] * 8, requires_grad=True)       # 32 values, 8 exactly zero
    with debug.record():
        loss = -(p.log() * torch.tensor([[0.0, 1.0]] * 16)).sum()
    stepper = debug.step_backward(loss)
    stepper.run(nan=True)
    text = stepper.explain()
    assert "input 0: float32[16, 2] min=0 max=1 mean=0.5 (8 of 32 values are exactly zero)" in text
    assert "(16 of 32 values are exactly zero)" in text      # the incoming gradient


class _Filtering(torch.tape):
    """A sink subclass outside tapelab: its own frames must not be taken for the user's line."""

    def record_op(self, ev):
        return super().record_op(ev) if ev.op != "exp" else None


def test_a_subclass_sink_records_the_users_line_not_its_own():
    x = torch.ones(3, requires_grad=True)
    with torch.tape() as plain:
        (x * 2).exp().sum()
    with _Filtering() as sub:
        (x * 2).exp().sum()
    assert [r.op for r in sub if r.kind == "forward"] == ["mul", "sum"]
    lines = {r.source for r in sub if r.kind == "forward"}
    assert len(lines) == 1 and lines.pop().endswith("(x * 2).exp().sum()")
    assert [r.source.split(":", 1)[0] for r in plain] == ["test_source_lines.py"] * 3


def test_source_line_of_an_event_emitted_outside_the_dispatcher():
    # no dispatcher frame on the stack: the walk starts at the handler's caller, as before
    from tapelab.base import events
    x = torch.ones(2)
    evs = []
    with events.subscribe("op", evs.append):
        x.exp()
    t = torch.tape()
    rec = t.record_op(evs[0])   # called directly, from this file
    assert rec.source.startswith("test_source_lines.py:") and rec.source.endswith("rec = t.record_op(evs[0])   # called directly, from this file")

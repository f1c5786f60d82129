"""Session 27 (issue 17): the watched dispatch path and the tape's handlers, cut for speed, tell
and record what they did before: the events' fields, the records' source lines (the stack walk
now tells tapelab's frames apart by file), backward records of nodes no op event numbered."""
from __future__ import annotations

import sys

import numpy as np

import tapelab as tl
from tapelab import events, nn
from tapelab.widgets.live import LiveTape

_TAPE = sys.modules["tapelab.tape"]


def _leaf(*shape, seed=0):
    return tl.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_op_events_carry_module_node_name_and_operand_ids():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    x = tl.ones(4, 3)
    seen = []
    with events.subscribe("op", seen.append):
        y = model(x)
        z = y * 2.0
    lin, relu, mul = seen
    assert (lin.op, lin.module, lin.grad_fn) == ("linear", "0", "AddmmBackward0")
    assert (relu.op, relu.module, relu.grad_fn) == ("relu", "1", "ReluBackward0")
    assert (mul.op, mul.module, mul.grad_fn) == ("mul", "", "MulBackward0")
    # operand ids: an input first told here gets its id, an op's result keeps the one it was told with
    assert lin.inputs == (x._uid(), model[0].weight._uid(), model[0].bias._uid())
    assert relu.inputs == (lin.output,) and mul.inputs == (y._uid(), None) and mul.output == z._uid()
    assert mul.input_shapes == ((4, 2), ()) and relu.input_shapes == ((4, 2),)


def test_in_place_write_events_carry_the_module_scope():
    w = tl.ones(3)
    seen = []
    with tl.no_grad(), events.subscribe("op", seen.append):
        with tl.dispatch.module_scope("head"):
            w.add_(tl.ones(3), alpha=0.5)
        w.mul_(2.0)
    assert [(e.op, e.module, e.grad_fn, e.inputs[0]) for e in seen] == [("add", "head", "", w._uid()),
                                                                         ("mul", "", "", w._uid())]
    assert w.tolist() == [3.0, 3.0, 3.0]


def test_op_events_name_the_node_its_inputs_chose():
    w, b = _leaf(2, 3), _leaf(2, seed=1)
    seen = []
    with events.subscribe("op", seen.append):   # one op, its node named by the input's rank, as ATen lowers it
        outs = [tl.nn.functional.linear(tl.ones(4, 3, dtype=w.dtype), w, b),
                tl.nn.functional.linear(tl.ones(5, 4, 3, dtype=w.dtype), w, b)]
    assert [e.grad_fn for e in seen] == [o.grad_fn.name() for o in outs] == ["AddmmBackward0", "ViewBackward0"]


def test_source_lines_skip_tapelab_code_compiled_from_a_string_not_the_users():
    x = _leaf(3)
    ours = compile("def run(x):\n    return x * 3\n", "<string>", "exec")
    theirs = compile("def run(x):\n    return x * 4\n", "<string>", "exec")
    ns_ours, ns_theirs = {"__name__": "tapelab.fake_generated"}, {"__name__": "user_generated"}
    exec(ours, ns_ours)
    exec(theirs, ns_theirs)
    with tl.tape() as t:
        ns_ours["run"](x)                                        # the line
        ns_theirs["run"](x)
    first, second = t.nodes
    assert first.source.endswith('ns_ours["run"](x)                                        # the line')
    assert first.source.startswith("test_recording_s27.py:")
    assert second.source == "<string>:2"                     # the user's generated code: its own line


def test_a_file_is_judged_by_its_module_once():
    x = _leaf(3)
    with tl.tape() as t:
        x.exp()
    assert t.nodes[0].source.startswith("test_recording_s27.py:")
    assert __file__ in _TAPE._THEIR_FILES and __file__ not in _TAPE._OUR_FILES
    assert _TAPE.__file__ in _TAPE._OUR_FILES or sys.modules["tapelab.core.dispatch"].__file__ in _TAPE._OUR_FILES


def test_backward_records_of_nodes_made_while_nobody_recorded():
    x = _leaf(4)
    y = (x * 2).exp()                   # made unrecorded: its nodes carry no tape_seq
    loss = y.sum()
    with tl.tape() as t:
        loss.backward()
    back = [r for r in t if r.kind == "backward"]
    assert [r.op for r in back] == ["SumBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad"]
    assert all(r.forward_seq is None and r.module == "" for r in back)
    # recorded ones link to their forward records
    with tl.tape() as t2:
        (x * 3).sum().backward()
    fwd = {r.seq: r.op for r in t2 if r.kind == "forward"}
    assert [fwd.get(r.forward_seq) for r in t2 if r.kind == "backward"] == ["sum", "mul", None]


def test_deaf_steps_are_counted_and_a_delta_follows_each_step_end(monkeypatch):
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    opt = tl.optim.SGD(model.parameters(), lr=0.1)
    x, target = tl.ones(5, 4), tl.tensor([0, 1, 0, 1, 1])

    def step():
        opt.zero_grad()
        tl.nn.functional.cross_entropy(model(x), target).backward()
        opt.step()

    deltas = []
    live = LiveTape(sinks=[deltas.append], rate=1e9)        # every tick may send
    monkeypatch.setattr(live, "_record_next", lambda now, cpu: False)   # after the first steps: counted
    with live:
        for _ in range(8):
            step()
    b = live.builder
    assert b.steps == 8 and b.folded >= 5
    with tl.tape() as plain:
        step()
    fwd = sum(r.kind == "forward" and r.phase == "forward" for r in plain)
    bwd = sum(r.kind == "backward" for r in plain)
    # every counted step counts as many ops and backward nodes as a recorded one
    assert (fwd, bwd) == (8, 8) and (b.forward, b.backward) == (8 * fwd, 8 * bwd)
    assert deltas and live.sent == len(deltas)

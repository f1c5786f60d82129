"""Session 31: a tape that only records (the base handlers, no summaries, no cap) keeps each event's
fields and makes its ``TapeNode`` records when read; the dispatcher tells such a recorder by fields
(``events.subscribe(..., fields=True)``) and makes no ``OpRecorded`` for it. What the records say
must not change: they are compared with those of a tape whose handlers make every record at once."""
import gc
import weakref

import numpy as np
import pytest

import tapelab
from tapelab import events
from tapelab.base import events as _events
from tapelab.core import dispatch
from tapelab.tape import TapeNode


class EagerTape(tapelab.tape):
    """The same records, made as each event arrives (a sink that overrides the handlers)."""

    def record_op(self, ev):
        return super().record_op(ev)

    def record_step(self, step):
        return super().record_step(step)


def _program(t):
    rng = np.random.default_rng(0)
    model = t.nn.Sequential(t.nn.Linear(6, 5), t.nn.ReLU(), t.nn.Linear(5, 3))
    opt = t.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = t.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    y = t.tensor(rng.integers(0, 3, 4))
    return model, opt, x, y


def _step(t, model, opt, x, y):
    opt.zero_grad()
    loss = t.nn.functional.cross_entropy(model(x), y)
    (loss * 2).exp().backward()
    opt.step()
    return loss


def _plain(rec) -> dict:
    d = rec.to_dict()
    for k in ("start_ns", "duration_ns", "index", "inputs", "output", "seq", "forward_seq"):
        d.pop(k)
    return d


def _ids(tp):
    """Each record's ids renumbered by first appearance (the two tapes run apart, so their uids and seqs differ)."""
    seen = {}

    def n(key, v):
        return None if v is None else seen.setdefault((key, v), len(seen))
    return [(r.index, [n("t", u) for u in r.inputs], n("t", r.output), n("s", r.seq), n("s", r.forward_seq))
            for r in tp.nodes]


def test_a_recording_tape_is_lazy_and_a_sink_or_summaries_or_a_cap_make_records_at_once():
    assert tapelab.tape()._lazy
    assert not EagerTape()._lazy
    assert not tapelab.tape(keep_values=True)._lazy
    assert not tapelab.tape(max_records=10)._lazy


def test_lazy_records_equal_the_records_made_at_once():
    model, opt, x, y = _program(tapelab)
    _step(tapelab, model, opt, x, y)
    with tapelab.tape() as lazy:
        _step(tapelab, model, opt, x, y)
    assert any(raw.__class__ is tuple for raw in lazy._nodes)   # not made while recording
    with EagerTape() as eager:
        _step(tapelab, model, opt, x, y)
    assert all(isinstance(r, TapeNode) for r in eager._nodes)
    assert len(lazy) == len(eager) > 20
    assert [_plain(r) for r in lazy.nodes] == [_plain(r) for r in eager.nodes]
    assert _ids(lazy) == _ids(eager)
    kinds = {(r.kind, r.phase) for r in lazy.nodes}
    assert kinds == {("forward", "forward"), ("backward", "backward"), ("forward", "backward")}
    assert any(r.module and r.kind == "backward" for r in lazy.nodes)   # found through the op's record
    assert any(r.source.startswith("test_tape_s31.py:") for r in lazy.nodes)


def test_lazy_records_read_while_recording_go_on_in_order():
    a = tapelab.randn(3, 3, requires_grad=True)
    with tapelab.tape() as t:
        b = (a * 2).sum()
        first = t.nodes                                 # made while recording
        assert [r.op for r in first] == ["mul", "sum"]
        mul = t.forward_record(first[0].seq)
        b.backward()
        assert t[-1].kind == "backward" and t[-1].op == "AccumulateGrad"
    bwd = [r for r in t.nodes if r.kind == "backward"]
    assert [r.op for r in bwd] == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    assert [r.index for r in t.nodes] == list(range(len(t)))
    assert t.nodes[0] is mul and t.forward_record(mul.seq) is mul
    assert bwd[1].forward_seq == mul.seq and bwd[1].output_shapes == ((3, 3), None)   # (no gradient for 2)
    t.clear()
    assert len(t) == 0 and t.nodes == [] and t.forward_record(mul.seq) is None


def test_a_lazy_tape_keeps_no_tensor_alive():
    a = tapelab.randn(64, 64, requires_grad=True)
    with tapelab.tape() as t:
        b = (a * 3).exp()
        b.sum().backward()
        alive = weakref.ref(b)
        del b
        gc.collect()
        assert alive() is None                          # before any record is made
    assert t.nodes[1].op == "exp" and t.nodes[1].tensor is None


def test_a_fields_subscriber_gets_the_event_fields_and_tensors_alone_or_beside_an_event_subscriber():
    got, evs = [], []

    def on_fields(fields, tensors):
        got.append((fields, tensors))

    a = tapelab.ones(2, 2)
    with events.subscribe("op", on_fields, fields=True):
        assert dispatch.STATE.slow
        (a + 1).relu()                                  # alone
        with events.subscribe("op", evs.append):
            (a * 2).neg()                               # beside an OpRecorded subscriber
    assert not dispatch.STATE.slow and not _events._takes_fields
    assert [f[1] for f, _ in got] == ["add", "relu", "mul", "neg"]
    assert [e.op for e in evs] == ["mul", "neg"]
    for (fields, tensors), ev in zip(got[2:], evs):
        assert events.OpRecorded(*fields, tensors) == ev and fields == events.op_fields(ev)
        assert tensors[1] is ev.tensors[1] and tensors[0][0] is ev.tensors[0][0]
    assert got[2][1][0][0] is a


def test_emit_tells_a_fields_subscriber_by_fields():
    got = []
    ev = events.OpRecorded(1, "mul", (1, 2), ((2,), (2,)), 3, (2,), "float32", "cpu", False, 5, 6)
    with events.subscribe("op", lambda f, t: got.append((f, t)), fields=True):
        events.emit("op", ev)
    assert got == [(events.op_fields(ev), ())]


def test_fields_are_for_op_events_and_one_function_listens_one_way():
    def fn(*a):
        pass
    with pytest.raises(ValueError, match="'op' events only"):
        events.subscribe("backward_step", fn, fields=True)
    with events.subscribe("op", fn, fields=True):
        with pytest.raises(ValueError, match="for their fields"):
            events.subscribe("op", fn)
    with events.subscribe("op", fn):
        with pytest.raises(ValueError, match="OpRecorded payloads"):
            events.subscribe("op", fn, fields=True)
    assert not events.has_subscribers("op") and not _events._takes_fields


def test_a_paused_lazy_tape_resumes_by_fields():
    a = tapelab.ones(2)
    with tapelab.tape() as t:
        (a + 1)
        t.listen_ops(False)
        (a * 2)
        t.listen_ops(True)
        (a - 1)
    assert [r.op for r in t.nodes] == ["add", "sub"] and t._subs == []

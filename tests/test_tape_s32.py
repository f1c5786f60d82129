"""Session 32: a tape's scope subscribes and unsubscribes its handlers as one group
(``events.subscribe_group`` / ``unsubscribe_group``): the dispatcher recomputes its flag once each
way, a refused spec leaves nothing subscribed, and the records are those the tape made before."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab.base import events
from tapelab.core import dispatch


def _quiet():
    assert not events.has_subscribers("op") and not events.has_subscribers("backward_step")
    assert dispatch.STATE.slow is False


def test_group_subscribes_all_and_tells_once(subscription_changes):
    _quiet()
    seen = []

    def on_fields(fields, tensors):
        seen.append(("fields", fields[1]))

    def on_step(step):
        seen.append(("step", step.name))
    subs = events.subscribe_group(("op", on_fields, True), ("backward_step", on_step))
    assert len(subscription_changes) == 1
    assert [s.kind for s in subs] == ["op", "backward_step"] and [s.fields for s in subs] == [True, False]
    assert dispatch.STATE.slow is True
    x = tapelab.tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    events.unsubscribe_group(subs)
    assert len(subscription_changes) == 2
    _quiet()
    assert ("fields", "mul") in seen and ("fields", "sum") in seen
    assert ("step", "MulBackward0") in seen and ("step", "SumBackward0") in seen
    events.unsubscribe_group(subs)   # already gone: nothing to tell
    assert len(subscription_changes) == 2


def test_group_refused_spec_subscribes_nothing(subscription_changes):
    _quiet()

    def fn(*a):
        pass
    with pytest.raises(ValueError, match="unknown event kind"):
        events.subscribe_group(("op", fn, True), ("no such kind", fn))
    _quiet()
    assert fn not in events._takes_fields
    with pytest.raises(ValueError, match="fields=True is for 'op'"):
        events.subscribe_group(("backward_step", fn), ("backward_step", fn, True))
    _quiet()
    sub = events.subscribe("op", fn)   # the refused group left no trace: fn may listen by events
    sub.unsubscribe()
    _quiet()


def test_tape_scope_tells_once_each_way_and_records(subscription_changes):
    _quiet()
    x = tapelab.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    with tapelab.tape() as t:
        assert len(subscription_changes) == 1 and dispatch.STATE.slow is True
        (x.tanh() * 2.0).sum().backward()
    assert len(subscription_changes) == 2
    _quiet()
    ops = [(n.kind, n.op, n.phase) for n in t.nodes]
    assert ops[:3] == [("forward", "tanh", "forward"), ("forward", "mul", "forward"), ("forward", "sum", "forward")]
    assert [n.op for n in t.nodes if n.kind == "backward"] == ["SumBackward0", "MulBackward0", "TanhBackward0",
                                                                "AccumulateGrad"]
    fwd = t.nodes[0]
    assert fwd.shape == (2, 3) and fwd.dtype == "float32" and fwd.source.startswith("test_tape_s32.py:")
    tx = torch.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    (tx.tanh() * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_tape_reentered_and_listen_toggles_keep_one_subscription_each():
    _quiet()
    t = tapelab.tape()
    with t:
        t.listen_ops(False)
        assert not events.has_subscribers("op") and events.has_subscribers("backward_step")
        t.listen_ops(True)
        assert len(events._subscribers["op"]) == 1
    _quiet()
    with t:
        tapelab.tensor([1.0]).exp()
    _quiet()
    assert [n.op for n in t.nodes] == ["exp"]

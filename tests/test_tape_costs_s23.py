"""What watching costs less of (issue 17, session 23): ``backward()`` and ``autograd.grad`` emit
their ``backward_step`` events from the generator-free walk (``engine._run_plain``), and the
events, their order, their content and their surroundings must be those of the generator walk
(``engine._steps``, what ``backward_steps`` and the debugger run). Each case builds the same graph
twice, walks it once each way with the same subscribers, and compares what they saw."""
import numpy as np
import pytest

import tapelab as tl
from tapelab import events
from tapelab.autograd import engine
from tapelab.base.grad_mode import STATE as GRAD


def _arr(t):
    return None if t is None else np.array(t.detach().numpy(), copy=True)


def _same(a, b):
    """Equal step records: names, indices, flags, and every array bit for bit."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert type(x) is type(y)
        if isinstance(x, (tuple, list)):
            _same(x, y)
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def _watch(walk, *, keep=False):
    """Run ``walk()`` while subscribed to ``backward_step`` and ``op``; return what was seen: per step
    its index, name, whether it is ``running_node()``, the grad mode and graph task it saw, and its
    gradients' values; per op its name and the running node's name. ``keep`` also holds each step
    (as a view would), so a later sum in place would show in its values at the end."""
    seen, kept = [], []

    def on_step(step):
        running = engine.running_node()
        seen.append(("step", step.index, step.name, running is step.node, GRAD.enabled,
                     engine.current_graph_task_id() >= 0,
                     tuple(_arr(g) for g in step.grad_outputs), tuple(_arr(g) for g in step.grad_inputs),
                     step.duration_ns >= 0 and step.start_ns > 0))
        if keep:
            kept.append(step)

    def on_op(ev):
        running = engine.running_node()
        seen.append(("op", ev.op, running.name() if running is not None else None))

    with events.subscribe("backward_step", on_step), events.subscribe("op", on_op):
        walk()
    if keep:
        seen.append(tuple(tuple(_arr(g) for g in s.grad_inputs + tuple(s.grad_outputs)) for s in kept))
    assert engine.running_node() is None
    return seen


def _both(build, plain, generator, **kw):
    """``build()`` twice: walked by ``plain`` (the public call) and by ``generator`` (``_steps``)."""
    a_graph, b_graph = build(), build()
    a = _watch(lambda: plain(*a_graph), **kw)
    b = _watch(lambda: generator(*b_graph), **kw)
    assert any(r[0] == "step" for r in a)
    _same(a, b)
    return a_graph, b_graph


def _gen(loss, **kw):
    engine._drain(engine.backward_steps(loss, **kw))


def _mlp(seed=0):
    rng = np.random.default_rng(seed)
    tl.manual_seed(seed)
    model = tl.nn.Sequential(tl.nn.Linear(6, 5), tl.nn.ReLU(), tl.nn.Linear(5, 3))
    x = tl.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    y = tl.tensor(rng.integers(0, 3, 4))
    return model, tl.nn.functional.cross_entropy(model(x), y)


@pytest.mark.parametrize("keep", [False, True])
def test_mlp_step_events_equal_the_generators(keep):
    (ma, la), (mb, lb) = _both(lambda: _mlp(), lambda m, loss: loss.backward(), lambda m, loss: _gen(loss), keep=keep)
    for pa, pb in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_array_equal(pa.grad.numpy(), pb.grad.numpy())


def _shared():
    """One leaf reaching the loss four ways (sums into one buffer, in place where nothing else holds
    it), an intermediate with a tensor hook and retain_grad, node pre- and post-hooks."""
    x = tl.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    h = x * x + x
    h.retain_grad()
    h.register_hook(lambda g: g * 2)
    e = h.exp()
    e.grad_fn.register_prehook(lambda gouts: (gouts[0] + 1,))
    e.grad_fn.register_hook(lambda gins, gouts: (gins[0] * 3,))
    loss = (e * x).sum() + h.sum()
    return x, h, loss


def test_hooks_sums_and_retain_grad_equal_the_generators():
    (xa, ha, _), (xb, hb, _) = _both(_shared, lambda x, h, loss: loss.backward(), lambda x, h, loss: _gen(loss),
                                     keep=True)
    np.testing.assert_array_equal(xa.grad.numpy(), xb.grad.numpy())
    np.testing.assert_array_equal(ha.grad.numpy(), hb.grad.numpy())
    assert np.isfinite(xa.grad.numpy()).all() and np.abs(xa.grad.numpy()).sum() > 0


def test_retain_graph_twice_and_create_graph_equal_the_generators():
    def twice(x, h, loss, walk):
        walk(loss, retain_graph=True)
        walk(loss, create_graph=True)

    (xa, _, _), (xb, _, _) = _both(_shared, lambda *g: twice(*g, lambda l, **kw: l.backward(**kw)),
                                   lambda *g: twice(*g, _gen))
    assert xa.grad.requires_grad and xb.grad.requires_grad   # the second pass recorded its graph
    np.testing.assert_array_equal(xa.grad.detach().numpy(), xb.grad.detach().numpy())


def test_leaf_grad_ownership_equals_the_generators():
    """A leaf's ``.grad`` is the step's incoming gradient or a copy of it: the same on both walks
    (a copy here, where the subscriber holds every step; owned under a tape, below)."""
    def run(walk):
        x = tl.tensor([1.0, 2.0, 3.0], requires_grad=True)
        steps = []
        with events.subscribe("backward_step", steps.append):
            walk((x * 2).sum())
        leaf = [s for s in steps if s.name == "AccumulateGrad"]
        assert len(leaf) == 1
        return leaf[0].grad_outputs[0] is x.grad, x.grad.numpy().tolist()

    assert run(lambda l: l.backward()) == run(_gen)
    assert run(_gen) == (False, [2.0, 2.0, 2.0])   # a copy: the subscriber kept the step that sent it


def test_grad_capture_and_pruning_equal_the_generators():
    """``autograd.grad`` of a leaf, an intermediate and a second leaf: a captured leaf makes a step
    (nothing accumulated), a captured node that leads to no other target does not run and makes
    no step, and the steps after it count on from the last step."""
    def build():
        w = tl.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        u = tl.tensor(np.ones((2, 3)), requires_grad=True)
        v = u * 5                  # created first: its node runs after h's
        h = (w * 3).tanh()
        return w, u, h, (h * h).sum() + v.sum()

    def plain(w, u, h, loss):
        return tl.autograd.grad(loss, [h, u])

    def generator(w, u, h, loss):
        capture = {(h.grad_fn, 0): None, (u._accumulator(), 0): None}
        engine._drain(engine.backward_steps(loss, _capture=capture))
        return tuple(capture.values())

    out = {}
    (wa, ua, ha, la), (wb, ub, hb, lb) = _both(build, lambda *g: out.setdefault("a", plain(*g)),
                                               lambda *g: out.setdefault("b", generator(*g)))
    for ga, gb in zip(out["a"], out["b"]):
        np.testing.assert_array_equal(ga.numpy(), gb.numpy())
    np.testing.assert_array_equal(out["a"][1].numpy(), np.full((2, 3), 5.0))
    assert wa.grad is None and ua.grad is None   # grad() accumulates nothing
    steps = [(r[1], r[2]) for r in _watch(lambda: plain(*build())) if r[0] == "step"]
    assert "TanhBackward0" not in [name for _, name in steps]
    assert steps[-2:] == [(len(steps) - 2, "MulBackward0"), (len(steps) - 1, "AccumulateGrad")]


def test_step_events_under_no_grad_see_the_callers_mode():
    """The walk runs vjps with grad off (no create_graph); a subscriber sees the caller's mode."""
    def walk(loss):
        with tl.no_grad():
            loss.backward()

    x = tl.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    with events.subscribe("backward_step", lambda s: seen.append(GRAD.enabled)):
        (x * x).sum().backward()
        walk((x * x).sum())
    assert seen == [True] * 3 + [False] * 3
    assert GRAD.enabled


class _Boom(Exception):
    pass


def test_error_mid_walk_leaves_the_tape_usable():
    """A hook raising in the middle of a watched walk: the steps before it were emitted as on the
    generator walk, nothing is left running, and a tape records the next forward ops as forward."""
    def build():
        x = tl.tensor([1.0, -2.0, 3.0], requires_grad=True)
        h = (x * 2).exp()
        h.register_hook(lambda g: (_ for _ in ()).throw(_Boom()))
        return x, (h * 3).sum()

    def expect_boom(walk):
        with pytest.raises(_Boom):
            walk()

    a, b = build(), build()
    sa = _watch(lambda: expect_boom(lambda: a[1].backward()))
    sb = _watch(lambda: expect_boom(lambda: _gen(b[1])))
    _same(sa, sb)
    assert [r[2] for r in sa if r[0] == "step"] == ["SumBackward0", "MulBackward0"]
    assert engine.running_node() is None and engine.current_graph_task_id() == -1 and GRAD.enabled
    with tl.tape() as t:
        y = a[0] * 5
        y.sum().backward()
    assert [(n.kind, n.op, n.phase) for n in t.nodes][:2] == [("forward", "mul", "forward"), ("forward", "sum", "forward")]
    assert [n.op for n in t.nodes if n.kind == "backward"] == ["SumBackward0", "MulBackward0",
                                                               "AccumulateGrad"]
    np.testing.assert_array_equal(a[0].grad.numpy(), [5.0, 5.0, 5.0])


def test_subscribing_and_anomaly_mode_mid_walk_keep_the_indices():
    """A hook that starts a subscription, one that stops it, and one that turns anomaly mode on
    (the rest of the walk goes to the generator): the indices count every step either way."""
    def build(log):
        x = tl.tensor([0.5, 1.5], requires_grad=True)
        a = x * 2
        b = a.sin()
        c = b * b
        subs = []
        a.register_hook(lambda g: tl.autograd.set_detect_anomaly(True) and None)
        b.register_hook(lambda g: subs[0].unsubscribe())
        c.register_hook(lambda g: subs.append(events.subscribe("backward_step", lambda s: log.append(("late", s.index, s.name)))))
        return c.sum()

    logs = []
    for walk in (lambda l: l.backward(), _gen):
        log = []
        loss = build(log)
        with events.subscribe("backward_step", lambda s: log.append(("all", s.index, s.name))):
            try:
                walk(loss)
            finally:
                tl.autograd.set_detect_anomaly(False)
        logs.append(log)
    assert logs[0] == logs[1]
    assert [r[1] for r in logs[0] if r[0] == "all"] == [0, 1, 2, 3, 4]
    assert ("late", 1, "MulBackward0") in logs[0] and not any(r[0] == "late" and r[1] > 1 for r in logs[0])


# ---------------------------------------------------------------- scope names after module surgery
# A root's walk of its modules' names is kept until a module's children change anywhere (or
# another root names modules it shares); each change below must show in the next recording.
class _Net(tl.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = tl.nn.Sequential(tl.nn.Linear(3, 3), tl.nn.ReLU())
        self.head = tl.nn.Linear(3, 2)

    def forward(self, x):
        for m in self.body:
            x = m(x)
        return self.head(x)


def _paths(model, x=None):
    """The module path of each op ``model(x)`` records on a tape."""
    with tl.tape() as t:
        model(tl.ones(2, 3) if x is None else x)
    return [(n.op, n.module) for n in t.nodes if n.kind == "forward"]


def _named_params(model):
    from tapelab.nn.modules.module import parameter_names
    names = parameter_names()
    return sorted(names[p._uid()] for p in model.parameters())


def test_scope_names_follow_children_added_removed_replaced_renamed():
    net = _Net()
    assert _paths(net) == [("linear", "body.0"), ("relu", "body.1"), ("linear", "head")]
    assert _paths(net) == [("linear", "body.0"), ("relu", "body.1"), ("linear", "head")]   # the kept names
    net.body.append(tl.nn.Tanh())                                   # added (a container's setitem)
    assert _paths(net)[2] == ("tanh", "body.2")
    del net.body[1]                                                 # removed: the Tanh renumbered
    assert _paths(net) == [("linear", "body.0"), ("tanh", "body.1"), ("linear", "head")]
    net.head = tl.nn.Linear(3, 4)                                   # replaced by assignment
    assert _paths(net)[-1] == ("linear", "head")
    assert _named_params(net) == ["body.0.bias", "body.0.weight", "head.bias", "head.weight"]
    net._modules["out"] = net._modules.pop("head")                  # renamed the way libraries do it
    net.forward = lambda x: net.out(net.body[1](net.body[0](x)))
    assert _paths(net) == [("linear", "body.0"), ("tanh", "body.1"), ("linear", "out")]
    net.body._modules["0"] = tl.nn.Sequential(tl.nn.Linear(3, 3))  # a library's direct write, one level down
    assert _paths(net)[0] == ("linear", "body.0.0")
    net.add_module("extra", net.out)                                # a second name: the first one stays
    assert _paths(net)[-1] == ("linear", "out")
    net._modules.pop("out")                                          # the first name gone: the second shows
    net.forward = lambda x: net.extra(net.body[1](net.body[0](x)))
    assert _paths(net)[-1] == ("linear", "extra")
    net.add_module("again", net.extra)
    assert _paths(net)[-1] == ("linear", "extra")
    delattr(net, "extra")
    net.forward = lambda x: net.again(net.body[1](net.body[0](x)))
    assert _paths(net)[-1] == ("linear", "again")


def test_scope_names_after_a_child_called_alone_and_a_replaced_modules_dict():
    net = _Net()
    _paths(net)
    assert _paths(net.head, tl.ones(2, 3)) == [("linear", "")]      # the child as a root of its own
    assert _paths(net)[-1] == ("linear", "head")                    # named from the outer root again
    body = net.body
    body._modules = {"a": body._modules["0"], "b": body._modules["1"]}   # a plain dict: walked each call
    assert _paths(net)[:2] == [("linear", "body.a"), ("relu", "body.b")]
    body._modules["c"] = body._modules.pop("a")
    assert _paths(net)[:2] == [("relu", "body.b"), ("linear", "body.c")]   # c is now last


def test_scope_names_of_copies():
    import copy
    import pickle
    net = _Net()
    _paths(net)
    for clone in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert clone.__dict__["_tape_names"] is not net.__dict__["_tape_names"]
        clone.body.insert(0, tl.nn.Identity())
        assert _paths(clone) == [("linear", "body.1"), ("relu", "body.2"), ("linear", "head")]
    assert _paths(net) == [("linear", "body.0"), ("relu", "body.1"), ("linear", "head")]


def test_scope_names_are_kept_while_nothing_changes():
    """The point of keeping them: a watched call after one that walked walks nothing (a walk
    replaces the token), until something changes."""
    net = _Net()
    _paths(net)
    token = net.__dict__["_tape_names"]
    _paths(net)
    assert net.__dict__["_tape_names"] is token
    tl.nn.Sequential(tl.nn.ReLU())   # a module built elsewhere: a children dict changed, so a walk again
    _paths(net)
    assert net.__dict__["_tape_names"] is not token


class _Labelled(_Net):
    """Names its tree its own way (from ``label``, which is no child): walked on every call."""

    label = "a"

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        for name, m in super().named_modules(memo, prefix, remove_duplicate):
            yield (f"{self.label}.{name}" if name else name), m


def test_scope_names_of_a_module_with_its_own_named_modules():
    net = _Labelled()
    assert _paths(net)[-1] == ("linear", "a.head")
    net.label = "b"
    assert _paths(net)[-1] == ("linear", "b.head")
    assert net.__dict__["_tape_names"] is None


def test_a_tape_leaves_leaf_gradients_owned():
    """A tape holds no gradient, so a leaf's ``.grad`` is the gradient the walk made, not a copy
    (a copy per parameter per step would be a memcpy of the whole model under every recording)."""
    model, loss = _mlp()
    seen = []

    def on_step(step):
        if step.name == "AccumulateGrad":
            seen.append(step.grad_outputs[0] is step.node.variable.grad)
    with tl.tape(), events.subscribe("backward_step", on_step):
        loss.backward()
    assert seen == [True] * 4


def test_a_hook_registered_during_forward_runs_from_the_next_call_watched_or_not():
    """Module.__call__ looks at the hooks once, before forward, while watched too (it no longer goes
    through _call_with_hooks for a module without hooks): as PyTorch, and as the unwatched call."""
    import torch

    def make(nn):
        class Late(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)
                self.calls = []

            def forward(self, x):
                if not self._forward_hooks:
                    self.register_forward_hook(lambda m, a, out: self.calls.append("hook"))
                self.calls.append("forward")
                return self.lin(x)
        return Late()

    want = make(torch.nn)
    for _ in range(2):
        want(torch.ones(1, 2))
    for watched in (False, True):
        got = make(tl.nn)
        for _ in range(2):
            if watched:
                _paths(got, tl.ones(1, 2))
            else:
                got(tl.ones(1, 2))
        assert got.calls == want.calls == ["forward", "forward", "hook"]

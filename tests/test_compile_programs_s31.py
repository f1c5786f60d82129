"""``tapelab.compile`` where session 30 left it unlike ``torch.compile``: globals a module's ``forward``
reads are guarded, value guards compare as torch's (NaN equal to NaN), and the
graph breaks of a data-dependent branch or ``.item()`` (against eager and PyTorch)."""
import math

import numpy as np
import pytest

import tapelab

torch = pytest.importorskip("torch")

GAIN = 1.0
TABLE = {"shift": 0.0}


class GlobalReader(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tapelab.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x) * GAIN + TABLE["shift"]


def test_globals_read_in_a_module_forward_are_guarded():
    global GAIN
    tapelab.manual_seed(0)
    m = GlobalReader()
    c = tapelab.compile(m)
    x = tapelab.randn(2, 4)
    try:
        for gain, shift in ((1.0, 0.0), (1.0, 0.0), (2.0, 0.0), (2.0, 5.0), (0.5, -1.0)):
            GAIN, TABLE["shift"] = gain, shift
            np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    finally:
        GAIN, TABLE["shift"] = 1.0, 0.0


class Inner(tapelab.nn.Module):
    def forward(self, x):
        return x * GAIN


class Outer(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) + 1.0


def test_globals_read_in_a_submodule_forward_are_guarded():
    global GAIN
    c = tapelab.compile(Outer())
    x = tapelab.ones(2)
    try:
        assert c(x).tolist() == [2.0, 2.0] and c(x).tolist() == [2.0, 2.0]
        GAIN = 3.0
        assert c(x).tolist() == [4.0, 4.0]
    finally:
        GAIN = 1.0


class NanScaled(tapelab.nn.Module):
    def __init__(self, value):
        super().__init__()
        self.fill = value

    def forward(self, x):
        return x.nan_to_num(nan=0.0) + 1.0 if math.isnan(self.fill) else x + self.fill


@pytest.mark.parametrize("fresh_object", [False, True])
def test_nan_attribute_keeps_its_entry(fresh_object):
    m = NanScaled(float("nan"))
    c = tapelab.compile(m)
    x = tapelab.ones(3)
    for _ in range(4):
        if fresh_object:
            m.fill = float("nan")          # a new NaN object each call: still the same value to a guard
        assert c(x).tolist() == [2.0, 2.0, 2.0]
    assert len(c._compiled.cache) == 1 and c._compiled.value_recompiles == 0
    m.fill = 2.0
    assert c(x).tolist() == [3.0, 3.0, 3.0] and c._compiled.value_recompiles == 1


def test_nan_global_and_closure_keep_their_entry():
    limit = [float("nan")]

    @tapelab.compile
    def f(x):
        return x + 1.0 if limit[0] != limit[0] else x

    x = tapelab.ones(2)
    for _ in range(4):
        limit[0] = float("nan")
        assert f(x).tolist() == [2.0, 2.0]
    assert len(f.cache) == 1 and f.value_recompiles == 0


# ---------------------------------------------------------------- graph breaks split the graph
def _branchy(m):
    def f(x):
        y = x.sin() * 2
        if y.sum() > 0:
            y = y.cos()
        else:
            y = y.exp()
        return y + 1
    return f


def _item_scaled(m):
    def g(x):
        y = x * 2
        s = y.sum().item()
        return y * s
    return g


@pytest.mark.parametrize("make", [_branchy, _item_scaled])
def test_explain_splits_at_the_break_as_torch(make):
    x = tapelab.randn(8)
    ours = tapelab._dynamo.explain(make(tapelab))(x)
    theirs = torch._dynamo.explain(make(torch))(torch.from_numpy(x.numpy().copy()))
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (2, 1)
    assert len(ours.break_reasons) == 1 and ours.break_reasons[0].graph_break
    assert [f.lineno for f in ours.break_reasons[0].user_stack][-1] == [
        f.lineno for f in theirs.break_reasons[0].user_stack][-1]


def _grads(fn, x):
    x = x.detach().requires_grad_()
    out = fn(x)
    out.sum().backward()
    return out.detach().numpy(), x.grad.numpy()


def test_branch_runs_compiled_segments_both_ways_matching_eager_and_torch():
    f, ft = tapelab.compile(_branchy(tapelab)), _branchy(torch)
    for sign in (1, 1, -1, -1, 1, -1, 1):
        x = tapelab.randn(8) + 3.0 * sign
        got, grad = _grads(f, x)
        want, want_grad = _grads(ft, torch.from_numpy(x.numpy().copy()))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
    (entry,) = f.cache.values()
    assert entry.segments and len(entry.run.traces) == 2 and entry.retraces == 1   # one trace per path


def test_item_value_is_guarded_between_segments():
    g = tapelab.compile(_item_scaled(tapelab))
    x = tapelab.randn(8)
    for _ in range(3):                                   # the same value read: the compiled segments run
        np.testing.assert_allclose(g(x).numpy(), _item_scaled(tapelab)(x).numpy(), rtol=1e-6)
    (entry,) = g.cache.values()
    assert entry.retraces == 0 and len(entry.segments) == 2
    y = tapelab.randn(8)                                 # another value: never the old constant
    np.testing.assert_allclose(g(y).numpy(), _item_scaled(tapelab)(y).numpy(), rtol=1e-6)
    assert entry.retraces == 1


def test_fullgraph_item_runs_as_torch_and_fullgraph_branch_raises():
    x = tapelab.randn(8)
    xt = torch.from_numpy(x.numpy().copy())
    got = tapelab.compile(_item_scaled(tapelab), fullgraph=True)(x)
    want = torch.compile(_item_scaled(torch), fullgraph=True, backend="eager")(xt)     # torch 2.13 captures it
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    with pytest.raises(tapelab._dynamo.exc.Unsupported, match="data-dependent"):
        tapelab.compile(_branchy(tapelab), fullgraph=True)(x)


class Gated(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = tapelab.nn.Linear(4, 4)
        self.b = tapelab.nn.Linear(4, 2)

    def forward(self, x):
        h = self.a(x).relu()
        if h.mean() > 0.2:                # data-dependent Python in forward
            h = h * 2.0
        return self.b(h)


def test_module_with_a_branch_in_forward_gets_compiled_pieces():
    tapelab.manual_seed(0)
    m = Gated()
    c = tapelab.compile(m)
    for i in range(6):
        x = tapelab.randn(3, 4) + (i % 2)
        np.testing.assert_allclose(c(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    report = tapelab._dynamo.explain(m)(x)
    assert report.graph_count == 2 and report.graph_break_count == 1
    (entry,) = c._compiled.cache.values()
    assert entry.segments and entry.run is not None
    m.b.weight = tapelab.nn.Parameter(tapelab.zeros(2, 4))    # a reassigned parameter recompiles
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())


def test_print_of_a_tensor_prints_every_call(capsys):
    def p(x):
        y = x * 2
        print(y)
        return y + 1
    f = tapelab.compile(p)
    f(tapelab.ones(2))
    f(tapelab.ones(2))
    assert capsys.readouterr().out.count("tensor(") == 2     # every call prints: no graph skips it

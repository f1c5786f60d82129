"""Capture on the engine's spine (issue 13): tapelab.graphs is a ``dispatch.Mode`` that uses only
the declared hooks. No patching of Tensor methods or Op objects, no heap scan, and the same
capture errors and replay values as before."""
import gc
import pathlib
import re

import numpy as np
import pytest

import tapelab as T
from tapelab import nn
from tapelab.dispatch import STATE, Mode
from tapelab.graphs import CaptureError, Graph, graph
from tapelab.optim import SGD
from tapelab.optim.optimizer import live_optimizers

GRAPHS = pathlib.Path(T.__file__).parent / "graphs"


def test_graphs_source_has_no_side_doors():
    for path in sorted(GRAPHS.glob("*.py")):
        src = path.read_text()
        assert "gc.get_objects" not in src, path.name       # no heap scan
        assert "setattr(" not in src, path.name              # no patching of Tensor or engine functions
        assert not re.search(r"\.fwd\s*=(?!=)", src), path.name   # a replacement forward is eager(fwd=)


def test_capture_is_a_mode_and_leaves_tensor_and_ops_alone():
    before = dict(vars(T.Tensor))
    fwds = {name: op.fwd for name, op in T.ops.registry.REGISTRY.items()}
    x = T.randn(3, 4)
    g = Graph()
    with graph(g):
        assert isinstance(STATE.modes[-1], Mode)
        assert dict(vars(T.Tensor)) == before                 # numpy/repr/format are not wrapped
        y = (x @ x.t()).relu().sum()
        assert all(op.fwd is fwds[name] for name, op in T.ops.registry.REGISTRY.items())
    g.replay()
    np.testing.assert_allclose(y.numpy(), np.maximum(x.numpy() @ x.numpy().T, 0).sum(), rtol=1e-5)


def test_capture_and_buffers_scan_no_heap(monkeypatch):
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = T.randn(5, 6), T.tensor([0, 1, 2, 0, 1])

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step()
    opt.zero_grad(set_to_none=True)

    def scan(*a, **k):
        raise AssertionError("gc.get_objects() called")
    monkeypatch.setattr(gc, "get_objects", scan)
    g = Graph()
    with graph(g):
        loss = step()
    kinds = {b["name"]: b["kind"] for b in g.buffers()}
    assert kinds[g.buffer_name(loss)] == "static_output" and kinds[g.buffer_name(x)] == "static_input"
    assert kinds[g.buffer_name(model[0].weight)] == "state"
    g.replay()


def test_factories_in_the_captured_region_replay_right():
    """A factory's tensor is a constant of the graph; one written in place starts again from its
    initial value at every replay, as a CUDA graph re-runs the fill kernel."""
    x = T.zeros(4)
    g = Graph()
    with graph(g):
        acc = T.zeros(4)
        for k in (1, 2, 3):
            acc.add_(x * k)
        out = acc + T.ones(4) + T.full((4,), 2.0) + T.arange(4)
    np.testing.assert_array_equal(acc.numpy(), np.zeros(4))   # x was zeros at capture
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal(4).astype(np.float32)
        x.copy_(T.from_numpy(xv))
        g.replay()
        np.testing.assert_allclose(acc.numpy(), 6 * xv, rtol=1e-6)
        np.testing.assert_allclose(out.numpy(), 6 * xv + 3 + np.arange(4), rtol=1e-6)
    assert g.buffer_name(acc) in {b["name"] for b in g.buffers() if b["kind"] == "constant"}


def test_a_view_held_alone_keeps_its_buffer_a_static_output():
    x = T.randn(3, 2)
    g = Graph()
    with graph(g):
        y = (x * 2).t()
        z = (x + 1).detach()
    kinds = {b["name"]: b["kind"] for b in g.buffers()}
    ny, nz = g.buffer_name(y), g.buffer_name(z)
    assert kinds[ny] == kinds[nz] == "static_output"
    del y, z
    gc.collect()
    kinds = {b["name"]: b["kind"] for b in g.buffers()}
    assert kinds[ny] == kinds[nz] == "pool"


def test_live_optimizers_is_weak():
    p = T.zeros(2, requires_grad=True)
    opt = SGD([p], lr=0.1)
    assert opt in live_optimizers()
    n = len(live_optimizers())
    del opt
    gc.collect()
    assert len(live_optimizers()) == n - 1


def _fails(body, match):
    x = T.randn(4, 4)
    with pytest.raises(CaptureError, match=match) as info:
        with graph(Graph()):
            body(x)
    assert "test_graphs_spine.py" in str(info.value)
    assert not STATE.modes and not T.graphs.is_current_stream_capturing()


@pytest.mark.parametrize("body,match", [
    (lambda x: x.numpy(), r"Tensor.numpy\(\) copies a value to the host"),
    (lambda x: print(x), r"printing a Tensor copies a value to the host"),
    (lambda x: repr(x), r"printing a Tensor copies"),
    (lambda x: x[0, 0].item(), r"Tensor.item\(\) copies a value to the host"),
    (lambda x: 1 if x.sum() > 0 else 0, r"Tensor.item\(\)"),
], ids=["numpy", "print", "repr", "item", "branch"])
def test_user_host_reads_are_capture_errors(body, match):
    _fails(body, match)


@pytest.mark.parametrize("body,match", [
    (lambda x: T.randint(0, 4, (4,)), r"randint\(\) draws random numbers outside the graph"),
    (lambda x: T.randperm(4), r"randperm\(\) draws random numbers"),
    (lambda x: T.randn_like(x), r"randn\(\) draws random numbers"),
    (lambda x: nn.Dropout(0.5)(x), r"bernoulli \(dropout\)\(\) draws random numbers"),
], ids=["randint", "randperm", "randn_like", "Dropout"])
def test_random_draws_are_capture_errors(body, match):
    _fails(body, match)


@pytest.mark.parametrize("body,match", [
    (lambda x: T.argwhere(x), r"nonzero\(\)/argwhere\(\) has a data-dependent output shape"),
    (lambda x: x.unique(return_counts=True), r"unique\(\) has a data-dependent output shape"),
    (lambda x: x.__setitem__(x > 0, T.zeros(3)), r"boolean-mask assignment of a tensor"),
], ids=["argwhere", "unique-counts", "mask-assign"])
def test_data_dependent_ops_are_capture_errors(body, match):
    _fails(body, match)

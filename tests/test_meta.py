"""The meta device (issue 9): shapes and dtypes without data, PyTorch's errors where data is needed.

The op database runs on meta in test_ops.py and every nn layer in test_nn_layers.py; this file
holds what is particular to meta: cost, host reads, factories, modules, FX shape propagation.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.fx.passes.shape_prop import ShapeProp

META = tl.device("meta")


def test_meta_tensors_hold_no_memory_and_ops_cost_no_compute():
    x = tl.empty(1 << 20, 1 << 20, device="meta")                 # 4 TiB if it had data
    w = tl.empty(1 << 20, 1 << 10, device="meta")
    y = (x @ w).relu() * 2 + 1          # 1e15 multiply-adds and 4 TiB if it had data: the run would not end
    assert (tuple(y.shape), y.dtype, y.device) == ((1 << 20, 1 << 10), tl.float32, META)
    assert y._data._a.strides == (0, 0) and y.is_meta and not tl.ones(1).is_meta


def test_big_model_on_meta_then_materialized():
    model = tl.nn.Sequential(tl.nn.Linear(16384, 16384, device="meta"), tl.nn.GELU(),
                             tl.nn.Linear(16384, 10, device="meta"))
    out = model(tl.empty(8, 16384, device="meta"))
    assert (tuple(out.shape), out.device) == ((8, 10), META)
    assert sum(p.numel() for p in model.parameters()) == 16384 * 16384 + 16384 + 16384 * 10 + 10
    small = tl.nn.Linear(3, 2, device="meta").to_empty(device="cpu")
    assert small.weight.device == tl.device("cpu") and small.weight.requires_grad
    small.reset_parameters()
    assert np.isfinite(small(tl.ones(4, 3)).detach().numpy()).all()


def test_meta_factories_draw_no_random_numbers():
    state = tl.get_rng_state()
    for t in (tl.randn(3, 4, device="meta"), tl.rand(2, device="meta"), tl.randint(0, 5, (7,), device="meta"),
              tl.randperm(6, device="meta"), tl.normal(0.0, 1.0, (2, 2), device="meta"),
              tl.nn.functional.dropout(tl.empty(3, 3, device="meta"), 0.5)):
        assert t.device == META
    assert (tl.get_rng_state().numpy() == state.numpy()).all()
    assert tl.randint(0, 5, (7,), device="meta").dtype == tl.int64


def test_host_reads_raise_pytorch_errors():
    x = tl.empty(2, 3, device="meta")
    tx = torch.empty(2, 3, device="meta")
    for read in (lambda t: t[0, 0].item(), lambda t: bool(t[0, 0]), lambda t: float(t[0, 0]), lambda t: t.tolist(),
                 lambda t: t.cpu(), lambda t: t.numpy(), lambda t: torch.ones(2, 3).copy_(t) if isinstance(t, torch.Tensor)
                 else tl.ones(2, 3).copy_(t)):
        with pytest.raises(Exception) as want:
            read(tx)
        with pytest.raises(want.type, match=str(want.value).split("!")[0].split(".")[0][:30]):
            read(x)


def test_repr_like_pytorch():
    assert repr(tl.empty(2, 3, device="meta")) == repr(torch.empty(2, 3, device="meta")).replace("torch.", "tapelab.")
    assert repr(tl.empty((), dtype=tl.int64, device="meta")) == "tensor(..., device='meta', size=(), dtype=tapelab.int64)"
    w = tl.ones(3, device="meta", requires_grad=True)
    assert repr(w) == "tensor(..., device='meta', size=(3,), requires_grad=True)"
    assert repr(w * 2) == "tensor(..., device='meta', size=(3,), grad_fn=<MulBackward0>)"


def test_mixing_meta_and_cpu_names_both_devices():
    with pytest.raises(RuntimeError, match=r"meta \[2, 3\], cpu \[3\]"):
        tl.empty(2, 3, device="meta") + tl.ones(3)
    with pytest.raises(RuntimeError, match="meta"):
        tl.ones(2, 3).add_(tl.empty(2, 3, device="meta"))


def test_in_place_shape_rules_hold_on_meta():
    x = tl.empty(3, device="meta")
    with pytest.raises(RuntimeError, match="shape"):
        x.add_(tl.empty(2, 3, device="meta"))
    x[1:] = tl.empty(1, 2, device="meta")                       # numpy drops a value's extra leading 1
    with pytest.raises((RuntimeError, ValueError)):
        x[1:] = tl.empty(3, device="meta")


def test_backward_on_meta_gives_meta_gradients():
    model = tl.nn.Linear(4, 3, device="meta")
    x = tl.empty(5, 4, device="meta", requires_grad=True)
    tl.nn.functional.cross_entropy(model(x), tl.empty(5, dtype=tl.int64, device="meta")).backward()
    for t in (x.grad, model.weight.grad, model.bias.grad):
        assert t.device == META
    assert tuple(model.weight.grad.shape) == (3, 4) and tuple(x.grad.shape) == (5, 4)


def test_data_dependent_ops_raise():
    x = tl.empty(4, device="meta")
    for op in (lambda: x.nonzero(), lambda: x[x > 0], lambda: tl.unique(x), lambda: x.masked_select(x > 0)):
        with pytest.raises(NotImplementedError, match="Meta tensors"):
            op()
    assert tuple(x.masked_fill(x > 0, 1.0).shape) == (4,)       # a fixed-shape result is fine


def test_fx_shape_propagation_with_meta_inputs():
    class Net(tl.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = tl.nn.Conv2d(3, 8, 3, padding=1)
            self.head = tl.nn.Linear(8 * 32 * 32, 10)

        def forward(self, x):
            return self.head(self.conv(x).relu().flatten(1))
    gm = tl.fx.symbolic_trace(Net().to("meta"))
    ShapeProp(gm).propagate(tl.empty(64, 3, 32, 32, device="meta"))
    shapes = {n.name: tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes if "tensor_meta" in n.meta}
    assert shapes["conv"] == (64, 8, 32, 32) and shapes["flatten"] == (64, 8192) and shapes["head"] == (64, 10)


def test_tape_and_views_show_meta_nodes_without_values():
    from tapelab.widgets.live import LiveTape
    from tapelab.widgets.tensor_view import tensor_summary
    from tapelab.widgets.viewmodel import graph_from_tape
    model = tl.nn.Linear(4, 3, device="meta")
    x = tl.empty(2, 4, device="meta", requires_grad=True)
    with tl.tape(keep_values=True) as tape:
        model(x).sum().backward()
    graph = graph_from_tape(tape)
    ops = [n for n in graph["nodes"] if n["kind"] in ("forward", "backward")]
    assert ops and all(n["device"] == "meta" and n["value"] is None for n in ops)
    assert any(n["op"] == "linear" and n["shape"] == [2, 3] for n in ops)
    summary = tensor_summary(x)
    assert (summary["shape"], summary["device"], summary["stats"], summary["hist"]) == ([2, 4], "meta", None, None)
    with LiveTape() as live:                             # streaming summaries skip values too
        model(x).sum()
    streamed = [n for n in live.graph()["nodes"] if n["kind"] == "forward"]
    assert len(streamed) == 2 and all(n["device"] == "meta" and n["value"] is None for n in streamed)


def test_capture_planning_on_meta():
    """A training step captured on meta: the graph's steps and buffer plan (what a cuda capture of
    the same step would allocate) without memory or compute."""
    model = tl.nn.Sequential(tl.nn.Linear(1024, 4096), tl.nn.ReLU(), tl.nn.Linear(4096, 10)).to("meta")
    opt = tl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = tl.empty(256, 1024, device="meta"), tl.empty(256, dtype=tl.int64, device="meta")

    def step():
        loss = tl.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step()
    opt.zero_grad(set_to_none=True)
    g = tl.graphs.Graph("meta")
    with tl.graphs.graph(g):
        out = step()
    summary = g.summary()
    kinds = {b["kind"] for b in summary["buffers"]}
    assert {"static_input", "state", "pool", "static_output"} <= kinds
    assert summary["pool_nbytes"] >= 4 * 256 * 4096                 # at least the hidden activation
    g.replay()
    assert out.device == META and tuple(out.shape) == ()

"""tapelab.compile: compiled modules equal eager ones (outputs and gradients), guards, graph
breaks, the cache limit, the numpy fallback, the cuda source, and the tape/profiler/graphs/FX
integration. Eager tapelab is the reference here: tests/test_ops.py holds it to PyTorch, and
test_gelu_mlp_matches_pytorch closes the loop once directly."""
from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
import torch

import tapelab
import tapelab.compiler as tc
from tapelab.compiler import cuda as cuda_backend
from tapelab.compiler.fused import FusedOp
from tapelab.fx.trace_from_tape import write_state
from tapelab.graphs import Graph, graph

from _compile_models import ZOO, GCN, LSTMLM, MLP, bn_net, chain

RTOL, ATOL = 1e-5, 1e-6


def _close(got, want, what=""):
    """rtol 1e-5, and an absolute floor of 1e-5 of the tensor's scale: a gradient summed over a
    batch can cancel to a value far below its neighbours, whose rounding it then carries."""
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=max(ATOL, RTOL * float(np.abs(want).max())), err_msg=what)


def _grads(model):
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


# linear adds its bias inside its GEMM (one op), so the encoder layer keeps no elementwise chain to fuse
# (a lone relu, a residual add between a linear and a layer norm); a lone gelu becomes a kernel
# only when it measures faster than the op's own forward (gelu's is a fused eager loop already)
UNFUSED = {"attention", "gelu_mlp"}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_compiled_equals_eager(name):
    make, inp = ZOO[name]
    tapelab.manual_seed(0)
    model, x = make(), inp()
    x.requires_grad_()
    compiled = tapelab.compile(model)
    compiled(x)                          # the first call traces (its result is that eager run)
    y = compiled(x)
    (y * y).sum().backward()
    got, gx = _grads(model), x.grad.numpy().copy()
    model.zero_grad()
    x.grad = None
    ye = model(x)
    (ye * ye).sum().backward()
    _close(y.detach().numpy(), ye.detach().numpy())
    _close(gx, x.grad.numpy())
    for n, g in _grads(model).items():
        _close(got[n], g, n)
    ops = [n.target for n in compiled._compiled.cache[next(iter(compiled._compiled.cache))].graph.graph.nodes
           if n.op == "call_function"]
    if name not in UNFUSED:
        assert any(isinstance(getattr(t, "op", None), FusedOp) for t in ops), "no group was fused"


def test_gelu_mlp_matches_pytorch():
    tapelab.manual_seed(0)
    m = MLP(act="gelu")
    tm = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    with torch.no_grad():
        for (_, p), tp in zip(m.named_parameters(), tm.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    cm = tapelab.compile(m)
    cm(tapelab.tensor(x))
    y = cm(tapelab.tensor(x))
    y.sum().backward()
    ty = tm(torch.from_numpy(x))
    ty.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(m.fc1.weight.grad.numpy(), tm[0].weight.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_chain_is_one_kernel_forward_and_backward():
    x, y = tapelab.randn(64, 32, requires_grad=True), tapelab.randn(32, requires_grad=True)
    f = tapelab.compile(chain)
    f(x, y)
    out = f(x, y)
    assert out.grad_fn.name() == "CompiledFunctionBackward"      # torch's name for a compiled call's node
    assert out.grad_fn.op.name == "fused(mul, add, tanh, mul, sub, exp, mul)"
    with tapelab.tape() as t:
        out = f(x, y)
        out.sum().backward()
    names = [r.op for r in t.nodes]
    assert "fused(mul, add, tanh, mul, sub, exp, mul)" in names
    assert not {"tanh", "exp"} & set(names), names          # the backward's chain is fused too
    xt, yt = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (x, y))
    ((xt * yt + 1.0).tanh() * 0.5 - yt).exp().mul(xt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_profiler_shows_one_event_naming_the_members():
    f = tapelab.compile(chain)
    x, y = tapelab.randn(8, 4), tapelab.randn(4)
    f(x, y)
    with tapelab.profiler.profile() as prof:
        f(x, y)
    names = [e.key for e in prof.key_averages()]
    assert "fused(mul, add, tanh, mul, sub, exp, mul)" in names and "tanh" not in names


# ---------------------------------------------------------------- guards, breaks, cache
def test_new_shape_recompiles_and_explain_reports_guards():
    f = tapelab.compile(chain)
    f(tapelab.randn(4, 3), tapelab.randn(3))
    f(tapelab.randn(4, 3), tapelab.randn(3))
    assert len(f.cache) == 1
    f(tapelab.randn(5, 3), tapelab.randn(3))
    assert len(f.cache) == 2
    f(tapelab.randn(4, 3, dtype=tapelab.float64), tapelab.randn(3, dtype=tapelab.float64))
    assert len(f.cache) == 3
    ex = tc.explain(chain, tapelab.randn(4, 3), tapelab.randn(3))
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert "arg0: Tensor shape=(4, 3) dtype=float32 device=cpu requires_grad=False" in ex.out_guards
    assert ex.ops_per_graph == [["fused(mul, add, tanh, mul, sub, exp, mul)"]]
    assert "Graph Count: 1" in str(ex) and "Compile Times:" in str(ex)


def test_python_values_and_modes_are_guarded():
    f = tapelab.compile(lambda x, s: x * s + 1.0)
    x = tapelab.randn(3)
    np.testing.assert_allclose(f(x, 2.0).numpy(), (x * 2.0 + 1.0).numpy(), rtol=RTOL)
    np.testing.assert_allclose(f(x, 3.0).numpy(), (x * 3.0 + 1.0).numpy(), rtol=RTOL)
    with tapelab.no_grad():
        f(x, 3.0)
    assert len(f.cache) == 3
    m = tapelab.compile(MLP())
    m(tapelab.randn(2, 32))
    m.eval()
    m(tapelab.randn(2, 32))
    assert [k[1] for k in m._compiled.cache] == [True, False]


def _branchy(x):
    if x.sum() > 0:
        return x.exp() * 2.0
    return x.sin() * 2.0


def test_data_dependent_branch_is_a_reported_graph_break():
    f = tapelab.compile(_branchy)
    for sign in (1.0, -1.0):
        x = tapelab.ones(3) * sign
        np.testing.assert_allclose(f(x).numpy(), _branchy(x).numpy())
    ex = tc.explain(_branchy, tapelab.ones(3))
    assert ex.graph_count == 2 and ex.graph_break_count == 1       # split at the break, as torch's
    assert "data-dependent: Tensor.bool()" in ex.break_reasons[0] and "if x.sum() > 0" in ex.break_reasons[0]
    with pytest.raises(tc.Unsupported, match="fullgraph=True.*data-dependent"):
        tapelab.compile(_branchy, fullgraph=True)(tapelab.ones(3))


def test_cache_size_limit_falls_back_to_eager_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(tc.config, "cache_size_limit", 2)
    f = tapelab.compile(lambda x: (x + 1.0).relu())
    f(tapelab.randn(1))
    f(tapelab.randn(2))
    with caplog.at_level("WARNING"):
        out = f(tapelab.randn(3))
    assert "hit config.recompile_limit (2)" in caplog.text
    assert out.shape == (3,) and len(f.cache) == 2
    tc.reset()
    assert len(f.cache) == 0


# ---------------------------------------------------------------- surface
def test_surface_like_torch_compile():
    m = MLP()
    cm = tapelab.compile(m, mode="reduce-overhead")
    assert cm.fc1 is m.fc1 and list(cm.parameters()) == list(m.parameters())
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    assert tapelab.compile(m, disable=True) is m

    @tapelab.compile
    def f(x):
        return x.tanh() + 1.0

    @tapelab.compile(backend="eager")
    def g(x):
        return x.tanh() + 1.0
    x = tapelab.randn(4)
    np.testing.assert_allclose(f(x).numpy(), g(x).numpy(), rtol=RTOL)
    seen = []

    def backend(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm
    tapelab.compile(lambda x: x * 2.0, backend=backend)(x)
    assert seen == [1]
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        tapelab.compile(m, mode="fast")
    with pytest.raises(RuntimeError, match="Unexpected optimization option"):
        tapelab.compile(m, options={"not_an_inductor_option": True})


def test_asked_numpy_kernels_do_not_say_numba_is_missing(monkeypatch):
    """``options={"kernels": "numpy"}`` with numba installed is a choice, not a fallback: no warning."""
    from tapelab.compiler import cpu
    if not cpu.numba_available():
        pytest.skip("numba is not installed")
    monkeypatch.setattr(cpu, "_WARNED", [])
    f = tapelab.compile(chain, options={"kernels": "numpy"})
    x, y = tapelab.randn(16, 8), tapelab.randn(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(x, y)
        out = f(x, y)
    np.testing.assert_allclose(out.numpy(), chain(x, y).numpy(), rtol=RTOL, atol=ATOL)


def test_numpy_fallback_without_numba(monkeypatch):
    from tapelab.compiler import cpu
    monkeypatch.setenv("TAPELAB_COMPILE_NUMBA", "0")
    monkeypatch.setattr(cpu, "_WARNED", [])
    x, y = tapelab.randn(16, 8, requires_grad=True), tapelab.randn(8, requires_grad=True)
    f = tapelab.compile(chain)
    with pytest.warns(RuntimeWarning, match="numba is not available"):
        f(x, y)
    out = f(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # said once
        out.sum().backward()
    ref = chain(x.detach(), y.detach())
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=RTOL, atol=ATOL)
    op = out.grad_fn.op
    assert "out=" in op.source and "def run(" in op.source


# ---------------------------------------------------------------- integration
def test_compile_then_capture_replays():
    f = tapelab.compile(chain)
    sx, sy = tapelab.randn(8, 4), tapelab.randn(4)
    f(sx, sy)                                          # compiled outside the capture
    g = Graph()
    with graph(g):
        out = f(sx, sy)
    x, y = tapelab.randn(8, 4), tapelab.randn(4)
    sx.copy_(x)
    sy.copy_(y)
    g.replay()
    np.testing.assert_allclose(out.numpy(), chain(x, y).numpy(), rtol=RTOL, atol=ATOL)


def _sig_tanh(m, x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid()


def test_captured_kernels_write_into_the_recorded_buffers():
    """A captured compiled step's replay runs each fused kernel (forward and backward) into the
    buffers recorded at capture (``Op.fwd_out``): no fresh output, no copy, PyTorch's values."""
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(6)]
    x, w = (tapelab.tensor(a, requires_grad=True) for a in data[:2])
    gy = tapelab.tensor(data[2])
    f = tapelab.compile(lambda x, w: _sig_tanh(tapelab, x, w))

    def step():
        x.grad = w.grad = None
        y = f(x, w)
        y.backward(gy)
        return y
    step()
    step()
    g = Graph()
    with graph(g):
        y = step()
    ptrs = (y.data_ptr(), x.grad.data_ptr(), w.grad.data_ptr())
    with tapelab.no_grad():
        for t, a in zip((x, w, gy), data[3:]):
            t.copy_(tapelab.tensor(a))
    tracemalloc.start()
    g.replay()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < data[0].nbytes          # three 16 KB kernel outputs were fresh arrays, then copied
    assert (y.data_ptr(), x.grad.data_ptr(), w.grad.data_ptr()) == ptrs
    tx, tw = (torch.tensor(a, requires_grad=True) for a in data[3:5])
    ty = _sig_tanh(torch, tx, tw)
    ty.backward(torch.tensor(data[5]))
    for got, want in ((y, ty), (x.grad, tx.grad), (w.grad, tw.grad)):
        _close(got.detach().numpy(), want.detach().numpy())


def test_fx_node_meta_carries_the_generated_source():
    f = tapelab.compile(chain)
    f(tapelab.randn(4, 3), tapelab.randn(3))
    gm = next(iter(f.cache.values())).graph
    node = next(n for n in gm.graph.nodes if "fused" in n.meta)
    meta = node.meta["fused"]
    assert meta["name"] == "fused(mul, add, tanh, mul, sub, exp, mul)"
    assert "tanh32(" in meta["source"] and "exp32(" in meta["source"] and "no_cpython_wrapper" in meta["source"]
    assert "tanhf(" in meta["cuda_source"]


def test_cuda_source_text():
    x, y = tapelab.randn(4, 3), tapelab.randn(3)
    f = tapelab.compile(chain)
    out = f(x, y)
    op = next(n for n in next(iter(f.cache.values())).graph.graph.nodes if "fused" in n.meta).target.op
    ins, outs = cuda_backend.params(op.kernel)
    assert (ins, outs) == ("float32 a0, float32 a1", "float32 o0")
    # cupy's ElementwiseKernel reads a parameter's type as numpy's dtype of that name: a float32 array
    # must meet a name that numpy reads as float32 ("float" is numpy's float64: the H200 run refused it)
    assert all(np.dtype(p.split()[0]) == np.float32 for p in (ins + ", " + outs).split(", "))
    src = op.cuda_source.splitlines()
    assert src[0] == "float t0 = (a0 * a1);" and src[-1].startswith("o0 = ")
    assert any("tanhf(" in s for s in src) and any("expf(" in s for s in src)
    assert out.shape == (4, 3)


def test_simulated_cuda_device_runs_the_fused_op():
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0):
        x = tapelab.randn(6, 5, device="cuda", requires_grad=True)
        y = tapelab.randn(5, device="cuda")
        f = tapelab.compile(chain)
        f(x, y)
        out = f(x, y)
        assert out.device.type == "cuda"
        out.sum().backward()
        ref = chain(x.detach(), y)
        np.testing.assert_allclose(out.detach().cpu().numpy(), ref.cpu().numpy(), rtol=RTOL, atol=ATOL)
        assert x.grad.device.type == "cuda"


def test_compile_then_capture_on_the_simulated_cuda_device():
    """A compiled step (forward and backward) captured on the simulated cuda device replays with new
    inputs to eager's values and gradients: the fused op's host kernel is recorded by the capture."""
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0):
        f = tapelab.compile(chain)
        sx, sy = tapelab.randn(8, 4, device="cuda", requires_grad=True), tapelab.randn(4, device="cuda")
        for _ in range(2):
            f(sx, sy).sum().backward()
        g = Graph()
        with graph(g):
            out = f(sx, sy)
            out.sum().backward()
        assert out.grad_fn.op.name.startswith("fused(")
        x, y = tapelab.randn(8, 4, device="cuda"), tapelab.randn(4, device="cuda")
        with tapelab.no_grad():
            sx.copy_(x)
            sy.copy_(y)
        sx.grad.zero_()
        g.replay()
        xr = x.clone().requires_grad_()
        chain(xr, y).sum().backward()
        _close(out.detach().cpu().numpy(), chain(x, y).cpu().numpy())
        _close(sx.grad.cpu().numpy(), xr.grad.cpu().numpy())


def test_meta_device_gives_shapes():
    x = tapelab.randn(4, 3)
    f = tapelab.compile(chain)
    f(x, tapelab.randn(3))
    op = next(n for n in next(iter(f.cache.values())).graph.graph.nodes if "fused" in n.meta).target.op
    out = tapelab.dispatch.apply(op, tapelab.empty(4, 3, device="meta"), tapelab.empty(3, device="meta"))
    assert out.shape == (4, 3) and out.device.type == "meta"


def test_fx_view_shows_the_fused_box_with_its_source():
    from tapelab.widgets.fx_adapter import graph_from_fx
    f = tapelab.compile(chain)
    f(tapelab.randn(4, 3), tapelab.randn(3))
    view = graph_from_fx(next(iter(f.cache.values())).graph)
    box = next(n for n in view["nodes"] if "fused" in n)
    assert box["op"] == "fused(mul, add, tanh, mul, sub, exp, mul)"
    assert box["fused"]["members"] == ["mul", "add", "tanh", "mul_1", "sub", "exp", "mul_2"]
    assert "def kernel(" in box["fused"]["source"] and box["shape"] == [4, 3]


@pytest.mark.parametrize("momentum,track", [(0.1, True), (None, True), (0.1, False)])
def test_train_mode_batch_norm_is_one_graph_equal_to_eager_and_torch(momentum, track):
    """BatchNorm1d/2d in training mode compile without a break: the graph writes running_mean,
    running_var and num_batches_tracked back (momentum=None's 1/num_batches_tracked is a graph op),
    so three SGD steps give eager tapelab's outputs, gradients and buffers bit for bit and torch's
    to rtol 1e-5 (gradients 1e-4 of their scale); eval mode afterwards (a new key) reads the updated
    statistics (its elementwise normalisation fused: rtol 1e-5)."""
    tapelab.manual_seed(0)
    model, twin = bn_net(tapelab.nn, momentum, track), bn_net(tapelab.nn, momentum, track)
    twin.load_state_dict(model.state_dict())
    ref = bn_net(torch.nn, momentum, track)
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
    compiled = tapelab.compile(model)
    opts = [tapelab.optim.SGD(m.parameters(), lr=0.1) for m in (model, twin)] + [torch.optim.SGD(ref.parameters(), lr=0.1)]
    for step in range(3):
        x = tapelab.randn(5, 3, 6, 6)
        outs = [compiled(x), twin(x), ref(torch.from_numpy(x.numpy().copy()))]
        for o, opt in zip(outs, opts):
            opt.zero_grad()
            (o * o).sum().backward()
        got, eager, want = (o.detach().numpy() for o in outs)
        np.testing.assert_array_equal(got, eager)
        # after an SGD step the weights carry the gradients' 1e-4 (below) against torch's
        near = _close if step == 0 else lambda g, w, what: np.testing.assert_allclose(
            g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()), err_msg=what)
        near(got, want, f"step {step}")
        for (n, p), q, r in zip(model.named_parameters(), twin.parameters(), ref.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy(), err_msg=n)
            # a batch norm's backward amplifies float32 rounding (1/std over a small batch), and the biases
            # before one have a zero gradient in exact arithmetic: rounding noise
            want = r.grad.numpy()
            np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-4, atol=max(1e-5, 1e-4 * float(np.abs(want).max())), err_msg=n)
        for (n, b), c, r in zip(model.named_buffers(), twin.buffers(), ref.buffers()):
            np.testing.assert_array_equal(b.numpy(), c.numpy(), err_msg=n)
            near(b.numpy(), r.numpy(), n)
        for opt in opts:
            opt.step()
    if track:
        assert int(model[1].num_batches_tracked) == 3
    (entry,) = compiled._compiled.cache.values()
    assert entry.reason is None and entry.graph is not None
    writes = [n.args[0].meta.get("attr_path", n.args[0].target) for n in entry.graph.graph.nodes
              if n.target is write_state]
    assert writes == ([f"{i}.{b}" for i in (1, 5) for b in ("num_batches_tracked", "running_mean", "running_var")]
                      if track else [])
    for m in (model, twin, ref):
        m.eval()
    x = tapelab.randn(5, 3, 6, 6)
    for _ in range(2):              # traced, then the compiled graph
        got = compiled(x).detach().numpy()
        _close(got, twin(x).detach().numpy(), "eval")     # eval's normalisation is a fused kernel
        want = ref(torch.from_numpy(x.numpy().copy())).detach().numpy()   # after three steps' rounding
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()), err_msg="eval")
    assert all(e.reason is None for e in compiled._compiled.cache.values())


def test_momentum_none_batch_norm_with_a_hook_breaks_and_says_why():
    """The cumulative factor is recorded as graph ops only for a BatchNorm without hooks (the
    recorder runs the module's update itself); with one the host read is a reported break."""
    bn = tapelab.nn.BatchNorm1d(3, momentum=None)
    bn.register_forward_hook(lambda m, a, o: None)
    report = tc.explain(tapelab.nn.Sequential(bn), tapelab.randn(5, 3))
    assert report.graph_break_count == 1 and "Tensor.item()" in report.break_reasons[0]
    assert tc.explain(tapelab.nn.BatchNorm1d(3, momentum=None), tapelab.randn(5, 3)).graph_break_count == 0


def test_in_place_input_updates_are_written_back_by_the_graph():
    """An input written in place is updated by the compiled graph itself, once per call, as eager
    does; a write through a view of it cannot be replayed and breaks the graph (undone, run once)."""
    def bump(x, buf):
        buf.add_(1.0)
        return x * 2.0 + 1.0
    buf = tapelab.zeros(3)
    f = tapelab.compile(bump)
    for _ in range(3):
        f(tapelab.randn(3), buf)
    assert buf.tolist() == [3.0, 3.0, 3.0]
    assert tc.explain(bump, tapelab.randn(3), tapelab.zeros(3)).graph_break_count == 0

    def poke(x, buf):
        buf[0].add_(1.0)
        return x * 2.0 + buf
    buf = tapelab.zeros(3)
    g = tapelab.compile(poke)
    for _ in range(3):
        g(tapelab.randn(3), buf)
    assert buf.tolist() == [3.0, 0.0, 0.0]
    assert "untraceable" in tc.explain(poke, tapelab.randn(3), tapelab.zeros(3)).break_reasons[0]


def _torch_lstm_lm(model):
    """PyTorch's LSTM LM with ``model``'s weights."""
    tm = torch.nn.ModuleDict({"encoder": torch.nn.Embedding(16, 12), "rnn": torch.nn.LSTM(12, 12, 2),
                              "decoder": torch.nn.Linear(12, 16)})
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()})
    return tm


def test_an_lstm_compiles_with_its_whole_layer_ops():
    """The compile tracer keeps nn.LSTM's whole-sequence ops (``Mode.whole_layer_ops``): the graph has
    one lstm_scan/lstm pair per layer and no per-step cell, and its loss and gradients are PyTorch's."""
    tapelab.manual_seed(0)
    model = LSTMLM()
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 16, (6, 3))
    h0, c0 = (rng.standard_normal((2, 3, 12)).astype(np.float32) for _ in range(2))
    args = (tapelab.tensor(tokens[:-1]), tapelab.tensor(tokens[1:]), tapelab.tensor(h0), tapelab.tensor(c0))
    compiled = tapelab.compile(model)
    compiled(*args)
    loss = compiled(*args)
    loss.backward()
    entry = next(iter(compiled._compiled.cache.values()))
    names = [getattr(n.target, "__name__", "") for n in entry.graph.graph.nodes]
    assert entry.reason is None and names.count("lstm_scan") == names.count("lstm") == 2
    assert "lstm_cell" not in names
    tm = _torch_lstm_lm(model)
    t = torch.tensor(tokens)
    out, _ = tm["rnn"](tm["encoder"](t[:-1]), (torch.tensor(h0), torch.tensor(c0)))
    want = torch.nn.functional.cross_entropy(tm["decoder"](out).reshape(-1, 16), t[1:].reshape(-1))
    want.backward()
    _close(loss.item(), want.item())
    for n, p in model.named_parameters():
        _close(p.grad.numpy(), dict(tm.named_parameters())[n].grad.numpy(), n)


def test_a_compiled_lstm_captures_and_replays():
    """Compile, then capture: the capture takes the compiled call as its one-node step, forward and
    backward (``Mode.whole_compiled_steps``), whose generated code runs the whole-layer ops; a new
    initial state in the static input gives PyTorch's loss and gradients."""
    tapelab.manual_seed(0)
    model = LSTMLM()
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 16, (6, 3))
    h0, c0, h1 = (rng.standard_normal((2, 3, 12)).astype(np.float32) for _ in range(3))
    args = (tapelab.tensor(tokens[:-1]), tapelab.tensor(tokens[1:]), tapelab.tensor(h0), tapelab.tensor(c0))
    compiled = tapelab.compile(model)

    def step():
        model.zero_grad(set_to_none=True)
        loss = compiled(*args)
        loss.backward()
        return loss
    step()
    step()
    g = Graph()
    with graph(g):
        loss = step()
    ops = [n["op"] for n in g._program.nodes]
    assert ops == ["compiled(LSTMLM)", "CompiledFunctionBackward"]
    (entry,) = compiled.__dict__["_compiled"].cache.values()
    assert entry.step.members.count("lstm_scan") == 2 and "lstm_cell" not in entry.step.members
    with tapelab.no_grad():
        args[2].copy_(tapelab.tensor(h1))
    g.replay()
    tm = _torch_lstm_lm(model)
    t = torch.tensor(tokens)
    out, _ = tm["rnn"](tm["encoder"](t[:-1]), (torch.tensor(h1), torch.tensor(c0)))
    want = torch.nn.functional.cross_entropy(tm["decoder"](out).reshape(-1, 16), t[1:].reshape(-1))
    want.backward()
    _close(loss.item(), want.item())
    for n, p in model.named_parameters():
        _close(p.grad.numpy(), dict(tm.named_parameters())[n].grad.numpy(), n)


def test_an_unrolled_lstm_runs_eagerly_and_says_why():
    """An LSTM with a projection has no whole-layer op: traced, it is one cell op per step (the bench's
    LSTM LM step ran 1.9x slower unrolled): that key runs eagerly, equal to eager, and explain says why."""
    tapelab.manual_seed(0)
    model = tapelab.nn.LSTM(4, 6, proj_size=3)
    x = tapelab.randn(5, 2, 4)
    compiled = tapelab.compile(model)
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    first = compiled(x)[0].sum()                # the trace's run is the result: the model ran once
    handle.remove()
    loss = compiled(x)[0].sum()
    loss.backward()
    got = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    want = model(x)[0].sum()
    want.backward()
    assert loss.item() == want.item() and len(calls) == 1
    _close(first.detach().numpy(), want.detach().numpy())     # the per-step cells: the same up to rounding
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(got[n], p.grad.numpy(), n)
    entry = next(iter(compiled._compiled.cache.values()))
    assert entry.graph is None and entry.reason.startswith("unrolled recurrence: ")
    assert "proj_size" in tc.explain(model, x).break_reasons[0]


def test_a_sparse_adjacency_input_compiles_and_is_read_each_call():
    """The GCN row: a sparse COO input is a graph input like a dense one (guarded by its shape), so
    a new adjacency of the same size runs the same graph on the new entries; equal to eager."""
    tapelab.manual_seed(0)
    model, rng = GCN(), np.random.default_rng(0)
    x, y = tapelab.randn(12, 5), tapelab.tensor(rng.integers(0, 3, 12))

    def adjacency(n_edges):
        idx = rng.integers(0, 12, (2, n_edges))
        return tapelab.sparse_coo_tensor(tapelab.tensor(idx), tapelab.tensor(rng.random(n_edges).astype(np.float32)),
                                         (12, 12)).coalesce()
    compiled = tapelab.compile(model)
    for adj in (adjacency(30), adjacency(30), adjacency(40)):
        model.zero_grad()
        loss = compiled(adj, x, y)
        loss.backward()
        got = _grads(model)
        model.zero_grad()
        want = model(adj, x, y)
        want.backward()
        _close(loss.detach().numpy(), want.detach().numpy())
        for n, g in _grads(model).items():
            _close(got[n], g, n)
    assert len(compiled._compiled.cache) == 1 and next(iter(compiled._compiled.cache.values())).graph is not None


def test_sibling_groups_merge_into_one_kernel():
    """GPT-2's tanh GELU: ``0.5 * h`` and ``1 + tanh(...)`` start as two groups from ``h``; the product
    that consumes both joins them (neither depends on the other), so the chain is one kernel."""
    make, inp = ZOO["gpt_block"]
    tapelab.manual_seed(0)
    ops = tc.explain(make(), inp()).ops_per_graph[0]
    fused = [o for o in ops if o.startswith("fused(")]
    assert "fused(mul, mul, mul, mul, add, mul, tanh, add, mul)" in fused, fused


def test_backward_reads_the_saved_output_instead_of_recomputing():
    """tanh's vjp reads its output: the group's backward takes the forward's saved result (no
    second forward kernel in the backward), and gradients still equal PyTorch's."""
    f = tapelab.compile(lambda x: (x * 2.0 + 1.0).tanh())
    x = tapelab.randn(8, 4, requires_grad=True)
    f(x)
    out = f(x)
    op = out.grad_fn.op
    assert op.save_output
    with tapelab.tape() as t:
        out.sum().backward()
    assert [r.op for r in t.nodes].count(op.name) == 0      # no recompute of the forward kernel
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    (xt * 2.0 + 1.0).tanh().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape", [(64, 33), (1, 12000)])
@pytest.mark.parametrize("numba", ["1", "0"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_a_trailing_sum_is_accumulated_in_the_kernel(monkeypatch, numba, shape, reduction):
    """``chain(x).sum()`` (or ``.mean()``, a squared-mean loss's): the reduction is the group's
    kernel's own accumulation (one op forward, no sum node; a 12000-element row spans three of
    cpu.REDUCE_BLOCK's per-lane float32 partial sums), its backward's kernel reading the 0-d
    gradient as a scalar (no expand: mean's vjp divides the expanded gradient, and the division
    moves before the expand), and value and gradients equal PyTorch's at rtol 1e-5, with numba
    and without."""
    from tapelab.compiler import cpu
    monkeypatch.setenv("TAPELAB_COMPILE_NUMBA", numba)
    monkeypatch.setattr(cpu, "_WARNED", [True])

    def f(x, w):
        return getattr(((x * w + 1.0).tanh() * x).sigmoid(), reduction)()
    x, w = tapelab.randn(*shape, requires_grad=True), tapelab.randn(shape[-1], requires_grad=True)
    c = tapelab.compile(f)
    c(x, w)
    out = c(x, w)
    gm = c.cache[next(iter(c.cache))].graph
    name = f"fused(mul, add, tanh, mul, sigmoid, {reduction})"
    assert [n.target.op.name for n in gm.graph.nodes if n.op == "call_function"] == [name]
    assert out.shape == () and out.grad_fn.name() == "CompiledFunctionBackward" and out.grad_fn.op.name == name
    backwards = list(out.grad_fn.op._backwards.values())
    assert backwards and all("expand" not in bw.code for bw in backwards)
    out.backward()
    xt, wt = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (x, w))
    want = f(xt, wt)
    want.backward()
    np.testing.assert_allclose(out.item(), want.item(), rtol=RTOL)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("numba", ["1", "0"])
def test_a_fused_mean_of_nothing_is_nan(monkeypatch, numba):
    """A fused trailing mean over an empty tensor divides 0 by 0 once: NaN, as PyTorch's ``mean()``."""
    from tapelab.compiler import cpu
    monkeypatch.setenv("TAPELAB_COMPILE_NUMBA", numba)
    monkeypatch.setattr(cpu, "_WARNED", [True])
    c = tapelab.compile(lambda x: (x * x + 1.0).mean())
    x = tapelab.randn(0, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # numpy's "Mean of empty slice"
        c(x)
        out = c(x)
    assert out.grad_fn is None and np.isnan(out.item()) and out.dtype == tapelab.float32
    assert "mean" in c.cache[next(iter(c.cache))].graph.fused_ops[0].name


@pytest.mark.parametrize("grad", [False, True])
def test_a_large_trailing_sum_joins_the_kernel(grad):
    """A trailing sum joins its group's kernel at any size, with a backward too (which then recomputes
    the group and reads the 0-d gradient as a scalar): values and gradients equal PyTorch's."""
    def f(m, x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((513, 64)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    x, w = tapelab.tensor(a, requires_grad=grad), tapelab.tensor(b, requires_grad=grad)
    c = tapelab.compile(lambda x, w: f(tapelab, x, w))
    c(x, w)
    out = c(x, w)
    gm = c.cache[next(iter(c.cache))].graph
    names = [n.target.op.name for n in gm.graph.nodes if isinstance(getattr(n.target, "op", None), FusedOp)]
    assert names == ["fused(mul, add, tanh, mul, sigmoid, sum)"]
    xt, wt = torch.tensor(a, requires_grad=grad), torch.tensor(b, requires_grad=grad)
    ref = f(torch, xt, wt)
    np.testing.assert_allclose(out.item(), ref.item(), rtol=RTOL)
    if grad:
        out.backward()
        ref.backward()
        _close(x.grad.numpy(), xt.grad.numpy())
        _close(w.grad.numpy(), wt.grad.numpy())


@pytest.mark.parametrize("pays", [False, True])
def test_a_lone_op_fuses_only_when_its_kernel_pays(monkeypatch, pays):
    from tapelab.compiler import fused
    monkeypatch.setattr(fused, "_pays", lambda *a: pays)
    m = MLP(act="gelu")
    cm = tapelab.compile(m)
    x = tapelab.randn(4, 32)
    cm(x)
    gm = next(iter(cm._compiled.cache.values())).graph
    assert any(isinstance(getattr(n.target, "op", None), FusedOp) for n in gm.graph.nodes) == pays
    _close(cm(x).detach().numpy(), m(x).detach().numpy())


def test_a_one_kernel_backward_giving_two_inputs_one_gradient(monkeypatch):
    """``(a + b).relu()``: the backward is one kernel (threshold_backward, fused when it times faster)
    whose one output is both inputs' gradient; the bench's ResNet residual raised StopIteration there
    whenever the timing chose the kernel."""
    from tapelab.compiler import fused
    monkeypatch.setattr(fused, "_pays", lambda *a: True)
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    a, b = (tapelab.tensor(d, requires_grad=True) for d in data)
    f = tapelab.compile(lambda a, b: (a + b).relu())
    f(a, b)
    out = f(a, b)
    assert out.grad_fn.op.name == "fused(add, relu)"
    out.backward(tapelab.ones(4, 8))
    ta, tb = (torch.tensor(d, requires_grad=True) for d in data)
    (ta + tb).relu().backward(torch.ones(4, 8))
    _close(a.grad.numpy(), ta.grad.numpy())
    _close(b.grad.numpy(), tb.grad.numpy())


def test_automatic_dynamic_shapes_reuse_the_entry_for_a_third_size():
    """A second batch size whose trace is the same graph marks dim 0 dynamic; the kernels take sizes
    as arguments, so later sizes run that entry (no recompile) with PyTorch's values and gradients."""
    f = tapelab.compile(chain)
    for n in (4, 5, 7, 9):
        x, y = tapelab.randn(n, 3, requires_grad=True), tapelab.randn(3, requires_grad=True)
        out = f(x, y)
        out.sum().backward()
        xt, yt = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (x, y))
        ref = ((xt * yt + 1.0).tanh() * 0.5 - yt).exp() * xt
        ref.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=RTOL, atol=1e-5)
    assert len(f.cache) == 2 and isinstance(out.grad_fn.op, FusedOp)
    assert "arg0.size(0) is dynamic" in list(f.cache.values())[-1].guards
    g = tapelab.compile(chain, dynamic=False)
    for n in (4, 5, 7):
        g(tapelab.randn(n, 3), tapelab.randn(3))
    assert len(g.cache) == 3


def test_a_size_baked_into_the_graph_keeps_recompiling():
    """GPTBlock reshapes with its sequence length: the traces differ, so no dim becomes dynamic."""
    tapelab.manual_seed(0)
    m = ZOO["gpt_block"][0]()
    cm = tapelab.compile(m)
    for t in (8, 9, 10):
        x = tapelab.randn(2, t, 32)
        _close(cm(x).detach().numpy(), m(x).detach().numpy())
    assert len(cm._compiled.cache) == 3 and not cm._compiled.dynamic


def test_a_reassigned_parameter_recompiles():
    m = MLP(act="silu")
    cm = tapelab.compile(m)
    x = tapelab.randn(4, 32)
    cm(x)
    cm(x)
    m.fc1.weight = tapelab.nn.Parameter(tapelab.randn(64, 32))
    _close(cm(x).detach().numpy(), m(x).detach().numpy())
    assert "self.fc1.weight is the tensor traced" in next(iter(cm._compiled.cache.values())).guards


def test_functional_call_and_a_reassigned_buffer_reach_a_compiled_module():
    """The identity guard reads the dict that held each parameter and buffer: ``functional_call``'s
    swapped parameters are seen (as PyTorch's), the next plain call sees the module's own again,
    and a reassigned buffer recompiles."""
    m = tapelab.nn.Sequential(tapelab.nn.Linear(4, 3), tapelab.nn.BatchNorm1d(3)).eval()
    cm = tapelab.compile(m)
    x = tapelab.randn(5, 4)
    cm(x)
    cm(x)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).eval()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    xt = torch.tensor(x.numpy())
    doubled = {"_orig_mod.0.weight": m[0].weight.detach() * 2.0}
    got = tapelab.func.functional_call(cm, doubled, (x,))
    want = torch.func.functional_call(tm, {"0.weight": tm[0].weight.detach() * 2.0}, (xt,))
    _close(got.detach().numpy(), want.detach().numpy())
    _close(cm(x).detach().numpy(), tm(xt).detach().numpy())
    m[1].running_mean = tapelab.full((3,), 0.5)
    tm[1].running_mean = torch.full((3,), 0.5)
    _close(cm(x).detach().numpy(), tm(xt).detach().numpy())


def test_double_backward_runs_the_members_ops_and_says_so():
    f = tapelab.compile(chain)
    x, y = tapelab.randn(5, 3, requires_grad=True), tapelab.randn(3, requires_grad=True)
    f(x, y)
    out = f(x, y)
    with pytest.warns(UserWarning, match="create_graph=True through fused"):
        gx, gy = tapelab.autograd.grad(out.sum(), [x, y], create_graph=True)
    (gx.sum() + (gy * gy).sum()).backward()
    xt, yt = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (x, y))
    gxt, gyt = torch.autograd.grad(chain(xt, yt).sum(), [xt, yt], create_graph=True)
    (gxt.sum() + (gyt * gyt).sum()).backward()
    np.testing.assert_allclose(gx.detach().numpy(), gxt.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=RTOL, atol=1e-5)


def test_without_a_c_compiler_the_object_file_is_cached_and_loaded_by_mcjit(monkeypatch, tmp_path):
    from tapelab.compiler import cpu
    from tapelab.compiler.kernel import Kernel
    from tapelab.compiler.symbolic import input_sym
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu, "_link", lambda *a: False)          # as if no cc were installed
    x0, x1 = input_sym(0, np.float32), input_sym(1, np.float32)
    kernel = Kernel("fused(mul, add)", [("float32", (5, 3)), ("float32", (3,))], [x0 * x1 + 1.0], (5, 3),
                    ["mul", "add"])
    a, b = np.arange(15, dtype=np.float32).reshape(5, 3), np.array([1.0, 2.0, 3.0], np.float32)
    for _ in range(2):                                             # built, then loaded from the cached .o
        (out,) = cpu.load(kernel, True)(a, b)
        np.testing.assert_array_equal(out, a * b + np.float32(1.0))
    assert [p.suffix for p in tmp_path.iterdir() if p.suffix in (".o", ".so")] == [".o"]


@pytest.mark.skipif(not tc.cpu.numba_available(), reason="the fused ReLU and max-pool loops need numba")
def test_relu_then_2x2_max_pool_is_one_op_equal_to_eager():
    """max_pool2d(relu(x), 2) becomes relu_max_pool2d: values and gradients bit for bit eager's,
    with a NaN (kept, and its gradient passed), tied maxima (the first takes the gradient) and
    all-negative windows (zero gradient)."""
    F = tapelab.nn.functional

    def f(x):
        return F.max_pool2d(F.relu(x * 1.5), 2)
    xs = np.random.default_rng(0).standard_normal((2, 3, 6, 8)).astype(np.float32)
    xs[0, 0, 0, 1] = np.nan
    xs[1, 1, :2, :2] = -1.0
    xs[1, 2, 2:4, 2:4] = 0.5
    compiled = tapelab.compile(f)
    for _ in range(2):               # traced, then the compiled graph
        x, xe = tapelab.tensor(xs, requires_grad=True), tapelab.tensor(xs, requires_grad=True)
        y, ye = compiled(x), f(xe)
        g = tapelab.randn(*y.shape)
        y.backward(g)
        ye.backward(g)
        np.testing.assert_array_equal(y.detach().numpy(), ye.detach().numpy())
        np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())
    (entry,) = compiled.cache.values()
    names = [getattr(n.target, "__name__", "") for n in entry.graph.graph.nodes if n.op == "call_function"]
    assert "relu_max_pool2d" in names and "relu" not in names and "max_pool_blocks" not in names
    with tapelab.profiler.profile() as prof:
        compiled(tapelab.tensor(xs, requires_grad=True)).sum().backward()
    assert {"relu_max_pool2d", "relu_max_pool2d_backward"} <= {e.key for e in prof.key_averages()}

    sx = tapelab.tensor(xs, requires_grad=True)   # captured
    g = Graph()
    with graph(g):
        compiled(sx).sum().backward()
    x2 = np.random.default_rng(1).standard_normal(xs.shape).astype(np.float32)
    with tapelab.no_grad():
        sx.copy_(tapelab.tensor(x2))
        sx.grad.zero_()                           # the replay accumulates into the captured .grad
    g.replay()
    xe = tapelab.tensor(x2, requires_grad=True)
    f(xe).sum().backward()
    np.testing.assert_array_equal(sx.grad.numpy(), xe.grad.numpy())


def test_relu_joins_an_elementwise_group():
    """relu's forward guards its eager loop with ``a.size and ...``: the symbolic trace reads on to its
    formula, so relu fuses with its neighbours (it was left out since that guard came); a NaN is kept."""
    def f(a, b):
        return tapelab.nn.functional.relu(a + b) * 2.0
    xs = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    xs[0, 0] = np.nan
    compiled = tapelab.compile(f)
    b = tapelab.randn(4, 5)
    for _ in range(2):
        a, ae = tapelab.tensor(xs, requires_grad=True), tapelab.tensor(xs, requires_grad=True)
        y, ye = compiled(a, b), f(ae, b)
        y.sum().backward()
        ye.sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), ye.detach().numpy())
        np.testing.assert_array_equal(a.grad.numpy(), ae.grad.numpy())
    (entry,) = compiled.cache.values()
    assert [repr(n.target) for n in entry.graph.graph.nodes if n.op == "call_function"] == ["fused(add, relu, mul)"]


def test_a_graph_break_runs_the_call_once_with_its_effects():
    """A compiled training step that reads ``loss.item()`` breaks the graph; its first call is the
    traced eager run itself, so the optimizer step and the Python append happen once, as eagerly."""
    def run(compiled):
        tapelab.manual_seed(0)
        model = tapelab.nn.Linear(4, 2)
        opt = tapelab.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = tapelab.randn(8, 4), tapelab.randn(8, 2)
        losses = []

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            return loss
        f = tapelab.compile(step) if compiled else step
        for _ in range(4):
            f(x, y)
        return losses, model.weight.detach().numpy().copy()
    (eager_losses, eager_w), (losses, w) = run(False), run(True)
    assert losses == eager_losses and len(losses) == 4
    np.testing.assert_array_equal(w, eager_w)


def test_a_tensor_kept_outside_the_call_is_a_reported_break():
    """Appending a tensor the call made to a list (a logger's store, an activation cache) is a side
    effect a graph would not repeat: the key runs eagerly, each call hands its own tensor over."""
    log = []

    def f(x):
        y = (x * 2).relu()
        log.append(y.sum())
        return y + 1
    compiled = tapelab.compile(f)
    for i in range(3):
        compiled(tapelab.full((4,), float(i)))
    assert [v.item() for v in log] == [0.0, 8.0, 16.0]
    report = str(tc.explain(f, tapelab.ones(4)))
    assert "Python side effect: a tensor the call made is kept in a list" in report

    class Cache:
        pass
    holder = Cache()

    def g(x):
        holder.last = x.exp()
        return x.sum()
    assert "attribute last of Cache" in str(tc.explain(g, tapelab.ones(4)))


def test_dynamo_ctx_compiles_a_method_with_the_modules_settings():
    """``OptimizedModule.dynamo_ctx`` (Lightning's ``from_compiled``): a decorator compiling with the
    same settings; the wrapped step equals the eager one."""
    tapelab.manual_seed(0)
    model = tapelab.nn.Linear(4, 3)
    compiled = tapelab.compile(model, backend="eager", dynamic=False)
    step = compiled.dynamo_ctx(lambda x: model(x).relu().sum())
    assert isinstance(step, tc.CompiledFunction) and step.backend == "eager" and step.dynamic_mode is False
    x = tapelab.randn(5, 4)
    for _ in range(2):
        assert step(x).item() == pytest.approx(model(x).relu().sum().item(), rel=1e-6)


def test_a_lone_ops_timed_answer_is_kept_for_later_processes(monkeypatch, tmp_path):
    """Whether a lone op fuses is timed once per kernel, op and shapes and kept beside the kernels,
    so the same program compiles to the same graph later (here: a fresh memo reads the file)."""
    from tapelab.compiler import fused
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fused, "_PAYS", {})
    timed = []
    real = fused._timed_pays
    monkeypatch.setattr(fused, "_timed_pays", lambda *a: timed.append(1) or real(*a))

    def graph_ops():
        cm = tapelab.compile(MLP(act="gelu"))
        cm(tapelab.randn(4, 32))
        gm = next(iter(cm._compiled.cache.values())).graph
        return [getattr(n.target, "op", n.target).__class__.__name__ for n in gm.graph.nodes]
    first = graph_ops()
    files = {p.name: p.read_text() for p in (tmp_path / "pays").iterdir()}
    assert timed and files and set(files.values()) <= {"0", "1"}
    monkeypatch.setattr(fused, "_PAYS", {})
    monkeypatch.setattr(fused, "_timed_pays", lambda *a: pytest.fail("timed again"))
    assert graph_ops() == first


def test_a_call_keeping_nothing_outside_skips_the_heap_scans(monkeypatch):
    """``trace_with_output(kept=...)`` counts each made tensor's references in the recorder's, the
    result's and the autograd nodes' own holders first: when they account for all of them the two
    ``gc.get_referrers`` scans of the heap are skipped (the warm compile's largest cost); a tensor
    held anywhere else (a closure cell, a dict, a global) still goes to the scans and is named."""
    import gc
    import importlib
    tft = importlib.import_module("tapelab.fx.trace_from_tape")
    scans = []
    real = gc.get_referrers
    monkeypatch.setattr(tft.gc, "get_referrers", lambda *a: scans.append(1) or real(*a))
    kept: list = []
    tft.trace_with_output(MLP(act="gelu"), tapelab.randn(4, 32), kept=kept)
    assert kept == [] and scans == []
    box: dict = {}

    def cell():
        y = None

        def f(x):
            nonlocal y
            y = x.exp()
            return (y * 2).sum()
        return f
    for fn, where in ((cell(), "a closure variable"), (lambda x: box.setdefault("k", x.tanh()).sum(), "a dict")):
        kept = []
        tft.trace_with_output(fn, tapelab.randn(3, requires_grad=True), kept=kept)
        assert where in kept


def test_a_module_argument_is_guarded_by_identity_mode_and_parameters():
    """gpt-fast compiles ``decode_one_token(model, x, input_pos)``: a module passed as an argument. Another
    module, another mode or a reassigned parameter is a new graph; an in-place update is read live."""
    def f(model, x):
        return model(x).relu().sum(-1)
    m, x = tapelab.nn.Linear(3, 2), tapelab.randn(4, 3)
    c = tapelab.compile(f, fullgraph=True)

    def same(module):
        np.testing.assert_allclose(c(module, x).detach().numpy(), f(module, x).detach().numpy(), rtol=1e-6)
    same(m)
    same(tapelab.nn.Linear(3, 2))
    with tapelab.no_grad():
        m.weight.mul_(3)
    same(m)
    m.weight = tapelab.nn.Parameter(tapelab.randn(2, 3))
    same(m)
    drop = tapelab.nn.Sequential(tapelab.nn.Linear(3, 2), tapelab.nn.Dropout(0.5))
    c(drop, x)
    np.testing.assert_allclose(c(drop.eval(), x).detach().numpy(), f(drop, x).detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_reduced_precision_groups_run_eagerly_and_equal_eager(dt):
    """gpt-fast compiles a bfloat16 model: the generated loops take no bfloat16/float16, so those groups
    stay eager ops (the codegen raised NameError: name 'bfloat16' is not defined)."""
    class M(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tapelab.nn.Linear(8, 8)

        def forward(self, x):
            return tapelab.nn.functional.silu(self.lin(x)) * x + 1
    m = M().to(getattr(tapelab, dt))
    x = tapelab.randn(2, 8).to(getattr(tapelab, dt))
    with tapelab.no_grad():
        np.testing.assert_array_equal(tapelab.compile(m, fullgraph=True)(x).float().numpy(), m(x).float().numpy())

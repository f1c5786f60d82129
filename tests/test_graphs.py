"""tapelab.graphs: capture and replay with CUDA Graph semantics on cpu (issue 6)."""
import gc
import re
import weakref

import numpy as np
import pytest

import tapelab as T
from tapelab import nn
from tapelab.dispatch import STATE
from tapelab.graphs import CaptureError, Graph, graph, make_graphed_callables
from tapelab.optim import SGD, Adam

N_STEPS = 100
B, DIN, DH, NCLS = 16, 20, 32, 5


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return ([rng.standard_normal((B, DIN)).astype(np.float32) for _ in range(n)],
            [rng.integers(0, NCLS, B) for _ in range(n)])


def _mlp():
    T.manual_seed(0)
    return nn.Sequential(nn.Linear(DIN, DH), nn.ReLU(), nn.Linear(DH, DH), nn.Tanh(), nn.Linear(DH, NCLS))


class CapturableAdam(Adam):
    """Adam whose step count is a tensor (PyTorch's ``capturable=True`` branch, op for op), so the
    bias corrections are tensor ops a graph replays. tapelab's Adam keeps a Python count."""

    def _step_group(self, group):
        beta1, beta2 = group["betas"]
        lr, eps = group["lr"], group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            st = self.state[p]
            if not st:
                st["step"] = T.zeros(())
                st["exp_avg"], st["exp_avg_sq"] = T.zeros_like(p), T.zeros_like(p)
            step = st["step"]
            step.add_(1)
            st["exp_avg"].lerp_(p.grad, 1 - beta1)
            st["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            step_size_neg = -(lr / (1 - beta1 ** step))
            bc2_sqrt = (1 - beta2 ** step).sqrt()
            denom = (st["exp_avg_sq"].sqrt() / (bc2_sqrt * step_size_neg)).add_(eps / step_size_neg)
            p.addcdiv_(st["exp_avg"], denom)


def _train(make_opt, graphed, steps=N_STEPS, warmup=3):
    """Parameters after ``warmup`` eager steps and ``steps`` more, eager or replayed."""
    model = _mlp()
    opt = make_opt(model.parameters())
    xs, ys = _data(warmup + steps)
    static_x, static_y = T.zeros(B, DIN), T.zeros(B, dtype=T.int64)

    def step():
        loss = nn.functional.cross_entropy(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    for i in range(warmup):
        static_x.copy_(T.from_numpy(xs[i]))
        static_y.copy_(T.from_numpy(ys[i]))
        opt.zero_grad(set_to_none=True)
        step()
    g = None
    if graphed:
        before = [p.detach().numpy().copy() for p in model.parameters()]
        g = Graph()
        opt.zero_grad(set_to_none=True)
        with graph(g):
            static_loss = step()
        # capture records the step without doing it: parameters are as they were
        for p, b in zip(model.parameters(), before):
            np.testing.assert_array_equal(p.detach().numpy(), b)
    losses = []
    for i in range(warmup, warmup + steps):
        static_x.copy_(T.from_numpy(xs[i]))
        static_y.copy_(T.from_numpy(ys[i]))
        if graphed:
            g.replay()
            losses.append(float(static_loss.detach().numpy()))
        else:
            opt.zero_grad(set_to_none=True)
            losses.append(step().item())
    return [p.detach().numpy().copy() for p in model.parameters()], losses, g


@pytest.mark.parametrize("make_opt", [
    lambda ps: SGD(ps, lr=0.05, momentum=0.9),
    lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: CapturableAdam(ps, lr=1e-2),
], ids=["sgd-momentum", "sgd-nesterov-wd", "adam-capturable"])
def test_training_step_replay_equals_eager(make_opt):
    eager_params, eager_losses, _ = _train(make_opt, graphed=False)
    replay_params, replay_losses, g = _train(make_opt, graphed=True)
    assert g.replays == N_STEPS
    for a, b in zip(eager_params, replay_params):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(replay_losses, eager_losses, rtol=1e-5, atol=1e-6)
    assert not STATE.slow and not STATE.modes  # the eager fast path is back


def test_adam_with_python_step_count_is_rejected():
    model = _mlp()
    opt = Adam(model.parameters(), lr=1e-2)
    x = T.randn(B, DIN)
    model(x).sum().backward()
    opt.step()
    before = [p.detach().numpy().copy() for p in model.parameters()]
    g = Graph()
    with pytest.raises(CaptureError, match=r"Adam.step\(\) ran during capture.*'step'"):
        with graph(g):
            model(x).sum().backward()
            opt.step()
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    with pytest.raises(RuntimeError, match="no capture"):
        g.replay()


# ---------------------------------------------------------------- static buffers
def test_static_output_is_overwritten_by_each_replay():
    x = T.zeros(3, 4)
    w = T.randn(4, 2)
    g = Graph()
    with graph(g):
        assert T.graphs.is_current_stream_capturing() and T.cuda.is_current_stream_capturing()
        out = (x @ w).tanh() * 2 + x.sum()
    assert not T.graphs.is_current_stream_capturing()
    held = out  # the same tensor object: replay writes into its buffer
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        x.copy_(T.from_numpy(xv))
        g.replay()
        assert held is out
        np.testing.assert_allclose(out.numpy(), np.tanh(xv @ w.numpy()) * 2 + xv.sum(), rtol=1e-5, atol=1e-6)
    kept = out.clone()
    x.fill_(1.0)
    g.replay()
    assert not np.allclose(kept.numpy(), out.numpy())  # clone what you need to keep


def test_capture_does_not_run_the_work_on_existing_tensors():
    p = T.ones(4)
    acc = T.zeros(4)
    g = Graph()
    with graph(g):
        p.mul_(3)
        acc.add_(p)
    np.testing.assert_array_equal(p.numpy(), np.ones(4))
    np.testing.assert_array_equal(acc.numpy(), np.zeros(4))
    g.replay()
    g.replay()
    np.testing.assert_array_equal(p.numpy(), np.full(4, 9.0))
    np.testing.assert_array_equal(acc.numpy(), np.full(4, 12.0))


def test_tensor_made_during_capture_and_written_restarts_each_replay():
    x = T.tensor([1.0, 2.0, 3.0])
    g = Graph()
    with graph(g):
        z = T.zeros(3)          # a factory: outside the dispatcher, a constant of the graph
        z.add_(x)               # ... written in place: every replay starts from zeros again
        out = z * 10
    for _ in range(3):
        g.replay()
        np.testing.assert_array_equal(out.numpy(), [10.0, 20.0, 30.0])


def test_inplace_ops_under_autograd_replay_like_eager():
    def f(x, w, v):
        h = x @ w
        h.relu_()
        h.mul_(v)               # v needs grad: the node keeps h's value from before the write
        return (h * h).sum()

    x = T.randn(5, 3)
    w = T.randn(3, 4, requires_grad=True)
    v = T.randn(4, requires_grad=True)
    g = Graph()
    with graph(g):
        loss = f(x, w, v)
        loss.backward()
    gw, gv = w.grad, v.grad
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal((5, 3)).astype(np.float32)
        x.copy_(T.from_numpy(xv))
        g.replay()
        w2 = w.detach().clone().requires_grad_(True)
        v2 = v.detach().clone().requires_grad_(True)
        ref = f(T.from_numpy(xv), w2, v2)
        ref.backward()
        np.testing.assert_allclose(loss.detach().numpy(), ref.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(gw.numpy(), w2.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gv.numpy(), v2.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert any(n["kind"] == "snapshot" for n in g.nodes())


def test_gradient_accumulation_into_existing_grad_is_replayed():
    w = T.ones(3, requires_grad=True)
    w.grad = T.zeros(3)
    x = T.tensor([1.0, 2.0, 3.0])
    g = Graph()
    with graph(g):
        (w * x).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(3))   # restored after capture
    g.replay()
    g.replay()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0, 6.0])


# ---------------------------------------------------------------- pools and reset
def test_pool_shared_between_two_graphs():
    x = T.randn(6, 6)
    g1, g2 = Graph(), Graph()
    with graph(g1):
        a = x @ x
    pool = g1.pool()
    n1 = pool.nbytes
    assert n1 >= a.numpy().nbytes
    with graph(g2, pool=pool):
        b = a.relu() + 1
    assert g2.pool() is pool and pool.n_graphs == 2 and pool.nbytes > n1
    x.copy_(T.randn(6, 6))
    g1.replay()
    g2.replay()   # replays in capture order read what the first wrote
    np.testing.assert_allclose(b.numpy(), np.maximum(x.numpy() @ x.numpy(), 0) + 1, rtol=1e-5)
    g1.reset()
    assert pool.n_graphs == 1 and pool.nbytes < pool.nbytes + 1
    g2.replay()
    with pytest.raises(TypeError, match="MemPool"):
        Graph().capture_begin(pool="nope")


def test_reset_frees_the_graph_buffers():
    x = T.randn(32, 32)
    g = Graph()
    with graph(g):
        out = (x @ x).exp().sum()
    inner = [weakref.ref(b) for b in g._program.buffers.values() if b is not out._data]
    assert inner and all(r() is not None for r in inner)
    pool = g.pool()
    g.reset()
    gc.collect()
    assert all(r() is None for r in inner)
    assert pool.nbytes == 0 and out.numpy().shape == ()   # what the user holds stays valid
    with pytest.raises(RuntimeError, match="no capture"):
        g.replay()
    with graph(g):   # a reset graph can capture again
        out2 = x + 1
    g.replay()
    np.testing.assert_allclose(out2.numpy(), x.numpy() + 1)


def test_graph_lists_what_it_captured():
    x = T.randn(4, 4)
    g = Graph()
    with graph(g):
        y = x.matmul(x).relu()
    ops = [n["op"] for n in g.nodes()]
    assert ops == ["matmul", "relu"]
    assert all("test_graphs.py" in n["where"] for n in g.nodes())
    assert "def _replay" in g.source
    summary = g.summary()
    assert summary["pool_nbytes"] == 2 * y.numpy().nbytes and len(summary["static_inputs"]) == 1
    seen = []
    with T.events.subscribe("capture_done", seen.append):
        with graph(Graph()):
            x * 2
    assert seen and seen[0]["nodes"][0]["op"] == "mul"


# ---------------------------------------------------------------- make_graphed_callables
def test_make_graphed_callables_module_gradients_equal_eager():
    model = _mlp()
    ref = _mlp()
    x0 = T.randn(B, DIN, requires_grad=True)
    gmodel = make_graphed_callables(model, (x0,), num_warmup_iters=2)
    assert gmodel is model and model.fwd_graph._program is not None
    xs, _ = _data(4, seed=1)
    for xv in xs:
        x1 = T.from_numpy(xv.copy()).requires_grad_(True)
        x2 = T.from_numpy(xv.copy()).requires_grad_(True)
        model.zero_grad()
        ref.zero_grad()
        out1 = gmodel(x1)
        out2 = ref(x2)
        np.testing.assert_allclose(out1.detach().numpy(), out2.detach().numpy(), rtol=1e-5, atol=1e-6)
        (out1 ** 2).sum().backward()
        (out2 ** 2).sum().backward()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    model.eval()   # captured in training mode: eval runs the eager forward
    np.testing.assert_allclose(model(x0).detach().numpy(), ref(x0).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_make_graphed_callables_functions_tuple():
    w = T.randn(3, 3, requires_grad=True)

    def f(a, b):
        return (a @ w).sin() * b, a.sum()

    def h(c):
        return c.exp()

    a0, b0, c0 = T.randn(2, 3, requires_grad=True), T.randn(2, 3), T.randn(4, requires_grad=True)
    gf, gh = make_graphed_callables((f, h), ((a0, b0), (c0,)))
    for seed in range(3):
        rng = np.random.default_rng(seed)
        av, bv, cv = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 3), (4,)))
        a1, c1 = T.from_numpy(av).requires_grad_(True), T.from_numpy(cv).requires_grad_(True)
        y, s = gf(a1, T.from_numpy(bv))
        (y.sum() * 2 + s + gh(c1).sum()).backward()
        a2, c2 = T.from_numpy(av.copy()).requires_grad_(True), T.from_numpy(cv.copy()).requires_grad_(True)
        y2, s2 = f(a2, T.from_numpy(bv))
        (y2.sum() * 2 + s2 + h(c2).sum()).backward()
        np.testing.assert_allclose(a1.grad.numpy(), a2.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c1.grad.numpy(), c2.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"argument 0 is float32\[5, 3\].*sample_args\[0\]"):
        gf(T.randn(5, 3, requires_grad=True), b0)
    with pytest.raises(RuntimeError, match="requires_grad"):
        gf(T.randn(2, 3), b0)


# ---------------------------------------------------------------- capture errors
def _fails(body, match):
    x = T.randn(4, 4)
    g = Graph()
    with pytest.raises(CaptureError, match=match) as info:
        with graph(g):
            body(x)
    msg = str(info.value)
    assert "test_graphs.py" in msg, msg            # names the user's source line
    assert not STATE.modes and not STATE.slow       # capture ended, eager fast path back
    assert not T.graphs.is_current_stream_capturing()
    assert "checked" not in T.Tensor.numpy.__name__
    return msg


@pytest.mark.parametrize("body,match", [
    (lambda x: x.sum().item(), r"Tensor.item\(\) copies a value to the host"),
    (lambda x: x.tolist(), r"Tensor.tolist\(\)"),
    (lambda x: x.numpy(), r"Tensor.numpy\(\)"),
    (lambda x: print(x), r"printing a Tensor copies"),
    (lambda x: f"{x.sum():.3f}", r"printing a Tensor copies"),
    (lambda x: bool(x.sum() > 0), r"Tensor.item\(\)"),
], ids=["item", "tolist", "numpy", "print", "format", "branch"])
def test_host_syncs_are_capture_errors(body, match):
    _fails(body, match)


@pytest.mark.parametrize("body,match", [
    (lambda x: x.nonzero(), r"nonzero\(\)/argwhere\(\) has a data-dependent output shape"),
    (lambda x: x[x > 0], r"boolean-mask indexing"),
    (lambda x: x.masked_select(x > 0), r"boolean-mask indexing .*masked_select"),
    (lambda x: T.unique(x), r"unique\(\)"),
], ids=["nonzero", "bool-mask", "masked_select", "unique"])
def test_data_dependent_shapes_are_capture_errors(body, match):
    _fails(body, match)


@pytest.mark.parametrize("body,match", [
    (lambda x: x + T.randn(4, 4), r"randn\(\) draws random numbers"),
    (lambda x: T.rand_like(x), r"rand\(\) draws random numbers"),
    (lambda x: nn.functional.dropout(x, 0.5, training=True), r"bernoulli \(dropout\)"),
], ids=["randn", "rand_like", "dropout"])
def test_random_ops_are_capture_errors(body, match):
    _fails(body, match)


def test_capture_error_restores_state_and_graph_stays_empty():
    p = T.ones(3)
    g = Graph()
    with pytest.raises(CaptureError):
        with graph(g):
            p.add_(1)
            p.sum().item()
    np.testing.assert_array_equal(p.numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match="no capture"):
        g.replay()


def test_nested_capture_is_an_error():
    g1, g2 = Graph(), Graph()
    with pytest.raises(CaptureError, match="already in progress"):
        with graph(g1):
            with graph(g2):
                pass
    assert not T.graphs.is_current_stream_capturing() and not STATE.modes


def test_replay_during_capture_is_an_error():
    x = T.randn(3)
    g1, g2 = Graph(), Graph()
    with graph(g1):
        x * 2
    with pytest.raises(CaptureError, match="replay\\(\\) during a capture"):
        with graph(g2):
            g1.replay()
    assert not STATE.modes


def test_masked_fill_and_where_are_fine():
    x = T.randn(4, 4)
    g = Graph()
    with graph(g):
        y = x.masked_fill(x < 0, 0.0) + T.where(x > 1, x, T.zeros_like(x))
    x.copy_(T.randn(4, 4))
    g.replay()
    xv = x.numpy()
    np.testing.assert_allclose(y.numpy(), np.where(xv < 0, 0, xv) + np.where(xv > 1, xv, 0), rtol=1e-6)


# ---------------------------------------------------------------- replay-time checks
def test_replay_rejects_rebound_static_inputs():
    x = T.randn(4, 3)
    g = Graph()
    with graph(g):
        y = x * 2
    x.data = T.randn(5, 3)
    with pytest.raises(CaptureError, match=r"static input float32\[4, 3\] first read at .*test_graphs.py.*"
                                           r"captured as float32\[4, 3\] on cpu and is now float32\[5, 3\]"):
        g.replay()
    x.data = T.randn(4, 3)
    with pytest.raises(CaptureError, match="holds a different buffer"):
        g.replay()
    x.data = T.randn(4, 3).double()
    with pytest.raises(CaptureError, match="is now float64"):
        g.replay()


def test_replay_names_graphed_callable_inputs():
    model = nn.Linear(3, 2)
    x0 = T.randn(4, 3)
    make_graphed_callables(model, (x0,), num_warmup_iters=1)
    model.weight.data = T.randn(2, 3)
    with pytest.raises(CaptureError, match="parameter 'weight'"):
        model(x0)


def test_engine_host_read_becomes_a_replay_guard():
    x = T.randn(6, requires_grad=True)
    cuts = T.tensor([1, 3])
    g = Graph()
    with graph(g):   # tensor_split reads its tensor of indices on the host: recorded as a guard
        parts = T.tensor_split(x, cuts)
    assert [tuple(p.shape) for p in parts] == [(1,), (2,), (3,)] and g._program.guards
    g.replay()
    cuts.copy_(T.tensor([2, 3]))
    with pytest.raises(CaptureError, match=r"ops/movement.py.*read \[1, 3\] at capture.*now sees \[2, 3\]"):
        g.replay()


def test_captured_cross_entropy_checks_targets_on_the_device():
    """No host read (so a CUDA graph can form): an out-of-range target makes the replayed loss NaN,
    and that sample contributes no gradient; in eager mode it is PyTorch's IndexError."""
    model, sx, sy = nn.Linear(4, 3), T.randn(2, 4), T.tensor([0, 1])
    opt = T.optim.SGD(model.parameters(), lr=0.1)

    def step():
        loss = nn.functional.cross_entropy(model(sx), sy)
        loss.backward()
        opt.step()
        return loss
    step()
    g = Graph()
    with graph(g):
        out = step()
    assert not g._program.guards
    sy.copy_(T.tensor([0, 7]))
    g.replay()
    assert np.isnan(out.item()) and np.isfinite(model.weight.detach().numpy()).all()
    sy.copy_(T.tensor([0, 2]))
    with T.no_grad():
        want = nn.functional.cross_entropy(model(sx), sy).item()
    g.replay()
    assert out.item() == pytest.approx(want, rel=1e-6)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        nn.functional.cross_entropy(model(sx), T.tensor([0, 7]))


def test_cuda_names_without_gpu():
    if T.cuda.is_available():
        pytest.skip("a GPU is present: bench/gpu_check.py exercises the cuda path")
    with pytest.raises(RuntimeError, match="needs cupy and a CUDA device"):
        T.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="needs cupy and a CUDA device"):
        T.cuda.make_graphed_callables(nn.Linear(2, 2), (T.randn(1, 2),))
    assert T.cuda.graph is not T.graphs.graph and isinstance(T.cuda.graph_pool_handle(), T.graphs.MemPool)


def test_capturable_adam_replays_like_eager():
    """tapelab's own Adam(capturable=True) keeps its count in a tensor, so a captured step replays."""
    def opt(ps):
        return T.optim.Adam(ps, lr=0.01, capturable=True)
    eager, eager_losses, _ = _train(opt, graphed=False)
    replayed, replay_losses, _ = _train(opt, graphed=True)
    for e, r in zip(eager, replayed):
        np.testing.assert_allclose(r, e, atol=1e-5)
    np.testing.assert_allclose(replay_losses, eager_losses, atol=1e-5)


# ---------------------------------------------------------------- the public view of a capture
def _captured_sgd_step(device="cpu"):
    model = _mlp().to(device)
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)
    xs, ys = _data(1)
    static_x, static_y = T.from_numpy(xs[0]).to(device), T.from_numpy(ys[0]).to(device)

    def step():
        loss = nn.functional.cross_entropy(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss
    opt.zero_grad(set_to_none=True)
    step()                                   # warm-up: momentum buffers exist
    g = Graph(device)
    opt.zero_grad(set_to_none=True)
    with graph(g):
        loss = step()
    return g, model, opt, static_x, static_y, loss


def test_buffers_lists_every_buffer_with_its_kind():
    g, model, opt, sx, sy, loss = _captured_sgd_step()
    bufs = g.buffers()
    by_name = {b["name"]: b for b in bufs}
    assert len(by_name) == len(bufs) and {b["kind"] for b in bufs} <= set(T.graphs.BUFFER_KINDS)
    for b in bufs:
        assert set(b) == {"name", "shape", "dtype", "device", "kind", "bytes", "static_name", "aliases"}
        assert b["device"] == "cpu" and b["name"] in b["aliases"]
        assert re.search(rf"\b{b['name']}\b", g.source)
    x = by_name[g.buffer_name(sx)]
    assert x["kind"] == "static_input" and x["shape"] == [B, DIN] and x["dtype"] == "float32"
    assert x["bytes"] == B * DIN * 4 and x["static_name"].startswith("a static input float32")
    assert by_name[g.buffer_name(sy)]["dtype"] == "int64"
    for p in model.parameters():
        assert by_name[g.buffer_name(p)]["kind"] == "state"                        # SGD writes it in place
        assert by_name[g.buffer_name(opt.state[p]["momentum_buffer"])]["kind"] == "state"
        assert by_name[g.buffer_name(p.grad)]["kind"] == "static_output"           # made during capture
    out = by_name[g.buffer_name(loss)]
    assert out["kind"] == "static_output" and out["shape"] == [] and out["bytes"] == 4
    assert any(b["kind"] == "pool" for b in bufs) and any(b["kind"] == "constant" for b in bufs)
    # a view of a buffer is an alias of it, with its own shape
    w = model[0].weight
    assert g.buffer_name(w.t()) == g.buffer_name(w)
    assert g.buffer_name(T.zeros(3)) is None and Graph().buffers() == [] and Graph().buffer_name(w) is None
    # a pool buffer no tensor holds any more
    name = g.buffer_name(loss)
    del loss
    gc.collect()
    assert {b["name"]: b for b in g.buffers()}[name]["kind"] == "pool"
    g.reset()
    assert g.buffers() == [] and not g.captured


def test_replay_timing_counters():
    g, *_ = _captured_sgd_step()
    assert (g.replays, g.last_replay_us, g.total_replay_us) == (0, 0.0, 0.0)
    seen = []
    for _ in range(3):
        g.replay()
        seen.append(g.last_replay_us)
    assert g.replays == 3 and all(t > 0 for t in seen)
    assert g.total_replay_us == pytest.approx(sum(seen))
    s = g.summary()
    assert s["replays"] == 3 and s["last_replay_us"] == seen[-1] and s["total_replay_us"] == g.total_replay_us
    assert not s["stream_captured"] and not g.stream_captured
    g.reset()
    assert (g.replays, g.last_replay_us, g.total_replay_us) == (0, 0.0, 0.0)


def test_capture_done_carries_the_graph_and_buffer_shapes():
    seen = []
    x = T.randn(4, 3)
    with T.events.subscribe("capture_done", seen.append):
        g = Graph()
        with graph(g):
            y = (x * 2).sum(0)
    (p,) = seen
    assert p["graph"] is g
    for key in ("device", "nodes", "static_inputs", "pool_nbytes", "replays"):    # the summary fields stay
        assert key in p
    assert [n["op"] for n in p["nodes"]] == ["mul", "sum"] and p["pool_nbytes"] > 0
    shapes = {b["name"]: (b["shape"], b["dtype"], b["kind"]) for b in p["buffers"]}
    assert shapes[g.buffer_name(x)] == ([4, 3], "float32", "static_input")
    assert shapes[g.buffer_name(y)] == ([3], "float32", "static_output")
    import json
    json.dumps({k: v for k, v in p.items() if k != "graph"})                        # the rest is plain data


# ---------------------------------------------------------------- the cuda path on the simulated device
@pytest.fixture
def sim():
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0) as dev:
        yield dev


def test_simulated_cuda_training_step_replay_equals_cpu(sim):
    """Graph(device='cuda') on the simulated device: recording, buffers and replay as on a GPU
    (the simulated stream capture records the kernels, its GEMMs through cuBLASLt, into one
    graph); 20 replayed steps equal 20 eager steps on cpu."""
    steps = 20
    xs, ys = _data(steps + 1, seed=3)
    g, model, opt, sx, sy, loss = _captured_sgd_step(sim)
    assert g.device == sim and g.stream_captured and g.captured
    assert (g.cuda_graphs, g.eager_steps) == (1, 0) and g.summary()["gemm_route"] == "cuBLASLt (simulated)"
    assert all(b["device"] == "cuda:0" for b in g.buffers())
    assert {b["kind"] for b in g.buffers()} >= {"static_input", "state", "static_output"}
    c_model = _mlp()
    c_opt = SGD(c_model.parameters(), lr=0.05, momentum=0.9)
    c_x, c_y = T.from_numpy(_data(1)[0][0]), T.from_numpy(_data(1)[1][0])
    c_opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(c_model(c_x), c_y).backward()
    c_opt.step()
    for i in range(steps):
        x, y = T.from_numpy(xs[i]), T.from_numpy(ys[i])
        sx.copy_(x.to(sim))
        sy.copy_(y.to(sim))
        g.replay()
        c_opt.zero_grad(set_to_none=True)
        c_loss = nn.functional.cross_entropy(c_model(x), y)
        c_loss.backward()
        c_opt.step()
        assert loss.device == sim
        np.testing.assert_allclose(loss.detach().cpu().numpy(), c_loss.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert g.replays == steps
    for p, c in zip(model.parameters(), c_model.parameters()):
        assert p.device == sim
        np.testing.assert_allclose(p.detach().cpu().numpy(), c.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_simulated_cuda_make_graphed_callables(sim):
    T.manual_seed(0)
    lin = nn.Linear(4, 3).to(sim)
    ref = nn.Linear(4, 3)
    ref.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
    x = T.randn(2, 4)
    glin = make_graphed_callables(lin, (x.to(sim).requires_grad_(),), num_warmup_iters=1)
    glin(x.to(sim).requires_grad_()).sum().backward()
    ref(x).sum().backward()
    assert lin.fwd_graph.device == sim
    np.testing.assert_allclose(lin.weight.grad.cpu().numpy(), ref.weight.grad.numpy(), rtol=1e-6)


class _FakeCupy:
    """Stands in for cupy's stream-capture API (what tapelab.graphs._cuda calls), logging the calls."""

    def __init__(self, fail_in_run=False):
        log = self.log = []
        fake = self
        self.current = object()
        self.allocator = None
        self.capturing = False
        self.graphs, self.replayed = [], []

        class Stream:
            def __init__(self, non_blocking=False):
                log.append(("Stream", non_blocking))

            def wait_event(self, ev):
                log.append(("wait_event",))

            def __enter__(self):
                log.append(("enter stream",))
                return self

            def __exit__(self, *exc):
                log.append(("exit stream",))

            def begin_capture(self):
                log.append(("begin_capture",))
                fake.capturing = True
                fake.allocator(256)                    # a temporary allocated during capture

            def end_capture(self):
                log.append(("end_capture",))
                fake.capturing = False
                return CGraph(len(fake.graphs))

        class CGraph:
            def __init__(self, n):
                self.n = n
                fake.graphs.append(self)

            def launch(self, stream):
                log.append(("launch", stream is fake.current))
                fake.replayed.append(f"graph{self.n}")

        class Cuda:
            Device = __import__("tapelab._simarray", fromlist=["_SimDevice"])._SimDevice
            runtime = type("runtime", (), {"is_hip": False})

            @staticmethod
            def get_current_stream():
                return type("S", (), {"record": lambda self: "event"})() if not log or log[-1][0] != "replay" \
                    else fake.current

            @staticmethod
            def using_allocator(alloc):
                import contextlib

                @contextlib.contextmanager
                def cm():
                    fake.allocator = alloc
                    yield
                    fake.allocator = None
                return cm()
        Cuda.Stream = Stream
        self.cuda = Cuda

    def get_default_memory_pool(self):
        log = self.log

        class Pool:
            def malloc(self, size):
                log.append(("malloc", size))
                return type("Mem", (), {"mem": type("M", (), {"size": size})()})()
        return Pool()


def test_stream_capture_path_with_a_stand_in_cupy(sim, monkeypatch):
    """The cupy calls of the cuda path, in order, on a stand-in: capture on a non-default stream
    after the recording, temporaries held until reset, replay launches the graph."""
    from tapelab.graphs import _cuda
    fake = _FakeCupy()
    monkeypatch.setattr(_cuda, "_cupy", lambda dev: fake)
    launched = []
    monkeypatch.setattr(_cuda.StreamGraph, "launch", lambda self: launched.append(self.segments) or
                        self.segments[0].launch(fake.current))
    x = T.randn(3, 4).to(sim)
    g = Graph(sim)
    with graph(g):
        y = (x * 2).relu()
    names = [c[0] for c in fake.log]
    assert names[:2] == ["Stream", "wait_event"] and fake.log[0] == ("Stream", True)   # non-default stream
    assert names.index("begin_capture") < names.index("malloc") < names.index("end_capture")
    assert g.stream_captured and g.summary()["stream_captured"] and g._exec.nbytes == 256
    g.replay()
    assert launched and fake.log[-1] == ("launch", True) and g.replays == 1
    g.reset()
    assert not g.stream_captured and g.buffers() == []
    # stream_capture=False, or a program with replay guards: the program replays itself
    g2 = Graph(sim, stream_capture=False)
    with graph(g2):
        y2 = x + 1
    assert not g2.stream_captured
    g2.replay()
    np.testing.assert_allclose(y2.cpu().numpy(), x.cpu().numpy() + 1)
    del y


def test_piecewise_capture_runs_refused_steps_between_graphs(sim):
    """cupy refuses cuBLAS inside a stream capture: each refusing step splits the capture, runs
    eagerly between the graphs around it at replay, and its partial capture attempt is dropped."""
    from tapelab.graphs._cuda import StreamGraph
    fake = _FakeCupy()
    ran = []

    def step(name, cublas=False):
        def run():
            if cublas and fake.capturing:
                raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")
            ran.append(name)
        run.__name__ = name
        return run
    steps = [step("a"), step("b"), step("mm1", True), step("c"), step("mm2", True), step("mm3", True), step("d")]
    sg = StreamGraph(steps, sim, fake)
    kinds = ["graph" if hasattr(s, "launch") else s.__name__ for s in sg.segments]
    assert kinds == ["graph", "mm1", "graph", "mm2", "mm3", "graph"] and sg.eager_steps == 3
    assert [g.n for g in sg.segments if hasattr(g, "launch")] == [1, 3, 5]     # graphs 0, 2, 4 were attempts
    assert ran == ["a", "b", "a", "b", "c", "c", "d"]                            # recorded, not replayed yet
    assert len(sg.held) == 3                                                      # only the kept graphs' memory
    ran.clear()
    sg.launch()
    assert fake.replayed == ["graph1", "graph3", "graph5"] and ran == ["mm1", "mm2", "mm3"]
    with pytest.raises(CaptureError, match="stream capture of the recorded program failed"):
        StreamGraph([step("a"), lambda: 1 / 0], sim, fake)


def test_stream_capture_failure_is_a_clear_error(sim, monkeypatch):
    from tapelab.graphs import _cuda
    fake = _FakeCupy()
    monkeypatch.setattr(_cuda, "_cupy", lambda dev: fake)

    class Boom(Exception):
        pass
    monkeypatch.setattr(_cuda.StreamGraph, "__init__", _wrap_init(_cuda.StreamGraph.__init__, Boom))
    x = T.randn(3).to(sim)
    g = Graph(sim)
    with pytest.raises(CaptureError, match=r"CUDA stream capture of the recorded program failed on cuda:0: "
                                           r"Boom.*stream_capture=False"):
        with graph(g):
            x * 2
    assert ("end_capture",) in fake.log                  # the capture was closed before raising
    assert not g.captured and not T.graphs.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="no capture"):
        g.replay()


def _wrap_init(init, exc):
    def wrapped(self, steps, device, cp, **kw):
        def failing():
            raise exc("the current stream is capturing")
        init(self, [failing], device, cp, **kw)
    return wrapped


@pytest.mark.parametrize("shape,bias", [((256, 128), True), ((4, 64, 128), False)])
def test_captured_linear_writes_into_its_recorded_buffer(shape, bias):
    """A replayed ``linear`` runs its GEMM straight into the output buffer recorded at capture
    (``Op.fwd_out``): no fresh (rows, out) array to copy over, and torch's values. One intra-op
    thread: with two, the pool's blocks (run side by side when it measured that faster, depending on
    what ran before) each make their own GEMM temporaries, which is not what is checked here."""
    import tracemalloc

    import torch
    T.set_num_threads(1)
    rng = np.random.default_rng(1)
    layer = T.nn.Linear(shape[-1], 192, bias=bias)
    x = T.tensor(rng.standard_normal(shape).astype(np.float32))
    with T.no_grad():
        layer(x)
        g = T.graphs.Graph()
        with T.graphs.graph(g):
            y = layer(x)
        ptr = y.data_ptr()
        g.replay()   # a first replay may compile the GEMM's loops (numba's allocations): not measured
        new = rng.standard_normal(shape).astype(np.float32)
        x.copy_(T.tensor(new))
        tracemalloc.start()
        g.replay()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    # no result-sized array: what is allocated is the own GEMM's transposed weight and edge panels
    # (kernels/sgemm.py), under the result's size
    assert peak < y.numpy().nbytes and y.data_ptr() == ptr
    ref = torch.nn.functional.linear(torch.tensor(new), torch.tensor(layer.weight.detach().numpy()),
                                     torch.tensor(layer.bias.detach().numpy()) if bias else None)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)

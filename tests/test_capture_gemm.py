"""GEMMs inside a CUDA stream capture: a captured training step is one graph (issue 18).

On the simulated cuda device, whose stream capture refuses cuBLAS calls and host reads as cupy's
does, records every kernel and replays them (``tapelab/base/simcapture.py``). The cuBLASLt
problems the capture runs (``tapelab/kernels/cublaslt.py``) are computed there from exactly the
memory cuBLASLt would read, so their layouts are checked against torch.matmul here.
"""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab import nn
from tapelab.graphs import CaptureError, Graph, graph, make_graphed_callables
from tapelab.optim import SGD


@pytest.fixture
def sim():
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0) as dev:
        yield dev


def _route(sim):
    from tapelab.kernels.cublaslt import gemm_route
    route, why = gemm_route(sim.xp, sim)
    assert route is not None and why == "" and route.name == "cuBLASLt (simulated)"
    return route


def _operand(rng, shape, layout, dtype):
    """An array of ``shape`` stored as ``layout``: "c" contiguous, "t" a transposed view of a
    contiguous matrix, "s" a strided slice, "b" a batch broadcast by a zero stride."""
    if layout == "t":
        base = rng.standard_normal(shape[:-2] + shape[-2:][::-1]).astype(dtype)
        return np.swapaxes(base, -1, -2)
    if layout == "s":
        return rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)[..., ::2]
    if layout == "b":
        return np.broadcast_to(rng.standard_normal(shape[-2:]).astype(dtype), shape)
    return rng.standard_normal(shape).astype(dtype)


CASES = [((5, 3), (3, 4), "c", "c"), ((5, 3), (3, 4), "t", "c"), ((5, 3), (3, 4), "c", "t"),
         ((5, 3), (3, 4), "t", "t"), ((1, 3), (3, 1), "c", "c"), ((6, 1), (1, 2), "t", "t"),
         ((2, 5, 3), (2, 3, 4), "c", "c"), ((2, 5, 3), (3, 4), "c", "t"), ((5, 3), (4, 3, 2), "c", "t"),
         ((2, 2, 5, 3), (2, 3, 4), "t", "c"), ((4, 5, 3), (4, 3, 2), "b", "c"), ((4, 5, 3), (4, 3, 2), "s", "s"),
         ((3, 1, 5, 3), (1, 2, 3, 4), "c", "c"), ((7,), (7, 3), "c", "c"), ((2, 5, 7), (7,), "c", "c"),
         ((7,), (7,), "c", "c"), ((2, 0, 3), (3, 4), "c", "c"), ((5, 0), (0, 4), "c", "c")]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("sa,sb,la,lb", CASES)
def test_cublaslt_problem_equals_torch_matmul(sim, sa, sb, la, lb, dtype):
    """Every layout the capture meets (transposed views, strided slices, broadcast and collapsed
    batches, 1-d operands, empty products) as one cuBLASLt call, against torch.matmul."""
    rng = np.random.default_rng(0)
    if dtype == "complex64":
        a = (_operand(rng, sa, la, "float32") + 1j * _operand(rng, sa, la, "float32")).astype(dtype)
        b = (_operand(rng, sb, lb, "float32") + 1j * _operand(rng, sb, lb, "float32")).astype(dtype)
        if la != "c" or lb != "c":
            return                                   # the layouts of real and imaginary parts are the float cases'
    else:
        a, b = _operand(rng, sa, la, dtype), _operand(rng, sb, lb, dtype)
    route = _route(sim)
    from tapelab.base.simarray import SimArray
    got = route.matmul(SimArray(a), SimArray(b))._a
    want = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype != "float64" else 1e-12, atol=1e-5)
    expect_calls = 0 if 0 in got.shape or 0 in sa else 1
    assert route.calls == expect_calls


def test_cublaslt_layout_reads_operands_in_place(sim):
    """A transposed view (x @ W.T, a linear layer) and a batch with one stride need no copy; a
    batch no single stride describes is copied first; ``out=`` receives the product directly."""
    from tapelab.kernels.cublaslt import plan
    w = np.zeros((4, 3), np.float32)
    p, ca, cb = plan((5, 3), (12, 4), w.T.shape, w.T.strides, np.float32)
    assert (ca, cb) == (False, False) and p.a == (3, 4, 3, 0, True) and p.b == (3, 5, 3, 0, False)
    x = np.zeros((2, 3, 5, 6), np.float32)[:, :, :, :3]            # rows of stride 6: in place
    p, ca, cb = plan(x.shape, x.strides, (3, 4), (16, 4), np.float32)
    assert not ca and p.b == (3, 5, 6, 30, False) and p.batch == 6
    y = np.zeros((3, 2, 5, 3), np.float32).transpose(1, 0, 2, 3)     # batch dims out of order: copied
    p, ca, cb = plan(y.shape, y.strides, (3, 4), (16, 4), np.float32)
    assert ca and p.b == (3, 5, 3, 15, False)
    from tapelab.base.simarray import SimArray
    route = _route(sim)
    a, b = np.ones((5, 3), np.float32), np.full((3, 4), 2, np.float32)
    out = SimArray(np.zeros((5, 4), np.float32))
    assert route.matmul(SimArray(a), SimArray(b), out=out) is out
    np.testing.assert_allclose(out._a, a @ b)


def test_simulated_capture_refuses_what_cupy_refuses(sim):
    """Inside a stream capture the simulated device refuses cuBLAS (xp.matmul, the @ operator, dot,
    einsum, linalg) and host reads, as cupy does; the cuBLASLt route and integer products pass."""
    xp = sim.xp
    a = xp.asarray(np.ones((3, 3), np.float32))
    s = xp.cuda.Stream(non_blocking=True)
    route = _route(sim)
    with s:
        s.begin_capture()
        try:
            for call in (lambda: xp.matmul(a, a), lambda: a @ a, lambda: xp.dot(a, a), lambda: a.dot(a),
                         lambda: xp.einsum("ij,jk->ik", a, a), lambda: xp.linalg.inv(a)):
                with pytest.raises(NotImplementedError, match="cuBLAS API during stream capture"):
                    call()
            for call in (lambda: float(a.sum()), lambda: a.get(), lambda: a.sum().item(), lambda: bool(a.sum())):
                with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
                    call()
            c = route.matmul(a, a)
            i = xp.matmul(xp.asarray(np.ones((2, 2), np.int64)), xp.asarray(np.ones((2, 2), np.int64)))
            a *= 2                                         # a write: undone at the end of the capture
        finally:
            g = s.end_capture()
    np.testing.assert_array_equal(a.get(), np.ones((3, 3)))     # capture records, it changes no memory
    c._a[...] = 0
    i._a[...] = 0
    g.launch()
    np.testing.assert_array_equal(a.get(), np.full((3, 3), 2))
    np.testing.assert_array_equal(c.get(), np.full((3, 3), 3))  # ran before the write, as recorded
    np.testing.assert_array_equal(i.get(), np.full((2, 2), 2))


def _mlp_pair(seed=0):
    T.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 5))
    ref = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 5))
    return model, ref


def _transformer_pair(seed=0):
    T.manual_seed(seed)
    kw = dict(d_model=16, nhead=4, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoderLayer(**kw), nn.Linear(16, 5))
    ref = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(**kw), torch.nn.Linear(16, 5))
    return model, ref


def _captured_step(model, ref, sim, x_shape, y_shape, n_classes=5):
    ref.load_state_dict({k: torch.from_numpy(v.cpu().numpy().copy()) for k, v in model.state_dict().items()})
    model.to(sim)
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(1)
    sx = T.from_numpy(rng.standard_normal(x_shape).astype(np.float32)).to(sim)
    sy = T.from_numpy(rng.integers(0, n_classes, y_shape)).to(sim)

    def step():
        out = model(sx)
        loss = nn.functional.cross_entropy(out.reshape(-1, n_classes), sy.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    opt.zero_grad(set_to_none=True)
    step()                                      # warm-up: momentum buffers exist
    opt.zero_grad(set_to_none=True)
    g = Graph(sim)
    with graph(g):
        loss = step()
    # the reference takes the same warm-up step
    xr, yr = torch.from_numpy(sx.cpu().numpy()), torch.from_numpy(sy.cpu().numpy())
    ropt.zero_grad()
    torch.nn.functional.cross_entropy(ref(xr).reshape(-1, n_classes), yr.reshape(-1)).backward()
    ropt.step()
    return g, model, ref, opt, ropt, sx, sy, loss, rng


def _cnn_pair(seed=0):
    T.manual_seed(seed)
    layers = lambda m: m.Sequential(m.Conv2d(2, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                                    m.Flatten(), m.Linear(4 * 3 * 3, 5))
    return layers(nn), layers(torch.nn)


@pytest.mark.parametrize("which", ["mlp", "transformer", "cnn"])
def test_captured_training_step_is_one_graph_equal_to_torch(sim, which):
    """A GELU MLP, a Transformer encoder layer and a conv-BN-ReLU-maxpool training step (forward,
    backward, SGD momentum),
    captured on the simulated cuda device: one CUDA graph, no step outside it, every GEMM through
    cuBLASLt; each replay's loss and the parameters equal PyTorch's eager steps."""
    if which == "mlp":
        model, ref = _mlp_pair()
        x_shape, y_shape = (8, 12), (8,)
    elif which == "cnn":     # conv, train-mode batch norm, max-pool (its backward reads no host value)
        model, ref = _cnn_pair()
        x_shape, y_shape = (3, 2, 6, 6), (3,)
    else:
        model, ref = _transformer_pair()
        x_shape, y_shape = (2, 6, 16), (2, 6)
    g, model, ref, opt, ropt, sx, sy, loss, rng = _captured_step(model, ref, sim, x_shape, y_shape)
    s = g.summary()
    assert g.stream_captured and (g.cuda_graphs, g.eager_steps) == (1, 0)
    assert (s["cuda_graphs"], s["gemm_route"], s["gemm_fallback"]) == (1, "cuBLASLt (simulated)", "")
    # every GEMM, forward and backward (the attention backward reads the forward's kept weights: no q k^T again)
    assert g._exec.route.calls == {"mlp": 8, "transformer": 20, "cnn": 5}[which]
    for _ in range(3):
        x = rng.standard_normal(x_shape).astype(np.float32)
        y = rng.integers(0, 5, y_shape)
        sx.copy_(T.from_numpy(x).to(sim))
        sy.copy_(T.from_numpy(y).to(sim))
        g.replay()
        ropt.zero_grad()
        rloss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)).reshape(-1, 5), torch.from_numpy(y).reshape(-1))
        rloss.backward()
        ropt.step()
        np.testing.assert_allclose(loss.detach().cpu().numpy(), rloss.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (name, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), rp.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_without_a_gemm_route_the_capture_splits_at_every_gemm(sim, monkeypatch):
    """What the route prevents: with none (cupy without nvmath-python), the simulated capture
    refuses each GEMM and the step becomes graphs with the GEMMs run eagerly between them, still
    with the right values. A test of the one-graph form above fails if any GEMM escapes the route."""
    from tapelab.graphs import _cuda
    monkeypatch.setattr(_cuda, "gemm_route", lambda cp, dev: (None, "no cuBLASLt (test)"))
    model, ref = _mlp_pair()
    g, model, ref, opt, ropt, sx, sy, loss, rng = _captured_step(model, ref, sim, (8, 12), (8,))
    assert g.eager_steps >= 6 and g.cuda_graphs > 1
    assert (g.summary()["gemm_route"], g.summary()["gemm_fallback"]) == (None, "no cuBLASLt (test)")
    x, y = rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 5, (8,))
    sx.copy_(T.from_numpy(x).to(sim))
    sy.copy_(T.from_numpy(y).to(sim))
    g.replay()
    ropt.zero_grad()
    rloss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y))
    np.testing.assert_allclose(loss.detach().cpu().numpy(), rloss.detach().numpy(), rtol=1e-5)


@pytest.mark.parametrize("eq, shapes, split", [("ij,jk->ik", [(3, 4), (4, 5)], False),
                                                ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], False)])
def test_einsum_of_three_operands_still_splits_the_capture(sim, eq, shapes, split):
    """An einsum of two operands is one batched GEMM (ATen's contraction), routed as matmul; one of
    three is two of them, one pair at a time as ATen contracts (ops/linalg.py: _einsum_pairs), each
    routed: the capture stays one graph."""
    ops = [T.randn(*s).to(sim) for s in shapes]
    g = Graph(sim)
    with graph(g):
        c = T.einsum(eq, (ops[0] * 2).relu(), *ops[1:]) + 1
    assert (g.cuda_graphs, g.eager_steps) == ((2, 1) if split else (1, 0))
    ops[0].copy_(T.randn(*shapes[0]).to(sim))
    g.replay()
    host = [torch.from_numpy(o.cpu().numpy()) for o in ops]
    want = torch.einsum(eq, (host[0] * 2).relu(), *host[1:]) + 1
    np.testing.assert_allclose(c.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_host_read_inside_the_stream_capture_is_a_capture_error(sim, monkeypatch):
    """A forward that reads a device value on the host would fail cupy's capture: the simulated
    one fails it too, with the CaptureError naming the way out."""
    from tapelab.graphs import _cuda
    x = T.randn(4).to(sim)
    g = Graph(sim)
    real = _cuda.StreamGraph.__init__

    def with_a_host_read(self, steps, device, cp, **kw):
        real(self, steps + [lambda: float(x._data.sum())], device, cp, **kw)
    monkeypatch.setattr(_cuda.StreamGraph, "__init__", with_a_host_read)
    with pytest.raises(CaptureError, match="not permitted when stream is capturing.*stream_capture=False"):
        with graph(g):
            x * 2


def test_graphed_callables_forward_and_backward_are_one_graph_each(sim):
    T.manual_seed(0)
    lin = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).to(sim)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ref.load_state_dict({k: torch.from_numpy(v.cpu().numpy().copy()) for k, v in lin.state_dict().items()})
    x = T.randn(5, 4)
    glin = make_graphed_callables(lin, (x.to(sim).requires_grad_(),), num_warmup_iters=1)
    for gr in (lin.fwd_graph, lin.bwd_graph):
        assert (gr.cuda_graphs, gr.eager_steps) == (1, 0)
    xs = x.to(sim).requires_grad_()
    glin(xs).pow(2).sum().backward()
    xr = torch.from_numpy(x.numpy()).requires_grad_()
    ref(xr).pow(2).sum().backward()
    np.testing.assert_allclose(xs.grad.cpu().numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin[0].weight.grad.cpu().numpy(), ref[0].weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def _bench_module(name):
    """``bench/<name>.py`` imported as its script imports it (bench/ on the path)."""
    import importlib
    import os
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module(name)


def test_gpu_check_capture_section_runs_on_the_simulated_device():
    """bench/gpu_check.py --capture, the short run a GPU session makes, passes on the simulated device."""
    gpu_check = _bench_module("gpu_check")
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0) as dev:
        rows = gpu_check.check_captured_steps(dev, "MLP", replays=2, time_it=False)
    ((name, ok, detail, _, _),) = rows
    assert ok, detail
    assert "1 CUDA graph launch(es), 0 steps between graphs, GEMMs through cuBLASLt (simulated) (8" in detail


def test_gpu_check_compile_section_runs_on_the_simulated_device():
    """bench/gpu_check.py --compile: a compiled GELU MLP trains as eager does on the simulated device, runs
    fused kernels, and the compiled step captures into ONE CUDA graph (a fused kernel is one simulated
    device kernel there, which the capture records, not a host round trip it refuses)."""
    gpu_compile = _bench_module("gpu_compile")
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0) as dev:
        name, ok, detail, times = gpu_compile.compiled_row("GELU MLP 784-1024-1024-10, batch 64", dev, None,
                                                           steps=2, time_it=False)
    assert ok, detail
    assert "captured: 1 CUDA graph(s), 0 eager steps" in detail and times == {}
    assert int(detail.split(" fused kernels")[0].rsplit(" ", 1)[1]) >= 2, detail


class _FakeCublasLt:
    """nvmath.bindings.cublasLt's functions over host memory: descriptors are dicts whose
    attributes are read from the buffers the caller passes (as the C API reads them), and
    ``matmul`` computes D = alpha op(A) op(B) + beta C from raw pointers, column-major, batched.
    It checks tapelab's calls of the real bindings (argument order, attribute buffers, layouts)."""

    def __init__(self, real):
        self.real, self.objs, self.calls = real, {}, []
        for name in ("MatmulDescAttribute", "MatrixLayoutAttribute", "MatmulPreferenceAttribute",
                     "MatmulHeuristicResult", "get_matmul_desc_attribute_dtype", "get_matrix_layout_attribute_dtype",
                     "get_matmul_preference_attribute_dtype"):
            setattr(self, name, getattr(real, name))

    def _new(self, **kw):
        self.objs[len(self.objs) + 1] = kw
        return len(self.objs)

    @staticmethod
    def _read(ptr, size, dtype):
        import ctypes
        return np.frombuffer((ctypes.c_char * size).from_address(ptr), dtype=dtype)[0]

    def create(self):
        return self._new(kind="handle")

    def matmul_desc_create(self, compute, scale):
        return self._new(kind="desc", compute=compute, scale=scale)

    def matmul_desc_set_attribute(self, desc, attr, ptr, size):
        self.objs[desc][self.MatmulDescAttribute(attr).name] = self._read(ptr, size, self.get_matmul_desc_attribute_dtype(attr))

    def matrix_layout_create(self, dtype, rows, cols, ld):
        return self._new(kind="layout", type=dtype, rows=rows, cols=cols, ld=ld, BATCH_COUNT=1, STRIDED_BATCH_OFFSET=0)

    def matrix_layout_set_attribute(self, layout, attr, ptr, size):
        self.objs[layout][self.MatrixLayoutAttribute(attr).name] = self._read(
            ptr, size, self.get_matrix_layout_attribute_dtype(attr))

    def matmul_preference_create(self):
        return self._new(kind="pref")

    def matmul_preference_set_attribute(self, pref, attr, ptr, size):
        self.objs[pref][self.MatmulPreferenceAttribute(attr).name] = self._read(
            ptr, size, self.get_matmul_preference_attribute_dtype(attr))

    def matmul_preference_destroy(self, pref):
        assert self.objs[pref]["MAX_WORKSPACE_BYTES"] > 0

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, pref, requested, results, count):
        import ctypes
        assert requested == 1 and results != 0
        ctypes.c_int32.from_address(count).value = 1

    def matmul(self, handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws, ws_size, stream):
        import ctypes
        self.calls.append((handle, stream, ws_size))
        D = self.objs[desc]
        np_type = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128}
        scale = np_type[D["scale"]]
        al, be = self._read(alpha, np.dtype(scale).itemsize, scale), self._read(beta, np.dtype(scale).itemsize, scale)

        def mat(ptr, layout, trans=0):
            L = self.objs[layout]
            dt = np.dtype(np_type[L["type"]])
            batch, rows, cols, ld, st = int(L["BATCH_COUNT"]), L["rows"], L["cols"], L["ld"], int(L["STRIDED_BATCH_OFFSET"])
            extent = (batch - 1) * st + (cols - 1) * ld + rows
            flat = np.frombuffer((ctypes.c_char * (extent * dt.itemsize)).from_address(ptr), dtype=dt)
            m = np.lib.stride_tricks.as_strided(flat, (batch, cols, rows),
                                                (st * dt.itemsize, ld * dt.itemsize, dt.itemsize)).transpose(0, 2, 1)
            return m.transpose(0, 2, 1) if trans else m
        A, B = mat(a, adesc, D.get("TRANSA", 0)), mat(b, bdesc, D.get("TRANSB", 0))
        out = mat(d, ddesc)
        c_term = be * mat(c, cdesc) if be != 0 else 0          # beta 0: C is not read (cuBLAS's rule)
        wide = np.complex128 if out.dtype.kind == "c" else np.float64
        out[...] = al * (A.astype(wide) @ B.astype(wide)) + c_term


def test_nvmath_cublaslt_calls_compute_the_product(sim, monkeypatch):
    """The GPU route's own code (``_Lt``: descriptors, layouts, attribute buffers, the matmul call)
    against a stand-in of nvmath's cuBLASLt bindings that computes from the raw pointers it gets."""
    nvmath = pytest.importorskip("nvmath", reason="nvmath-python is not installed (the [cuda] extra)")
    from nvmath.bindings import cublasLt
    from tapelab.base.simarray import SimArray
    from tapelab.kernels import cublaslt as _gemm
    fake = _FakeCublasLt(cublasLt)
    monkeypatch.setattr(nvmath.bindings, "cublasLt", fake)
    monkeypatch.setattr(_gemm._Lt, "_HANDLES", {})
    route = _gemm.GemmRoute(sim.xp, _gemm._Lt(sim.xp, sim), "cuBLASLt (nvmath-python, stand-in)")
    rng = np.random.default_rng(0)
    cases = [c for c in CASES if 0 not in c[0] + c[1]]
    for (sa, sb, la, lb), dtype in ((c, dt) for c in cases for dt in ("float32", "float64")):
        a, b = _operand(rng, sa, la, dtype), _operand(rng, sb, lb, dtype)
        got = route.matmul(SimArray(a), SimArray(b))._a
        want = torch.matmul(torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b)))
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{sa} {la} @ {sb} {lb}")
    assert [c[2] for c in fake.calls] == [_gemm.WORKSPACE_BYTES] * 2 * len(cases)

"""Devices, ``tapelab.cuda`` without a GPU, a simulated second device, and DLPack exchange.

THE SIMULATED DEVICE. CI has no GPU, so device handling would go untested. ``tapelab._backend.
simulated_cuda()`` points ``device('cuda:0')`` at a namespace that computes with numpy but whose
arrays (``SimArray``) behave like cupy's where it matters for correctness: they refuse implicit
conversion to numpy (``np.asarray(a)`` raises TypeError, as cupy does) and refuse to mix with numpy
arrays in any ufunc or array function, and transfers copy. So on CPU we exercise, for real:
the dispatcher's device check (PyTorch's message naming both devices), ``.to()`` / ``.cpu()`` /
``.cuda()`` / ``Module.to`` moves and their gradients, factories with ``device=``, forwards that
would build a numpy array behind ``xp``'s back, and DLPack exports that report a CUDA device.
It cannot find numerical or API differences of cupy itself: bench/gpu_check.py does that on a GPU
(and ``bench/gpu_check.py --simulate`` runs the whole op database on the simulated device).

Cases that need a real GPU ``pytest.skip`` with the reason from ``tapelab.cuda.unavailable_reason()``.
"""
from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import tapelab
from tapelab._backend import SimArray, simulated_cuda

dev_mod = sys.modules["tapelab.base.device"]  # the module (tapelab.device is the class)

NO_GPU = not tapelab.cuda.is_available()
needs_gpu = pytest.mark.skipif(NO_GPU, reason=f"needs a CUDA GPU: {tapelab.cuda.unavailable_reason() or ''}")
gpu_only_absent = pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")

@pytest.fixture
def sim():
    with simulated_cuda(0) as d:
        yield d


# ---------------------------------------------------------------- device objects
def test_device_parsing_and_interning():
    assert tapelab.device("cpu") is tapelab.device("cpu")
    assert tapelab.device("cuda") is tapelab.device("cuda:0") is tapelab.device("cuda", 0)
    d = tapelab.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert repr(d) == "device(type='cuda', index=1)"
    assert repr(tapelab.device("cpu")) == "device(type='cpu')"
    assert tapelab.device("cpu") == "cpu" and d == "cuda:1" and d != "cuda:0"
    assert tapelab.device(d) is d
    assert pickle.loads(pickle.dumps(d)) is d
    assert len({tapelab.device("cuda"), tapelab.device("cuda:0")}) == 1


def test_device_errors_like_pytorch():
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, ipu, .*, mps, meta, .* device type at start of device string: gpu"):
        tapelab.device("gpu")
    with pytest.raises(TypeError, match="expected a string"):
        tapelab.device(3.5)


def test_tensor_device_metadata():
    x = tapelab.ones(2)
    assert x.device is tapelab.device("cpu") and not x.is_cuda
    assert x.to("cpu") is x and x.cpu() is x


# ---------------------------------------------------------------- tapelab.cuda without a GPU
@gpu_only_absent
def test_cuda_queries_never_raise_without_gpu():
    assert tapelab.cuda.is_available() is False
    assert tapelab.cuda.device_count() == 0
    assert tapelab.cuda.unavailable_reason()
    tapelab.cuda.manual_seed(0)        # no-ops, as in PyTorch
    tapelab.cuda.manual_seed_all(0)
    tapelab.cuda.empty_cache()


def _no_gpu_message():
    return "tapelab.cuda needs cupy and a CUDA device: " + tapelab.cuda.unavailable_reason()


@gpu_only_absent
@pytest.mark.parametrize("call", [
    lambda c: c.current_device(), lambda c: c.set_device(0), lambda c: c.synchronize(),
    lambda c: c.Stream(), lambda c: c.current_stream(), lambda c: c.Event(enable_timing=True),
    lambda c: c.reset_peak_memory_stats(), lambda c: c.get_device_name(0),
], ids=["current_device", "set_device", "synchronize", "Stream", "current_stream", "Event",
        "reset_peak_memory_stats", "get_device_name"])
def test_cuda_api_raises_clear_error_without_gpu(call):
    with pytest.raises(RuntimeError) as e:
        call(tapelab.cuda)
    assert str(e.value) == _no_gpu_message()


@gpu_only_absent
@pytest.mark.parametrize("make", [
    lambda: tapelab.ones(3).to("cuda"), lambda: tapelab.ones(3).cuda(), lambda: tapelab.ones(3).to("cuda:1"),
    lambda: tapelab.ones(3).to(tapelab.device("cuda"), tapelab.float64),
    lambda: tapelab.zeros(2, 3, device="cuda"), lambda: tapelab.ones(2, device="cuda"),
    lambda: tapelab.empty(2, device="cuda"), lambda: tapelab.full((2,), 1.0, device="cuda"),
    lambda: tapelab.tensor([1.0, 2.0], device="cuda"), lambda: tapelab.arange(3, device="cuda"),
    lambda: tapelab.linspace(0, 1, 5, device="cuda"), lambda: tapelab.eye(2, device="cuda"),
    lambda: tapelab.randn(2, device="cuda"), lambda: tapelab.rand(2, device="cuda"),
    lambda: tapelab.randint(0, 5, (2,), device="cuda"), lambda: tapelab.zeros_like(tapelab.ones(2), device="cuda"),
    lambda: tapelab.nn.Linear(2, 2).to("cuda"), lambda: tapelab.nn.Linear(2, 2).cuda(),
], ids=["to", "cuda", "to_cuda1", "to_dev_dtype", "zeros", "ones", "empty", "full", "tensor", "arange",
        "linspace", "eye", "randn", "rand", "randint", "zeros_like", "Module.to", "Module.cuda"])
def test_moves_and_factories_raise_clear_error_without_gpu(make):
    with pytest.raises(RuntimeError, match="^tapelab.cuda needs cupy and a CUDA device: "):
        make()


def test_is_available_never_raises_when_cupy_import_breaks(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def broken(name, *a, **k):
        if name == "cupy" or name.startswith("cupy."):
            raise OSError("libcudart.so: cannot open shared object file")
        return real_import(name, *a, **k)
    monkeypatch.setattr(dev_mod, "_CUDA_STATE", [])
    monkeypatch.setattr(builtins, "__import__", broken)
    assert tapelab.cuda.is_available() is False
    assert tapelab.cuda.device_count() == 0
    assert "OSError" in tapelab.cuda.unavailable_reason()
    with pytest.raises(RuntimeError, match="tapelab.cuda needs cupy and a CUDA device: importing cupy failed"):
        tapelab.cuda.synchronize()


def test_is_available_without_cupy(monkeypatch):
    monkeypatch.setattr(dev_mod, "_CUDA_STATE", [])
    monkeypatch.setitem(sys.modules, "cupy", None)   # import cupy -> ImportError
    assert tapelab.cuda.is_available() is False
    assert "cupy is not installed" in tapelab.cuda.unavailable_reason()


# ---------------------------------------------------------------- the simulated device
def test_simulated_device_factories(sim):
    for t in (tapelab.zeros(2, 3, device="cuda"), tapelab.ones(2, device=sim), tapelab.arange(4, device="cuda"),
              tapelab.randn(3, device="cuda"), tapelab.eye(2, device="cuda"), tapelab.tensor([1, 2], device="cuda")):
        assert t.device is sim and t.is_cuda and isinstance(t._data, SimArray)


def test_simulation_is_restored():
    with simulated_cuda(0):
        pass
    assert tapelab.device("cuda:0")._xp is None  # the real (lazy) cupy namespace again
    if NO_GPU:
        with pytest.raises(RuntimeError, match="tapelab.cuda needs cupy"):
            tapelab.zeros(1, device="cuda")


def test_simulated_arrays_refuse_numpy_like_cupy(sim):
    a = tapelab.ones(3, device="cuda")._data
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(3)
    with pytest.raises(TypeError, match="Unsupported type"):
        sim.xp.concatenate([a, np.ones(3)])
    assert (a + 1).get().tolist() == [2.0, 2.0, 2.0]


def test_ops_on_simulated_device_stay_there(sim):
    x = tapelab.randn(3, 4, device="cuda")
    y = (x.exp() * 2 + x.sum(1, keepdim=True)).softmax(-1) @ tapelab.ones(4, 2, device="cuda")
    assert y.device is sim and isinstance(y._data, SimArray)
    ref = (x.cpu().exp() * 2 + x.cpu().sum(1, keepdim=True)).softmax(-1) @ tapelab.ones(4, 2)
    np.testing.assert_allclose(y.cpu().numpy(), ref.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a @ b.T,
                                lambda a, b: tapelab.cat([a, b]), lambda a, b: tapelab.where(a > 0, a, b)],
                         ids=["add", "mul", "matmul", "cat", "where"])
def test_mixing_devices_raises_pytorch_message(sim, op):
    a = tapelab.ones(2, 3, device="cuda")
    b = tapelab.ones(2, 3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least "
                                           "two devices") as e:
        op(a, b)
    assert "cuda:0" in str(e.value) and "cpu" in str(e.value)


def test_mixing_devices_in_place(sim):
    a = tapelab.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="same device.*cuda:0.*cpu|same device.*cpu.*cuda:0"):
        a.add_(tapelab.ones(2))


def test_cuda_to_cpu_copies(sim):
    x = tapelab.arange(4.0, device="cuda")
    y = x.cpu()
    assert y.device == "cpu" and type(y._data) is np.ndarray
    y[0] = 7.0
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]   # a transfer is a copy
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and float(x[1]) == 1.0
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        x.numpy()


def test_cuda_to_cpu_gradient(sim):
    x = tapelab.arange(3.0, device="cuda").requires_grad_()
    (x.cpu() * 2).sum().backward()
    assert x.grad.device is sim and x.grad.tolist() == [2.0, 2.0, 2.0]


def test_cpu_to_cuda_move(sim):
    x = tapelab.arange(3.0)
    y = x.to("cuda")
    assert y.device is sim and isinstance(y._data, SimArray)
    assert y.cpu().tolist() == [0.0, 1.0, 2.0]


def test_module_to_simulated_cuda(sim):
    lin = tapelab.nn.Linear(3, 2)
    lin.to("cuda")
    assert all(p.device is sim for p in lin.parameters())
    out = lin(tapelab.ones(4, 3, device="cuda"))
    assert out.device is sim


@pytest.mark.parametrize("fn", [tapelab.tanh, tapelab.relu, tapelab.exp, tapelab.sigmoid, lambda x: x.amax(0)],
                         ids=["tanh", "relu", "exp", "sigmoid", "amax"])
def test_vjp_reading_its_output_stays_on_device(sim, fn):
    x = tapelab.randn(3, 2, device="cuda").requires_grad_()
    fn(x).sum().backward()
    assert x.grad.device is sim


def test_backward_on_device(sim):
    tapelab.manual_seed(0)  # fixed data: the result must not depend on which tests ran before
    w = tapelab.randn(3, 2, device="cuda").requires_grad_()
    x = tapelab.randn(4, 3, device="cuda")
    ((x @ w) * 3).sum().backward()   # matmul, mul and sum do not read a saved output
    assert w.grad.device is sim
    np.testing.assert_allclose(w.grad.cpu().numpy(), 3 * x.cpu().numpy().sum(0)[:, None].repeat(2, 1), rtol=1e-6)


# ---------------------------------------------------------------- DLPack
def test_dlpack_numpy_both_ways_shares_memory():
    x = tapelab.arange(4.0)
    a = np.from_dlpack(x)
    a[0] = 9.0
    assert x[0].item() == 9.0
    n = np.arange(3.0)
    y = tapelab.from_dlpack(n)
    n[1] = 7.0
    assert y.tolist() == [0.0, 7.0, 2.0] and y.device == "cpu"


def test_dlpack_torch_both_ways_shares_memory():
    torch = pytest.importorskip("torch")
    x = tapelab.arange(4.0)
    t = torch.from_dlpack(x)
    t[0] = 9.0
    assert x[0].item() == 9.0
    src = torch.arange(3.0)
    y = tapelab.from_dlpack(src)
    src[1] = 7.0
    assert y.tolist() == [0.0, 7.0, 2.0] and y.dtype == tapelab.float32
    assert x.__dlpack_device__() == (1, 0)


def test_dlpack_of_a_noncontiguous_view():
    x = tapelab.arange(6.0).reshape(2, 3).t()
    a = np.from_dlpack(x)
    assert a.tolist() == x.tolist()


def test_dlpack_from_simulated_device(sim):
    x = tapelab.arange(3.0, device="cuda")
    assert x.__dlpack_device__() == (2, 0)           # reports CUDA, as a cupy array does
    y = tapelab.from_dlpack(x)
    assert y.device is sim
    y.add_(1.0)
    assert x.tolist() == [1.0, 2.0, 3.0]             # zero copy


@needs_gpu
def test_dlpack_cupy_and_torch_cuda():
    import cupy
    x = tapelab.arange(4.0, device="cuda")
    a = cupy.from_dlpack(x)
    a[0] = 5.0
    assert x[0].item() == 5.0
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch was built without CUDA")
    t = torch.from_dlpack(x)
    t[1] = 6.0
    assert x[1].item() == 6.0


# ---------------------------------------------------------------- real GPU
@needs_gpu
def test_cuda_roundtrip_and_grad():
    x = tapelab.randn(4, 3).requires_grad_()
    y = x.cuda()
    assert y.is_cuda and y.device == "cuda:0"
    (y.tanh() * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (1 - np.tanh(x.detach().numpy()) ** 2), rtol=1e-5)


@needs_gpu
def test_cuda_memory_stats_and_events():
    c = tapelab.cuda
    c.reset_peak_memory_stats()
    before = c.memory_allocated()
    t = tapelab.zeros(1 << 20, device="cuda")
    assert c.memory_allocated() - before >= 4 << 20
    assert c.max_memory_allocated() >= c.memory_allocated()
    del t
    start, end = c.Event(enable_timing=True), c.Event(enable_timing=True)
    s = c.Stream()
    with s:
        start.record()
        tapelab.randn(256, 256, device="cuda").sum()
        end.record()
    c.current_stream().wait_stream(s)
    assert start.elapsed_time(end) >= 0
    c.synchronize()


def test_tensor_device_queries_like_pytorch(sim):
    import torch
    for m in (torch, tapelab):
        x = m.ones(3)
        assert x.get_device() == -1 and m.empty(2, device="meta").get_device() == -1 and not x.is_pinned()
        assert x.data_ptr() != 0 and x[1:].data_ptr() == x.data_ptr() + 4
        assert x.type("torch.DoubleTensor").dtype == m.float64
    assert tapelab.ones(2, device="cuda").get_device() == 0          # the simulated cuda:0
    assert tapelab.empty(2, device="meta").data_ptr() == 0
    with pytest.raises(ValueError, match="invalid type"):
        tapelab.ones(1).type("torch.FancyTensor")


@gpu_only_absent
def test_pin_memory_without_a_gpu_raises_like_pytorch():
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        tapelab.ones(2).pin_memory()

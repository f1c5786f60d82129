"""``tapelab.cuda``'s surface completed in session 21 (seeds, memory statistics, nvtx, the runtime
queries, the submodules), each against PyTorch 2.13.

Without a GPU every name answers as CPU-only PyTorch does (the values, or the exception's type and
message), compared with ``torch`` itself. With a device the values come from cupy: here a stand-in
cupy (``_StandInCupy``: its memory pool, runtime, nvtx and random calls, logging what tapelab asks of
it) with the simulated cuda device's tensors (``simulated_cuda``).
"""
from __future__ import annotations

import importlib
import itertools
import sys
import types
import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab._backend import simulated_cuda
from tapelab.base import device as dev_mod

NO_GPU = not tapelab.cuda.is_available()
without_gpu = pytest.mark.skipif(not NO_GPU, reason="checks the behaviour without a GPU")

# each call as a program writes it; both libraries run it, on the cuda module and its submodules
CALLS = [
    "seed()", "seed_all()", "initial_seed()", "default_generators", "manual_seed(1)", "manual_seed_all(1)",
    "memory_stats()", "memory_stats_as_nested_dict()", "reset_accumulated_memory_stats()", "max_memory_cached()",
    "memory_cached()", "set_per_process_memory_fraction(0.5)", "get_per_process_memory_fraction()",
    "memory_snapshot()", "list_gpu_processes()", "init()", "get_arch_list()", "get_gencode_flags()",
    "is_tf32_supported()", "set_stream(None)", "get_sync_debug_mode()", "set_sync_debug_mode('warn')",
    "ipc_collect()", "can_device_access_peer(0, 1)", "clock_rate()", "utilization()", "temperature()",
    "power_draw()", "device_memory_used()", "memory_usage()", "host_memory_stats()",
    "host_memory_stats_as_nested_dict()", "reset_peak_host_memory_stats()", "reset_accumulated_host_memory_stats()",
    "caching_allocator_alloc(16)", "caching_allocator_delete(0)", "caching_allocator_enable(True)",
    "get_allocator_backend()", "current_blas_handle()", "current_solver_handle()", "cudart()", "check_error(0)",
    "has_half", "has_magma", "nvtx.range_push('a')", "nvtx.range_pop()", "nvtx.mark('m')", "nvtx.range_start('x')",
    "nvtx.range_end(0)", "profiler.start()", "profiler.stop()", "random.seed()", "random.initial_seed()",
    "memory.memory_stats()", "memory.max_memory_reserved()", "memory_allocated()", "max_memory_reserved()",
]


def _outcome(lib, call):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return "value", repr(eval(f"lib.cuda.{call}"))
    except Exception as e:       # noqa: BLE001 - the exception is the answer compared
        return type(e).__name__, str(e)


@without_gpu
@pytest.mark.parametrize("call", CALLS)
def test_without_a_gpu_as_cpu_only_torch(call):
    assert _outcome(tapelab, call) == _outcome(torch, call)


@without_gpu
def test_nvtx_range_and_profiler_profile_without_a_gpu():
    for lib in (torch, tapelab):
        cm = lib.cuda.nvtx.range("step {}", 3)          # made without error, fails when entered
        with pytest.raises(RuntimeError, match="^NVTX functions not installed. Are you sure you have a CUDA build"):
            with cm:
                pass

        @lib.cuda.nvtx.range("decorated")
        def f():
            return 1
        with pytest.raises(RuntimeError, match="NVTX functions not installed"):
            f()
        with pytest.raises(AssertionError, match="^Torch not compiled with CUDA enabled$"):
            with lib.cuda.profiler.profile():
                pass


@without_gpu
def test_deprecated_names_warn_as_torch():
    for name, new in (("memory_cached", "memory_reserved"), ("max_memory_cached", "max_memory_reserved")):
        for lib in (torch, tapelab):
            with pytest.warns(FutureWarning, match=f"`torch.cuda.{name}` has been renamed to `torch.cuda.{new}`"):
                assert getattr(lib.cuda, name)() == 0


@without_gpu
def test_device_of_a_cpu_tensor_is_a_no_op():
    for lib in (torch, tapelab):
        with lib.cuda.device_of(lib.zeros(2)) as d:
            pass
        assert isinstance(lib.cuda.device_of(lib.zeros(1)), lib.cuda.device)


def test_names_and_submodules_match_torch():
    missing = ["seed", "seed_all", "initial_seed", "default_generators", "memory_stats", "memory_stats_as_nested_dict",
               "reset_accumulated_memory_stats", "max_memory_cached", "memory_cached",
               "set_per_process_memory_fraction", "get_per_process_memory_fraction", "memory_snapshot",
               "list_gpu_processes", "nvtx", "init", "get_arch_list", "get_gencode_flags", "is_tf32_supported",
               "device_of", "set_stream", "get_sync_debug_mode", "set_sync_debug_mode", "ipc_collect",
               "can_device_access_peer", "clock_rate", "utilization", "temperature", "power_draw",
               "device_memory_used", "host_memory_stats", "reset_peak_host_memory_stats", "caching_allocator_alloc",
               "caching_allocator_delete", "current_blas_handle", "check_error", "has_half", "has_magma", "memory",
               "random", "streams", "graphs", "amp", "profiler"]
    assert not [n for n in missing if n not in dir(tapelab.cuda)]
    for sub in ("nvtx", "memory", "random", "streams", "graphs", "profiler"):
        theirs = getattr(torch.cuda, sub)
        ours = importlib.import_module(f"tapelab.cuda.{sub}")
        assert getattr(tapelab.cuda, sub) is ours
        public = getattr(theirs, "__all__", None) or [n for n in dir(theirs) if n[0].isupper()]
        assert not [n for n in public if n not in dir(ours) and n not in
                    ("CUDAPluggableAllocator", "change_current_allocator", "MemPool", "use_mem_pool",
                     "caching_allocator_disabled", "ExternalStream")], sub
    assert tapelab.cuda.memory.memory_stats is tapelab.cuda.memory_stats
    assert tapelab.cuda.random.manual_seed is tapelab.cuda.manual_seed
    assert tapelab.cuda.streams.Stream is tapelab.cuda.Stream and tapelab.cuda.graphs.CUDAGraph is tapelab.cuda.CUDAGraph


def test_submodules_import_under_aliases():
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    try:
        # torchvision's aliases import tapelab.vision, whose TVTensor subclasses keep the function hook
        # installed for the rest of the session (test_devices' dlpack round trip then recurses)
        with tapelab.install_aliases(torchvision=False):
            for sub in ("nvtx", "memory", "random", "streams", "graphs", "profiler", "amp"):
                mod = importlib.import_module(f"torch.cuda.{sub}")
                assert mod is getattr(tapelab.cuda, sub)
            from torch.cuda.nvtx import range as nvtx_range      # noqa: F401
            from torch.cuda.memory import memory_stats
            from torch.cuda.amp import GradScaler                  # noqa: F401  (served from tapelab.amp.cuda)
            assert memory_stats is tapelab.cuda.memory_stats
    finally:
        for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
            del sys.modules[k]
        sys.modules.update(saved)


# ---------------------------------------------------------------- with a device: a stand-in cupy
class _StandInCupy(types.ModuleType):
    """The cupy calls of ``tapelab.cuda``: two devices (compute capability 9.0 and 8.0, 1 GiB each), a
    memory pool that rounds blocks to 512 bytes and gives them back when the pointer dies, as cupy's."""

    GiB = 1 << 30

    def __init__(self):
        super().__init__("cupy")
        fake = self
        self.current = 0
        self.log = []
        self.allocator = None
        ptrs = itertools.count(0x7F0000000000, 0x1000)

        class OutOfMemoryError(MemoryError):
            pass

        class Pointer:
            def __init__(self, dev, size):
                self.device_id, self.ptr = dev, next(ptrs)
                self.mem = types.SimpleNamespace(size=size)

            def __del__(self):
                fake.pool.used[self.device_id] -= self.mem.size

        class Pool:
            def __init__(self):
                self.used, self.total, self.limit = {0: 0, 1: 0}, {0: 0, 1: 0}, {0: 0, 1: 0}

            def malloc(self, size):
                d, rounded = fake.current, -(-size // 512) * 512
                if self.limit[d] and self.used[d] + rounded > self.limit[d]:
                    raise OutOfMemoryError(f"out of memory allocating {rounded} bytes")
                self.used[d] += rounded
                self.total[d] = max(self.total[d], self.used[d])
                return Pointer(d, rounded)

            def used_bytes(self):
                return self.used[fake.current]

            def total_bytes(self):
                return self.total[fake.current]

            def free_all_blocks(self):
                self.total = dict(self.used)

            def set_limit(self, size=None, fraction=None):
                self.limit[fake.current] = size

            def get_limit(self):
                return self.limit[fake.current]
        self.pool = Pool()

        class Device:
            def __init__(self, i=None):
                self.id = fake.current if i is None else int(i)
                self.compute_capability = {0: "90", 1: "80"}[self.id]

            def use(self):
                fake.current = self.id

            def __enter__(self):
                self.prev, fake.current = fake.current, self.id
                return self

            def __exit__(self, *exc):
                fake.current = self.prev

            def synchronize(self):
                pass

        class Stream:
            def use(self):
                fake.log.append(("stream use",))

        def props(i):
            return {"name": b"Stand-in GPU", "major": 9 - i, "minor": 0, "totalGlobalMem": fake.GiB,
                    "multiProcessorCount": 132}

        class CUDARuntimeError(RuntimeError):
            def __init__(self, status):
                super().__init__({2: "cudaErrorMemoryAllocation: out of memory"}.get(status, f"cudaError{status}: ?"))

        def mark(name):
            return lambda *a: fake.log.append((name, *a))
        runtime = types.SimpleNamespace(
            is_hip=False, getDeviceCount=lambda: 2, getDeviceProperties=props,
            memGetInfo=lambda: (fake.GiB - fake.pool.total[fake.current] - 1000, fake.GiB),
            deviceCanAccessPeer=lambda i, j: int(i != j), profilerStart=mark("profilerStart"),
            profilerStop=mark("profilerStop"), CUDARuntimeError=CUDARuntimeError)
        self.cuda = types.SimpleNamespace(
            Device=Device, Stream=Stream, runtime=runtime, is_available=lambda: True,
            memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
            set_allocator=lambda f: setattr(fake, "allocator", f), alloc=lambda size: fake.allocator(size),
            device=types.SimpleNamespace(get_cublas_handle=lambda: 0xB1A5, get_cusolver_handle=lambda: 0x5017),
            nvtx=types.SimpleNamespace(available=True, RangePush=mark("RangePush"), RangePop=mark("RangePop"),
                                       Mark=mark("Mark")))
        self.random = types.SimpleNamespace(seed=lambda s: fake.log.append(("seed", fake.current, s)))

    def get_default_memory_pool(self):
        return self.pool

    def get_default_pinned_memory_pool(self):
        return types.SimpleNamespace(free_all_blocks=lambda: None)

    def array_of(self, nbytes):
        """What a cupy array's allocation does: the current allocator (tapelab's tracking one)."""
        return (self.allocator or self.pool.malloc)(nbytes)


@pytest.fixture
def gpu(monkeypatch):
    """A stand-in cupy as the installed one, with tapelab.cuda's state fresh."""
    fake = _StandInCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy.cuda", fake.cuda)
    monkeypatch.setattr(dev_mod, "_CUDA_STATE", [(True, "")])
    c = tapelab.cuda
    for mod, name, fresh in ((c.memory, "_STATS", {}), (c.memory, "_TRACKING", []), (c.random, "_GENERATORS", []),
                             (c.memory, "_RAW", {}), (c._runtime, "_SYNC_DEBUG", [0])):
        monkeypatch.setattr(mod, name, fresh)
    return fake


def test_memory_stats_agree_with_memory_allocated(gpu):
    c = tapelab.cuda
    assert c.memory_allocated() == 0 and c.memory_stats()["allocated_bytes.all.current"] == 0
    a = gpu.array_of(1000)            # rounds to 1024
    b = gpu.array_of(3000)            # 3072
    assert c.memory_allocated() == 4096 and c.max_memory_allocated() == 4096
    del b
    s = c.memory_stats()
    assert list(s) == sorted(s)
    assert s["allocated_bytes.all.current"] == c.memory_allocated() == 1024
    assert s["allocated_bytes.all.peak"] == c.max_memory_allocated() == 4096
    assert s["allocated_bytes.all.allocated"] == 4096 and s["allocated_bytes.all.freed"] == 3072
    assert s["reserved_bytes.all.current"] == c.memory_reserved() == 4096 == c.max_memory_reserved()
    assert s["active_bytes.all.peak"] == s["requested_bytes.all.peak"] == 4096
    assert s["num_ooms"] == 0 and s["num_alloc_retries"] == 0
    c.empty_cache()
    assert c.memory_reserved() == 1024 and c.max_memory_reserved() == 4096
    assert c.memory_stats()["reserved_bytes.all.freed"] == 3072
    c.reset_peak_memory_stats()
    assert c.max_memory_allocated() == 1024 and c.max_memory_reserved() == 1024
    nested = c.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == 1024 and nested["num_ooms"] == 0
    c.reset_accumulated_memory_stats()
    s = c.memory_stats()
    assert s["allocated_bytes.all.allocated"] == s["allocated_bytes.all.freed"] == 0
    assert s["allocated_bytes.all.current"] == 1024
    with pytest.warns(FutureWarning):
        assert c.memory_cached() == c.memory_reserved()
    with pytest.warns(FutureWarning):
        assert c.max_memory_cached() == c.max_memory_reserved()
    assert c.memory.memory_stats() == c.memory_stats()
    # per device: device 1's pool is its own
    with c.device(1):
        e = gpu.array_of(512)
    assert c.memory_allocated(1) == 512 and c.memory_allocated(0) == 1024
    snap = c.memory_snapshot()
    assert [(s["device"], s["allocated_size"]) for s in snap] == [(0, 1024), (1, 512)]
    del a, e
    assert c.memory_allocated(0) == c.memory_allocated(1) == 0


def test_memory_fraction_caps_the_pool(gpu):
    c = tapelab.cuda
    assert c.get_per_process_memory_fraction() == 1.0
    with pytest.raises(TypeError, match="must be `float`"):
        c.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Invalid fraction value: 1.5. Allowed range: 0~1"):
        c.set_per_process_memory_fraction(1.5)
    c.set_per_process_memory_fraction(0.25)
    assert gpu.pool.limit[0] == gpu.GiB // 4
    assert c.get_per_process_memory_fraction() == 0.25
    assert c.get_per_process_memory_fraction(1) == 1.0
    with pytest.raises(MemoryError):
        gpu.array_of(gpu.GiB // 2)
    assert c.memory_stats()["num_ooms"] == 1
    c.set_per_process_memory_fraction(1.0)
    assert c.get_per_process_memory_fraction() == 1.0


def test_caching_allocator_alloc_and_delete(gpu):
    c = tapelab.cuda
    ptr = c.caching_allocator_alloc(100, device=1)
    assert isinstance(ptr, int) and c.memory_allocated(1) == 512 and c.memory_allocated(0) == 0
    c.caching_allocator_delete(ptr)
    assert c.memory_allocated(1) == 0
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        c.caching_allocator_delete(ptr)
    assert c.get_allocator_backend() == "native"
    c.ipc_collect()
    assert c.host_memory_stats() == {} and c.host_memory_stats_as_nested_dict() == {}


def test_cuda_seeds_are_the_cuda_generators(gpu):
    c = tapelab.cuda
    gens = c.default_generators
    assert len(gens) == 2 and all(isinstance(g, tapelab.Generator) for g in gens)
    assert [str(g.device) for g in gens] == ["cuda:0", "cuda:1"]
    assert c.initial_seed() == 67280421310721                 # PyTorch's default seed
    gpu.log.clear()
    c.manual_seed(7)
    assert c.initial_seed() == 7 and gens[1].initial_seed() == 67280421310721
    assert gpu.log == [("seed", 0, 7)]                          # cupy's generator on device 0
    c.manual_seed_all(11)
    assert [g.initial_seed() for g in gens] == [11, 11]
    c.seed()
    s0 = c.initial_seed()
    assert s0 != 11 and gens[1].initial_seed() == 11
    c.seed_all()
    assert gens[0].initial_seed() == gens[1].initial_seed() != s0
    with c.device(1):
        c.manual_seed(3)
        assert c.initial_seed() == 3 == c.random.initial_seed()
    assert gens[1].initial_seed() == 3 and gens[0].initial_seed() != 3
    # a random op on cuda with generator= one of them draws from it, as from a cpu generator so seeded
    c.manual_seed(5)
    with simulated_cuda(0) as dev:
        got = tapelab.randn(4, device=dev, generator=gens[0]).cpu().numpy()
    want = tapelab.randn(4, generator=tapelab.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(got, want)


def test_device_queries(gpu):
    c = tapelab.cuda
    c.init()
    assert c.get_arch_list() == ["sm_80", "sm_90"]
    assert c.get_gencode_flags() == "-gencode compute=compute_80,code=sm_80 -gencode compute=compute_90,code=sm_90"
    assert c.is_tf32_supported() is True
    assert c.can_device_access_peer(0, 1) is True and c.can_device_access_peer(1, 1) is False
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        c.can_device_access_peer(0, 2)
    assert c.current_blas_handle() == 0xB1A5 and c.current_solver_handle() == 0x5017
    assert c.device_memory_used() == 1000                      # total - free, from the driver
    c.set_sync_debug_mode("warn")
    assert c.get_sync_debug_mode() == 1
    c.set_sync_debug_mode(0)
    assert c.get_sync_debug_mode() == 0
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        c.set_sync_debug_mode("loud")
    c.check_error(0)
    with pytest.raises(c.CudaError, match=r"^out of memory \(2\)$"):
        c.check_error(2)
    c.set_stream(None)
    with simulated_cuda(1) as dev:
        t = tapelab.zeros(2, device=dev)
        with c.device_of(t):
            assert c.current_device() == 1
        assert c.current_device() == 0
        with c.device_of(tapelab.zeros(2)):
            assert c.current_device() == 0


def test_nvml_queries_need_pynvml_as_torch(gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    c = tapelab.cuda
    for q in (c.clock_rate, c.utilization, c.temperature, c.power_draw, c.memory_usage):
        with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py does not seem to be installed"):
            q()
    assert c.list_gpu_processes() == "pynvml module not found, please install nvidia-ml-py"


def test_nvml_queries_through_pynvml(gpu, monkeypatch):
    handles = []

    class NVMLError_DriverNotLoaded(Exception):
        pass
    nv = types.SimpleNamespace(
        NVMLError_DriverNotLoaded=NVMLError_DriverNotLoaded, nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: handles.append(i) or f"h{i}",
        nvmlDeviceGetClockInfo=lambda h, kind: 1980, nvmlDeviceGetTemperature=lambda h, kind: 41,
        nvmlDeviceGetPowerUsage=lambda h: 123456,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=87, memory=30),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=4242, usedGpuMemory=3 << 20)])
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    c = tapelab.cuda
    assert (c.clock_rate(), c.utilization(), c.temperature(), c.power_draw(), c.memory_usage()) == \
        (1980, 87, 41, 123456, 30)
    assert c.list_gpu_processes(1) == "GPU:5\nprocess       4242 uses        3.000 MB GPU memory"
    assert handles[0] == 3 and handles[-1] == 5               # the visible devices' NVML indices


def test_nvtx_and_profiler_reach_cupy(gpu):
    nvtx, c = tapelab.cuda.nvtx, tapelab.cuda
    gpu.log.clear()
    assert nvtx.range_push("outer") == 0
    assert nvtx.range_push("inner") == 1
    assert nvtx.range_pop() == 1 and nvtx.range_pop() == 0
    assert nvtx.range_pop() == -1                              # nothing open: NVTX's negative answer
    nvtx.mark("here")
    with nvtx.range("step {}", 2):
        pass

    @nvtx.range("fn")
    def f(x):
        return x + 1
    assert f(1) == 2
    h = nvtx.range_start("async")
    assert isinstance(h, int) and nvtx.range_end(h) is None
    assert gpu.log == [("RangePush", "outer"), ("RangePush", "inner"), ("RangePop",), ("RangePop",),
                       ("Mark", "here"), ("RangePush", "step 2"), ("RangePop",), ("RangePush", "fn"), ("RangePop",)]
    gpu.log.clear()
    with c.profiler.profile():
        pass
    c.profiler.start()
    assert c.cudart().cudaProfilerStop() == 0
    assert gpu.log == [("profilerStart",), ("profilerStop",), ("profilerStart",), ("profilerStop",)]


def test_nvtx_without_cupys_nvtx_is_a_no_op(gpu):
    gpu.cuda.nvtx.available = False
    nvtx = tapelab.cuda.nvtx
    assert nvtx.range_push("x") == 0 and nvtx.range_pop() == 0
    nvtx.mark("m")
    assert gpu.log == []


def test_torch_manual_seed_seeds_every_cuda_generator(gpu):
    """``torch.manual_seed(s)`` seeds the cpu generator and every device's, as PyTorch's (``core.random``
    calls the seeding ``tapelab.cuda`` registered)."""
    c = tapelab.cuda
    gens = c.default_generators
    tapelab.manual_seed(13)
    assert tapelab.initial_seed() == 13 and [g.initial_seed() for g in gens] == [13, 13]
    assert c.initial_seed() == 13

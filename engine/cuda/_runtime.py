"""``tapelab.cuda``'s devices and runtime: availability, the current device, properties, the
runtime's handles and error codes, NVML's queries, and PyTorch's answers where there is no CUDA
(``_lazy_init``, ``_unbound``). The package (``tapelab.cuda``) re-exports the public names."""
from __future__ import annotations

import os
from collections import namedtuple

from ..base.device import cuda_available, cuda_device_count, cuda_unavailable_reason, device as _device, require_cuda


# ---------------------------------------------------------------- errors a program names in `except`
# (torch.cuda.OutOfMemoryError is torch.OutOfMemoryError: Pytorch-UNet's train.py catches it around training)
class CudaError(RuntimeError):
    """An error code from the CUDA runtime, as ``torch.cuda.CudaError(code)``: "<cuda's message> (code)"
    with cupy, "CUDA error code <code>" without."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, code: int) -> None:
        msg = _error_string(code)
        super().__init__(msg if msg.startswith("CUDA error code") else f"{msg} ({code})")


class DeferredCudaCallError(Exception):
    """A queued CUDA call that failed at lazy initialization (``torch.cuda.DeferredCudaCallError``)."""
    __module__ = "tapelab.cuda"   # where programs name it


# ---------------------------------------------------------------- PyTorch's answers without CUDA (session 21)
# Without cupy tapelab.cuda answers as a PyTorch built without CUDA: the names that initialise CUDA
# first raise its AssertionError, those whose binding such a build lacks its AttributeError. With cupy
# but no device or driver (PyTorch's CUDA build on a machine without a GPU) they raise tapelab's
# RuntimeError, as the older names of this module do in both cases.
_NOT_COMPILED = "Torch not compiled with CUDA enabled"


def _cupy_missing() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("cupy") is None
    except (ImportError, ValueError):
        return True


def _lazy_init():
    """cupy, or PyTorch's error of a first use of CUDA where there is none."""
    if cuda_available():
        return require_cuda()
    if _cupy_missing():
        raise AssertionError(_NOT_COMPILED)
    return require_cuda()      # raises: cupy is there, a device or driver is not


def _unbound(binding: str):
    """cupy, or the error of a name whose binding PyTorch's build without CUDA lacks (``torch._C``'s)."""
    if cuda_available():
        return require_cuda()
    if _cupy_missing():
        raise AttributeError(f"module 'torch._C' has no attribute '{binding}'")
    return require_cuda()


def init() -> None:
    """Initialise CUDA (cupy's runtime); PyTorch's error without one."""
    _lazy_init()


has_half: bool = True      # PyTorch's constants (half is a cuda dtype of cupy's too)
has_magma: bool = False


# ---------------------------------------------------------------- devices (issue 9)
def is_available() -> bool:
    """True when cupy is installed and a CUDA device and driver are present. Never raises."""
    return cuda_available()


def is_initialized() -> bool:
    return cuda_available()


_queued_calls: list = []   # calls waiting for a CUDA that this process does not have


def _lazy_call(callable, **kwargs) -> None:
    """Run ``callable`` once CUDA is initialised: now where it is, else kept, as PyTorch keeps it for an
    initialisation that never comes without a device (fairscale's model-parallel RNG tracker sets the
    cuda RNG state through this)."""
    if is_initialized():
        callable()
    else:
        _queued_calls.append(callable)


def device_count() -> int:
    """Number of CUDA devices (0 without cupy or a GPU; never raises)."""
    return cuda_device_count()


def _index(dev) -> int:
    """A device index from None (current), an int, a string or a ``tapelab.device``."""
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    d = _device(dev)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index


def current_device() -> int:
    return int(require_cuda().cuda.Device().id)


def set_device(dev) -> None:
    """Make ``dev`` (int, 'cuda:N' or a device) the current CUDA device."""
    cupy = require_cuda()
    i = _index(dev) if dev is not None else 0
    n = device_count()
    if not 0 <= i < n:
        raise RuntimeError(f"CUDA error: invalid device ordinal: {i} (device_count() is {n})")
    cupy.cuda.Device(i).use()


class device:
    """Context manager that changes the current device: ``with tapelab.cuda.device(1): ...``."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, dev):
        self.idx = _index(dev) if dev is not None else -1
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            if self.prev != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev != self.idx:
            set_device(self.prev)
        return False


def get_device_name(dev=None) -> str:
    cupy = require_cuda()
    props = cupy.cuda.runtime.getDeviceProperties(_index(dev))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


_DeviceProperties = namedtuple("_CudaDeviceProperties", ["name", "major", "minor", "total_memory",
                                                        "multi_processor_count"])


def get_device_properties(dev=None):
    """``name``, ``major``/``minor`` (compute capability), ``total_memory`` (bytes),
    ``multi_processor_count`` of a device, from the CUDA runtime."""
    cupy = require_cuda()
    p = cupy.cuda.runtime.getDeviceProperties(_index(dev))
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return _DeviceProperties(name, int(p["major"]), int(p["minor"]), int(p["totalGlobalMem"]),
                             int(p["multiProcessorCount"]))


def get_device_capability(dev=None) -> tuple[int, int]:
    props = get_device_properties(dev)
    return props.major, props.minor


def mem_get_info(dev=None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the driver reports them."""
    cupy = require_cuda()
    with cupy.cuda.Device(_index(dev)):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def is_bf16_supported() -> bool:
    """False: tapelab's bfloat16 lives on the cpu (ml_dtypes); cupy has no bfloat16 dtype."""
    return False


def synchronize(dev=None) -> None:
    """Wait for all work on ``dev`` (default: the current device)."""
    cupy = require_cuda()
    cupy.cuda.Device(_index(dev)).synchronize()


class device_of(device):
    """``with device_of(t):`` makes ``t``'s cuda device current for the block (a no-op for a cpu tensor)."""
    __module__ = "tapelab.cuda"   # where programs name it

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read ``peer_device``'s memory directly (the CUDA runtime's answer)."""
    cupy = _lazy_init()
    i, j = _index(device), _index(peer_device)
    n = device_count()
    if not 0 <= i < n:
        raise AssertionError("Invalid device id")
    if not 0 <= j < n:
        raise AssertionError("Invalid peer device id")
    return bool(cupy.cuda.runtime.deviceCanAccessPeer(i, j))


def get_arch_list() -> list[str]:
    """The architectures kernels are built for: cupy compiles each kernel for the device it runs on, so
    the ``sm_XY`` of the devices present ([] without a GPU, as PyTorch's build without CUDA)."""
    if not cuda_available():
        return []
    import cupy
    return sorted({f"sm_{cupy.cuda.Device(i).compute_capability}" for i in range(device_count())},
                  key=lambda a: int(a[3:]))


def get_gencode_flags() -> str:
    """``get_arch_list`` as nvcc's ``-gencode`` flags ('' without a GPU)."""
    return " ".join(f"-gencode compute=compute_{arch},code={kind}_{arch}"
                    for kind, arch in (a.split("_") for a in get_arch_list()))


def is_tf32_supported() -> bool:
    """Whether the current device computes in TF32 natively (compute capability 8.0 and up); False
    without a GPU."""
    return cuda_available() and get_device_capability()[0] >= 8


def current_blas_handle() -> int:
    """cuBLAS's handle of the current device (cupy's)."""
    cupy = _lazy_init()
    return int(cupy.cuda.device.get_cublas_handle())


def current_solver_handle() -> int:
    """cuSOLVER's handle of the current device (cupy's)."""
    cupy = _lazy_init()
    return int(cupy.cuda.device.get_cusolver_handle())


class _CudaRT:
    """``torch.cuda.cudart()``: the runtime calls programs make through it (profiling's start and stop
    around a region for Nsight, error strings), over cupy's runtime."""

    class cudaError:
        success = 0
        memoryAllocation = 2

    def __init__(self, cupy):
        self._rt = cupy.cuda.runtime

    def cudaProfilerStart(self) -> int:
        self._rt.profilerStart()
        return 0

    def cudaProfilerStop(self) -> int:
        self._rt.profilerStop()
        return 0

    def cudaGetErrorString(self, code: int) -> str:
        return _error_string(code)


def _error_string(code: int) -> str:
    try:
        import cupy
        return str(cupy.cuda.runtime.CUDARuntimeError(int(code))).partition(": ")[2] or f"CUDA error code {code}"
    except Exception:
        return f"CUDA error code {code}"


def cudart() -> _CudaRT:
    return _CudaRT(_lazy_init())


def check_error(res: int) -> None:
    """Raise ``CudaError`` for a CUDA runtime result other than success."""
    if not cuda_available() and _cupy_missing():     # PyTorch's build without CUDA has no _cudart
        raise AttributeError("'NoneType' object has no attribute 'cudaError'")
    require_cuda()
    if res != _CudaRT.cudaError.success:
        raise CudaError(res)


_SYNC_DEBUG = [0]


def set_sync_debug_mode(debug_mode) -> None:
    """Record PyTorch's sync debug mode ("default"/0, "warn"/1, "error"/2). tapelab does not (yet) warn
    at the host reads that synchronise; ``get_sync_debug_mode`` returns what was set."""
    _lazy_init()
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = modes[debug_mode]
    _SYNC_DEBUG[0] = int(debug_mode)


def get_sync_debug_mode() -> int:
    _lazy_init()
    return _SYNC_DEBUG[0]


def ipc_collect() -> None:
    """Nothing to collect: tapelab shares no cuda memory between processes (PyTorch's error without CUDA)."""
    _lazy_init()


# ---------------------------------------------------------------- NVML queries (session 21)
# As PyTorch's, these read nvidia-ml-py (pynvml) and raise its ModuleNotFoundError without it;
# device_memory_used needs only cupy (the driver's used memory, total - free).
_NO_NVML = "nvidia-ml-py does not seem to be installed or it can't be imported."


def _nvml(device, index: bool = False):
    """(pynvml, handle of ``device``), with its NVML index when ``index``; or PyTorch's errors."""
    try:
        import pynvml
    except ImportError as e:
        raise ModuleNotFoundError(_NO_NVML) from e
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded as e:
        raise RuntimeError("cuda driver can't be loaded, is cuda enabled?") from e
    _lazy_init()
    i = _index(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v.strip() for v in visible.split(",")]
        if all(v.lstrip("-").isdigit() for v in ids) and i < len(ids):
            i = int(ids[i])
    handle = pynvml.nvmlDeviceGetHandleByIndex(i)
    return (pynvml, handle, i) if index else (pynvml, handle)


def list_gpu_processes(device=None) -> str:
    """The processes using ``device`` and their memory, as PyTorch prints them (through pynvml)."""
    try:
        import pynvml
    except ImportError:
        return "pynvml module not found, please install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded:
        return "cuda driver can't be loaded, is cuda enabled?"
    nv, handle, i = _nvml(device, index=True)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    lines = [f"GPU:{i}"]      # NVML's index, as PyTorch prints it
    if len(procs) == 0:
        lines.append("no processes are running")
    for p in procs:
        lines.append(f"process {p.pid:>10d} uses {p.usedGpuMemory / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)


def clock_rate(device=None) -> int:
    """The SM clock in MHz (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetClockInfo(h, 1)       # NVML_CLOCK_SM


def utilization(device=None) -> int:
    """Percent of the last sample period in which a kernel ran (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetUtilizationRates(h).gpu


def memory_usage(device=None) -> int:
    """Percent of the last sample period in which device memory was read or written (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetUtilizationRates(h).memory


def temperature(device=None) -> int:
    """The GPU's temperature in degrees Celsius (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetTemperature(h, 0)     # NVML_TEMPERATURE_GPU


def power_draw(device=None) -> int:
    """The GPU's power draw in milliwatts (pynvml)."""
    nv, h = _nvml(device)
    return nv.nvmlDeviceGetPowerUsage(h)


def device_memory_used(device=None) -> int:
    """Bytes of device memory in use by all processes: the driver's total minus free (with a GPU; without
    one PyTorch's pynvml error)."""
    if cuda_available():
        free, total = mem_get_info(device)
        return total - free
    _nvml(device)
    raise AssertionError(_NOT_COMPILED)      # pynvml present: _nvml has raised PyTorch's error already


def unavailable_reason() -> str:
    """Why ``is_available()`` is False ('' when it is True)."""
    return cuda_unavailable_reason()

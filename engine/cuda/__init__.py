"""``tapelab.cuda``: PyTorch's ``torch.cuda`` surface, backed by cupy.

Works with or without cupy and a GPU: ``is_available()`` is False (never raising) when cupy
is missing or no CUDA device/driver exists; queries such as ``device_count()`` return 0 and
``manual_seed`` does nothing (as in PyTorch); everything that needs a GPU (streams, events,
memory stats, ``synchronize``, ``set_device``) raises
``RuntimeError("tapelab.cuda needs cupy and a CUDA device: <why>")``.

The names PyTorch added later (session 21: ``seed``/``initial_seed``, ``memory_stats`` and its kin,
``set_per_process_memory_fraction``, ``init``, ``cudart`` ...) answer without cupy as PyTorch built
without CUDA does (its ``AssertionError("Torch not compiled with CUDA enabled")``, its AttributeError,
or its defaults: ``memory_stats()`` empty, ``get_arch_list()`` [], ``seed()`` a no-op), and with cupy but
no GPU with the RuntimeError above. The code lives in PyTorch's submodules (``memory``, ``random``,
``streams``, ``graphs``; ``nvtx`` and ``profiler`` over cupy's NVTX and profiler API) and in
``_runtime`` (devices, runtime, NVML), which none of the others import back.

Random numbers of tapelab tensors on cuda are drawn by the host generator and copied over, so
``tapelab.manual_seed`` makes cpu and cuda runs draw the same values. ``default_generators`` (one
tapelab Generator per GPU, a random op's ``generator=`` on cuda) carry the cuda seeds:
``cuda.manual_seed``/``seed``/``initial_seed`` set and read them, and seeding one seeds cupy's own
generator (``cupy.random``) on its device for code that uses it directly. ``get_rng_state`` is the
host generator's state, the one cuda tensors draw from.
"""
from __future__ import annotations

from .._torch_extra import OutOfMemoryError
from ..amp import cuda as amp
from ..base.device import cuda_available, cuda_device_count, cuda_unavailable_reason, require_cuda  # noqa: F401
from ..core.creation import CUDA_LEGACY
from . import nvtx, profiler  # noqa: F401
from ._runtime import (CudaError, DeferredCudaCallError, can_device_access_peer, check_error,  # noqa: F401
                       clock_rate, cudart, current_blas_handle, current_device, current_solver_handle, device,
                       device_count, device_memory_used, device_of, get_arch_list, get_device_capability,
                       get_device_name, get_device_properties, get_gencode_flags, get_sync_debug_mode, has_half,
                       has_magma, init, ipc_collect, is_available, is_bf16_supported, is_initialized,
                       is_tf32_supported, list_gpu_processes, mem_get_info, power_draw, set_device,
                       set_sync_debug_mode, synchronize, temperature, unavailable_reason, utilization, memory_usage,
                       _index, _lazy_call)
from .graphs import (CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing,  # noqa: F401
                     make_graphed_callables)
from .memory import (caching_allocator_alloc, caching_allocator_delete, caching_allocator_enable,  # noqa: F401
                     empty_cache, get_allocator_backend, get_per_process_memory_fraction, host_memory_stats,
                     host_memory_stats_as_nested_dict, max_memory_allocated, max_memory_cached, max_memory_reserved,
                     memory_allocated, memory_cached, memory_reserved, memory_snapshot, memory_stats,
                     memory_stats_as_nested_dict, memory_summary, reset_accumulated_host_memory_stats,
                     reset_accumulated_memory_stats, reset_max_memory_allocated, reset_max_memory_cached,
                     reset_peak_host_memory_stats, reset_peak_memory_stats, set_per_process_memory_fraction)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all,  # noqa: F401
                     seed, seed_all, set_rng_state, set_rng_state_all, _generators)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401
from . import graphs, memory, random, streams  # noqa: F401,E402  (the submodules, as attributes)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "get_device_name",
           "synchronize", "Stream", "Event", "current_stream", "default_stream", "stream", "StreamContext",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache", "manual_seed",
           "manual_seed_all", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "is_initialized", "get_device_properties", "get_device_capability", "mem_get_info",
           "memory_summary", "is_bf16_supported", "amp", "OutOfMemoryError", "CudaError", "DeferredCudaCallError",
           "CUDAGraph", "graph", "make_graphed_callables", "graph_pool_handle", "is_current_stream_capturing",
           "seed", "seed_all", "initial_seed", "default_generators", "memory_stats", "memory_stats_as_nested_dict",
           "reset_accumulated_memory_stats", "max_memory_cached", "memory_cached", "reset_max_memory_cached",
           "set_per_process_memory_fraction", "get_per_process_memory_fraction", "memory_snapshot",
           "list_gpu_processes", "init", "get_arch_list", "get_gencode_flags", "is_tf32_supported", "device_of",
           "set_stream", "get_sync_debug_mode", "set_sync_debug_mode", "ipc_collect", "can_device_access_peer",
           "clock_rate", "utilization", "memory_usage", "temperature", "power_draw", "device_memory_used",
           "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_peak_host_memory_stats",
           "reset_accumulated_host_memory_stats", "caching_allocator_alloc", "caching_allocator_delete",
           "caching_allocator_enable", "get_allocator_backend", "current_blas_handle", "current_solver_handle",
           "cudart", "check_error", "has_half", "has_magma", "memory", "random", "streams", "graphs", "nvtx",
           "profiler", *CUDA_LEGACY]

# the legacy typed constructors on cuda (constructing one without a GPU raises PyTorch's TypeError)
FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor, \
    BoolTensor = CUDA_LEGACY.values()


def __getattr__(name: str):
    """``torch.cuda._initialized``, which libraries read as a flag (linear-attention-transformer's
    reversible layers record the cuda RNG state only when it is set): ``is_initialized()``;
    ``default_generators``, made at the first use (probing cupy at import would slow every import)."""
    if name == "_initialized":
        return is_initialized()
    if name == "default_generators":
        return _generators()
    raise AttributeError(f"module 'torch.cuda' has no attribute '{name}'")


def __dir__() -> list:
    return sorted(set(globals()) | {"default_generators", "_initialized"})

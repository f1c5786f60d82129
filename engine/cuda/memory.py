"""``torch.cuda.memory``: the caching allocator's statistics and controls; the objects are
``tapelab.cuda``'s (cupy's memory pool stands for PyTorch's caching allocator)."""
from __future__ import annotations

from . import (caching_allocator_alloc, caching_allocator_delete, caching_allocator_enable, empty_cache,  # noqa: F401
               get_allocator_backend, get_per_process_memory_fraction, host_memory_stats,
               host_memory_stats_as_nested_dict, is_initialized, list_gpu_processes, max_memory_allocated,
               max_memory_cached, max_memory_reserved, mem_get_info, memory_allocated, memory_cached,
               memory_reserved, memory_snapshot, memory_stats, memory_stats_as_nested_dict, memory_summary,
               reset_accumulated_host_memory_stats, reset_accumulated_memory_stats, reset_max_memory_allocated,
               reset_max_memory_cached, reset_peak_host_memory_stats, reset_peak_memory_stats,
               set_per_process_memory_fraction)

__all__ = ["caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_enable",
           "get_per_process_memory_fraction", "set_per_process_memory_fraction", "empty_cache", "memory_stats",
           "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
           "reset_max_memory_allocated", "reset_max_memory_cached", "host_memory_stats",
           "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached",
           "max_memory_cached", "memory_snapshot", "memory_summary", "list_gpu_processes", "mem_get_info",
           "get_allocator_backend"]

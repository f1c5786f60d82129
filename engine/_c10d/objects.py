"""Collectives of picklable Python objects (``all_gather_object`` and friends).

Objects are pickled by the backend (mpi4py's lowercase calls) on the group's communication
thread, in order with the tensor collectives. Like PyTorch's, they trust what they unpickle:
use them only between ranks of one job.
"""
from __future__ import annotations

from .collectives import _src
from .group import resolve

__all__ = ["all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"]


def _wait(g, name: str, job):
    """Run ``job`` on the communication thread and return its value."""
    return g.submit(name, job)._future.wait()


def all_gather_object(object_list: list, obj, group=None) -> None:
    """``object_list[i]`` becomes rank i's ``obj`` (``object_list`` has one slot per rank)."""
    g = resolve(group)
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list must have one slot per rank ({g.size()}), "
                         f"got {len(object_list)}")
    object_list[:] = _wait(g, "all_gather_object", lambda: g.backend.allgather_object(obj))


def broadcast_object_list(object_list: list, src: int | None = None, group=None, device=None,
                          group_src: int | None = None) -> None:
    """Every rank's ``object_list`` becomes rank ``src``'s (the lists have the same length)."""
    g = resolve(group)
    root = _src(g, src, group_src, "src")
    object_list[:] = _wait(g, "broadcast_object_list", lambda: g.backend.broadcast_object(list(object_list), root))


def gather_object(obj, object_gather_list: list | None = None, dst: int | None = None, group=None,
                  group_dst: int | None = None) -> None:
    """On rank ``dst``, ``object_gather_list[i]`` becomes rank i's ``obj``."""
    g = resolve(group)
    root = _src(g, dst, group_dst, "dst")
    if g.rank() == root and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(f"gather_object: object_gather_list on the destination must have one slot per rank "
                         f"({g.size()})")
    got = _wait(g, "gather_object", lambda: g.backend.gather_object(obj, root))
    if g.rank() == root:
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None = None,
                        src: int | None = None, group=None, group_src: int | None = None) -> None:
    """``scatter_object_output_list[0]`` on rank i becomes ``scatter_object_input_list[i]`` of rank ``src``."""
    g = resolve(group)
    root = _src(g, src, group_src, "src")
    if g.rank() == root and (scatter_object_input_list is None or len(scatter_object_input_list) != g.size()):
        raise ValueError(f"scatter_object_list: scatter_object_input_list on the source must have one object per "
                         f"rank ({g.size()})")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    scatter_object_output_list[0] = _wait(g, "scatter_object_list",
                                          lambda: g.backend.scatter_object(
                                              list(scatter_object_input_list) if g.rank() == root else None, root))

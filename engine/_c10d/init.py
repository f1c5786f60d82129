"""Creating and querying process groups: ``init_process_group``, ``new_group``, ``get_rank``...

The ranks are MPI's: a job starts under ``mpiexec`` (``python -m tapelab.distributed.run`` does
it), and MPI has already met every rank when ``init_process_group`` runs, so ``init_method``
(``env://``, ``tcp://``, ``file://``) and ``MASTER_ADDR``/``MASTER_PORT`` need no rendezvous
of their own. ``RANK``/``WORLD_SIZE``, when set, must agree with MPI's and are checked.
"""
from __future__ import annotations

import sys

from .group import NO_GROUP, ProcessGroup, add_group, env_int, resolve, set_world, world
from .mpi import MPIBackend, mpi
from .nccl import NCCLBackend

__all__ = ["is_available", "init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size",
           "get_backend", "new_group", "get_global_rank", "get_group_rank", "get_process_group_ranks",
           "Backend"]


class Backend(str):
    """``torch.distributed.Backend``: the backend names (``Backend("GLOO")`` -> ``"gloo"``)."""

    MPI, NCCL, GLOO, UNDEFINED = "mpi", "nccl", "gloo", "undefined"

    def __new__(cls, name: str):
        return super().__new__(cls, name.lower())


def is_available() -> bool:
    """PyTorch's default builds have distributed on Linux and Windows, not on macOS."""
    return sys.platform.startswith("linux") or sys.platform == "win32"


def _backend_name(backend) -> str:
    """PyTorch's names mapped to tapelab's two: cpu work goes over MPI (gloo's role), cuda over NCCL."""
    parts = {p.split(":")[-1] for p in str(backend or "mpi").lower().split(",")}
    if parts == {"nccl"}:
        return "nccl"
    if parts <= {"mpi", "gloo", "nccl"}:   # "cpu:gloo,cuda:nccl": MPI, cuda tensors through the host
        return "mpi"
    raise ValueError(f"Invalid backend {backend!r}: tapelab.distributed has 'mpi' (and 'gloo', its alias) for cpu "
                     "tensors and 'nccl' for cuda tensors")


def init_process_group(backend=None, init_method: str | None = None, timeout=None, world_size: int = -1,
                       rank: int = -1, store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the job's default process group.

    Args:
        backend: ``"mpi"`` or ``"gloo"`` (both MPI, for cpu tensors) or ``"nccl"`` (cuda tensors).
        world_size, rank: if given (or set as ``WORLD_SIZE``/``RANK``), must equal MPI's.

    Example::

        >>> dist.init_process_group("gloo")     # under python -m tapelab.distributed.run
        >>> dist.get_rank(), dist.get_world_size()
    """
    if world() is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = _backend_name(backend)
    comm = mpi().COMM_WORLD
    for what, given, env, actual in (("world_size", world_size, "WORLD_SIZE", comm.Get_size()),
                                     ("rank", rank, "RANK", comm.Get_rank())):
        want = given if given != -1 else env_int(env, actual)
        if want != actual:
            raise ValueError(f"init_process_group: {what}={want} but MPI started this process as {what} {actual} of "
                             f"{comm.Get_size()}; start the ranks with python -m tapelab.distributed.run "
                             f"--nproc-per-node {want if what == 'world_size' else '<n>'} (or mpiexec -n <n>)")
    comm = comm.Dup()   # tapelab's own communicator: its messages never meet the script's own MPI calls
    if name == "nccl":
        be = NCCLBackend(comm, device_id.index if device_id is not None else env_int("LOCAL_RANK", 0))
    else:
        be = MPIBackend(comm)
    set_world(ProcessGroup(be, list(range(comm.Get_size())), group_name or "default"))


def destroy_process_group(group=None) -> None:
    """Finish and free ``group`` (the default group and all others when None)."""
    if group is None:
        if world() is None:
            raise AssertionError("Process group cannot be None")   # PyTorch's check, word for word
        set_world(None)
    else:
        resolve(group).shutdown()


def is_initialized() -> bool:
    """Whether the default process group exists."""
    return world() is not None


def get_rank(group=None) -> int:
    """This process's rank in ``group``."""
    return resolve(group).rank()


def get_world_size(group=None) -> int:
    return resolve(group).size()


def get_backend(group=None) -> str:
    return Backend(resolve(group).name())


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization: bool = False,
              group_desc: str | None = None, device_id=None, sort_ranks: bool = True):
    """A group of the global ``ranks`` (all when None). Every rank of the default group calls it;
    the others get ``GroupMember.NON_GROUP_MEMBER`` (None)."""
    w = resolve(None)
    ranks = list(range(w.size()) if ranks is None else ranks)
    ranks = sorted(ranks) if sort_ranks else ranks
    bad = [r for r in ranks if not 0 <= r < w.size()]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are not in the world of {w.size()}")
    sub = w.submit("new_group", lambda: w.backend.split(ranks))._future.wait()
    if sub is None:
        return None
    g = ProcessGroup(sub, ranks, group_desc or f"group{ranks}")
    add_group(g)
    return g


def get_global_rank(group, group_rank: int) -> int:
    return resolve(group).ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    return resolve(group).group_rank(global_rank, "global_rank")


def get_process_group_ranks(group) -> list[int]:
    return list(resolve(group).ranks)


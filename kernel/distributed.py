"""``%%distributed -n 4 [--timeout S] [--tape]``: run a cell on N ranks of ipyparallel MPI engines.

The first such cell starts the engines under the environment's ``mpiexec`` (the engines are MPI
ranks, with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` set, so the cell
calls ``init_process_group`` as a script would); later cells with the same N reuse them. Each
rank's output is shown as it comes, prefixed ``[rank r]``. A rank that raises (while the others
may sit in a collective, which would make ipyparallel wait for ever), or a cell still running at
the timeout, stops the engines and raises :class:`DistributedCellError` naming the rank and its
traceback. With ``--tape``, rank 0 records the cell under a ``LiveTape`` whose view-model deltas
(at most ``TAPE_RATE`` a second) travel to the notebook as ipyparallel data messages
(``publish_data``, one key per delta, numbered); the notebook feeds them, in order, to a
``TapeView`` below the cell while the cell runs, and gives it rank 0's final graph at the end.
Needs the ``mpi`` extra (ipyparallel, mpi4py, mpich).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import time
from typing import Callable

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

__all__ = ["DistributedCellError", "RankCluster", "DistributedMagics", "record_rank0"]

TAPE_RATE = 10.0           # deltas a second from rank 0's tape (one every 100 ms at most)
DELTA_KEY = "tapelab_tape_delta_"   # + the delta's number, from 1: ipyparallel keeps the latest value per key


class DistributedCellError(RuntimeError):
    """A rank of a ``%%distributed`` cell failed or the cell ran past its timeout."""


class RankCluster:
    """N ipyparallel engines started as MPI ranks; ``run(code)`` runs code on all of them."""

    def __init__(self, n: int, master_port: int = 29500) -> None:
        self.n, self.master_port = n, master_port
        self.cluster = self.client = None
        self.ranks: dict[int, int] = {}     # engine id -> MPI rank
        self.rank0_graph: dict | None = None

    def start(self) -> "RankCluster":
        import ipyparallel as ipp
        from tapelab.distributed.run import mpiexec
        self.cluster = ipp.Cluster(engines="mpi", n=self.n, log_level=40)
        self.cluster.config.MPILauncher.mpi_cmd = [mpiexec()]     # the environment's MPICH, not one on PATH
        self.client = self.cluster.start_and_connect_sync()
        self.client.wait_for_engines(self.n, timeout=120)
        view = self.client[:]
        got = view.apply_sync(_mpi_rank)
        self.ranks = dict(zip(self.client.ids, got))
        for eid, rank in self.ranks.items():
            self.client[eid].apply_sync(_set_env, {"RANK": str(rank), "LOCAL_RANK": str(rank),
                                                   "WORLD_SIZE": str(self.n), "LOCAL_WORLD_SIZE": str(self.n),
                                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.master_port)})
        return self

    def run(self, code: str, timeout: float = 300.0, write: Callable[[str], None] = sys.stdout.write,
            tape: bool = False, on_delta: Callable[[dict], None] | None = None) -> dict:
        """Run ``code`` on every rank, streaming ``[rank r]`` output through ``write``; returns
        {rank: "ok"}. A failing rank or the timeout stops the engines and raises DistributedCellError.
        With ``tape``, rank 0 records the cell (``record_rank0``): each view-model delta it
        publishes is passed to ``on_delta`` as it arrives, in order, and ``self.rank0_graph`` is the
        tape's final graph (what ``TapeView`` draws), fetched once the cell is done."""
        import ipyparallel as ipp
        rank0 = next(eid for eid, r in self.ranks.items() if r == 0)
        jobs = {self.ranks[eid]: self.client[eid].execute(_TAPED.format(code=code) if tape and eid == rank0 else code,
                                                          block=False, silent=False)
                for eid in self.client.ids}
        shown = {r: 0 for r in jobs}
        deltas = 0
        deadline = time.monotonic() + timeout
        while True:
            if tape and on_delta is not None:
                deltas = _pass_deltas(jobs[0], deltas, on_delta)
            for r in sorted(jobs):
                text = jobs[r].stdout + jobs[r].stderr if isinstance(jobs[r].stdout, str) else ""
                if len(text) > shown[r]:
                    for line in text[shown[r]:].splitlines(keepends=True):
                        write(f"[rank {r}] {line}")
                    shown[r] = len(text)
            failed = [r for r in sorted(jobs) if jobs[r].ready() and not jobs[r].successful()]
            if failed:
                r = failed[0]
                try:
                    jobs[r].get(0)
                    why = "an unknown error"
                except ipp.RemoteError as e:
                    why = _ANSI.sub("", "".join(line + "\n" for line in e.render_traceback()))
                except Exception as e:   # the engine died: ipyparallel reports it as its own error
                    why = f"{type(e).__name__}: {e}"
                self.stop()
                raise DistributedCellError(f"rank {r} of {self.n} failed (the engines were stopped):\n{why}")
            if all(j.ready() for j in jobs.values()):
                if tape and on_delta is not None:
                    _pass_deltas(jobs[0], deltas, on_delta)
                if tape:
                    self.rank0_graph = self.client[rank0].pull("_tapelab_rank0_graph", block=True)
                return {r: "ok" for r in jobs}
            if time.monotonic() > deadline:
                waiting = [r for r in sorted(jobs) if not jobs[r].ready()]
                self.stop()
                raise DistributedCellError(f"the cell did not finish within {timeout:g} s on ranks {waiting} "
                                           "(the engines were stopped)")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.cluster is not None:
            try:
                self.cluster.stop_cluster_sync()
            finally:
                self.cluster = self.client = None


def _pass_deltas(job, done: int, on_delta: Callable[[dict], None]) -> int:
    """Give ``on_delta`` rank 0's deltas numbered past ``done`` that have arrived (in order, none
    skipped: a later one waits for its predecessor); returns the number of the last one given."""
    data = getattr(job, "data", None) or {}
    while f"{DELTA_KEY}{done + 1}" in data:
        done += 1
        on_delta(data[f"{DELTA_KEY}{done}"])
    return done


def record_rank0(code: str, namespace: dict, publish: Callable[[dict], None] | None = None) -> dict:
    """Run ``code`` in ``namespace`` under a ``LiveTape`` (on rank 0's engine); every delta goes to
    ``publish`` as ``{DELTA_KEY + n: delta}`` (default: ipyparallel's ``publish_data``, which sends
    it to the notebook on the engine's IOPub stream while the cell runs). Returns the final graph."""
    from tapelab.widgets.live import LiveTape
    if publish is None:
        from ipyparallel.datapub import publish_data as publish
    sent = [0]

    def ship(delta: dict) -> None:
        sent[0] += 1
        publish({f"{DELTA_KEY}{sent[0]}": delta})

    with LiveTape(sinks=[ship], rate=TAPE_RATE, title="rank 0") as rec:
        exec(compile(code, "<cell>", "exec"), namespace)
    return rec.graph()


# rank 0's cell under a live tape; the final graph (a JSON-able dict) is left in its namespace to pull
_TAPED = """from tapelab.kernel.distributed import record_rank0 as _tapelab_record_rank0
_tapelab_rank0_graph = _tapelab_record_rank0({code!r}, globals())
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")   # the engines' tracebacks come colored


def _mpi_rank() -> int:
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank()


def _set_env(values: dict) -> None:
    os.environ.update(values)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%distributed", add_help=False)
    p.add_argument("-n", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--tape", action="store_true", help="show rank 0's live tape below the cell")
    return p


@magics_class
class DistributedMagics(Magics):
    """``%%distributed -n N [--timeout S]`` and ``%distributed_stop``."""

    cluster: RankCluster | None = None

    @cell_magic
    def distributed(self, line: str, cell: str):
        """Run the cell on N MPI ranks (ipyparallel engines); a failing rank raises DistributedCellError."""
        try:
            args = _parser().parse_args(shlex.split(line))
        except SystemExit:
            print("usage: %%distributed [-n N] [--timeout SECONDS] [--tape]")
            return None
        if self.cluster is not None and (self.cluster.n != args.n or self.cluster.cluster is None):
            self.cluster.stop()
            self.cluster = None
        if self.cluster is None:
            self.cluster = RankCluster(args.n).start()
        view = handle = None
        if args.tape:
            from IPython.display import display
            from tapelab.widgets import TapeView
            view = TapeView(title="rank 0")
            handle = display(view, display_id=True)
            view.set_running(True)
        try:
            self.cluster.run(cell, args.timeout, write=sys.stdout.write, tape=args.tape,
                             on_delta=view.send_delta if view is not None else None)
        except DistributedCellError:
            self.cluster = None
            raise
        finally:
            if view is not None:
                view.set_running(False)
        if view is not None:
            view.graph = self.cluster.rank0_graph
            if handle is not None:
                handle.update(view)   # the saved output carries the final graph
        return None

    @line_magic
    def distributed_stop(self, line: str = ""):
        """Stop the engines of ``%%distributed``."""
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

"""``python -m tapelab.distributed.run`` (torchrun's role): start a script's ranks under MPI.

    python -m tapelab.distributed.run --nproc-per-node 4 train.py --epochs 3

runs ``mpiexec -n 4 python -m mpi4py -m tapelab.distributed.worker train.py --epochs 3``: each
rank gets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and
``MASTER_PORT`` as from torchrun. ``python -m mpi4py`` turns an uncaught exception into an
``MPI_Abort`` of the whole job (without it the other ranks would wait in their collectives for
ever); MPICH's ``MPIEXEC_TIMEOUT`` and the launcher's own deadline (``--timeout``) end a job that
hangs. When the job fails, the launcher says which rank failed and why: its traceback, the
signal that killed it, or the ranks still running at the deadline, and exits non-zero.
"""
from __future__ import annotations

import argparse
import os
import shutil
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ._rank_watch import RankWatch

__all__ = ["main", "mpiexec", "launch", "failure_report"]


def mpiexec() -> str:
    """The MPI launcher beside this Python (the venv's, from the mpich wheel), else the one on PATH."""
    here = Path(sys.executable).with_name("mpiexec")
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("no mpiexec found: pip install 'tapelab[mpi]' (mpi4py, mpich) into this environment")
    return found


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tapelab.distributed.run",
                                description="Start N ranks of a training script under MPI (torchrun's role).")
    p.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc", type=int, default=1)
    p.add_argument("--nnodes", type=str, default="1", help="only 1 (this machine)")
    p.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=29500)
    p.add_argument("--standalone", action="store_true", help="accepted, as torchrun's (one node)")
    p.add_argument("--timeout", type=float, default=float(os.environ.get("TAPELAB_DIST_TIMEOUT", 600)),
                   help="seconds before a job that has not finished is ended (default 600)")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p


def launch(script: str, args: list[str], nproc: int, timeout: float = 600.0, module: bool = False,
           master_addr: str = "127.0.0.1", master_port: int = 29500) -> tuple[int, str]:
    """Run the ranks; returns (exit code, failure report or ""). Output streams to this process's."""
    with tempfile.TemporaryDirectory(prefix="tapelab-run-") as status:
        env = dict(os.environ, WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR=master_addr,
                   MASTER_PORT=str(master_port), GROUP_RANK="0", TAPELAB_RUN_STATUS=status,
                   MPIEXEC_TIMEOUT=str(max(1, int(timeout))), TORCHELASTIC_RUN_ID=f"tapelab-{os.getpid()}")
        cmd = [mpiexec(), "-n", str(nproc), sys.executable, "-m", "mpi4py", "-m", "tapelab.distributed.worker",
               *(["-m"] if module else []), script, *args]
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        seen: list[str] = []
        watch = RankWatch(Path(status), nproc).start()
        pumps = [threading.Thread(target=_pump, args=(src, dst, seen), daemon=True)
                 for src, dst in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr))]
        for t in pumps:
            t.start()
        timed_out = False
        try:
            code = proc.wait(timeout=timeout + 10)   # MPIEXEC_TIMEOUT first; this if mpiexec itself hangs
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait()
        for t in pumps:
            t.join(timeout=5)
        watch.stop()
        if code == 0 and not timed_out:
            return 0, ""
        return (code or 1), failure_report(Path(status), nproc, code, timeout, timed_out, "".join(seen),
                                           watch.ended)


def _pump(src, dst, seen: list[str]) -> None:
    """Copy the ranks' output through as it comes, keeping mpiexec's banners for the report."""
    for raw in iter(src.readline, b""):
        line = raw.decode(errors="replace")
        dst.write(line)
        dst.flush()
        if "PID" in line or "EXIT CODE" in line or "TIMEOUT" in line.upper():
            seen.append(line)


def failure_report(status: Path, nproc: int, code: int, timeout: float, timed_out: bool, banner: str = "",
                   ended: list[list[int]] | None = None) -> str:
    """Which ranks failed and why, from the files the workers left in ``status``, the order in which
    the ranks' processes ended (``ended``, from ``RankWatch``) and mpiexec's "BAD TERMINATION"
    banner (``PID n RUNNING AT``, ``EXIT CODE: s``) for a rank that was killed."""
    lines = []
    for r in range(nproc):
        err = status / f"rank{r}.error"
        if err.exists():
            lines.append(f"rank {r} (local_rank {r}) failed with:\n{err.read_text().rstrip()}")
    finished = {r for r in range(nproc) if (status / f"rank{r}.done").exists()}
    started = {r for r in range(nproc) if (status / f"rank{r}.pid").exists()}
    if not lines:
        vanished = sorted(started - finished)
        if timed_out or "TIMED OUT" in banner:   # hydra: "APPLICATION TIMED OUT", exit code 255
            lines.append(f"the job did not finish within the timeout of {timeout:g} s; ranks still running: "
                         f"{vanished or sorted(set(range(nproc)) - finished)}")
        elif vanished:
            pid_of = {r: (status / f"rank{r}.pid").read_text().strip() for r in started}
            rank_of = {p: r for r, p in pid_of.items()}
            named = _first_to_end(ended or [], finished) or [
                rank_of[p] for p in re.findall(r"PID (\d+) RUNNING", banner) if p in rank_of]
            codes = dict(re.findall(r"PID (\d+) RUNNING.*?EXIT CODE: (\d+)", banner, re.S))
            for r in named:
                signal_ = codes.get(pid_of[r]) or next(iter(codes.values()), None)
                sig = f" by signal {signal_}" if signal_ else ""
                lines.append(f"rank {r} (pid {pid_of[r]}) was killed{sig} "
                             f"(no Python traceback); the other ranks were stopped")
            for r in ([] if named else vanished):
                lines.append(f"rank {r} (pid {pid_of[r]}) exited without "
                             f"finishing the script and without a Python traceback: it was killed (a signal, "
                             f"out of memory) or called os._exit")
        else:
            lines.append("a rank failed before it started the script (mpiexec could not start it)")
    if timed_out and lines and "timeout" not in lines[-1]:
        lines.append(f"the job was ended after the timeout of {timeout:g} s")
    return "\n".join([f"tapelab.distributed.run: the job failed (mpiexec exit code {code}, {nproc} ranks)", *lines])


def _first_to_end(ended: list[list[int]], finished: set[int]) -> list[int]:
    """The unfinished rank that ended before every other unfinished one, alone; [] on a tie."""
    for group in ended:
        group = [r for r in group if r not in finished]
        if group:
            return group if len(group) == 1 else []
    return []


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    if ns.nnodes not in ("1", "1:1"):
        raise SystemExit("tapelab.distributed.run: only one node (--nnodes 1) is supported")
    code, report = launch(ns.script, ns.args, ns.nproc, ns.timeout, ns.module, ns.master_addr, ns.master_port)
    if report:
        print(report, file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())

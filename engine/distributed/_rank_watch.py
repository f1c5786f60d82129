"""The order in which a job's rank processes end, seen as it happens.

When one rank is killed (SIGKILL, the OOM killer), MPICH's hydra kills the others with SIGKILL too, and
its "BAD TERMINATION" banner names one PID, which under load can be a rank hydra killed while
cleaning up (both ended by signal 9 before hydra looked). The ranks are hydra's children, not the
launcher's, so the launcher cannot ``wait`` for them; it watches each one's ``pidfd`` instead (Linux
5.3+): a pidfd turns readable the moment its process ends, and a thread blocked in ``poll`` wakes
then. A rank that ends alone, before any other, is the one that failed; ranks seen ending in the
same wake-up are a tie the caller breaks with the banner.
"""
from __future__ import annotations

import os
import select
import threading
from pathlib import Path

__all__ = ["RankWatch"]


class RankWatch:
    """Watches ``rank<r>.pid`` files appear in ``status`` and records the ranks' ends in order:
    ``ended`` is a list of groups (sorted rank lists), one per wake-up that saw ranks end."""

    def __init__(self, status: Path, nproc: int):
        self.status, self.nproc = Path(status), nproc
        self.ended: list[list[int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tapelab-rank-watch", daemon=True)

    @staticmethod
    def available() -> bool:
        return hasattr(os, "pidfd_open") and hasattr(select, "poll")

    def start(self) -> "RankWatch":
        if self.available():
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _pid(self, rank: int) -> int | None:
        try:
            return int((self.status / f"rank{rank}.pid").read_text())
        except (OSError, ValueError):       # not written yet, or half written
            return None

    def _run(self) -> None:
        poller, fds, known = select.poll(), {}, set()
        try:
            while not self._stop.is_set():
                gone = []
                for r in range(self.nproc):
                    if r in known or (pid := self._pid(r)) is None:
                        continue
                    known.add(r)
                    try:
                        fd = os.pidfd_open(pid)
                    except ProcessLookupError:
                        gone.append(r)
                        continue
                    fds[fd] = r
                    poller.register(fd, select.POLLIN)
                # short waits while pid files are still to come; a wake-up per end after that
                for fd, _ in poller.poll(10 if len(known) < self.nproc else 100):
                    poller.unregister(fd)
                    gone.append(fds.pop(fd))
                    os.close(fd)
                if gone:
                    self.ended.append(sorted(gone))
        finally:
            for fd in fds:
                os.close(fd)

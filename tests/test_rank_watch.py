"""The launcher names the rank that was killed from the order the ranks' processes ended
(``RankWatch``), not from mpiexec's banner, which under load can name a rank hydra killed while
cleaning up. Real processes, real signals; no MPI needed."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tapelab.distributed._rank_watch import RankWatch
from tapelab.distributed.run import failure_report

pytestmark = pytest.mark.skipif(not RankWatch.available(), reason="needs os.pidfd_open (Linux 5.3+)")


def _sleepers(tmp_path, n):
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(n)]
    for r, p in enumerate(procs):
        (tmp_path / f"rank{r}.pid").write_text(str(p.pid))
    return procs


def _wait_for(cond, what):
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_the_watch_records_the_order_the_ranks_end(tmp_path):
    procs = _sleepers(tmp_path, 3)
    watch = RankWatch(tmp_path, 3).start()
    try:
        time.sleep(0.1)                           # the watch has opened every rank's pidfd
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        _wait_for(lambda: watch.ended, "rank 1's end was not seen")
        for p in (procs[0], procs[2]):
            p.kill()
            p.wait()
        _wait_for(lambda: sum(map(len, watch.ended)) == 3, "the other ends were not seen")
    finally:
        watch.stop()
        for p in procs:
            p.kill()
    assert watch.ended[0] == [1]
    assert sorted(r for g in watch.ended for r in g) == [0, 1, 2]


def test_a_rank_gone_before_the_watch_saw_it_counts_as_ended(tmp_path):
    (tmp_path / "rank0.pid").write_text(str(2 ** 22 + 12345))   # above pid_max: no such process
    watch = RankWatch(tmp_path, 1).start()
    _wait_for(lambda: watch.ended, "the missing process was not recorded")
    watch.stop()
    assert watch.ended == [[0]]


_BANNER = ("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID {pid} RUNNING AT vm\n"
           "=   EXIT CODE: 9\n")


def _status(tmp_path, pids, done=()):
    for r, pid in enumerate(pids):
        (tmp_path / f"rank{r}.pid").write_text(str(pid))
    for r in done:
        (tmp_path / f"rank{r}.done").write_text("")


def test_the_report_names_the_first_rank_to_end_over_the_banner(tmp_path):
    """The race seen in CI: rank 1 SIGKILLed itself, hydra killed rank 0 and its banner named rank 0."""
    _status(tmp_path, [100, 101])
    report = failure_report(tmp_path, 2, 9, 60, False, _BANNER.format(pid=100), ended=[[1], [0]])
    assert "rank 1 (pid 101) was killed by signal 9 (no Python traceback)" in report
    assert "rank 0" not in report


def test_a_tie_or_no_watch_falls_back_to_the_banner(tmp_path):
    _status(tmp_path, [100, 101])
    for ended in ([[0, 1]], None, []):
        report = failure_report(tmp_path, 2, 9, 60, False, _BANNER.format(pid=101), ended=ended)
        assert "rank 1 (pid 101) was killed by signal 9" in report and "rank 0" not in report


def test_a_rank_that_finished_first_is_not_the_one_named(tmp_path):
    _status(tmp_path, [100, 101, 102], done=[0])
    report = failure_report(tmp_path, 3, 9, 60, False, "", ended=[[0], [2], [1]])
    assert "rank 2 (pid 102) was killed (no Python traceback)" in report
    assert "rank 1 (pid" not in report and "rank 0 (pid" not in report

"""bench/run.py runs: with --processes each library times its side in a child process of its own.

Checks the table's shape, never timing values (issue 17: the 2-thread comparison needs the two
libraries' thread pools in separate processes)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME = r"[\d.]+ (?:µs|ms|s)"


def test_processes_mode_prints_a_row_with_both_sides():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "-k", "chain16 fwd (", "--quick",
                          "--reps", "1", "--processes"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"processes\s*: one per library.*tapelab \+ numpy floor \(pid \d+\), torch \(pid \d+\)",
                     out.stdout), out.stdout
    row = re.search(rf"^chain16 fwd \(recording\)\s+({TIME})\s+({TIME})\s+[\d.]+x\s+({TIME})", out.stdout, re.M)
    assert row, out.stdout                      # tapelab, torch and the numpy floor, from two processes
    assert re.search(r"chain16 fwd \(recording\): first-step loss tapelab [\d.]+, torch [\d.]+: agree", out.stdout)
    assert "not separate" not in out.stdout     # neither child imported the other library
    assert "error:" not in out.stdout, out.stdout

"""``Timer``: ``timeit`` with warm-up, a set thread count, device synchronisation and replicates.

PyTorch's ``torch.utils.benchmark.Timer`` on tapelab: the same constructor, the same measuring
loops (``timeit``, ``blocked_autorange``, ``adaptive_autorange``) and the same ``Measurement``, so a
researcher's timing cell runs unchanged and prints the same table. The default clock synchronises
the accelerator first (tapelab's cuda device runs asynchronously, as PyTorch's does).
"""
from __future__ import annotations

import enum
import sys
import textwrap
import timeit
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from ...base.device import cuda_available
from .common import Measurement, TaskSpec, set_torch_threads

__all__ = ["Timer", "timer", "Language"]


def timer() -> float:
    """``timeit.default_timer`` after the current GPU's queued work has finished (as PyTorch's waits for
    its accelerator: kernels run asynchronously)."""
    if cuda_available():
        import cupy
        cupy.cuda.Device().synchronize()
    return timeit.default_timer()


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


def _strip(code: str) -> str:
    code = textwrap.dedent(code)
    return (code[1:] if code[:1] == "\n" else code).rstrip()


class Timer:
    """Times a Python statement (a string) run with ``globals``, after ``setup``.

    ``label``, ``sub_label``, ``description`` and ``env`` name the measurement for printing and for
    ``Compare`` (rows by sub-label, columns by description, tables by label); ``num_threads`` is the
    intra-op thread count while it runs (1 by default, as PyTorch's: single-threaded speed is the
    comparable figure).
    """

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: dict[str, Any] | None = None,
                 label: str | None = None, sub_label: str | None = None, description: str | None = None,
                 env: str | None = None, num_threads: int = 1, language: Language | str = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise NotImplementedError("Timer(language='c++'): tapelab has no C++ frontend; time the Python "
                                      "statement instead")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can "
                             "simply be moved to `setup`.")
        self._globals = dict(globals or {})
        # the package itself (loaded: this module is inside it), what PyTorch's Timer puts under "torch"
        self._globals.setdefault("torch", sys.modules[__name__.partition(".")[0]])
        stmt, setup = _strip(stmt), _strip(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                   sub_label=sub_label, description=description, env=env,
                                   num_threads=num_threads)

    def _timeit(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> Measurement:
        """One replicate of ``number`` runs, after a warm-up of ``number // 100`` (at least 2)."""
        with set_torch_threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Callable[[int, float], NoReturn] | None = None) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def blocked_autorange(self, callback: Callable[[int, float], NoReturn] | None = None,
                          min_run_time: float = 0.2) -> Measurement:
        """Replicates of one block size until ``min_run_time`` seconds are spent. The block size is
        the first power of ten whose block takes ten thousand times the clock's own overhead and a
        thousandth of ``min_run_time`` (or all of it), after one run that is not timed: a first call
        may compile kernels for its shapes (seconds), which would otherwise set the block size to 1."""
        number = self._block_size(min_run_time)
        times = self._replicates(number, lambda times: True, min_run_time, None, callback)
        return Measurement(number, times, self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01, max_run_time: float = 10.0,
                           callback: Callable[[int, float], NoReturn] | None = None) -> Measurement:
        """Replicates until there are more than three, ``min_run_time`` is spent and the IQR is under
        ``threshold`` of the median, or until ``max_run_time``."""
        number = self._block_size(0.05)

        def settled(times: list[float]) -> bool:
            return len(times) > 3 and Measurement(number, times, self._task_spec).meets_confidence(threshold)
        times = self._replicates(number, settled, min_run_time, max_run_time, callback)
        return Measurement(number, times, self._task_spec)

    def collect_callgrind(self, number: int = 100, *, repeats: int | None = None, collect_baseline: bool = True,
                          retain_out_file: bool = False) -> NoReturn:
        raise NotImplementedError("Timer.collect_callgrind: tapelab does not run statements under Valgrind; "
                                  "use blocked_autorange, or tapelab.profiler for per-op times")

    def _block_size(self, min_run_time: float) -> int:
        with set_torch_threads(self._task_spec.num_threads):
            self._timeit(1)
            overhead = float(np.median([self._timeit(0) for _ in range(5)]))
            number = 1
            while True:
                taken = self._timeit(number)
                if (overhead / taken <= 1e-4 and taken >= min_run_time / 1000) or taken > min_run_time:
                    return number
                if number * 10 > 2147483647:
                    return number
                number *= 10

    def _replicates(self, number: int, can_stop: Callable[[list[float]], bool], min_run_time: float,
                    max_run_time: float | None, callback) -> list[float]:
        times: list[float] = []
        total, done = 0.0, False
        with set_torch_threads(self._task_spec.num_threads):
            while total < min_run_time or not done:
                spent = self._timeit(number)
                times.append(spent)
                total += spent
                if callback:
                    callback(number, spent)
                done = can_stop(times)
                if max_run_time and total > max_run_time:
                    break
        return times

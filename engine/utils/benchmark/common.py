"""What a benchmark measured (``TaskSpec``, ``Measurement``) and how its times are printed.

The statistics and the printed figures follow ``torch.utils.benchmark`` exactly, so a notebook that
prints a ``Measurement`` or a ``Compare`` table shows the same text under tapelab and PyTorch: quantiles
by linear interpolation in float64; units, significant figures and trimming computed in float32, as
PyTorch computes them through its default dtype.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ...base import runtime

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9   # seconds: no measurement is trusted to better than 25 ns
# the spread (IQR / median) above which a measurement carries a warning, and a stronger one
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25
_UNITS = {-3: ("ns", 1e-9), -2: ("us", 1e-6), -1: ("ms", 1e-3)}
_F32 = np.float32


def _log10_f32(x: float) -> float:
    """log10 of ``x`` in float32, correctly rounded (PyTorch's float32 log10 is, numpy's may be an ulp off)."""
    with np.errstate(divide="ignore"):
        return float(_F32(np.log10(np.float64(_F32(x)))))


@dataclasses.dataclass(frozen=True, repr=False)
class TaskSpec:
    """What a Timer runs and how it is labelled (everything but its globals); Measurements of equal
    TaskSpecs are replicates of one another."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    env: str | None = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or a one-line statement), with the sub-label after a colon."""
        sub = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + sub
        if "\n" not in self.stmt:
            return self.stmt + sub
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        if not self.setup or self.setup == "pass":
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """The title, description and setup, as the head of a Measurement's text."""
        parts = [self.title, self.description or "", self.setup_str()]
        return "\n".join(p + "\n" if "\n" in p else p for p in parts if p)


_TASK_FIELDS = frozenset(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(repr=False)
class Measurement:
    """Replicate timings of one TaskSpec: ``raw_times[i]`` is the time of ``number_per_run`` runs.

    Its statistics are per run (``times``); the TaskSpec's fields read through (``m.label``).
    """
    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None   # the caller's own payload, kept as given

    def __post_init__(self) -> None:
        self._stats: tuple | None = None

    def __getattr__(self, name: str) -> Any:
        if name in _TASK_FIELDS:
            return getattr(self.task_spec, name)
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    @property
    def times(self) -> list[float]:
        return [t / self.number_per_run for t in self.raw_times]

    def _statistics(self) -> tuple:
        """``(sorted times, median, mean, p25, p75, warnings)``, computed once."""
        if self._stats is None:
            ordered = tuple(sorted(self.times))
            if not ordered:
                return (), -1.0, -1.0, -1.0, -1.0, ()
            arr = np.asarray(ordered, np.float64)
            p25, median, p75 = (float(q) for q in np.quantile(arr, (0.25, 0.5, 0.75)))
            spread = (p75 - p25) / median
            warnings = ()
            if not spread < _IQR_GROSS_WARN_THRESHOLD:
                warnings = (_warning(spread, "This suggests significant environmental influence."),)
            elif not spread < _IQR_WARN_THRESHOLD:
                warnings = (_warning(spread, "This could indicate system fluctuation."),)
            self._stats = ordered, median, float(arr.mean()), p25, p75, warnings
        return self._stats

    @property
    def median(self) -> float:
        return self._statistics()[1]

    @property
    def mean(self) -> float:
        return self._statistics()[2]

    @property
    def iqr(self) -> float:
        stats = self._statistics()
        return stats[4] - stats[3]

    @property
    def significant_figures(self) -> int:
        """A rough count of trustworthy digits: the median against a 90% interval (z = 1.645) of the
        interquartile times' mean, between 1 and 4. ``Compare`` trims to it."""
        ordered, median = self._statistics()[:2]
        n = len(ordered)
        middle = np.asarray(ordered[n // 4:math.ceil(_F32(3 * n / 4))], _F32)
        std = float(middle.std()) if middle.size else float("nan")
        interval = max(1.645 * std / float(np.sqrt(_F32(middle.size))), _MIN_CONFIDENCE_INTERVAL)
        figures = math.floor(_log10_f32(median / interval))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        return bool(self._statistics()[5])

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        return self.iqr / self.median < threshold

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str | None:
        return self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self) -> str:
        ordered, median, _, p25, p75, warnings = self._statistics()
        n = len(ordered)
        unit, scale = select_unit(median)
        threads = self.task_spec.num_threads
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {(p75 - p25) / scale:.2f} {unit} ({p25 / scale:.2f} to {p75 / scale:.2f})")
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}")
        lines.append("\n".join(warnings))
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Replicates (equal TaskSpecs) pooled into one Measurement each, per run (``number_per_run=1``),
        in first-seen order; metadata is dropped, as it may differ between replicates."""
        groups: dict[TaskSpec, list[float]] = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].extend(m.times)
        return [Measurement(1, times, spec) for spec, times in groups.items()]


def _warning(spread: float, why: str) -> str:
    return (f"  WARNING: Interquartile range is {spread * 100:.1f}% of the median measurement.\n"
            f"           {why}")


def select_unit(t: float) -> tuple[str, float]:
    """The unit (``"ns"``, ``"us"``, ``"ms"``, ``"s"``) and its scale in seconds that print ``t`` seconds
    with one to three digits before the point."""
    group = _log10_f32(t) // 3
    return _UNITS.get(int(group) if math.isfinite(group) else 0, ("s", 1))


def unit_to_english(u: str) -> str:
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` rounded to ``n`` significant figures (3.14159, 2 -> 3.1), half to even."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = math.ceil(_log10_f32(abs(x)))
    scale = 10 ** (magnitude - n)
    return float(np.round(_F32(x / scale)) * _F32(scale))


def ordered_unique(elements: Iterable[Any]) -> list[Any]:
    """The distinct elements in first-seen order."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """tapelab's intra-op threads set to ``n`` inside the block, restored after it."""
    prior = runtime.get_num_threads()
    try:
        runtime.set_num_threads(n)
        yield
    finally:
        runtime.set_num_threads(prior)

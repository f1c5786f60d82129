"""``Compare``: Measurements as text tables, one per label, as ``torch.utils.benchmark`` prints them.

Rows are (thread count, env, sub-label or statement), grouped under a ``N threads:`` rule when the
thread count changes; columns are descriptions. Replicates are merged first. Options trim each
column to its measurements' significant figures, colour each cell against the row's or column's
best, and mark high-variance cells with ``(! XX%)``.
"""
from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence

import numpy as np

from .common import Measurement, _log10_f32, ordered_unique, select_unit, trim_sigfig, unit_to_english

__all__ = ["Colorize", "Compare"]

_BEST, _GOOD, _BAD, _VERY_BAD = "\033[92m", "\033[34m", "\033[2m\033[91m", "\033[31m"
_BOLD, _END = "\033[1m", "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


class Compare:
    """Prints Measurements side by side (``print(compare)`` or ``compare.print()``)."""

    def __init__(self, results: list[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results: Iterable[Measurement]) -> None:
        """Adds Measurements (anything else is a ValueError)."""
        results = list(results)
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour each cell against the best of its column (or of its row)."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        self._highlight_warnings = True

    def print(self) -> None:
        print(str(self))

    def _render(self) -> list[str]:
        by_label: dict = {}
        for m in Measurement.merge(self._results):
            by_label.setdefault(m.label, []).append(m)
        return [_Table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings).render()
                for group in by_label.values()]


def _row_key(m: Measurement) -> tuple:
    return m.num_threads, m.env, m.as_row_name


def _leading_digits(value: float) -> int:
    return math.ceil(_log10_f32(value))


class _Column:
    """One description's cells: a shared number format (digits before and after the point)."""

    def __init__(self, groups: list[tuple], scale: float, trim: bool, highlight: bool) -> None:
        self.groups = groups
        cells = [m for group in groups for m in group]
        self.highlight = highlight and any(m.has_warnings for m in cells if m)
        leading = [_leading_digits(m.median / scale) if m else None for m in cells]
        whole = max(d for d in leading if d is not None)
        decimals = min(max(m.significant_figures - d, 0) for d, m in zip(leading, cells) if m) if trim else 1
        self.trim = trim
        self.template = f"{{:>{whole + decimals + (1 if decimals else 0)}.{decimals}f}}{{:>{7 if self.highlight else 0}}}"

    def cell(self, value: float | None, figures: int, spread: float | None) -> str:
        if value is None:
            return " " * len(self.cell(1, figures, None))
        if self.trim:
            value = trim_sigfig(value, figures)
        mark = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return self.template.format(value, mark)


def _colour(text: str, value: float, best: float) -> str:
    if value <= best * 1.01 or value <= best + 100e-9:
        return _BEST + _BOLD + text + _END * 2
    if value <= best * 1.1:
        return _GOOD + _BOLD + text + _END * 2
    if value >= best * 5:
        return _VERY_BAD + _BOLD + text + _END * 2
    if value >= best * 2:
        return _BAD + text + _END * 2
    return text


class _Table:
    """One label's Measurements laid out as rows by ``_row_key`` and columns by description."""

    def __init__(self, results: list[Measurement], colorize: Colorize, trim: bool, highlight: bool) -> None:
        self.results, self.colorize, self.highlight = results, colorize, highlight
        self.label = results[0].label
        self.unit, self.scale = select_unit(min(m.median for m in results))
        # rows keep the statements' first-seen order within a thread count and env (a stable sort)
        self.row_keys = sorted(ordered_unique(map(_row_key, results)), key=lambda k: k[:2])
        self.column_keys = ordered_unique(m.description for m in results)
        row_at = {k: i for i, k in enumerate(self.row_keys)}
        col_at = {k: j for j, k in enumerate(self.column_keys)}
        self.grid: list[list[Measurement | None]] = [[None] * len(self.column_keys) for _ in self.row_keys]
        for m in results:
            self.grid[row_at[_row_key(m)]][col_at[m.description]] = m
        envs = {m.env for m in results}
        self.show_env = len(envs) > 1
        self.env_width = max(len(e) for e in envs) if self.show_env else 0
        # a row group is the rows of one thread count; a column's number format spans all of them
        self.group_of, groups, prior = [], [], None
        for key, row in zip(self.row_keys, self.grid):
            if key[0] != prior:
                groups.append([])
                prior = key[0]
            groups[-1].append(row)
            self.group_of.append(len(groups) - 1)
        self.columns = [_Column([tuple(row[j] for row in g) for g in groups], self.scale, trim, highlight)
                        for j in range(len(self.column_keys))]

    def _row_strings(self, i: int) -> list[str]:
        row = self.grid[i]
        first = next(m for m in row if m is not None)
        prior_env = self.row_keys[i - 1][1] if i and self.row_keys[i - 1][0] == self.row_keys[i][0] else ""
        env = f"({first.env})" if self.show_env and first.env != prior_env else ""
        out = ["  " + env.ljust(self.env_width + 4) + first.as_row_name]
        for m, column in zip(row, self.columns):
            out.append(column.cell(None, 1, None) if m is None else
                       column.cell(m.median / self.scale, m.significant_figures,
                                   m.iqr / m.median if m.has_warnings else None))
        return out

    def _best(self, i: int) -> Sequence[float | None]:
        row = self.grid[i]
        if self.colorize is Colorize.ROWWISE:
            return [min(m.median for m in row if m is not None)] * (len(row) + 1)
        if self.colorize is Colorize.COLUMNWISE:
            group = self.group_of[i]
            return [min((m.median for m in column.groups[group] if m is not None), default=None)
                    for column in self.columns]
        return [-1] * (len(row) + 1)

    def render(self) -> str:
        strings = [[""] + [str(k) if k is not None else "None" for k in self.column_keys]]
        strings += [self._row_strings(i) for i in range(len(self.row_keys))]
        n_cols = max(len(s) for s in strings)
        for s in strings:
            s.extend([""] * (n_cols - len(s)))
        widths = [max(len(c) for c in col) for col in zip(*strings)]
        lines = ["  |  ".join(c.center(w) for c, w in zip(strings[0], widths))]
        overall = len(lines[0])
        prior_threads = None
        for i, (key, cells) in enumerate(zip(self.row_keys, strings[1:])):
            if key[0] != prior_threads:
                lines.append(f"{key[0]} threads: ".ljust(overall, "-"))
                prior_threads = key[0]
            parts = [cells[0].ljust(widths[0])]
            for text, width, m, best in zip(cells[1:], widths[1:], self.grid[i], self._best(i)):
                text = text.center(width)
                if self.colorize is not Colorize.NONE and m is not None and best is not None:
                    text = _colour(text, m.median, best)
                parts.append(text)
            lines.append("  |  ".join(parts))
        warned = self.highlight and any(m.has_warnings for m in self.results)
        head = f"[{(' ' + (self.label or '') + ' ').center(overall - 2, '-')}]"
        foot = f"Times are in {unit_to_english(self.unit)}s ({self.unit})."
        note = "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n" if warned else ""
        return "\n".join([head, *lines, "", foot, note])

"""Sizes that follow the dynamic axes: what a traced int means once the batch size changes.

A trace specialises every size to the example (``reshape(x, (8, 7, 4))``). The exporter traces
once more per dynamic axis with that axis grown by one and compares: an int that moved is a
``Dim``, ``coef * prod(symbols) + offset`` (``B*H``, ``T - 1``), which the emitter computes at run
time from the inputs' shapes; an int that stayed is a constant.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["Dim", "infer", "ExportError", "EXPORTING"]

EXPORTING: list = []   # non-empty while an export traces (``is_in_onnx_export``)


class ExportError(RuntimeError):
    """The model cannot be exported as traced (the message says which node and why)."""


class Dim:
    """A size computed at run time: ``coef * prod(values of syms) + offset``; ``value`` is the traced one."""

    __slots__ = ("coef", "syms", "offset", "value")

    def __init__(self, coef: int, syms: tuple, offset: int, value: int):
        self.coef, self.syms, self.offset, self.value = coef, syms, offset, value

    def __index__(self) -> int:          # shape arithmetic in lowerings sees the traced value
        return self.value

    def __int__(self) -> int:
        return self.value

    def __eq__(self, other) -> bool:
        """Against a Dim: the same expression; against an int: the traced value (lowerings compare
        sizes, ``out_size != floor``, as the forward did on the example)."""
        if isinstance(other, Dim):
            return (self.coef, self.syms, self.offset) == (other.coef, other.syms, other.offset)
        return self.value == other

    def __hash__(self) -> int:
        return hash(self.value)

    def name(self) -> str:
        """A readable ``dim_param``: ``batch``, ``4*batch``, ``seq-1``."""
        text = "*".join(([str(self.coef)] if self.coef != 1 else []) + list(self.syms))
        return text + (f"{self.offset:+d}" if self.offset else "")

    def __repr__(self) -> str:
        return f"Dim({self.name()}={self.value})"


def _fit(v0: int, vs: list[int], base: dict, grown: list[str]) -> int | Dim:
    """The ``Dim`` that takes ``v0`` at the base sizes and ``vs[k]`` with symbol ``grown[k]`` grown by one."""
    moved = tuple(s for s, v in zip(grown, vs) if v != v0)
    if not moved:
        return v0
    scale = math.prod(base[s] for s in moved)
    if v0 % scale == 0:                              # a monomial: coef * B * T
        coef = v0 // scale
        if all(v == coef * math.prod(base[t] + (t == s) for t in moved) for s, v in zip(grown, vs) if s in moved):
            return Dim(coef, moved, 0, v0)
    if len(moved) == 1:                              # affine in one symbol: a*T + b
        s = moved[0]
        a = vs[grown.index(s)] - v0
        return Dim(a, moved, v0 - a * base[s], v0)
    raise ExportError(f"a size {v0} depends on dynamic axes {moved} in a way tapelab.onnx cannot express "
                      "(only c*prod(axes) or a*axis+b)")


def infer(base: Any, variants: list, sizes: dict, grown: list[str]) -> Any:
    """Walk ``base`` and its ``variants`` (same structure) and turn each int that moved into a ``Dim``."""
    if isinstance(base, bool) or base is None:
        return base
    if isinstance(base, int):
        return _fit(base, [int(v) for v in variants], sizes, grown)
    if isinstance(base, (tuple, list)):
        out = [infer(b, [v[i] for v in variants], sizes, grown) for i, b in enumerate(base)]
        return type(base)(out) if not hasattr(base, "_fields") else type(base)(*out)
    if isinstance(base, slice):
        parts = [infer(getattr(base, a), [getattr(v, a) for v in variants], sizes, grown)
                 for a in ("start", "stop", "step")]
        return slice(*parts)
    if isinstance(base, dict):
        return {k: infer(b, [v[k] for v in variants], sizes, grown) for k, b in base.items()}
    return base

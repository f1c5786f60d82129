"""A fusion group as one kernel description: its inputs, the scalar DAG, its outputs.

The backends (``cpu.py``, ``cuda.py``) read only this: each input's dtype and shape, the
output shape every member broadcasts to, and ``Sym`` expressions for each output. ``lines()``
orders the DAG once (common subexpressions shared) so every backend emits the same
statements in its own syntax.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .symbolic import Sym

__all__ = ["Kernel"]


@dataclass
class Kernel:
    """One fused loop.

    Args:
        name: ``fused(mul, add, tanh)``, the members in graph order.
        inputs: ``(dtype, shape)`` per tensor input, in argument order.
        outputs: one Sym per output.
        shape: the broadcast shape of the loop (every output has it, unless reduced).
        reduce: ``"sum"`` or ``"mean"``: the last output is summed (or averaged) over the whole loop
            into a 0-d result (a trailing ``.sum()``/``.mean()`` fused into the group: no second
            pass, no second dispatch); the outputs before it, if any, are written whole (the one-node
            step's forward keeps sigmoid's output for its backward and sums it in the same loop).
    """
    name: str
    inputs: list
    outputs: list
    shape: tuple
    members: list = field(default_factory=list)
    reduce: str | None = None

    @property
    def out_shape(self) -> tuple:
        """The last output's shape."""
        return () if self.reduce else tuple(self.shape)

    @property
    def out_shapes(self) -> list:
        """Each output's shape: the loop's, the reduced last one's ``()``."""
        return [tuple(self.shape)] * (len(self.outputs) - 1) + [self.out_shape]

    def lines(self) -> list:
        """``(k, sym)`` statements in dependency order (inputs and constants inline), and the
        statement index of each output: ``[(k, sym)], [k_out]``."""
        order: list = []
        seen: dict = {}       # structural key -> canonical Sym (common subexpressions)
        done: dict = {}       # id(sym) -> canonical Sym

        def visit(s: Sym):
            if id(s) in done:
                return done[id(s)]
            args = tuple(visit(a) for a in s.args)
            if s.kind == "input":
                key = ("input", s.value, str(s.dtype))
            elif s.kind == "const":
                key = ("const", type(s.value).__name__, repr(s.value), str(s.dtype))
            else:
                key = (s.kind, str(s.dtype), tuple(id(a) for a in args))
            node = seen.get(key)
            if node is None:
                node = seen[key] = s if s.kind in ("input", "const") else Sym(s.kind, args, s.dtype, s.value)
                if s.kind not in ("input", "const"):
                    order.append(node)
            done[id(s)] = node
            return node

        outs = [visit(o) for o in self.outputs]
        return order, outs

    @property
    def digest(self) -> str:
        """A hash of everything the generated source depends on (the disk cache's key): dtypes,
        ranks and layouts, not sizes, since the loop takes its sizes as arguments."""
        order, outs = self.lines()
        index = {id(s): k for k, s in enumerate(order)}

        def ref(s):
            return f"t{index[id(s)]}" if id(s) in index else repr((s.kind, s.value, str(s.dtype)))
        text = repr((self.reduce, [dt for dt, _ in self.inputs], len(self.shape), self.layouts(), [(s.kind, str(s.dtype), [ref(a) for a in s.args]) for s in order],
                     [ref(o) for o in outs]))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def layouts(self, shapes: list | None = None, out: tuple | None = None) -> list:
        """How each input is read inside the ``(rows, cols)`` loop over the output, ``cols``
        being its last dim: ``"full"`` (same shape), ``"row"`` (broadcast over leading dims),
        ``"col"`` (one value per row), ``"scalar"``, or ``"expand"`` (materialised first).
        ``shapes`` and ``out``: other sizes than the traced ones (a dynamic dimension)."""
        out = tuple(self.shape if out is None else out)
        nd = len(out)
        res = []
        for shape in (shapes if shapes is not None else [sh for _, sh in self.inputs]):
            shape = (1,) * (nd - len(shape)) + tuple(shape)
            size = int(np.prod(shape, dtype=np.int64))
            if shape == out:
                res.append("full")
            elif size == 1:
                res.append("scalar")
            elif nd and all(s == 1 for s in shape[:-1]) and shape[-1] == out[-1]:
                res.append("row")
            elif nd and shape[-1] == 1 and shape[:-1] == out[:-1]:
                res.append("col")
            else:
                res.append("expand")
        return res


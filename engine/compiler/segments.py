"""Graph breaks that split the graph: a call that reads a value to the host (``if x.sum() > 0:``,
``s = y.sum().item()``) runs as compiled segments, as ``torch.compile`` compiles the code before
and after a graph break.

tapelab's trace is one eager run, so the graph after a read is the path that run took: it holds
the branch taken and the ``.item()`` value as a constant. Each read is therefore a guard on the
value read, checked between the segments (the segment before computes the tensor read and the
values the later segments take); torch guards its resumed graph on the same value (an ``.item()``
result is ``L['___stack0'] == ...``). ``.tolist()`` and ``.numpy()`` are value reads as ``.item()``
is (up to 65536 elements kept); a printed tensor is one too unless the text it was printed into is
written again from each call's value (``printed.py``). A value unlike the trace's raises ``Diverged``
before the next segment runs; segments write no state before the last one, and Python between them
is not repeated (as a whole graph does not repeat it; printed text excepted), so the caller retraces
the call eagerly as a new variant of the same guard key (``Variants``).
"""
from __future__ import annotations

import numpy as np

from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.node import map_arg
from ..fx.trace_from_tape import guard_inputs

__all__ = ["SPLIT_READS", "Diverged", "split", "Check", "Segments", "Variants"]

SPLIT_READS = ("bool", "item", "tolist", "numpy", "print")   # the host reads a call is split at


class Diverged(Exception):
    """A value read between segments differs from the traced one: the rest of the graph is not this call's."""


def split(gm: GraphModule, reads: list, name: str) -> list[GraphModule]:
    """``gm`` cut at each host read (``meta["segment"]``, ``trace_with_output(reads=...)``): segment
    ``k`` takes the call's inputs and the values earlier segments hand on, and returns, but for the
    last, ``(the tensor read, *values later segments use)``."""
    nodes = [n for n in gm.graph.nodes if n.target is not guard_inputs]
    places = [n for n in nodes if n.op == "placeholder"]
    ops = [n for n in nodes if n.op not in ("placeholder", "get_attr", "output")]
    last = len(reads)

    def seg(n) -> int:
        return last if n.op == "output" else n.meta.get("segment", 0)
    roots = {n.target: _fetch(gm, n.target) for n in nodes if n.op == "get_attr"}
    out, carried = [], []
    for k in range(last + 1):
        g, env = Graph(), {}
        for p in places:
            env[p] = g.placeholder(p.name)
        for c in carried:
            env[c] = g.placeholder(f"carried_{c.name}")

        def get(a, g=g, env=env):
            if a not in env:                    # a parameter or constant: read where it is used
                env[a] = g.get_attr(a.target)
            return env[a]
        for n in ops:
            if seg(n) == k:
                env[n] = g.node_copy(n, get)
        if k < last:
            later = {node for node, *_ in reads[k + 1:]}
            carried = [n for n in ops if seg(n) <= k and (n in later or any(seg(u) > k for u in n.users))]
            g.output((get(reads[k][0]), *map(get, carried)))
        else:
            g.output(map_arg(gm.graph.output_node().args[0], get))
        module = GraphModule({t: roots[t] for t in roots if any(
            n.op == "get_attr" and n.target == t for n in g.nodes)}, g, f"{name}_segment{k}")
        module.train(gm.training)
        out.append(module)
    return out


def examples(segments: list, flat: tuple) -> list:
    """Each segment's example inputs (for lowering): the call's, then the values the segments before
    hand on, computed by running them unlowered (with grad mode as the call's: which of them require
    grad is part of what a lowered segment is built for)."""
    out, carried = [], ()
    for gm in segments:
        out.append([*flat, *carried])
        if len(out) < len(segments):
            carried = tuple(gm(*flat, *carried))[1:]
    return out


class Check:
    """A read's guard: ``bool(t)`` takes the traced branch; ``t.item()``, ``.tolist()``, ``.numpy()``
    (any other value read) is the traced value, NaN equal to NaN; a tensor printed whole into a slot
    of the replayed text (``printed.Texts``, ``value`` None) is no guard."""
    __slots__ = ("what", "value")

    def __init__(self, what: str, value: np.ndarray | None):
        self.what, self.value = what, (bool(value) if what == "bool" else value)

    def __call__(self, tensor) -> bool:
        data = tensor._data
        if self.value is None:
            return True
        if self.what == "bool":
            return bool(data) == self.value
        return data.shape == self.value.shape and bool(np.array_equal(
            data, self.value, equal_nan=data.dtype.kind in "fc"))

    def __repr__(self) -> str:
        return f"{self.what}() printed again" if self.value is None else f"{self.what}() == {self.value!r}"


class Segments:
    """The compiled segments of one trace, the checks between them and the text the trace printed
    (``printed.Texts``, or None), written once every check has passed (a call that diverges is traced
    again eagerly and prints it itself)."""
    __slots__ = ("runs", "checks", "texts")

    def __init__(self, runs: list, checks: list, texts=None):
        self.runs, self.checks, self.texts = runs, checks, texts

    def __call__(self, *flat):
        carried, reads = (), []
        for run, check in zip(self.runs, self.checks):
            read, *carried = run(*flat, *carried)
            if not check(read):
                raise Diverged
            reads.append(read)
        if self.texts is not None:
            self.texts.write(reads)
        return self.runs[-1](*flat, *carried)


class Variants:
    """A guard key's traces that split at reads, tried in turn (each from its first segment: another
    trace's segments hand on other values); ``Diverged`` when none took this call's path."""
    __slots__ = ("traces",)

    def __init__(self, first: Segments):
        self.traces = [first]

    def __call__(self, *flat):
        for trace in self.traces:
            try:
                return trace(*flat)
            except Diverged:
                continue
        raise Diverged


def _fetch(gm, path: str):
    obj = gm
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj

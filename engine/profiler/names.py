"""PyTorch's names for what the profiler records: each op's ``aten::`` call tree, read from the
op's declaration (``Op.aten``), and the autograd engine's names for backward nodes.

A recorded op becomes the events PyTorch's profiler shows for the same call: ``linear`` on a
matrix with a bias is ``aten::linear`` enclosing ``aten::t`` and ``aten::addmm``. The tree is
written as calls, ``linear(t, addmm)``: a name, optionally followed by the calls it makes in
parentheses; siblings are separated by commas; a name without ``::`` is an ``aten::`` one.
``*`` after a name marks the event that carries the op's FLOPs, memory and device time (as
PyTorch counts ``conv2d``'s FLOPs on ``aten::conv2d``); by default the last leaf that is not a view.

Times inside one op are not measured, so they are laid out: the op's span is its outermost
event's; views and other metadata-only calls (``t``, ``view``, ``expand``...) get 1 ns, the other
children of a call share the rest of its span equally, one after another.

A backward node ``XBackward0`` is two events, as in PyTorch: ``autograd::engine::evaluate_function:
XBackward0`` enclosing ``XBackward0``; ``AccumulateGrad`` is ``torch::autograd::AccumulateGrad``.
"""
from __future__ import annotations

from ..core.registry import REGISTRY

__all__ = ["calls", "parse", "op_name", "node_names", "resolve", "layout", "Resolved"]

# metadata-only calls: they take no measurable time inside an op (1 ns in the layout)
_INSTANT = frozenset(f"aten::{n}" for n in (
    "t", "transpose", "view", "reshape", "_reshape_alias", "_unsafe_view", "expand", "as_strided",
    "permute", "unsqueeze", "squeeze", "select", "slice", "detach", "detach_", "lift_fresh", "empty",
    "empty_like", "empty_strided", "resolve_conj", "resolve_neg", "numpy_T", "alias", "resize_"))

_PARSED: dict = {}    # spec -> tuple of (name, depth, instant, carries), preorder
_STATIC: dict = {}    # raw row name -> parsed calls, for ops whose tree is a constant


def parse(spec: str) -> tuple:
    """``"linear(t, addmm)"`` -> ``(("aten::linear", 0, False, False), ("aten::t", 1, True, False), ...)``:
    the calls in preorder with their depth, whether each is instant, and which carries the op's numbers."""
    got = _PARSED.get(spec)
    if got is not None:
        return got
    out, depth, name = [], 0, ""

    def flush():
        nonlocal name
        n = name.strip()
        if n:
            carries = n.endswith("*")
            n = n.rstrip("*").strip()
            full = n if "::" in n else "aten::" + n
            out.append([full, depth, full in _INSTANT, carries])
        name = ""

    for ch in spec:
        if ch == "(":
            flush()
            depth += 1
        elif ch == ")":
            flush()
            depth -= 1
        elif ch == ",":
            flush()
        else:
            name += ch
    flush()
    if depth != 0 or not out:
        raise ValueError(f"aten call tree {spec!r}: unbalanced parentheses or no name")
    if not any(c[3] for c in out):    # the last leaf that is not instant (else the first call)
        leaves = [i for i, c in enumerate(out) if (i + 1 == len(out) or out[i + 1][1] <= c[1]) and not c[2]]
        out[leaves[-1] if leaves else 0][3] = True
    got = _PARSED[spec] = tuple(tuple(c) for c in out)
    return got


class Resolved(str):
    """A call tree resolved as its op was recorded (a factory's depends on its params), kept as the
    row's name: told apart from an op's name by its type."""
    __slots__ = ()


def resolve(op, input_shapes: tuple = (), params: dict | None = None) -> str:
    """The call tree of one run of ``op``: its declared ``aten`` (a string, or a function of the
    input shapes and the params), or its own name."""
    a = op.aten
    if a is None:
        return op.name
    if isinstance(a, str):
        return a
    try:
        return a(input_shapes, params or {})
    except (IndexError, TypeError, ValueError, KeyError):
        return op.name


def _own(name: str) -> tuple:
    """One call named for the op (``aten::add``); a name that is not an identifier (a compiled
    graph's ``fused(mul, add)``, a library's ``mylib::op``) is kept as it is."""
    return ((f"aten::{name}" if name.isidentifier() else name, 0, False, True),)


def calls(name: str, input_shapes: tuple = ()) -> tuple:
    """The parsed call tree of a recorded row's ``name``: a registered op's name (its declared tree
    for these input shapes), the same followed by ``_`` for an op run in place (``aten::add_``, one
    call), a ``Resolved`` tree (factories), or any other name as one call."""
    got = _STATIC.get(name)
    if got is not None:
        return got
    if type(name) is Resolved:
        return parse(name)
    op = REGISTRY.get(name)
    if op is not None:
        if callable(op.aten):
            return parse(resolve(op, input_shapes))
        got = parse(op.aten) if op.aten is not None else _own(name)
    else:
        base = REGISTRY.get(name[:-1]) if name.endswith("_") else None
        if base is not None and not callable(base.aten):
            top = parse(base.aten)[0][0] if base.aten is not None else _own(base.name)[0][0]
            got = ((top if top.endswith("_") else top + "_", 0, False, True),)
        elif base is not None:
            top = parse(resolve(base, input_shapes))[0][0]
            return ((top if top.endswith("_") else top + "_", 0, False, True),)
        else:
            got = ((name, 0, False, True),)
    _STATIC[name] = got
    return got


def op_name(name: str) -> str:
    """The outermost ``aten::`` name of a recorded row's ``name`` (see ``calls``)."""
    return calls(name)[0][0]


def node_names(name: str) -> tuple:
    """A backward node's events, outermost first: ``("autograd::engine::evaluate_function: X", "X")``."""
    if name == "AccumulateGrad":
        name = "torch::autograd::AccumulateGrad"
    return f"autograd::engine::evaluate_function: {name}", name


def layout(parsed: tuple, start: int, duration: int) -> list:
    """``(start_ns, duration_ns)`` of each call of ``parsed`` inside ``[start, start + duration]``."""
    n = len(parsed)
    if n == 1:
        return [(start, duration)]
    spans = [None] * n

    def place(parent: int, s: int, d: int) -> None:
        # the children of call ``parent`` (-1: the top-level calls): the following calls one level
        # deeper, up to the next call at the parent's level
        depth = parsed[parent][1] if parent >= 0 else -1
        kids, j = [], parent + 1
        while j < n and parsed[j][1] > depth:
            if parsed[j][1] == depth + 1:
                kids.append(j)
            j += 1
        if not kids:
            return
        slow = [k for k in kids if not parsed[k][2]] or kids
        share = max(d - (len(kids) - len(slow)), 0) // len(slow)
        t = s
        for k in kids:
            dk = share if k in slow else min(1, d)
            spans[k] = (t, dk)
            place(k, t, dk)
            t += dk

    place(-1, start, duration)
    return spans

"""Stop conditions for the steppers: small predicates that combine with ``|`` and ``&``."""
from __future__ import annotations

from typing import Callable

__all__ = ["Condition", "when"]


class Condition:
    """A named predicate on a frame (``stepper.current``); ``a | b`` stops on either, ``a & b`` on both.

    ``fn(frame)`` returns a truth value; ``label`` is what ``stepper.stop_reason`` says when it
    fires. Build them with ``tapelab.debug.when(...)`` or from a plain callable.
    """

    __slots__ = ("fn", "label")

    def __init__(self, fn: Callable, label: str | None = None):
        self.fn, self.label = fn, label or getattr(fn, "__name__", "predicate")

    def reason(self, frame) -> str | None:
        """The label of the part that fired on ``frame``, or None."""
        return self.label if self.fn(frame) else None

    def __call__(self, frame) -> bool:
        return self.reason(frame) is not None

    def __or__(self, other) -> "Condition":
        return _Any([self, as_condition(other)])

    def __and__(self, other) -> "Condition":
        other = as_condition(other)
        return Condition(lambda f: self(f) and other(f), f"{self.label} and {other.label}")

    def __repr__(self) -> str:
        return f"Condition({self.label})"


class _Any(Condition):
    __slots__ = ("parts",)

    def __init__(self, parts):
        flat = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, _Any) else [p])
        self.parts = flat
        super().__init__(self._any, " or ".join(p.label for p in flat))

    def _any(self, frame) -> bool:
        return any(p(frame) for p in self.parts)

    def reason(self, frame) -> str | None:
        for p in self.parts:
            r = p.reason(frame)
            if r is not None:
                return r
        return None


def as_condition(c) -> Condition:
    if isinstance(c, Condition):
        return c
    if callable(c):
        return Condition(c)
    raise TypeError(f"a stop condition must be a Condition, a str or a callable, got {type(c).__name__}")


def any_of(conds) -> Condition | None:
    conds = [as_condition(c) for c in conds if c is not None]
    if not conds:
        return None
    return conds[0] if len(conds) == 1 else _Any(conds)


def in_module(path: str | None, prefix: str) -> bool:
    """``prefix`` names ``path`` or one of its ancestors (``"enc"`` covers ``"enc.0"``, not ``"enc2"``)."""
    if path is None:
        return False
    return prefix == "" or path == prefix or path.startswith(prefix + ".")


def _names(x) -> frozenset:
    return frozenset([x] if isinstance(x, str) else x)


def when(name=None, module: str | None = None, op=None, nan: bool = False,
         grad_norm_above: float | None = None, predicate: Callable | None = None) -> Condition:
    """A stop condition for ``run(until=...)``: all the given parts must hold (combine with ``|``).

    Args:
        name: a node name or several (backward: ``"MulBackward0"``; forward: the FX node's name).
        module: a module path prefix (``"encoder"`` covers ``"encoder.layers.0"``).
        op: forward only: the FX opcode (``"call_module"``) or the target's name (``"relu"``);
            backward: the forward op's name (``"log"``).
        nan: a NaN/Inf in a gradient produced (backward) or in the node's output (forward).
        grad_norm_above: backward only: a produced gradient's L2 norm exceeds this.
        predicate: ``fn(frame) -> bool`` on ``stepper.current``.

    >>> stepper.run(until=tapelab.debug.when(name="MulBackward0", module="fc1") | "ExpBackward0")
    """
    parts = []
    if name is not None:
        names = _names(name)
        parts.append(Condition(lambda f: f.name in names, f"name {'/'.join(sorted(names))}"))
    if module is not None:
        parts.append(Condition(lambda f: in_module(f.module, module), f"module {module!r}"))
    if op is not None:
        ops = _names(op)
        parts.append(Condition(lambda f: bool(ops & f.op_names), f"op {'/'.join(sorted(ops))}"))
    if nan:
        parts.append(Condition(lambda f: not f.finite, "nan"))
    if grad_norm_above is not None:
        x = float(grad_norm_above)
        parts.append(Condition(lambda f: f.max_grad_norm > x, f"grad_norm_above {x:g}"))
    if predicate is not None:
        parts.append(as_condition(predicate))
    if not parts:
        raise ValueError("when() needs at least one of name, module, op, nan, grad_norm_above, predicate")
    cond = parts[0]
    for p in parts[1:]:
        cond = cond & p
    return cond

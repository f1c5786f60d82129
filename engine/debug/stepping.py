"""What the backward and the forward steppers share: the current frame, one step, breakpoints."""
from __future__ import annotations


class Stepper:
    """Base of ``BackwardStepper`` and ``ForwardStepper``: subclasses provide ``_advance()`` (run
    one node, return its frame or None at the end) and keep ``_frame``, ``done``, ``breakpoints``."""

    _over = "the walk is over"   # what explain() says once everything ran

    @property
    def current(self):
        """The node that ran last (None before the first step)."""
        return self._frame

    def step(self):
        """Run one node; return its frame (None when everything ran)."""
        frame = self._advance()
        self.stop_reason = "step" if frame is not None else "done"
        return frame

    def _break(self, frame) -> str | None:
        for bp in self.breakpoints:
            if bp["enabled"] and bp["match"](frame):
                bp["hits"] += 1
                return f"breakpoint {bp['label']}"
        return None

    def remove_breakpoint(self, number: int) -> None:
        self.breakpoints = [b for b in self.breakpoints if b["number"] != number]

    def provenance(self) -> dict | None:
        """``current.provenance()``: where the current node's non-finite value comes from."""
        return self._frame.provenance() if self._frame is not None else None

    def explain(self) -> str:
        if self._frame is None:
            return "no step taken yet" if not self.done else self._over
        return self._frame.explain()

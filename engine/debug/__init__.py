"""tapelab.debug: step through backward and forward passes, stop where a NaN first appears.

- ``step_backward(loss)``: the backward walk one graph node at a time (``step``,
  ``step_over(module)``, ``run(until=...)``, ``finish``), with each node's incoming and
  outgoing gradients, saved tensors, forward op, module and source line.
- ``step_forward(module, *args)``: the forward pass one FX node at a time, with each node's
  inputs and output.
- ``when(...)``: stop conditions (node name, module, op, NaN/Inf, gradient norm, predicate),
  combined with ``|`` and ``&``.
- ``record()``: a scope in which the forward pass records what the steppers show (source
  line and op on every node, module paths, tape sequence numbers).

Both steppers are plain objects holding a generator: nothing blocks between steps, so a
notebook kernel stays idle (and widget buttons are served) while a pass is paused.
``stepper.to_dict()`` is a JSON-serialisable snapshot for viewers.

>>> with tapelab.debug.record():
...     loss = model(x).log_softmax(-1)[:, 0].mean()
>>> s = tapelab.debug.step_backward(loss)
>>> s.run(nan=True)
>>> print(s.explain())
"""
from __future__ import annotations

from ..base import events
from ..autograd.anomaly import STATE as _ANOMALY, set_detect_anomaly
from .backward import BackwardFrame, BackwardStepper, StepRecord, step_backward
from .conditions import Condition, when
from .forward import ForwardFrame, ForwardStepper, step_forward

__all__ = ["step_backward", "step_forward", "when", "record", "Condition", "BackwardStepper", "BackwardFrame",
           "StepRecord", "ForwardStepper", "ForwardFrame"]


class record:
    """Record, for the ops run inside, what the debugger shows: the source line and forward op
    on each graph node (anomaly mode's recording), module paths, and tape sequence numbers.

    Args:
        check_nan: also keep anomaly mode's NaN checks (a warning when an op turns finite
            inputs into NaN/Inf) and make ``run()`` stop at a non-finite gradient by default.
            Off by default: the steppers' ``nan=True`` condition finds them.

    Usable as a context manager; restores the previous anomaly mode on exit.
    """

    def __init__(self, check_nan: bool = False):
        self.check_nan = check_nan
        self._anomaly = None
        self._sub = None

    def __enter__(self) -> "record":
        self._anomaly = set_detect_anomaly(True, check_nan=self.check_nan or (
            _ANOMALY.enabled and _ANOMALY.check_nan))
        self._sub = events.subscribe("op", _ignore)  # an op listener makes dispatch number nodes (tape_seq)
        return self

    def __exit__(self, *exc) -> None:
        self._sub.unsubscribe()
        self._anomaly.__exit__(*exc)


def _ignore(_event) -> None:
    return None

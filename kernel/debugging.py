"""``%debug_backward [--retain-graph] [--run-to-nan] [-o NAME] EXPR``: a paused backward pass of
``EXPR`` (a loss tensor) shown as a ``Debugger`` widget below the cell.

The cell ends right away: the kernel is idle while the pass is paused, so the widget's buttons
(Step, Step over module, Continue, Run to NaN) are served between cells. The widget is kept as
``_debugger`` (and ``NAME`` with ``-o``); ``_debugger.stepper`` is the ``BackwardStepper``.
"""
from __future__ import annotations

import argparse
import shlex

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

__all__ = ["DebugMagics"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%debug_backward", add_help=False)
    p.add_argument("--retain-graph", action="store_true")
    p.add_argument("--run-to-nan", action="store_true", help="run to the first NaN/Inf gradient right away")
    p.add_argument("-o", dest="name", default=None)
    p.add_argument("expr", nargs=argparse.REMAINDER)
    return p


@magics_class
class DebugMagics(Magics):
    @line_magic
    def debug_backward(self, line: str = ""):
        """Step through the backward pass of a loss: ``%debug_backward loss`` shows a Debugger."""
        try:
            args = _parser().parse_args(shlex.split(line))
        except SystemExit:
            print("usage: %debug_backward [--retain-graph] [--run-to-nan] [-o NAME] EXPR")
            return None
        expr = " ".join(args.expr).strip()
        if not expr:
            print("usage: %debug_backward [--retain-graph] [--run-to-nan] [-o NAME] EXPR")
            return None
        from tapelab.widgets.debugger import Debugger

        loss = self.shell.ev(expr)
        dbg = Debugger(loss, retain_graph=args.retain_graph, title=expr)
        if args.run_to_nan:
            dbg.run_to_nan()
        self.shell.user_ns["_debugger"] = dbg
        if args.name:
            self.shell.user_ns[args.name] = dbg
        display(dbg)
        return None

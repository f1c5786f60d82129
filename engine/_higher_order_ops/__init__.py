"""``torch._higher_order_ops``: the control-flow operators (``cond``, ``while_loop``, ``scan``, ``associative_scan``,
``map``) by their module paths, run eagerly: tapelab traces nothing, so each calls its functions on real values
(autograd records the ops they run)."""
from .associative_scan import associative_scan
from .cond import cond
from .map import map
from .scan import scan
from .while_loop import while_loop

__all__ = ["cond", "while_loop", "scan", "associative_scan", "map"]

"""OpInfos for reductions."""
from __future__ import annotations

from .core import OpInfo, Sample, arr

RED = [Sample((arr(3, 4),), name="all"), Sample((arr(3, 4),), {"dim": 1}, name="dim1"),
       Sample((arr(2, 3, 4),), {"dim": (0, 2), "keepdim": True}, name="dims_keep"),
       Sample((arr(2, 3),), {"dim": -1}, name="negdim"), Sample((arr(),), name="0d"),
       Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]

OPS = [
    OpInfo("sum", lambda m, a, **kw: m.sum(a, **kw), lambda: RED),
    OpInfo("mean", lambda m, a, **kw: a.mean(**kw), lambda: RED),
]

"""OpInfos for movement ops."""
from __future__ import annotations

from .core import ErrorInput, OpInfo, Sample, arr

OPS = [
    OpInfo("reshape", lambda m, a, s: a.reshape(s), lambda: [Sample((arr(3, 4), (4, 3))), Sample((arr(3, 4), (-1,)), name="infer"),
                                                          Sample((arr(4, 3), (2, 6)), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(3, 4), (5, 3))), RuntimeError, "invalid for input of size 12")]),
    OpInfo("permute", lambda m, a: a.permute(2, 0, 1), lambda: [Sample((arr(2, 3, 4),))]),
    OpInfo("transpose", lambda m, a: a.transpose(0, -1), lambda: [Sample((arr(2, 3, 4),))]),
    OpInfo("expand", lambda m, a: a.expand(2, 3, 4), lambda: [Sample((arr(3, 1),)), Sample((arr(),), name="0d")],
           errors=lambda: [ErrorInput(Sample((arr(3, 2),)), RuntimeError, "must match the existing size")]),
    OpInfo("unsqueeze", lambda m, a: a.unsqueeze(-1), lambda: [Sample((arr(2, 3),))]),
    OpInfo("squeeze", lambda m, a: a.squeeze(), lambda: [Sample((arr(2, 1, 3, 1),))]),
    OpInfo("flatten", lambda m, a: a.flatten(1), lambda: [Sample((arr(2, 3, 4),))]),
]

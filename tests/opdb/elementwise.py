"""OpInfos for elementwise ops."""
from __future__ import annotations

from .core import ErrorInput, OpInfo, Sample, arr, pos

BCAST = [Sample((arr(3, 4), arr(3, 4)), name="same"), Sample((arr(2, 3, 4), arr(4)), name="bcast"),
         Sample((arr(3, 1), arr(1, 4)), name="outer"), Sample((arr(), arr(2, 3)), name="0d"),
         Sample((arr(0, 3), arr(3)), name="empty"), Sample((arr(4, 3), arr(4, 3)), noncontig=True, name="noncontig")]
UNARY = [Sample((arr(3, 4),), name="2d"), Sample((arr(),), name="0d"), Sample((arr(0, 2),), name="empty"),
         Sample((arr(4, 3),), noncontig=True, name="noncontig")]
UNARY_POS = [Sample((pos(3, 4),), name="2d"), Sample((pos(),), name="0d"),
             Sample((pos(4, 3),), noncontig=True, name="noncontig")]


def _shape_error():
    return [ErrorInput(Sample((arr(2, 3), arr(4, 3))), RuntimeError, "size|shape")]


OPS = [
    OpInfo("add", lambda m, a, b: m.add(a, b), lambda: BCAST + [Sample((arr(3), 2.5), name="scalar")],
           errors=_shape_error),
    OpInfo("add_alpha", lambda m, a, b: m.add(a, b, alpha=2), lambda: BCAST[:2]),
    OpInfo("sub", lambda m, a, b: a - b, lambda: BCAST),
    OpInfo("mul", lambda m, a, b: a * b, lambda: BCAST + [Sample((arr(3), 2.5), name="scalar")]),
    OpInfo("div", lambda m, a, b: a / b, lambda: [Sample((arr(3, 4), pos(3, 4))), Sample((arr(2, 3), pos(3)))]),
    OpInfo("neg", lambda m, a: -a, lambda: UNARY),
    OpInfo("exp", lambda m, a: m.exp(a), lambda: UNARY),
    OpInfo("log", lambda m, a: m.log(a), lambda: UNARY_POS),
    OpInfo("sqrt", lambda m, a: m.sqrt(a), lambda: UNARY_POS),
    OpInfo("tanh", lambda m, a: m.tanh(a), lambda: UNARY),
    OpInfo("sigmoid", lambda m, a: m.sigmoid(a), lambda: UNARY),
    OpInfo("relu", lambda m, a: m.relu(a), lambda: UNARY, gradgrad=False),
    OpInfo("pow", lambda m, a, b: m.pow(a, b), lambda: [Sample((pos(3, 4), arr(3, 4))),
                                                      Sample((pos(3, 4), 2.0), name="scalar_exp")]),
]

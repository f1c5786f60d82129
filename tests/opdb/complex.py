"""OpInfos of complex tensors: arithmetic and math with PyTorch's conjugate Wirtinger gradients, the
complex parts and conjugation, and the reductions and views that take them. Samples are ``carr``
arrays (complex64 under float32, complex128 under float64), so gradcheck runs in complex128."""
from __future__ import annotations

from .core import ErrorInput, OpInfo, Sample, arr, carr


def _unary(name, fn, sample=lambda: carr(2, 3)):
    return OpInfo(f"complex.{name}", fn, lambda: [Sample((sample(),), name="plain")])


def _away_from_zero(*shape):
    """Complex values with modulus in [0.5, 2]: log, sqrt, angle, abs, reciprocal and sgn stay smooth."""
    z = carr(*shape)
    return z / abs(z) * arr(*shape, low=0.5, high=2.0)


OPS = [
    OpInfo("complex.mul", lambda m, a, b: a * b,
           lambda: [Sample((carr(2, 3), carr(3)), name="bcast"), Sample((carr(3), arr(2, 3)), name="with_real"),
                    Sample((carr(2, 3), 1.5 - 2j), name="scalar")]),
    OpInfo("complex.div", lambda m, a, b: a / b,
           lambda: [Sample((carr(2, 3), _away_from_zero(3)), name="bcast"),
                    Sample((arr(3), _away_from_zero(3)), name="real_by_complex")]),
    OpInfo("complex.add_sub", lambda m, a, b: (a + b) - 2 * b + 1j,
           lambda: [Sample((carr(2, 3), arr(2, 3)), name="with_real")]),
    OpInfo("complex.pow", lambda m, a, b: a ** b,
           lambda: [Sample((_away_from_zero(3), 2.5), name="scalar_exp"),
                    Sample((_away_from_zero(3), carr(3) * 0.5), name="complex_exp")]),
    _unary("exp", lambda m, x: m.exp(x)),
    _unary("log", lambda m, x: m.log(x), lambda: _away_from_zero(2, 3)),
    _unary("sqrt", lambda m, x: m.sqrt(x), lambda: _away_from_zero(2, 3)),
    _unary("reciprocal", lambda m, x: m.reciprocal(x), lambda: _away_from_zero(2, 3)),
    _unary("sin", lambda m, x: m.sin(x)),
    _unary("cos", lambda m, x: m.cos(x)),
    _unary("tanh", lambda m, x: m.tanh(x), lambda: carr(2, 3) * 0.5),
    _unary("sigmoid", lambda m, x: m.sigmoid(x), lambda: carr(2, 3) * 0.5),
    _unary("abs", lambda m, x: m.abs(x), lambda: _away_from_zero(2, 3)),
    _unary("angle", lambda m, x: m.angle(x), lambda: _away_from_zero(2, 3)),
    _unary("sgn", lambda m, x: m.sgn(x), lambda: _away_from_zero(2, 3)),
    _unary("conj", lambda m, x: m.conj_physical(x) * x.conj()),
    _unary("real_imag", lambda m, x: x.real * 2 - x.imag ** 2),
    _unary("view_as_real", lambda m, x: m.view_as_real(x * 2)),
    OpInfo("complex.view_as_complex", lambda m, x: m.view_as_complex(x) * 2,
           lambda: [Sample((arr(3, 2),), name="plain")],
           errors=lambda: [ErrorInput(Sample((arr(3, 3),)), RuntimeError, "last dimension of size 2")]),
    OpInfo("complex.complex", lambda m, re, im: m.complex(re, im),
           lambda: [Sample((arr(2, 3), arr(3)), name="bcast")]),
    OpInfo("complex.polar", lambda m, r, th: m.polar(r, th),
           lambda: [Sample((arr(3, low=0.5), arr(3)), name="plain")]),
    OpInfo("complex.reductions", lambda m, x: x.sum(0) * x.mean() + x.prod(1).sum(),
           lambda: [Sample((carr(2, 3),), name="plain")]),
    OpInfo("complex.var_norm", lambda m, x: m.stack([x.var(), x.std(1).sum(), m.linalg.vector_norm(x)]),
           lambda: [Sample((carr(2, 3),), name="plain")]),
    OpInfo("complex.movement", lambda m, x: m.cat([x.flip(0), x.mT.reshape(2, 3)])[1:, ::2].roll(1, 0),
           lambda: [Sample((carr(2, 3),), name="plain")]),
    OpInfo("complex.where", lambda m, x, y: m.where(x.real > 0, x, y),
           lambda: [Sample((carr(2, 3), carr(3)), name="bcast")]),
    OpInfo("complex.to_real", lambda m, x: x.to(m.float64 if x.dtype == m.complex128 else m.float32) * x.real,
           lambda: [Sample((carr(3),), name="plain")]),
]

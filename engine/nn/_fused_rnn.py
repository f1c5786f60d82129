"""The LSTM and GRU cell nonlinearities as one op each (``lstm_cell``, ``gru_cell``), after the
matmuls: the composites were ~12 forward dispatches per time step and as many backward nodes.

``lstm_cell(gates, c)`` takes the summed gate pre-activations ``(B, 4H)`` (PyTorch's order i, f,
g, o) and returns ``[h', c']`` side by side ``(B, 2H)``; ``gru_cell(gi, gh, h)`` takes the input
and hidden projections ``(B, 3H)`` (r, z, n) and returns ``h'``. Plain backward is one fused op
per step (extra gradients as extra outputs); under ``create_graph`` the vjp is written in Tensor
ops, so double backward stays exact. Activations are recomputed from the inputs in backward.
"""
from __future__ import annotations

import math

from ..base.grad_mode import is_grad_enabled
from ..core.dispatch import apply
from ..core.registry import Op
from ..core.tensor import Tensor
from ..ops.movement import cat

__all__ = ["lstm_cell", "gru_cell"]


# ---------------------------------------------------------------- ONNX lowerings (``Op.onnx``, engine/onnx)
def _onnx_cols(g, x, k: int, n: int) -> list:
    """The ``n`` column blocks of width ``k`` of ``x (B, n*k)``."""
    return [g.op("Slice", x, g.const([i * k], "int64"), g.const([(i + 1) * k], "int64"), g.const([1], "int64"))
            for i in range(n)]


def _onnx_lstm_cell(g, gates, c):
    i, f, gg, o = _onnx_cols(g, gates, int(g.shape(c)[-1]), 4)
    c2 = g.op("Add", g.op("Mul", g.op("Sigmoid", f), c), g.op("Mul", g.op("Sigmoid", i), g.op("Tanh", gg)))
    return g.op("Concat", g.op("Mul", g.op("Sigmoid", o), g.op("Tanh", c2)), c2, axis=1)


def _onnx_gru_cell(g, gi, gh, hx):
    h = int(g.shape(hx)[-1])
    (ir, iz, inn), (hr, hz, hn) = _onnx_cols(g, gi, h, 3), _onnx_cols(g, gh, h, 3)
    r, z = g.op("Sigmoid", g.op("Add", ir, hr)), g.op("Sigmoid", g.op("Add", iz, hz))
    n = g.op("Tanh", g.op("Add", inn, g.op("Mul", r, hn)))
    return g.op("Add", n, g.op("Mul", z, g.op("Sub", hx, n)))


def _sig(xp, a):
    return 1 / (1 + xp.exp(-a))


# ---------------------------------------------------------------- LSTM
def _lstm_acts(xp, gates):
    h = gates.shape[-1] // 4
    return (_sig(xp, gates[:, :h]), _sig(xp, gates[:, h:2 * h]), xp.tanh(gates[:, 2 * h:3 * h]),
            _sig(xp, gates[:, 3 * h:]))


def _lstm_fwd(xp, gates, c):
    i, f, g, o = _lstm_acts(xp, gates)
    h = c.shape[-1]
    out = xp.empty((c.shape[0], 2 * h), gates.dtype)
    c2 = out[:, h:]
    xp.multiply(f, c, out=c2)
    c2 += i * g
    xp.multiply(o, xp.tanh(c2), out=out[:, :h])
    return out


def _lstm_bwd_fwd(xp, grad, gates, c):
    i, f, g, o = _lstm_acts(xp, gates)
    h = c.shape[-1]
    gh, gc = grad[:, :h], grad[:, h:]
    tc = xp.tanh(f * c + i * g)
    dc2 = gc + gh * o * (1 - tc * tc)
    d = xp.empty(gates.shape, gates.dtype)
    d[:, :h] = dc2 * g * i * (1 - i)
    d[:, h:2 * h] = dc2 * c * f * (1 - f)
    d[:, 2 * h:3 * h] = dc2 * i * (1 - g * g)
    d[:, 3 * h:] = gh * tc * o * (1 - o)
    return d, dc2 * f


def _lstm_vjp(grad, out, gates, c):
    if not is_grad_enabled():
        dgates, dc = apply(_lstm_bwd, grad, gates, c)
        return dgates, dc
    h = c.shape[-1]
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    gh, gc = grad[:, :h], grad[:, h:]
    tc = (f * c + i * g).tanh()
    dc2 = gc + gh * o * (1 - tc * tc)
    dgates = cat([dc2 * g * i * (1 - i), dc2 * c * f * (1 - f), dc2 * i * (1 - g * g), gh * tc * o * (1 - o)], -1)
    return dgates, dc2 * f


# ---------------------------------------------------------------- GRU
def _gru_acts(xp, gi, gh):
    h = gi.shape[-1] // 3
    r = _sig(xp, gi[:, :h] + gh[:, :h])
    z = _sig(xp, gi[:, h:2 * h] + gh[:, h:2 * h])
    n = xp.tanh(gi[:, 2 * h:] + r * gh[:, 2 * h:])
    return r, z, n


def _gru_fwd(xp, gi, gh, hx):
    r, z, n = _gru_acts(xp, gi, gh)
    return n + z * (hx - n)


def _gru_bwd_fwd(xp, grad, gi, gh, hx):
    r, z, n = _gru_acts(xp, gi, gh)
    h = hx.shape[-1]
    dn = grad * (1 - z) * (1 - n * n)
    dgi = xp.empty(gi.shape, gi.dtype)
    dgi[:, :h] = dn * gh[:, 2 * h:] * r * (1 - r)
    dgi[:, h:2 * h] = grad * (hx - n) * z * (1 - z)
    dgi[:, 2 * h:] = dn
    dgh = dgi.copy()
    dgh[:, 2 * h:] *= r
    return dgi, dgh, grad * z


def _gru_vjp(grad, out, gi, gh, hx):
    if not is_grad_enabled():
        return apply(_gru_bwd, grad, gi, gh, hx)
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    dn = grad * (1 - z) * (1 - n * n)
    dr = dn * h_n * r * (1 - r)
    dz = grad * (hx - n) * z * (1 - z)
    return cat([dr, dz, dn], -1), cat([dr, dz, dn * r], -1), grad * z


def _cost(per):
    return lambda shapes, out: per * math.prod(shapes[-1])


_lstm = Op("lstm_cell", _lstm_fwd, _lstm_vjp, promote="common", cost=_cost(20), onnx=_onnx_lstm_cell)
_lstm_bwd = Op("lstm_cell_backward", _lstm_bwd_fwd, None, n_extra=1)
_gru = Op("gru_cell", _gru_fwd, _gru_vjp, promote="common", cost=_cost(20), onnx=_onnx_gru_cell)
_gru_bwd = Op("gru_cell_backward", _gru_bwd_fwd, None, n_extra=2)


def lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """``(h', c')`` from the summed gate pre-activations ``(B, 4H)`` and the cell state ``(B, H)``."""
    hc = apply(_lstm, gates, c)
    h = c.shape[-1]
    return hc[:, :h], hc[:, h:]


def gru_cell(gi: Tensor, gh: Tensor, hx: Tensor) -> Tensor:
    """``h'`` from the input and hidden projections ``(B, 3H)`` and the state ``(B, H)``."""
    return apply(_gru, gi, gh, hx)

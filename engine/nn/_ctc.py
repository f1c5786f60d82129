"""``ctc_loss`` as ops (the composite was ~10 dispatches per frame per sample, and as many backward nodes).

As PyTorch's ``_ctc_loss`` / ``_ctc_loss_backward``: ``ctc_loss_forward`` (not differentiable) runs the
alpha recursion of Graves et al. 2006 (eq. 6-8) in log space over the whole batch at once (frames in a
Python loop, ``(N, S)`` arrays per step, extended labels padded to the longest) and returns the
per-sample negative log likelihoods and the alphas; ``ctc_loss`` passes the losses through and keeps the
alphas for its backward, ``ctc_loss_backward``, which runs the beta recursion (eq. 10-11) and returns
PyTorch's gradient (eq. 16, taken w.r.t. the logits before ``log_softmax``, as PyTorch's kernel does):
``exp(lp) - exp(lcab + nll - lp)`` per frame below the input length, where ``lcab`` sums
``alpha * beta`` over the extended positions of each class; zero past the input length, and for an
infinite loss under ``zero_infinity``. PyTorch has no double backward through it; neither has this.
The argument checks are PyTorch's, in its order, with its messages.
"""
from __future__ import annotations

import math

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..base.grad_mode import is_grad_enabled
from ..core import creation
from ..core.dispatch import apply
from ..core.registry import Op
from ..core.tensor import Tensor

__all__ = ["ctc_loss"]

_WHERE = "(while checking arguments for ctc_loss_allocate_outputs)"


# ---------------------------------------------------------------- the recursions, on backend arrays
def _lattice(xp, lp, targets, input_lengths, target_lengths, *, blank: int, width: int):
    """The emissions ``(T, N, S)`` along each sample's extended labels (blank, l1, blank, ..., blank;
    ``S = 2 * width + 1``), ``-inf`` past its input length and its own ``2 * length + 1`` positions, and
    where a path may skip from ``s - 2`` to ``s`` (the labels differ, PyTorch's rule)."""
    T, N, _ = lp.shape
    il, tl = input_lengths, target_lengths
    j = xp.arange(width)
    if targets.ndim == 1:   # concatenated: sample n's labels start after the lengths before it
        at = (xp.cumsum(tl) - tl)[:, None] + j
        labels = targets[xp.where(j < tl[:, None], at, 0)]
    else:
        labels = targets[:, :width]
    ext = xp.full((N, 2 * width + 1), blank, dtype=targets.dtype)
    ext[:, 1::2] = xp.where(j < tl[:, None], labels, blank)
    skip = xp.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    emit = lp[:, xp.arange(N)[:, None], ext]
    live = (xp.arange(T)[:, None, None] < il[:, None]) & (xp.arange(ext.shape[1]) < (2 * tl + 1)[:, None])
    return xp.where(live, emit, lp.dtype.type(-math.inf)), ext, skip


def _exp(xp, v):
    """``exp`` of ``v <= 0`` (terms less their maximum), correctly rounded in float32 as the C library's
    ``expf`` that PyTorch's kernel calls: numpy's float32 SIMD ``exp``/``log`` are off by up to a few
    ulps, which over a few hundred frames moves a float32 gradient by 1e-5; in float64, rounded once,
    they agree. ``v`` is floored first (numpy's exp of -inf and its underflows take a slow path): below
    -200 float32 rounds to 0 all the same, and below -700 float64 adds nothing to the sum of at least 1
    it goes into (a sum of only those is an all -inf position, see ``_logsumexp``)."""
    if v.dtype == xp.float32:
        return xp.exp(xp.maximum(v, v.dtype.type(-200)), dtype=xp.float64).astype(v.dtype)
    return xp.exp(xp.maximum(v, v.dtype.type(-700)))


def _log(xp, v):
    """``log`` as ``logf`` rounds it (see ``_exp``)."""
    return xp.log(v, dtype=xp.float64).astype(v.dtype) if v.dtype == xp.float32 else xp.log(v)


def _logsumexp(xp, terms):
    """``log(exp(a) + exp(b) + ...)`` over the terms stacked on axis 0, shifted by their maximum and
    summed in order: PyTorch's kernel's arithmetic. Where all are -inf the shift is any finite number
    and the sum (kept off 0, whose log is slow) gets the -inf maximum added: -inf, as there."""
    m = terms.max(axis=0)
    total = _exp(xp, terms - xp.maximum(m, xp.finfo(terms.dtype).min)).sum(axis=0)
    return _log(xp, xp.maximum(total, xp.finfo(terms.dtype).tiny)) + m


def _per_class(xp, ab, ext, C: int, blank: int):
    """``lcab``: the log of the sum of ``alpha * beta`` over each class's extended positions, each class's
    added one position at a time from the last, as PyTorch's kernel does (its float32 gradient's
    rounding, too). A step takes one label position and the blank's above it; a label equal to the
    blank (no path PyTorch's kernel handles either) joins the blank's sum at the end."""
    T, N, S = ab.shape
    acc = xp.full((T, N, C), -math.inf, dtype=ab.dtype)
    rows = xp.arange(N)
    blanks = ab[:, :, S - 1]
    for s in range(S - 2, 0, -2):   # label at s, blank at s - 1
        cls = ext[:, s]
        sums = _logsumexp(xp, xp.stack([acc[:, rows, cls], blanks, ab[:, :, s], ab[:, :, s - 1]]).reshape(2, 2, T, N))
        acc[:, rows, cls], blanks = sums[0], sums[1]
    acc[:, :, blank] = _logsumexp(xp, xp.stack([acc[:, :, blank], blanks]))
    return acc


def _forward(xp, lp, targets, input_lengths, target_lengths, *, blank: int, width: int, device: str):
    """The per-sample ``-log p(target | input)`` and the alphas ``(T, N, 2 + S)`` (two ``-inf`` columns
    first, so the shifted reads of each step are views). Half precision is refused here, after cpu
    autocast had its chance to make it float32 (PyTorch's cpu policy lists ctc_loss)."""
    if lp.dtype not in (xp.float32, xp.float64):
        name = {"float16": "Half", "bfloat16": "BFloat16"}.get(lp.dtype.name, lp.dtype.name)
        raise NotImplementedError(f'"ctc_loss_{device}" not implemented for \'{name}\'')
    emit, _, skip = _lattice(xp, lp, targets, input_lengths, target_lengths, blank=blank, width=width)
    T, N, S = emit.shape
    ninf = lp.dtype.type(-math.inf)
    alpha = xp.full((T, N, S + 2), ninf, dtype=lp.dtype)
    alpha[0, :, 2:4] = emit[0, :, :2]
    for t in range(1, T):
        prev = alpha[t - 1]
        terms = xp.stack([prev[:, 2:], prev[:, 1:-1], xp.where(skip, prev[:, :-2], ninf)])
        xp.add(_logsumexp(xp, terms), emit[t], out=alpha[t, :, 2:])
    il, tl = input_lengths, target_lengths
    last = alpha[il - 1, xp.arange(N)]                       # (N, S + 2) at each sample's last frame
    ends = xp.take_along_axis(last, xp.stack([2 * tl + 2, 2 * tl + 1], axis=1), axis=1)
    loglik = _logsumexp(xp, ends.T)   # an empty target's second end is the -inf pad
    loglik = xp.where(il == 0, xp.where(tl == 0, lp.dtype.type(0), ninf), loglik)
    return -loglik, alpha


def _backward(xp, grad, lp, targets, input_lengths, target_lengths, nll, alpha, *, blank: int, width: int,
              zero_infinity: bool):
    """PyTorch's ``_ctc_loss_backward``: the betas, then eq. 16 per frame and class."""
    emit, ext, skip = _lattice(xp, lp, targets, input_lengths, target_lengths, blank=blank, width=width)
    T, N, S = emit.shape
    C = lp.shape[2]
    il, tl = input_lengths, target_lengths
    ninf = lp.dtype.type(-math.inf)
    s = xp.arange(S)
    ends = (s == 2 * tl[:, None]) | (s == 2 * tl[:, None] - 1)
    start = ends & (xp.arange(T)[:, None, None] == il[:, None] - 1)   # beta starts at the ends, frame il - 1
    skip_up = xp.zeros_like(skip)
    skip_up[:, :-2] = skip[:, 2:]                                # s may skip to s + 2
    beta = xp.full((T + 1, N, S + 2), ninf, dtype=lp.dtype)      # a -inf frame T and two -inf columns last
    for t in range(T - 1, -1, -1):
        nxt = beta[t + 1]
        terms = xp.stack([nxt[:, :-2], nxt[:, 1:-1], xp.where(skip_up, nxt[:, 2:], ninf)])
        step = _logsumexp(xp, terms) + emit[t]
        beta[t, :, :S] = xp.where(start[t], emit[t], step)
    lcab = _per_class(xp, alpha[:, :, 2:] + beta[:T, :, :S], ext, C, blank)   # alpha * beta: emission twice
    out = (xp.exp(lp) - xp.exp(lcab + nll[:, None] - lp)) * grad[:, None]   # one rounding each: numpy's own exp
    keep = xp.arange(T)[:, None] < il
    if zero_infinity:
        keep = keep & (nll != math.inf)
    return xp.where(keep[:, :, None], out, lp.dtype.type(0))


def _passthrough(xp, lp, targets, input_lengths, target_lengths, nll, alpha, **params):
    return nll


def _no_double_backward(*args, **params):
    raise RuntimeError("derivative for aten::_ctc_loss_backward is not implemented")


def _vjp(g, out, lp, targets, input_lengths, target_lengths, nll, alpha, *, blank: int, width: int,
         zero_infinity: bool):
    grad = apply(_ctc_bwd, g, lp, targets, input_lengths, target_lengths, nll, alpha, blank=blank, width=width,
                 zero_infinity=zero_infinity)
    return (grad,) + (None,) * 5


_ctc_fwd = Op("ctc_loss_forward", _forward, None, n_extra=1)
_ctc = Op("ctc_loss", _passthrough, _vjp)
_ctc_bwd = Op("ctc_loss_backward", _backward, _no_double_backward)


# ---------------------------------------------------------------- PyTorch's argument checks
def _host_lengths(value, name: str) -> list:
    """The lengths as Python ints (PyTorch reads them on the host too)."""
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == _dtype.bool:
            raise RuntimeError(f"{name} must be integral")
        return [int(v) for v in value.reshape(-1).tolist()]
    return [int(v) for v in value]


def _check_lengths_kind(input_lengths, target_lengths) -> None:
    """PyTorch takes both lengths as tensors or both as sequences of ints."""
    kinds = []
    for value in (input_lengths, target_lengths):
        if isinstance(value, Tensor):
            kinds.append("Tensor")
        elif isinstance(value, (list, tuple)) and all(hasattr(type(v), "__index__") and not isinstance(v, bool)
                                                      for v in value):   # ints, numpy ints, 0-d integer tensors
            kinds.append("tuple of ints")
        else:
            kinds.append(type(value).__name__)
    if kinds not in (["Tensor", "Tensor"], ["tuple of ints", "tuple of ints"]):
        raise TypeError(f"ctc_loss(): input_lengths and target_lengths must both be Tensors or both tuples of ints, "
                        f"got {kinds[0]} and {kinds[1]}")


def _check(lp: Tensor, targets: Tensor, il: list, tl: list, blank: int) -> None:
    """``ctc_loss_allocate_outputs``'s checks (``lp`` is 3-d when the call's was 2-d)."""
    if lp.ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {lp.ndim}-dimensional tensor for argument #1 "
                           f"'log_probs' {_WHERE}")
    if not 1 <= targets.ndim <= 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional tensor for argument #2 "
                           f"'targets' {_WHERE}")
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if len(il) != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tl) != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    for n in tl:
        if n < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {n} {_WHERE}")
    size = sum(tl) if targets.ndim == 1 else N
    if targets.shape[0] != size:
        raise RuntimeError(f"Expected tensor to have size {size} at dimension 0, but got size {targets.shape[0]} "
                           f"for argument #2 'targets' {_WHERE}")
    if targets.ndim == 2 and targets.shape[1] < max(tl):
        raise RuntimeError(f"Expected tensor to have size at least {max(tl)} at dimension 1, but got size "
                           f"{targets.shape[1]} for argument #2 'targets' {_WHERE}")
    for n in il:
        if n < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {n} {_WHERE}")
        if n > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {n} {_WHERE}")


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification: ``-log`` of the total probability of every alignment of
    each target (blanks between and around its labels) to the input frames."""
    if _DISPATCH.functions is not None and has_tensor_like((log_probs, targets, input_lengths, target_lengths)):
        return handle_torch_function(ctc_loss, (log_probs, targets, input_lengths, target_lengths), log_probs,
                                     targets, input_lengths, target_lengths, blank=blank, reduction=reduction,
                                     zero_infinity=zero_infinity)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    _check_lengths_kind(input_lengths, target_lengths)
    il, tl = _host_lengths(input_lengths, "input_lengths"), _host_lengths(target_lengths, "target_lengths")
    if not log_probs.dtype.is_floating_point:   # float16 and bfloat16: in the forward, after autocast
        raise NotImplementedError(f'"ctc_loss_{log_probs.device.type}" not implemented for '
                                  f"'{log_probs.dtype.scalar_type}'")
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    _check(lp, targets, il, tl, blank)
    dev = lp.device
    args = (lp, targets.to(device=dev, dtype=_dtype.int64), creation.tensor(il, dtype=_dtype.int64, device=dev),
            creation.tensor(tl, dtype=_dtype.int64, device=dev))
    params = dict(blank=int(blank), width=max(tl))
    nll, alpha = apply(_ctc_fwd, *args, **params, device=dev.type)
    if is_grad_enabled() and lp.requires_grad:
        nll = apply(_ctc, *args, nll, alpha, **params, zero_infinity=bool(zero_infinity))
    if zero_infinity:
        nll = nll.where(nll != math.inf, creation.zeros((), dtype=nll.dtype, device=dev))
    if reduction == "mean":
        return (nll / creation.tensor(tl, dtype=nll.dtype, device=dev).clamp_min(1)).mean()
    if reduction == "sum":
        return nll.sum()
    return nll if batched else nll.squeeze(0)

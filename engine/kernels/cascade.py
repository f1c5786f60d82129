"""ATen's cascade sum of ``nll_loss``'s reduction, so a mean or summed class loss rounds as PyTorch's.

``nll_loss`` (and so ``cross_entropy`` without label smoothing) sums the kept samples' losses in the
input's float type through eight partial sums: each kept sample adds into the first, and at a
kept sample whose index is a multiple of 16 (of 256, 4096, ... for the later levels) a level is
flushed into the next. The weighted mean's denominator sums the samples' class weights the same
way; without weights it is the count of kept samples. numpy's pairwise sum rounds differently in
the last bits, which a program printing its loss at full precision shows.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["nll_sums", "nll_reduced"]

_LEVELS = 8
_JIT = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_JIT, inline="always")
def _levels(n):
    """The mask and shift of the cascade's levels for ``n`` samples."""
    power = max(4, int(np.ceil(np.log2(max(n, 2)))) // _LEVELS)
    return (1 << power) - 1, power


@njit(**_JIT, inline="always")
def _add(losses, weights, b, loss, wt, mask, power):
    """Sample ``b``'s loss and weight into the first level, then each level flushed into the next at
    the indices that are multiples of its span."""
    losses[0] += loss
    weights[0] += wt
    for j in range(_LEVELS - 1):
        if b & (mask << (j * power)) != 0:
            break
        losses[j + 1] += losses[j]
        weights[j + 1] += weights[j]
        losses[j] = 0
        weights[j] = 0


@njit(**_JIT, inline="always")
def _totals(losses, weights, zero):
    total = zero
    weight = zero
    for j in range(_LEVELS):
        total += losses[j]
        weight += weights[j]
    return total, weight


@njit(**_JIT)
def nll_sums(loss, t, wt, ignore, weighted):
    """``(sum of loss, sum of wt)`` over the samples whose target is not ``ignore``, both cascaded
    as ATen's ``nll_loss_out_frame`` (its weight sum is the kept count when not ``weighted``)."""
    n = loss.shape[0]
    mask, power = _levels(n)
    losses = np.zeros(_LEVELS, loss.dtype)
    weights = np.zeros(_LEVELS, loss.dtype)
    kept = 0
    for b in range(n):
        if t[b] == ignore:
            continue
        kept += 1
        _add(losses, weights, b, loss[b], wt[b], mask, power)
    total, weight = _totals(losses, weights, loss.dtype.type(0))
    return total, (weight if weighted else loss.dtype.type(kept))


@njit(**_JIT)
def nll_reduced(lp, t, w, ignore, weighted):
    """``nll_loss``'s sum of ``(N, C)`` log-probabilities ``lp`` at the targets ``t`` in one pass:
    ``(total, denominator, -1)`` as ``nll_sums`` of the per-sample losses (``-lp[b, t[b]] w[t[b]]``, 0
    where that weight is 0, never -0.0), or ``(0, 0, b)`` at the first target ``b`` outside ``[0, C)``
    that is not ``ignore`` (the caller's general path raises PyTorch's error). ``w`` is read only when
    ``weighted``."""
    n, C = lp.shape
    zero = lp.dtype.type(0)
    mask, power = _levels(n)
    losses = np.zeros(_LEVELS, lp.dtype)
    weights = np.zeros(_LEVELS, lp.dtype)
    kept = 0
    for b in range(n):
        ti = t[b]
        if ti == ignore:
            continue
        if ti < 0 or ti >= C:
            return zero, zero, b
        wt = w[ti] if weighted else lp.dtype.type(1)
        kept += 1
        _add(losses, weights, b, -(lp[b, ti] * wt) + zero if wt != zero else zero, wt, mask, power)
    total, weight = _totals(losses, weights, zero)
    return total, (weight if weighted else lp.dtype.type(kept)), -1

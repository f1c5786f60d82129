"""The memory layout of PyTorch's einsum result, so that ``.view()``, ``.is_contiguous()`` and the
random draws that follow memory order (dropout's mask) behave on an einsum result as under PyTorch.

ATen lines every operand up as (output labels, then the summed ones), missing labels unsqueezed,
and folds the operands two at a time from the left. A pair with labels to sum is one ``bmm``
whose output is laid out as (in both, only in the left, the summed ones, the rest) and then
permuted back, the two sides swapped when the output lists every right-only dim first; a pair
with none is an elementwise product, laid out as TensorIterator orders its operands' strides; a
label one operand alone still holds is summed first (a contiguous result). Numpy's contraction
paths return other layouts, so the forward asks this module for ATen's.
"""
from __future__ import annotations

import functools
import math

from ..base.iter_order import reorder_dimensions

__all__ = ["result_order", "bmm_plan"]


def _aten_label_index(c: str) -> int:
    """ATen numbers the labels A-Z then a-z; contraction dims follow that order."""
    return ord(c) - ord("A") if c.isupper() else ord(c) - ord("a") + 26


def _contiguous(sizes: list, order: list) -> list:
    """Strides of a fresh tensor whose dims run ``order`` from innermost to outermost."""
    strides, step = [0] * len(sizes), 1
    for d in order:
        strides[d] = step
        step *= sizes[d]
    return strides


def _operand(sub: str, shape: tuple, strides: tuple, pos: dict, n: int) -> tuple:
    """``(sizes, strides)`` of an operand permuted to ATen's order: a repeated label is a diagonal
    (its strides add), a missing one a size-1 dim unsqueezed at the end (stride 1)."""
    sizes, st = [1] * n, [1] * n
    seen = set()
    for c, size, stride in zip(sub, shape, strides):
        k = pos[c]
        st[k] = st[k] + stride if c in seen else stride
        sizes[k] = size
        seen.add(c)
    return sizes, st


def _product_strides(sizes: list, a: tuple, b: tuple) -> list:
    """TensorIterator's output strides for ``a * b`` broadcast to ``sizes``."""
    same = a[0] == b[0] == sizes
    if same and all(_is_contiguous(op) for op in (a, b)):
        return _contiguous(sizes, list(range(len(sizes)))[::-1])
    ops = [[0 if m == 1 and s != 1 else t for m, t, s in zip(op[0], op[1], sizes)] for op in (a, b)]
    return _contiguous(sizes, reorder_dimensions(sizes, ops))


def _is_contiguous(op: tuple) -> bool:
    sizes, strides = op
    want = 1
    for size, stride in zip(reversed(sizes), reversed(strides)):
        if size != 1:
            if stride != want:
                return False
            want *= size
    return True


def _pair(a: tuple, b: tuple, summed: list) -> tuple:
    """ATen's ``sumproduct_pair(a, b, summed, keepdim=True)``: the result's sizes and strides."""
    n = len(a[0])
    sizes = [1 if k in summed else max(a[0][k], b[0][k]) for k in range(n)]
    if not summed:
        return sizes, _product_strides(sizes, a, b)
    rest = [k for k in range(n) if k not in summed]
    both = [k for k in rest if a[0][k] != 1 and b[0][k] != 1]
    left = [k for k in rest if a[0][k] != 1 and b[0][k] == 1]
    right = [k for k in rest if k not in both and k not in left]
    if left and right and right[-1] < left[0]:    # bmm(b, a) lays the result out in the output's order
        left, right = right, left
    return sizes, _contiguous(sizes, (both + left + summed + right)[::-1])


@functools.lru_cache(maxsize=512)
def result_order(eq: str, shapes: tuple, strides: tuple) -> tuple:
    """The output's dims from outermost to innermost in memory, for an explicit equation (``'...'``
    expanded, ``->`` given) over operands of these shapes and element strides; ``()`` for one
    operand or a 0-d result (numpy's result stands)."""
    ins, out = eq.split("->")
    subs = ins.split(",")
    if len(subs) < 2 or not out:
        return ()
    order = list(out) + sorted({c for s in subs for c in s} - set(out), key=_aten_label_index)
    pos = {c: k for k, c in enumerate(order)}
    n = len(order)
    ops = [_operand(s, shape, st, pos, n) for s, shape, st in zip(subs, shapes, strides)]
    counts = [sum(op[0][k] != 1 for op in ops) for k in range(n)]
    while len(ops) > 1:
        a, b, *rest = ops
        summed = []
        for k in range(len(out), n):
            if a[0][k] != 1 and b[0][k] != 1:
                counts[k] -= 1
                if counts[k] == 1:
                    summed.append(k)
                    counts[k] = 0
            elif counts[k] == 1 and (a[0][k] != 1 or b[0][k] != 1):
                if a[0][k] != 1:
                    a = _summed_keepdim(a, k)
                else:
                    b = _summed_keepdim(b, k)
                counts[k] = 0
        ops = [_pair(a, b, summed)] + rest
    st = ops[0][1]
    dims = range(len(out))
    return tuple(sorted(dims, key=lambda d: (-st[d], d)))


def _summed_keepdim(op: tuple, k: int) -> tuple:
    sizes = list(op[0])
    sizes[k] = 1
    return sizes, _contiguous(sizes, list(range(len(sizes)))[::-1])


@functools.lru_cache(maxsize=512)
def bmm_plan(eq: str, shapes: tuple) -> tuple | None:
    """ATen's ``sumproduct_pair`` for two operands with labels to sum and no diagonal: which operand
    is the left one, then per side ``(axes summed alone, shape without its size-1 dims, transpose,
    3-d shape)`` (left ``(batch, rows, summed)``, right ``(batch, summed, cols)``), the product's
    shape by label and its transpose to the output; else None."""
    ins, out = eq.split("->")
    subs = ins.split(",")
    if len(subs) != 2 or any(len(set(s)) != len(s) for s in subs):
        return None
    size: dict = {}
    held = []
    for s, shape in zip(subs, shapes):
        held.append({c for c, n in zip(s, shape) if n != 1})
        for c, n in zip(s, shape):
            size[c] = max(size.get(c, 1), n)
    summed = sorted((held[0] & held[1]) - set(out), key=_aten_label_index)
    if not summed:
        return None
    lro = [c for c in out if c in held[0] and c in held[1]]
    lo = [c for c in out if c in held[0] and c not in held[1]]
    ro = [c for c in out if c not in lro and c not in lo]
    # ATen's right side also lists the other summed labels (size 1 by now), after every output one
    swap = bool(lo and ro and len(summed) == len(set(subs[0] + subs[1]) - set(out))
                and out.index(ro[-1]) < out.index(lo[0]))
    if swap:
        lo, ro = ro, lo
    order = (1, 0) if swap else (0, 1)
    mats = {order[0]: lro + [c for c in lo if c in held[order[0]]] + summed,
            order[1]: lro + summed + [c for c in ro if c in held[order[1]]]}
    steps = []
    for i, (s, shape) in enumerate(zip(subs, shapes)):
        alone = tuple(k for k, c in enumerate(s) if c not in out and c not in summed and shape[k] != 1)
        kept = [(c, n) for k, (c, n) in enumerate(zip(s, shape)) if k not in alone and n != 1]
        labels = [c for c, _ in kept]
        want = mats[i]
        groups = (want[:len(lro)], want[len(lro):len(want) - len(summed)], want[len(want) - len(summed):]) \
            if i == order[0] else (want[:len(lro)], want[len(lro):len(lro) + len(summed)], want[len(lro) + len(summed):])
        steps.append((alone, tuple(n for _, n in kept), tuple(labels.index(c) for c in want),
                      tuple(math.prod(size[c] for c in g) for g in groups)))
    mem = lro + lo + ro
    return order, steps[order[0]], steps[order[1]], tuple(size[c] for c in mem), tuple(mem.index(c) for c in out)

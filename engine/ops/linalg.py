"""Matrix products, contractions (einsum, tensordot), diagonals and the QR decomposition.

mm, bmm, mv, dot, addmm... are checked front ends over the one ``matmul`` primitive, so
they share its vjp; only their argument checks (and PyTorch's messages) differ.
"""
from __future__ import annotations

import functools
import importlib.util
import math

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from .. import return_types
from ..base.meta import has_data
from ..base.compressed import CompressedArray
from ..base.coo import COOArray
from ..kernels import gemm
from ..core.creation import eye, ones, zeros
from ..core.arguments import refuse_non_tensors
from ..core.dispatch import apply, array_operand, composite, reflected_failure, refused_operand
from .conjugation import conj
from .einsum_layout import _contiguous, _pair, _product_strides, bmm_plan, result_order
from .movement import _mark, cat, narrow
from ..core.registry import ALL, NONE, OTHERS, Op
from ._util import Tensor, _wrap_dim, sum_to, warn_once
from ..base.dtype import BFLOAT16_NP, FLOATING_KINDS, bfloat16, float16, from_np, in_float32, promote_types

_SPARSE = (COOArray, CompressedArray)     # the sparse operands' arrays (their dtype errors are PyTorch's sparse ones)
_INEXACT = FLOATING_KINDS + "c"     # the dtype kinds linalg takes: floating and complex
_REDUCED = (bfloat16, float16)      # the float dtypes PyTorch's GEMM accumulates and scales in float32

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "baddbmm",
           "einsum", "tensordot", "trace", "diag", "diagonal", "kron"]

# ---------------------------------------------------------------- matmul


def _matmul_vjp(g, out, a, b):
    wa, wb = a.requires_grad, b.requires_grad
    if g._data.dtype.kind == "c":   # complex: the products take the conjugates (PyTorch's convention)
        a, b = conj(a), conj(b)
    if a.ndim == 1 and b.ndim == 1:
        return (g * b if wa else None, g * a if wb else None)
    # 1-d operands are promoted to matrices for the product, then squeezed back
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = sum_to(g2 @ b2.mT, a2._data.shape).reshape(a.shape) if wa else None
    if not wb:
        gb = None
    elif b.ndim == 2:
        if a2.ndim > 2:     # a matrix shared by a batch (a linear layer): one GEMM over the flattened batch
            a2, g2 = a2.reshape(-1, a2.shape[-1]), g2.reshape(-1, g2.shape[-1])
        # b a transposed view (x @ W.t()): the gradient in W's layout, so the transpose's vjp hands
        # W a contiguous gradient, as PyTorch's linear backward does
        gb = (g2.mT @ a2).mT if _transposed(b._data) else a2.mT @ g2
    elif _expanded_transposed(b._data) and tuple(g2.shape[:-2]) == tuple(b2.shape[:-2]):
        gb = (g2.mT @ a2).mT   # vmap's per-sample weights: each gradient in W's layout, as above
    else:
        gb = sum_to(a2.mT @ g2, b2._data.shape).reshape(b.shape)
    return ga, gb


def _transposed(arr) -> bool:
    flags = arr.flags
    return flags.f_contiguous and not flags.c_contiguous


def _expanded_transposed(arr) -> bool:
    """Whether ``arr`` is one transposed C-contiguous matrix expanded over batch dims (stride 0): a
    weight's ``t()`` under vmap, whose per-sample gradients PyTorch's vmap hands back C-contiguous
    (a batch of distinct transposed matrices keeps bmm's layout, as PyTorch's)."""
    strides, shape = getattr(arr, "strides", None), arr.shape
    return (arr.ndim > 2 and strides is not None and shape[-1] > 1 and shape[-2] > 1
            and not any(strides[:-2]) and strides[-2] == arr.itemsize and strides[-1] == shape[-2] * arr.itemsize)


def _matmul_fwd(xp, a, b):
    # the dtype check runs here, after the modes: autocast casts mixed operands before it
    if a.dtype != b.dtype:
        if type(a) in _SPARSE or type(b) in _SPARSE:
            raise _sparse_dtype_error(a, b)
        raise _mixed_dtypes(a, b)
    if a.dtype.kind == "b":
        raise _no_bool_kernel(_CPU_KERNELS[min(b.ndim, 3)] if b.ndim > 1 or a.ndim > 1 else "dot")
    if a.dtype is BFLOAT16_NP and type(a) is not CompressedArray:   # a compressed one refuses it, as PyTorch's
        return in_float32(_gemm, xp, a, b)
    return _gemm(xp, a, b)


def _mixed_dtypes(a, b) -> RuntimeError:
    """PyTorch's refusal of operands of two dtypes, in the words of the kernel its matmul reaches for these
    ranks: dot (1-D, 1-D), addmv (a vector on the right), mm (a matrix on the right) or bmm."""
    ta, tb = from_np(a.dtype), from_np(b.dtype)
    if b.ndim == 1:
        if a.ndim == 1:
            return RuntimeError(f"dot : expected both vectors to have same dtype, but found {ta.scalar_type} and "
                                f"{tb.scalar_type}")
        return RuntimeError(f"addmv input tensors must have the same dtype, but got {tb.scalar_type}, "
                            f"{ta.scalar_type}, and {tb.scalar_type}")
    if b.ndim == 2:
        return RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {ta.cpp_name} != {tb.cpp_name}")
    return RuntimeError(f"expected scalar type {ta.scalar_type} but found {tb.scalar_type}")


def _sparse_dtype_error(a, b) -> RuntimeError:
    """PyTorch's message for a sparse operand of another dtype than the dense one: a COO product names
    the sparse operand's dtype as the expected one, a compressed one the first operand's (its
    matrix-vector product, addmv's message)."""
    name = lambda x: from_np(x.dtype).scalar_type  # noqa: E731
    if type(a) is CompressedArray and b.ndim == 1:
        return RuntimeError(f"addmv input tensors must have the same dtype, but got {name(b)}, {name(a)}, and {name(b)}")
    if type(a) is COOArray or type(b) is COOArray:
        sparse, dense = (a, b) if type(a) is COOArray else (b, a)
        return RuntimeError(f"expected scalar type {name(sparse)} but found {name(dense)}")
    return RuntimeError(f"expected scalar type {name(a)} but found {name(b)}")


# the ATen CPU kernel a product lowers to, by the second operand's ndim (one: a matrix-vector product,
# unless both are vectors; two: a GEMM, the first operand's batch folded into its rows; more: bmm)
_CPU_KERNELS = {1: "addmv_impl_cpu", 2: "addmm_impl_cpu_", 3: "bmm"}


def _no_bool_kernel(kernel: str) -> NotImplementedError:
    return NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _gemm(xp, a, b):
    if xp is np and a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1 and a.dtype.kind == "f" and type(a) is type(b) is np.ndarray:
        # an outer product per matrix (a per-sample weight gradient under vmap): each output is one
        # product, as a GEMM rounds it; numpy's batched matmul took 3.1 ms for 32 of 64 x 784, this 0.6
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return np.multiply(a, b, out=np.empty(shape, np.result_type(a, b)))
    if b.ndim == 2 and a.ndim > 2:      # a batch times one matrix: one GEMM, not one per batch entry
        return gemm(xp, a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
    return gemm(xp, a, b)


def _matmul_cost(input_shapes, output_shape) -> int:
    """A multiply-add (2 FLOPs, as PyTorch counts) per output element and contracted index."""
    a = input_shapes[0]
    return 2 * math.prod(output_shape) * (a[-1] if a else 1)


# PyTorch's node for ``matmul`` by the operands' ndims (the op it lowers to); a batched product is the
# ``_unsafe_view`` of its folded product, and so is a freed node's (its ndims are gone)
_MATMUL_NAMES = {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4", (2, 2): "MmBackward0"}


def _matmul_name(ndims: tuple, params: dict) -> str:
    a, b = ndims[:2]
    if a == 2 and b is not None and b >= 3:
        return "CloneBackward0"    # the transposed fold's result made contiguous
    return _MATMUL_NAMES.get((a, b), "MmBackward0" if a is None else "UnsafeViewBackward0")


def _matmul_aten(shapes, params) -> str:
    """PyTorch's calls for ``matmul`` (``mm``, ``bmm``... call it too): ``mm`` of two matrices, ``bmm`` of batches."""
    a, b = len(shapes[0]), len(shapes[1])
    if a <= 2 and b <= 2:
        return {(1, 1): "matmul(dot)", (2, 1): "matmul(mv)", (1, 2): "matmul(unsqueeze, mm, squeeze_)"}.get(
            (a, b), "matmul(mm)")
    if b <= 2:
        return "matmul(view, mm, _unsafe_view)"
    return "matmul(expand, reshape, expand, reshape, bmm, _unsafe_view)"


_matmul = Op("matmul", _matmul_fwd, _matmul_vjp, saves=OTHERS, out_form="matmul", cost=_matmul_cost,
             operator="matmul", aliases=("mm", "bmm", "mv", "dot", "vdot"), onnx="MatMul", complex=True,
             backward_name=_matmul_name, aten=_matmul_aten)


def _x(shape) -> str:
    return "x".join(map(str, shape))


def _mismatch(a: Tensor, b: Tensor) -> RuntimeError:
    """The message PyTorch gives for each way the inner sizes of ``a @ b`` can disagree."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) == 1 and len(sb) == 1:
        return RuntimeError(f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have "
                            f"the same number of elements, but got {sa[0]} and {sb[0]} elements respectively")
    if len(sb) == 1:
        rows = math.prod(sa[:-1])
        return RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{sa[-1]}), vec ({sb[0]})")
    if len(sb) == 2:
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                            f"({_x((math.prod(sa[:-1]), sa[-1]))} and {_x(sb)})")
    batch = math.prod(max(x, y) for x, y in zip((1,) * 8 + sa[:-2], (1,) * 8 + sb[:-2]))
    return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                        f"[{batch}, {sa[-1]}] but got: [{batch}, {sb[-2]}].")


def matmul(input, other):
    try:
        if input.ndim == 0 or other.ndim == 0:
            raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                               f"{input.ndim}D and {other.ndim}D")
        if input._data.shape[-1] != other._data.shape[-2 if other.ndim > 1 else 0]:
            raise _mismatch(input, other)
    except AttributeError:
        refuse_non_tensors("matmul", input, other)
        raise
    return apply(_matmul, input, other)


def mm(input, mat2):
    try:
        if input.ndim != 2:
            raise RuntimeError(f"self must be a matrix (mm got a {input.ndim}D tensor)")
        if mat2.ndim != 2:
            raise RuntimeError(f"mat2 must be a matrix (mm got a {mat2.ndim}D tensor)")
    except AttributeError:
        refuse_non_tensors("mm", input, mat2)
        raise
    return matmul(input, mat2)


def bmm(input, mat2):
    for name, t in (("batch1", input), ("batch2", mat2)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor (bmm got shape {list(t.shape)})")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    return matmul(input, mat2)


def mv(input, vec):
    try:
        if input.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    except AttributeError:
        refuse_non_tensors("mv", input, vec)
        raise
    return composite("mv", matmul, input, vec)


def dot(input, other):
    try:
        if input.ndim != 1 or other.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    except AttributeError:
        refuse_non_tensors("dot", input, other)
        raise
    if input._data.dtype != other._data.dtype:    # vdot's check words it as dot's too
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{input.dtype.scalar_type} and {other.dtype.scalar_type}")
    return composite("dot", matmul, input, other)


def vdot(input, other):
    """Dot product conjugating its first argument (``dot`` on real tensors)."""
    return dot(conj(input), other)


def inner(input, other):
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.dtype != other.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if input.ndim == 1 and other.ndim == 1:   # ATen's inner of two vectors is its dot (autocast leaves it)
        return composite("dot", matmul, input, other)
    return tensordot(input, other, ([-1], [-1]))


def outer(input, vec2):
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return input.unsqueeze(1) * vec2


ger = outer


def _scaled_sum(input, prod, beta, alpha):
    """``beta * input + alpha * prod``; beta=0 ignores input (its nan/inf do not propagate)."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod
    return prod + (input if beta == 1 else input * beta)


def _add_product(product, input, m1, m2, beta, alpha):
    """``beta * input + alpha * product(m1, m2)``. PyTorch's CPU GEMM forms a bfloat16/float16 result
    in float32, alpha and beta included, and rounds it once: so does this (rounding the product, then
    each scaled term, differs in the last bit of a quarter of the elements). The input joins the
    product's dtype: PyTorch's addmm is one op, so autocast runs all of it in the lower precision."""
    if input.dtype in _REDUCED and input.dtype == m1.dtype == m2.dtype:
        return _scaled_sum(input.float(), product(m1.float(), m2.float()), beta, alpha).to(input.dtype)
    prod = product(m1, m2)
    return _scaled_sum(input if input.dtype == prod.dtype else input.to(prod.dtype), prod, beta, alpha)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return _add_product(mm, input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _add_product(bmm, input, batch1, batch2, beta, alpha)


# ---------------------------------------------------------------- einsum
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _einsum_fwd(xp, *arrays, eq):
    # the dtype check runs here, after the modes (autocast casts mixed operands before it); the front
    # end has promoted the operands of an equation that sums no label across them
    if arrays[0].dtype.kind == "b" and _contracts(eq):
        raise _no_bool_kernel("bmm")
    plan = bmm_plan(eq, tuple(a.shape for a in arrays))
    # the batched GEMM's first operand names the dtype expected: the right one where ATen swaps them
    first = arrays[plan[0][0]] if plan is not None else arrays[0]
    for a in arrays:
        if a.dtype != first.dtype:
            raise RuntimeError(f"expected scalar type {from_np(first.dtype).scalar_type} "
                               f"but found {from_np(a.dtype).scalar_type}")
    if arrays[0].dtype is BFLOAT16_NP:
        return in_float32(_einsum_fwd, xp, *arrays, eq=eq)
    # BLAS contraction paths only pay off on large operands; path search costs tens of µs
    big = len(arrays) > 2 or sum(a.size for a in arrays) > 4096
    if plan is not None:
        return _contract_by_bmm(xp, arrays, plan)
    order = result_order(eq, tuple(a.shape for a in arrays), tuple(tuple(s // a.itemsize for s in a.strides) for a in arrays))
    if not order:
        return xp.einsum(eq, *arrays, optimize=big)
    # PyTorch's memory layout: contract into that order, then permute back (a view)
    ins, out = eq.split("->")
    res = xp.ascontiguousarray(xp.einsum(f"{ins}->{''.join(out[i] for i in order)}", *arrays, optimize=big))
    return res.transpose(tuple(order.index(i) for i in range(len(order))))


def _contract_by_bmm(xp, arrays, plan):
    """Two operands contracted as ATen does: one batched GEMM (the operands permuted and flattened
    to its three dims), whose result permuted back is the output in PyTorch's layout."""
    order, *sides, shape, back = plan
    mats = []
    for x, (alone, squeezed, perm, shape3) in zip((arrays[order[0]], arrays[order[1]]), sides):
        if alone:
            x = x.sum(axis=alone, dtype=x.dtype)
        mats.append(x.reshape(squeezed).transpose(perm).reshape(shape3))
    return gemm(xp, *mats).reshape(shape).transpose(back)


def _einsum_vjp(g, out, *operands, eq):
    ins, res = eq.split("->")
    subs = ins.split(",")
    cplx = g._data.dtype.kind == "c"
    # complex: contract with the conjugates (PyTorch's convention)
    factors = [conj(o) for o in operands] if cplx else operands
    grads = []
    for i, x in enumerate(operands):
        if not x.requires_grad:
            grads.append(None)
            continue
        others = [s for j, s in enumerate(subs) if j != i]
        grads.append(_operand_grad(g, res, subs[i], others, [o for j, o in enumerate(factors) if j != i], x, eq))
    return tuple(grads)


def _operand_grad(g, res, sub, other_subs, others, x, eq):
    """d/d(operand) of an einsum: contract g with the other operands onto this operand's labels.

    Labels this operand sums alone are broadcast back with ones; a repeated label (a
    diagonal, as in 'ii') is written back onto the diagonal with an identity matrix; dims
    that broadcast from size 1 are summed back to 1, and expanded where only this operand is
    larger than 1.
    """
    avail = set(res).union(*other_subs)
    uniq = "".join(dict.fromkeys(sub))
    target = "".join(c for c in uniq if c in avail)
    gx = apply(_einsum, g, *others, eq=f"{','.join([res, *other_subs])}->{target}")
    size = dict(zip(sub, x.shape))
    want = tuple(size[c] for c in target)
    if tuple(gx.shape) != want:  # size-1 labels broadcast one way or the other
        gx = sum_to(gx, tuple(1 if w == 1 else s for s, w in zip(gx.shape, want))).expand(want)
    if target == sub:
        return gx
    fresh = iter(c for c in _LETTERS if c not in eq)
    out_sub, extra_subs, extras = [], [], []
    for c in sub:
        if c in out_sub:
            f = next(fresh)
            out_sub.append(f)
            extra_subs.append(c + f)
            extras.append(eye(size[c], dtype=x.dtype, device=x.device))
        else:
            out_sub.append(c)
            if c not in target and sub.count(c) == 1:
                extra_subs.append(c)
                extras.append(ones(size[c], dtype=x.dtype, device=x.device))
    return apply(_einsum, gx, *extras, eq=f"{','.join([target, *extra_subs])}->{''.join(out_sub)}")


_einsum = Op("einsum", _einsum_fwd, _einsum_vjp, saves=OTHERS, aliases=("tensordot",),
             complex=True)


def _einsum_error(msg: str, eq: str) -> RuntimeError:
    return RuntimeError(f"einsum(): {msg} (equation '{eq}')")


@functools.lru_cache(maxsize=512)
def _expand_equation(eq: str, shapes: tuple) -> str:
    """The equation with '...' replaced by explicit labels and the output made explicit."""
    lhs, arrow, rhs = eq.replace(" ", "").partition("->")
    subs = lhs.split(",")
    if len(subs) != len(shapes):
        which = "fewer" if len(shapes) < len(subs) else "more"
        raise _einsum_error(f"{which} operands were provided than specified in the equation", eq)
    ell_nd = 0
    for i, (s, shape) in enumerate(zip(subs, shapes)):
        n = len(s.replace("...", ""))
        if n != len(shape) if "..." not in s else n > len(shape):
            raise _einsum_error(f"the number of subscripts in the equation ({n}) does not match the number "
                                f"of dimensions ({len(shape)}) for operand {i} and no ellipsis was given", eq)
        ell_nd = max(ell_nd, len(shape) - n)
    free = [c for c in _LETTERS if c not in eq]
    ell = "".join(free[:ell_nd])
    subs = [s.replace("...", ell[ell_nd - (len(shape) - len(s) + 3):] if ell_nd else "") if "..." in s else s
            for s, shape in zip(subs, shapes)]
    if arrow:
        out = rhs.replace("...", ell)
    else:
        joined = "".join(subs)
        out = ell + "".join(sorted(c for c in set(joined) if joined.count(c) == 1 and c not in ell))
    _check_labels(subs, out, shapes, eq)
    return f"{','.join(subs)}->{out}"


def _check_labels(subs, out, shapes, eq) -> None:
    seen: dict = {}
    for i, (s, shape) in enumerate(zip(subs, shapes)):
        for c, n in zip(s, shape):
            if c not in _LETTERS:
                raise _einsum_error(f"invalid subscript given in the equation string: '{c}'", eq)
            prev = seen.get(c, 1)
            if n != 1 and prev != 1 and n != prev:
                raise _einsum_error(f"subscript {c} has size {n} for operand {i} which does not broadcast "
                                    f"with previously seen size {prev}", eq)
            seen[c] = n if n != 1 else prev
    for c in out:
        if c not in seen:
            raise _einsum_error(f"output subscript {c} does not appear in the equation for any input operand", eq)
        if out.count(c) > 1:
            raise _einsum_error(f"output subscript {c} appears more than once in the output", eq)


def einsum(equation: str, *operands):
    """``einsum('ij,jk->ik', a, b)``; '...' broadcasting and implicit outputs as in PyTorch; also
    the sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. A list of operands, and the sublist
    form on tensors, become ``(equation, *operands)`` before ``__torch_function__`` sees the call, as
    in PyTorch (an fx node holds the operands flat; a Proxy's sublist form is recorded as given).

    Three operands or more are contracted two at a time as ATen's einsum does: in the order
    ``opt_einsum.contract_path`` gives where that package is installed and
    ``tapelab.backends.opt_einsum.enabled`` (PyTorch's Python ``einsum`` asks it), else left to right."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if _DISPATCH.functions is not None and has_tensor_like((equation, *operands)):
        return handle_torch_function(einsum, (equation, *operands), equation, *operands)
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation,) + operands)
    shapes = tuple(t._data.shape for t in operands)
    # PyTorch asks opt_einsum before ATen parses the equation: its errors come first
    path = _contract_path(equation, shapes) if len(operands) > 2 and OPT_EINSUM["enabled"] else None
    eq = _expand_equation(equation, shapes)
    if len(operands) > 2:
        return _einsum_pairs(eq, operands, path, _ellipsis_labels(eq, equation))
    if not _one_gemm(eq, shapes):
        # ATen first sums a label from the one operand where it is not size 1 (an integer sum is
        # int64) and, with no label left that both hold at a size above 1, multiplies (which promotes)
        return _einsum_pairs(eq, operands, None, _ellipsis_labels(eq, equation))
    return apply(_einsum, *operands, eq=eq)


# ---------------------------------------------------------------- einsum's contraction order
# torch.backends.opt_einsum's switches as einsum reads them (PyTorch's defaults: on, "auto", where the
# package is installed). backends/opt_einsum.py keeps PyTorch's flags and plain assignments and writes
# the values in force here (the backends sit above the ops).
_OPT_EINSUM_INSTALLED = importlib.util.find_spec("opt_einsum") is not None
OPT_EINSUM = {"enabled": _OPT_EINSUM_INSTALLED, "strategy": "auto" if _OPT_EINSUM_INSTALLED else None}


@functools.lru_cache(maxsize=1)
def opt_einsum_package():
    """The ``opt_einsum`` package where it can be imported, else None (imported at the first ask)."""
    try:
        import opt_einsum
    except ImportError:
        return None
    return opt_einsum


def _contract_path(equation: str, shapes: tuple) -> list | None:
    """PyTorch's path for ATen's einsum: ``opt_einsum.contract_path`` on the operands' shapes with the
    strategy set, flattened to ``[i0, j0, i1, j1, ...]``; None where opt_einsum is not installed."""
    if opt_einsum_package() is None:
        return None
    strategy = OPT_EINSUM["strategy"]
    try:
        return _path_of(equation, shapes, strategy)
    except TypeError:       # a strategy opt_einsum takes that is not hashable (a path, a callable)
        return _path_of.__wrapped__(equation, shapes, strategy)


@functools.lru_cache(maxsize=512)
def _path_of(equation: str, shapes: tuple, strategy) -> list:
    pairs = opt_einsum_package().contract_path(equation, *shapes, optimize=strategy, shapes=True)[0]
    return [i for pair in pairs for i in pair]


def _ellipsis_labels(eq: str, equation: str) -> str:
    """The labels the expanded ``eq`` gave '...' in ``equation``, in its order (ATen sums them first)."""
    return "".join(c for c in _LETTERS if c in eq and c not in equation)


def _aligned(sub: str, t, order: str):
    """The operand as ATen's einsum lines it up: a repeated label's diagonal (where the label first
    is), a size-1 dim unsqueezed for each label it lacks, then permuted to ``order``."""
    while len(set(sub)) < len(sub):
        c = next(c for c in sub if sub.count(c) > 1)
        i = sub.index(c)
        j = sub.index(c, i + 1)
        t, sub = t.diagonal(0, i, j).movedim(-1, i), sub[:j] + sub[j + 1:]
    for c in order:
        if c not in sub:
            t, sub = t.unsqueeze(t.ndim), sub + c
    return t.permute([sub.index(c) for c in order])


def _einsum_pairs(eq: str, operands: tuple, path: list | None, ell: str):
    """ATen's einsum on the (expanded) equation: every operand lined up as (the output's labels, then
    the summed ones: '...''s first, the others A-Z a-z), then contracted two at a time: the pairs of
    ``path`` (opt_einsum's, each product appended after the operands left), else left to right.
    Before each pair, a label only one of its operands still holds (and no other) is summed from it
    (keeping the dim); labels both hold and no later operand does are summed by the pair's batched
    GEMM (``_einsum`` on the two, through the two-operand machinery: dtype check, layout,
    gradient), a pair with none to sum is multiplied (which promotes; in a half dtype each product
    is rounded before the next). The summed dims are viewed away at the end (a lone operand's
    summed instead), so a bfloat16 outer product's gradient is the mul's, and a lone operand's
    transpose is a view."""
    ins, out = eq.split("->")
    subs = ins.split(",")
    summed = sorted(set(ins.replace(",", "")) - set(out),
                    key=lambda c: (0, ell.index(c)) if c in ell else (1, _LETTERS.index(c)))
    order = out + "".join(summed)
    ops = [_aligned(sub, t, order) for sub, t in zip(subs, operands)]
    nout, n = len(out), len(order)
    if len(ops) == 1:
        t = ops[0]
        return t.sum(list(range(nout, n))) if n > nout else t
    if path is not None and len(path) != 2 * (len(ops) - 1):
        raise RuntimeError(f"einsum(): expected contraction path given in path parameter to have size "
                           f"{2 * (len(ops) - 1)} but got {len(path)}")
    counts = [sum(t.shape[k] != 1 for t in ops) for k in range(n)]
    steps = iter(path or ())
    while len(ops) > 1:
        i, j = (0, 1) if path is None else sorted((next(steps), next(steps)))
        if i == j or i < 0 or j >= len(ops):
            raise RuntimeError(f"einsum(): invalid contraction ({i}, {j}"
                               + (") cannot contract an operand with itself" if i == j
                                  else ") operand index is out of bounds"))
        a, b = ops[i], ops[j]
        del ops[j], ops[i]
        pair, own_a, own_b = [], [], []
        for k in range(nout, n):
            if a.shape[k] != 1 and b.shape[k] != 1:
                counts[k] -= 1
                if counts[k] == 1:
                    pair.append(k)
                    counts[k] = 0
            elif counts[k] == 1:
                if a.shape[k] != 1:
                    own_a.append(k)
                    counts[k] = 0
                elif b.shape[k] != 1:
                    own_b.append(k)
                    counts[k] = 0
        if own_a:
            a = _summed(a, own_a)
        if own_b:
            b = _summed(b, own_b)
        res = _sumproduct_pair(a, b, pair, last=len(ops) == 0) if pair else _product(a, b)
        if path is None:
            ops.insert(0, res)
        else:
            ops.append(res)
    res = ops[0]
    return res.view(res.shape[:nout]) if n > nout else res


def _sumproduct_pair(a, b, pair: list, last: bool):
    """ATen's ``sumproduct_pair(a, b, pair, keepdim=True)`` of two lined-up operands: one batched
    GEMM summing the dims ``pair`` (``_einsum`` on the two), whose result keeps them as size-1 dims.
    The ``last`` pair's result goes without them: what is left of the summed dims is viewed away."""
    labels = _LETTERS[:a.ndim]     # one letter per dim in order: the GEMM sums the dims in ATen's order
    kept = [k for k in range(a.ndim) if k not in pair]
    res = apply(_einsum, a, b, eq=f"{labels},{labels}->{''.join(labels[k] for k in kept)}")
    if last:
        return res
    sizes, strides = _pair((list(a.shape), None), (list(b.shape), None), pair)
    return _laid_out(res, strides, sizes, kept)


def _product(a, b):
    """``a * b`` laid out as TensorIterator lays it out, size-1 dims included."""
    res = a * b
    return _laid_out(res, _product_strides(list(res.shape), (list(a.shape), list(a.stride())),
                                           (list(b.shape), list(b.stride()))))


def _summed(t, dims: list):
    """``t.sum(dims, keepdim=True)``, contiguous as ATen's reduction output."""
    res = t.sum(dims, keepdim=True)
    return _laid_out(res, _contiguous(list(res.shape), list(range(res.ndim))[::-1]))


def _laid_out(t, strides: list, sizes: list | None = None, dims: list | None = None):
    """``t`` with these element strides on every dim, one-element dims too (a later product's
    TensorIterator order reads theirs): ``t`` itself, a view of it where its memory order is
    theirs, else a copy. ``t`` may hold only the ``dims`` of ``sizes``, the others of size 1."""
    if sizes is None:
        if tuple(t.stride()) == tuple(strides) or 0 in t.shape:
            return t
        sizes, dims = list(t.shape), list(range(t.ndim))
    elif 0 in sizes:
        for k in range(len(sizes)):
            if k not in dims:
                t = t.unsqueeze(k)
        return t
    # the dims from the outermost in memory; a size-1 dim lies inside the dim it shares a stride with
    mem = sorted(range(len(sizes)), key=lambda k: (-strides[k], sizes[k] == 1))
    flat = t.permute([dims.index(k) for k in mem if k in dims]).reshape(-1)
    return flat.view([sizes[k] for k in mem]).permute([mem.index(k) for k in range(len(sizes))])


@functools.lru_cache(maxsize=512)
def _one_gemm(eq: str, shapes: tuple) -> bool:
    """Whether ATen contracts the two operands of the (expanded) equation in one batched GEMM with
    nothing summed before it: every label the output lacks is in both operands at a size above 1
    (so both must share a dtype). Else ``_einsum_pairs`` follows its steps."""
    ins, out = eq.split("->")
    if len(shapes) != 2:
        return False
    a, b = ins.split(",")
    sa, sb = dict(zip(a, shapes[0])), dict(zip(b, shapes[1]))
    summed = set(a + b) - set(out)
    return bool(summed) and all(c in sa and c in sb and sa[c] != 1 and sb[c] != 1 for c in summed)


@functools.lru_cache(maxsize=512)
def _contracts(eq: str) -> bool:
    """Whether the (expanded) equation sums a label that two or more operands share."""
    ins, out = eq.split("->")
    subs = ins.split(",")
    return any(c not in out and sum(c in s for s in subs) > 1 for c in set(ins.replace(",", "")))


def _sublist_equation(args: tuple) -> tuple:
    """``(a, [0, 1], b, [1, 2], [0, 2])`` -> ``('AB,BC->AC', (a, b))``: subscripts 0-51 are 'A'-'Z'
    then 'a'-'z' as in PyTorch (so an implicit output, sorted by letter, is sorted by subscript),
    ``Ellipsis`` is '...', a trailing odd list is the output."""
    def letters(sub) -> str:
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and 0 <= s < 52:
                out.append(_SUBLIST_LETTERS[s])
            else:
                raise ValueError(f"einsum(): expected subscript to be within the range [0, 52), but got {s}")
        return "".join(out)
    operands, subs = args[0:len(args) - len(args) % 2:2], args[1:len(args) - len(args) % 2:2]
    equation = ",".join(map(letters, subs))
    if len(args) % 2:
        equation += "->" + letters(args[-1])
    return equation, tuple(operands)


_SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def tensordot(a, b, dims=2):
    """Contract ``dims`` (a count, or a pair of dim lists) of ``a`` with those of ``b``."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    da = [_wrap_dim(d, a.ndim, "tensordot") for d in da]
    db = [_wrap_dim(d, b.ndim, "tensordot") for d in db]
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length (tensordot got {da} and {db})")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if a._data.dtype.kind == "b":
        raise _no_bool_kernel("addmm_impl_cpu_")
    la, lb = list(_LETTERS[:a.ndim]), list(_LETTERS[a.ndim:a.ndim + b.ndim])
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
        lb[j] = la[i]
    out = [c for k, c in enumerate(la) if k not in da] + [c for k, c in enumerate(lb) if k not in db]
    return apply(_einsum, a, b, eq=f"{''.join(la)},{''.join(lb)}->{''.join(out)}")


# ---------------------------------------------------------------- diagonals
def _diagonal_fwd(xp, x, *, offset, dim1, dim2):
    d = xp.diagonal(x, offset, dim1, dim2)
    if not getattr(d.flags, "writeable", True) and x.flags.writeable:
        d.flags.writeable = True  # numpy hands out a read-only view of a writeable array
    return d


def _embed_fwd(xp, g, *, shape, offset, dim1, dim2):
    out = xp.zeros(shape, g.dtype)
    d = _diagonal_fwd(xp, out, offset=offset, dim1=dim1, dim2=dim2)
    d[...] = g
    return out


def _diagonal_vjp(g, out, x, *, offset, dim1, dim2):
    return (apply(_diag_embed, g, shape=x._data.shape, offset=offset, dim1=dim1, dim2=dim2),)


_diagonal = Op("diagonal", _diagonal_fwd, _diagonal_vjp, saves=NONE, is_view=True)
_diag = Op("diag", lambda xp, x, **p: _diagonal_fwd(xp, x, **p).copy(), _diagonal_vjp, saves=NONE)
# writes g onto a diagonal of zeros: the adjoint of diagonal, and diag() of a vector
_diag_embed = Op("diag_embed", _embed_fwd,
                 lambda gg, out, g, *, shape, offset, dim1, dim2: (
                     apply(_diagonal, gg, offset=offset, dim1=dim1, dim2=dim2),),
                 saves=NONE)


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(diagonal, (input,), input, offset=offset, dim1=dim1, dim2=dim2)
    d1, d2 = _wrap_dim(dim1, input.ndim, "diagonal"), _wrap_dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    # a view of the input's base, as PyTorch's: an in-place op on it (K.diagonal().add_(eps)) is tracked
    return _mark(apply(_diagonal, input, offset=offset, dim1=d1, dim2=d2), input)


def diag(input, diagonal: int = 0):
    if input.ndim == 1:
        n = input.shape[0] + abs(diagonal)
        return apply(_diag_embed, input, shape=(n, n), offset=diagonal, dim1=0, dim2=1)
    if input.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    return apply(_diag, input, offset=diagonal, dim1=0, dim2=1)


def trace(input):
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(trace, (input,), input)
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


def kron(input, other):
    """Kronecker product: every element of ``input`` scales a copy of ``other``."""
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = input.reshape([s for n in sa for s in (n, 1)])
    b = other.reshape([s for n in sb for s in (1, n)])
    return (a * b).reshape([x * y for x, y in zip(sa, sb)])


METHODS = ("matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "baddbmm",
           "trace", "diag", "diagonal", "kron")
def _matmul_operator(self, other, reflected: bool = False):
    """``self @ other`` (``other @ self`` when ``reflected``); a numpy array taken as the other operators take it."""
    if refused_operand(other):
        return NotImplemented
    try:
        return matmul(other, self) if reflected else matmul(self, other)
    except (TypeError, AttributeError):
        if reflected:
            return reflected_failure(other)
        other = array_operand(other)   # PyTorch hands the array to numpy, whose matmul promotes the two dtypes
        common = promote_types(self.dtype, other.dtype)
        return matmul(self.to(common), other.to(common))


OPERATORS = {"__matmul__": _matmul_operator, "__rmatmul__": lambda s, o: _matmul_operator(s, o, True)}


# ---------------------------------------------------------------- qr
QRResult = return_types.linalg_qr


def _qr_k(m: int, n: int, mode: str) -> int:
    """The number of columns of Q (rows of R)."""
    return m if mode == "complete" else min(m, n)


def _qr_fwd(xp, a, *, mode):
    """R alone for mode 'r'; otherwise Q and R packed into one array, so that one recorded op
    gives both (an op has one differentiable output): side by side when they have as many
    rows (k == m), else stacked (k == n < m). ``_qr_unpack`` takes them apart."""
    *batch, m, n = a.shape
    k = _qr_k(m, n, mode)
    if not has_data(xp):      # meta: the shape alone (no O(m n k) factorisation of placeholder values)
        shape = (k, n) if mode == "r" else (m, k + n) if k == m else (m + k, n)
        return xp.empty((*batch, *shape), a.dtype)
    if mode == "r":
        return xp.linalg.qr(a, mode="r")
    q, r = xp.linalg.qr(a, mode=mode)
    return xp.concatenate([q, r], axis=-1 if k == m else -2)


def _qr_unpack(packed: Tensor, m: int, n: int, mode: str) -> tuple:
    """Q and R (views) of a packed qr output, or of its gradient."""
    k = _qr_k(m, n, mode)
    if k == m:
        return narrow(packed, -1, 0, k), narrow(packed, -1, k, n)
    return narrow(packed, -2, 0, m), narrow(packed, -2, m, k)


def _qr_vjp(g, out, a, *, mode):
    m, n = a.shape[-2:]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                           "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                           "linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    q, r = _qr_unpack(out, m, n, mode)
    gq, gr = _qr_unpack(g, m, n, mode)
    if m >= n:
        return (_qr_tall_grad(gq, gr, q, r),)
    # A = [X | Y] with X square: X = QU is a square QR and Y = QV, with R = [U | V]
    u, v = narrow(r, -1, 0, m), narrow(r, -1, m, n - m)
    gu, gv = narrow(gr, -1, 0, m), narrow(gr, -1, m, n - m)
    gx = _qr_tall_grad(gq + (q @ v) @ gv.mH, gu, q, u)
    return (cat([gx, q @ gv], -1),)


def _qr_tall_grad(gq, gr, q, r):
    """The gradient of A = QR (m >= n, R square and invertible; complex: R's diagonal real, as
    LAPACK's), as PyTorch's linalg_qr_backward: gA = (gQ + Q S) R^-H, where S is the Hermitian matrix
    whose strict upper triangle is that of X = gR R^H - Q^H gQ and whose diagonal is Re diag(X).
    Written in Tensor ops, so it differentiates again."""
    up = (gr @ r.mH - q.mH @ gq).triu()
    b = q @ (up + up.mH - up.real * eye(up.shape[-1], dtype=up.real.dtype, device=up.device)) + gq
    return apply(_solve_triangular, r, b.mH, upper=True).mH


_qr = Op("qr", _qr_fwd, _qr_vjp, saves=NONE, save_output=True, complex=True)


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``torch.linalg.qr``: A = QR with Q orthonormal columns and R upper triangular.

    Differentiable in modes 'reduced' and 'complete' (when rows <= columns), as in PyTorch.
    """
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                           f"(default), 'r', or 'complete'")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.qr: The input tensor A must have at least 2 dimensions (got {A.ndim}-D)")
    if A._data.dtype.kind not in _INEXACT:
        raise RuntimeError(f"linalg.qr: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.name.capitalize()}")
    out = apply(_qr, A, mode=mode)
    if mode == "r":
        return QRResult(zeros(0, dtype=A.dtype, device=A.device), out)
    return QRResult(*_qr_unpack(out, *A._data.shape[-2:], mode))


def _solve_triangular_fwd(xp, a, b, *, upper, unit=False):
    """``A^-1 B`` for triangular ``A`` (only its ``upper`` or lower triangle is read; its diagonal
    taken as ones when ``unit``). A zero on the diagonal gives inf/nan, as LAPACK's trtrs."""
    if not has_data(xp):      # meta: the shape alone (a solve of the placeholder values would be singular)
        return xp.empty(b.shape, b.dtype)
    tri = xp.triu(a, 1 if unit else 0) if upper else xp.tril(a, -1 if unit else 0)
    if unit:
        tri = tri + xp.eye(a.shape[-1], dtype=a.dtype)
    try:
        return xp.linalg.solve(tri, b)
    except Exception:         # numpy's LinAlgError on an exactly singular triangle
        return xp.full(b.shape, xp.nan, b.dtype)


def _solve_triangular_vjp(g, out, a, b, *, upper, unit=False):
    """gB = A^-H g, gA = -gB X^H on A's triangle (complex: conjugate transposes, PyTorch's convention)."""
    gb = apply(_solve_triangular, a.mH, g, upper=not upper, unit=unit)
    ga = -(gb @ out.mH)
    keep = (1 if unit else 0) if upper else (-1 if unit else 0)
    return (ga.triu(keep) if upper else ga.tril(keep)) if a.requires_grad else None, gb


# the triangular solve of qr's backward (torch.linalg.solve_triangular with left=True)
_solve_triangular = Op("solve_triangular", _solve_triangular_fwd, _solve_triangular_vjp, saves=ALL,
                       save_output=True, complex=True)


# ---------------------------------------------------------------- cholesky
class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a factorisation that cannot be completed (a RuntimeError, as PyTorch's)."""


LinAlgError.__module__ = "tapelab.linalg"


def _not_pd_message(xp, a) -> str:
    """PyTorch's text for the first batch element whose factorisation fails, naming the order
    of its first leading minor that is not positive-definite."""
    *batch, n, _ = a.shape
    flat = a.reshape((-1, n, n))
    for i in range(flat.shape[0]):
        for k in range(1, n + 1):
            if not _chol_ok(xp, flat[i, :k, :k]):
                where = f"(Batch element {i}): " if batch else ""
                return (f"{where}The factorization could not be completed because the input is not "
                        f"positive-definite (the leading minor of order {k} is not positive-definite).")
    return "The factorization could not be completed because the input is not positive-definite."


def _chol_ok(xp, a) -> bool:
    try:
        low = xp.linalg.cholesky(a)
    except Exception:       # numpy's LinAlgError (the array libraries do not share one class)
        return False
    return not bool(xp.isnan(low).any())   # cupy returns NaNs instead of raising


def _cholesky_fwd(xp, a):
    """The lower factor L of A = L L^H, reading only A's lower triangle (as PyTorch does: the upper
    one is the conjugate of the lower, the diagonal's imaginary parts are ignored)."""
    if not has_data(xp) or a.size == 0:      # meta, or empty: the shape alone
        return xp.zeros(a.shape, a.dtype) if has_data(xp) else xp.empty(a.shape, a.dtype)
    low = xp.tril(a, -1)
    diag = xp.real(xp.diagonal(a, 0, -2, -1))
    sym = low + xp.conj(xp.swapaxes(low, -1, -2)) + diag[..., None] * xp.eye(a.shape[-1], dtype=diag.dtype)
    try:
        low = xp.linalg.cholesky(sym)
    except Exception:
        low = None
    if low is None or bool(xp.isnan(low).any()):
        raise LinAlgError(_not_pd_message(xp, sym))
    return low


def _cholesky_vjp(g, out, a):
    """PyTorch's cholesky_backward: with Φ = tril(L^H gL) and its diagonal halved symmetrically,
    gA = L^-H (½(Φ + tril(Φ, -1)^H)) L^-1, as two triangular solves in Tensor ops."""
    phi = (out.mH @ g).tril()
    phi = 0.5 * (phi + phi.tril(-1).mH)
    x = apply(_solve_triangular, out.mH, phi, upper=True)          # L^-H Φ
    return (apply(_solve_triangular, out.mH, x.mH, upper=True).mH,)  # (L^-H Φ) L^-1


_cholesky = Op("cholesky", _cholesky_fwd, _cholesky_vjp, saves=NONE, save_output=True, complex=True)


def _check_cholesky(name: str, A) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A._data.dtype.kind not in _INEXACT:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.name.capitalize()}")


def _cholesky_as(name: str, A: Tensor, upper: bool) -> Tensor:
    """The factor under the public name ``name``, which checks and errors carry."""
    _check_cholesky(name, A)
    try:
        low = apply(_cholesky, A)
    except LinAlgError as e:
        raise LinAlgError(f"{name}: {e}") from None
    return low.mH if upper else low


def linalg_cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """``torch.linalg.cholesky``: L lower triangular with A = L L^H (``upper=True``: L^H), batched.
    Reads A's lower triangle; raises ``LinAlgError`` when A is not positive-definite."""
    return _cholesky_as("linalg.cholesky", A, upper)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated in PyTorch in favour of ``torch.linalg.cholesky``; warns as it does)."""
    warn_once("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
              "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\nand"
              "\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\nThis "
              "transform will produce equivalent results for all valid (symmetric positive definite) inputs.")
    return _cholesky_as("cholesky", input, upper)


__all__ += ["cholesky"]
METHODS += ("cholesky",)

"""Elementwise loops over flat float32 arrays: sigmoid, silu, gelu (erf and tanh forms) and relu, forward
and backward, tanh's backward, and the fused multiply-adds of ``add(..., alpha=)``, ``lerp`` and
``addcmul`` (one rounding each, as ATen's float32 kernels).

sigmoid, silu and gelu give PyTorch's CPU floats bit for bit: ``aten_map`` walks an array as ATen's
elementwise loop does (vector body and scalar tail per innermost loop, ``fastmath.aten_lanes``), the
loops compute with ``fastmath``'s Sleef/ATen/oneDNN functions in the vector body and libm in the tail,
in PyTorch's order of operations and FMAs (tests/test_activation_bits.py). One pass reads the input and
writes the result (numpy's gelu made six full-size temporaries). The backward reads the input alone and
recomputes the CDF (erf, or the tanh form's tanh), as PyTorch's gelu saves only its input: an in-place
change to the output before backward is legal.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import PARALLEL_MIN, parallel, split_count
from .fastmath import aten_lanes, onednn_avx512
from .fastmath import (erf_aten, exp_sleef_u10, expm1_sleef_u10, fma, gelu16_onednn_avx512, gelu_grad_onednn, gelu_onednn_avx2,
                       gelu_onednn_avx512, log1p_sleef_core, log_sleef_u10, pow_sleef_u10, select,
                       tanh_sleef_u10)

__all__ = ["sigmoid", "silu", "silu_backward", "gelu", "gelu_onednn", "gelu_backward", "gelu_backward_onednn", "softplus", "softplus_backward", "elu", "elu_backward", "mish", "mish_backward", "log_sigmoid", "log_sigmoid_backward", "relu", "relu_backward", "tanh_backward", "sigmoid_backward", "fill_rows", "put_cols", "add_rows", "scaled_add", "lerp", "lerp_weights", "addcmul", "addcdiv",
           "clamp", "sign", "pow_number", "log1p", "expm1"]

F = np.float32
_JIT = dict(cache=True, error_model="numpy", nogil=True)
_SQRT_HALF = F(1.0 / math.sqrt(2.0))
_BETA_ERF = F(2.0 / math.sqrt(math.pi) * (1.0 / math.sqrt(2.0)) * 0.5)     # ATen's M_2_SQRTPI * M_SQRT1_2 * 0.5
_K = F(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5)                  # kGeluBeta
_C = F(0.044715)
_K3C = F(3.0) * F(0.044715)                                              # kThree * kKappa, in float
_LOG1P_BOUND = F(1e38)                                                   # Sleef's LOG1PF_BOUND: logf beyond
_LOG1P_EXP_BOUND = F(87.0)                                               # exp below it stays below that bound


# ---------------------------------------------------------------- PyTorch's activations, bit for bit
# ATen's elementwise loop (``cpu_kernel_vec``) takes two vectors a step over the first ``n - n % block``
# elements (``block`` = 2 lanes: 32 with AVX512, ``fastmath.aten_lanes``) with Sleef's exp/tanh and ATen's
# erf, and the rest with its scalar lambda, whose exp/tanh/erf are libm's (numba's ``math`` calls the same
# ``expf``/``tanhf``/``erff``). Each loop here does the same, in the same order of operations; the FMAs are
# where GCC contracted ATen's code (measured against torch: silu's backward, the tanh-form gelu, ...).
# Above ATen's grain ``parallel_for`` gives each thread a chunk of ``ceil(n / tasks)`` elements, each with
# its own scalar tail: ``aten_map`` reads a dense array as rows of that chunk (``_chunk``) and cuts it
# between them, so the same elements take the scalar path as in ATen at every thread count.
@njit(**_JIT, inline="always")
def _aten_rows(part, params, x, out, block, run):
    """That walk of one input: ``x`` as rows of ``run`` elements (ATen's innermost loop: the whole array when
    it is contiguous), each row's first multiple of ``block`` by ``part(x, out, params, True)`` and the rest by
    ``part(..., False)``; ``block > run`` makes every element scalar. (Each row's two parts are loops over
    slices of their own: a loop from a variable start, inside the loop over rows, does not vectorise, 4x
    slower. Inlined in numba's IR: a loop passed as a value would make its caller uncachable.)"""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        part(x[start:m], out[start:m], params, True)
        part(x[m:end], out[m:end], params, False)


@njit(**_JIT)
def _sigmoid(x, out, params, exact):
    for i in range(x.shape[0]):
        if exact:
            out[i] = F(1.0) / (exp_sleef_u10(F(0.0) - x[i]) + F(1.0))
        else:
            out[i] = F(1.0) / (F(1.0) + math.exp(-x[i]))


@njit(**_JIT)
def sigmoid(x, out, block, run):
    """``1 / (exp(0 - x) + 1)`` (``_aten_rows``)."""
    _aten_rows(_sigmoid, (), x, out, block, run)


@njit(**_JIT)
def _silu(x, out, params, exact):
    for i in range(x.shape[0]):
        v = x[i]
        if exact:
            out[i] = v / (F(1.0) + exp_sleef_u10(-v))
        else:
            out[i] = v / (F(1.0) + math.exp(-v))


@njit(**_JIT)
def silu(x, out, block, run):
    """``x / (1 + exp(-x))`` (``_aten_rows``)."""
    _aten_rows(_silu, (), x, out, block, run)


@njit(**_JIT)
def _silu_backward(g, x, out, exact):
    for i in range(x.shape[0]):
        v = x[i]
        if exact:
            s = F(1.0) / (F(1.0) + exp_sleef_u10(-v))
        else:
            s = F(1.0) / (F(1.0) + math.exp(-v))
        out[i] = g[i] * s * fma(v, F(1.0) - s, F(1.0))


@njit(**_JIT)
def silu_backward(g, x, out, block, run):
    """``g s (1 + x (1 - s))``, s = 1/(1 + exp(-x)) (the last multiply-add fused)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _silu_backward(g[start:m], x[start:m], out[start:m], True)
        _silu_backward(g[m:end], x[m:end], out[m:end], False)


@njit(**_JIT, inline="always")
def _gelu_tanh_inner(v):
    return _K * fma(_C, v * v * v, v)


@njit(**_JIT, inline="always")
def _gelu_tanh_grad(v, t):
    """ATen's ``left' + left tanh' inner'`` with ``left = x/2``, ``right = 1 + t``: ``1 - t^2`` and
    ``1 + 3 c x^2`` fused (GCC's contraction, vector and scalar alike), the last sum not."""
    left = F(0.5) * v
    dleft = F(0.5) * (F(1.0) + t)
    dtanh = fma(-t, t, F(1.0))
    dinner = _K * fma(_K3C, v * v, F(1.0))
    return dleft + left * dtanh * dinner


# gelu's erf form has three code paths in PyTorch: oneDNN's kernel for a contiguous tensor of two or more
# elements (``mode`` 1 on AVX512, 2 below), ATen's own loop otherwise (``mode`` 0).
@njit(**_JIT)
def _gelu(x, out, params, exact):
    tanh, mode = params
    for i in range(x.shape[0]):
        v = x[i]
        if tanh:
            t = tanh_sleef_u10(_gelu_tanh_inner(v)) if exact else math.tanh(_gelu_tanh_inner(v))
            out[i] = F(0.5) * v * (F(1.0) + t)
        elif mode == 1:
            out[i] = gelu_onednn_avx512(v)
        elif mode == 2:
            out[i] = gelu_onednn_avx2(v)
        else:
            e = erf_aten(v * _SQRT_HALF) if exact else math.erf(v * _SQRT_HALF)
            out[i] = v * F(0.5) * (F(1.0) + e)


@njit(**_JIT)
def gelu(x, out, tanh, mode, block, run):
    """``x/2 (1 + erf(x/sqrt 2))``, or with ``tanh`` ``x/2 (1 + tanh(k (x + c x^3)))``, as ATen's own loop
    (``mode`` 0, or ``tanh``); oneDNN's erf form is ``gelu_onednn``."""
    _aten_rows(_gelu, (tanh, mode), x, out, block, run)


@njit(**_JIT)
def gelu_onednn(x, out, tanh, mode, block, run):
    """``gelu``'s erf form as oneDNN's kernel (``mode`` 1: AVX512, 16 at a time by its permutes, then the
    rest; 2: AVX2), ``tanh`` False; ``block`` and ``run`` are ``aten_map``'s, unused. A loop of its own (the
    caller picks it): ATen's loop's scalar tail (``_gelu`` with ``exact`` False) then compiles only where a
    model takes that loop (1 s of a fresh first step)."""
    n = x.shape[0]
    m = n - n % 16 if mode == 1 else 0
    for i in range(0, m, 16):
        gelu16_onednn_avx512(x, out, i)
    _gelu(x[m:], out[m:], (tanh, mode), True)


@njit(**_JIT)
def _gelu_backward(g, x, out, tanh, mode, exact):
    for i in range(x.shape[0]):
        v = x[i]
        if tanh:
            t = tanh_sleef_u10(_gelu_tanh_inner(v)) if exact else math.tanh(_gelu_tanh_inner(v))
            out[i] = g[i] * _gelu_tanh_grad(v, t)
        elif mode != 0:
            out[i] = g[i] * gelu_grad_onednn(v)
        elif exact:
            cdf = F(0.5) * (F(1.0) + erf_aten(v * _SQRT_HALF))
            out[i] = g[i] * fma(v, _BETA_ERF * exp_sleef_u10(v * v * F(-0.5)), cdf)
        else:                                           # the scalar lambda: this sum is not fused
            cdf = F(0.5) * (F(1.0) + math.erf(v * _SQRT_HALF))
            out[i] = g[i] * (cdf + v * (_BETA_ERF * math.exp(v * v * F(-0.5))))


@njit(**_JIT)
def gelu_backward(g, x, out, tanh, mode, block, run):
    """``g gelu'(x)``: ``Phi(x) + x phi(x)``, or for tanh ``(1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2)``
    (``mode`` as ``gelu``'s; oneDNN's backward is the same on every ISA)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _gelu_backward(g[start:m], x[start:m], out[start:m], tanh, mode, True)
        _gelu_backward(g[m:end], x[m:end], out[m:end], tanh, mode, False)


@njit(**_JIT)
def gelu_backward_onednn(g, x, out, tanh, mode, block, run):
    """``gelu_backward`` of the erf form where ``gelu_onednn`` runs the forward (the caller picks it; ``block``
    and ``run`` unused)."""
    _gelu_backward(g, x, out, tanh, mode, True)


# softplus and elu (ATen's ``softplus_kernel``/``elu_kernel`` and their backwards): ``cpu_kernel_vec``
# loops, Sleef's exp/expm1 in the vector body and libm in the scalar tail (rows as ``sigmoid``'s). The
# vector forms blend both branches by ``x > 0`` (or ``beta x > threshold``), the scalar ones branch on
# ``x <= 0``: a NaN takes the other side in each.
@njit(**_JIT, inline="always")
def _softplus_value(v, beta, threshold, exact, wide):
    bx = v * beta
    if exact:
        z = exp_sleef_u10(bx)
        lz = log_sleef_u10(z) if wide and not z <= _LOG1P_BOUND else log1p_sleef_core(z)
    else:
        lz = math.log1p(math.exp(bx))
    return v if bx > threshold else lz / beta


@njit(**_JIT)
def _softplus(x, out, beta, threshold, exact):
    for i in range(x.shape[0]):
        out[i] = _softplus_value(x[i], beta, threshold, exact, False)


@njit(**_JIT)
def _softplus_wide(x, out, beta, threshold):
    """The vector body where ``exp(beta x)`` may pass Sleef's log1p bound (a threshold above 87): Sleef's
    ``logf`` there, chosen per element (the choice costs 1.5x, so the common threshold goes without it)."""
    for i in range(x.shape[0]):
        out[i] = _softplus_value(x[i], beta, threshold, True, True)


@njit(**_JIT)
def softplus(x, out, beta, threshold, block, run):
    """``log1p(exp(beta x)) / beta``; ``x`` above the threshold."""
    n = x.shape[0]
    wide = not threshold < _LOG1P_EXP_BOUND
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        if wide:
            _softplus_wide(x[start:m], out[start:m], beta, threshold)
        else:
            _softplus(x[start:m], out[start:m], beta, threshold, True)
        _softplus(x[m:end], out[m:end], beta, threshold, False)


@njit(**_JIT)
def _softplus_backward(g, x, out, beta, threshold, exact):
    for i in range(x.shape[0]):
        bx = x[i] * beta
        z = exp_sleef_u10(bx) if exact else math.exp(bx)
        out[i] = g[i] if bx > threshold else g[i] * z / (z + F(1.0))


@njit(**_JIT)
def softplus_backward(g, x, out, beta, threshold, block, run):
    """``g z/(z + 1)``, ``z = exp(beta x)``; ``g`` above the threshold."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _softplus_backward(g[start:m], x[start:m], out[start:m], beta, threshold, True)
        _softplus_backward(g[m:end], x[m:end], out[m:end], beta, threshold, False)


@njit(**_JIT)
def _elu(x, out, alpha, exact):
    for i in range(x.shape[0]):
        v = x[i]
        if exact:
            out[i] = v if v > F(0.0) else expm1_sleef_u10(v) * alpha
        else:
            out[i] = math.expm1(v) * alpha if v <= F(0.0) else v


@njit(**_JIT)
def elu(x, out, alpha, block, run):
    """``x`` above 0, ``alpha (exp(x) - 1)`` else."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _elu(x[start:m], out[start:m], alpha, True)
        _elu(x[m:end], out[m:end], alpha, False)


@njit(**_JIT)
def _elu_backward(g, x, out, alpha, exact):
    for i in range(x.shape[0]):
        v = x[i]
        if exact:
            out[i] = g[i] if v > F(0.0) else g[i] * alpha * exp_sleef_u10(v)
        else:
            out[i] = g[i] * alpha * math.exp(v) if v <= F(0.0) else g[i]


@njit(**_JIT)
def elu_backward(g, x, out, alpha, block, run):
    """``g`` above 0, ``g alpha exp(x)`` else (from the input, as PyTorch's ``elu`` saves it)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _elu_backward(g[start:m], x[start:m], out[start:m], alpha, True)
        _elu_backward(g[m:end], x[m:end], out[m:end], alpha, False)


# mish (ATen's ``mish_kernel``/``mish_backward_kernel``): ``cpu_kernel_vec`` loops with no threshold,
# ``tanh(log1p(exp(x)))`` by Sleef in the vector body (its log1p is ``logf`` beyond 1e38) and libm in the tail;
# the backward's ``1 - t^2`` and last sum fused (GCC's contraction, vector and scalar alike: measured).
@njit(**_JIT, inline="always")
def _tanh_softplus(v, exact):
    if exact:
        z = exp_sleef_u10(v)
        return tanh_sleef_u10(log1p_sleef_core(z) if z <= _LOG1P_BOUND else log_sleef_u10(z))
    return math.tanh(math.log1p(math.exp(v)))


@njit(**_JIT)
def _mish(x, out, exact):
    for i in range(x.shape[0]):
        out[i] = x[i] * _tanh_softplus(x[i], exact)


@njit(**_JIT)
def mish(x, out, block, run):
    """``x tanh(log1p(exp(x)))`` (rows as ``sigmoid``'s)."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _mish(x[start:m], out[start:m], True)
        _mish(x[m:end], out[m:end], False)


@njit(**_JIT)
def _mish_backward(g, x, out, exact):
    for i in range(x.shape[0]):
        v = x[i]
        s = F(1.0) / (F(1.0) + (exp_sleef_u10(-v) if exact else math.exp(-v)))
        t = _tanh_softplus(v, exact)
        out[i] = g[i] * fma(v * s, fma(-t, t, F(1.0)), t)


@njit(**_JIT)
def mish_backward(g, x, out, block, run):
    """``g (t + x s (1 - t^2))``, ``t = tanh(log1p(exp(x)))``, ``s = 1/(1 + exp(-x))``."""
    n = x.shape[0]
    for start in range(0, n, run):
        end = min(start + run, n)
        m = end - (end - start) % block
        _mish_backward(g[start:m], x[start:m], out[start:m], True)
        _mish_backward(g[m:end], x[m:end], out[m:end], False)


# ATen's log_sigmoid (``log_sigmoid_cpu_kernel``) runs Vectorized over every element of the contiguous input,
# the tail a partial vector: Sleef's exp and log1p throughout, so neither split nor layout changes a float.
# Its backward reads the forward's buffer ``z = exp(-|x|)``; recomputed here with the same Sleef exp, the
# same bits. ``max_deriv - sign * q`` with sign +-1 is exact, fused or not.
@njit(**_JIT)
def log_sigmoid(x, out):
    """``min(x, 0) - log1p(exp(-|x|))``: Sleef's log1p core alone, as its argument is at most 1 (or NaN,
    which the core keeps NaN)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = (v if v < F(0.0) else F(0.0)) - log1p_sleef_core(exp_sleef_u10(-abs(v)))


@njit(**_JIT)
def log_sigmoid_backward(g, x, out):
    """``g (1 - z/(1+z))`` below 0, ``g z/(1+z)`` else, ``z = exp(-|x|)``."""
    for i in range(x.shape[0]):
        v = x[i]
        z = exp_sleef_u10(-abs(v))
        q = z / (F(1.0) + z)
        out[i] = ((F(1.0) - q) if v < F(0.0) else q) * g[i]


@njit(**_JIT)
def relu(x, out):
    """ATen's ``clamp_min(x, 0)``, ``x < 0 ? 0 : x``: NaN and -0.0 kept (numpy's ``maximum`` is its NaN-aware
    scalar loop here, ~7x a subtraction, and gives +0.0 for -0.0; this select vectorises)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = select(v < F(0.0), F(0.0), v)


@njit(**_JIT)
def fill_rows(out, row):
    """Every row of ``out (M, N)`` set to ``row (N,)``: linear's bias in its output before addmm's GEMM
    adds the product (``kernels.parallel`` cuts the rows over the threads, as ATen's copy runs)."""
    for i in range(out.shape[0]):
        dst = out[i]
        for j in range(row.shape[0]):
            dst[j] = row[j]


@njit(**_JIT)
def put_cols(src, out, col):
    """``out[i, col:col + w] = src[i]`` for the rows of ``src (M, w)``: one piece of a split's gradient
    written into its columns of the input's gradient (``kernels.parallel`` cuts the rows over the threads,
    as ATen's ``cat`` runs)."""
    for i in range(src.shape[0]):
        s, dst = src[i], out[i]
        for j in range(s.shape[0]):
            dst[col + j] = s[j]


@njit(**_JIT)
def add_rows(a, out, row):
    """``out[i] = a[i] + row`` for the rows of ``a (M, N)``: an add that broadcasts ``row (N,)`` (GPT's token
    plus position embeddings), numpy's floats, its rows cut over the threads by ``kernels.parallel``."""
    for i in range(a.shape[0]):
        src, dst = a[i], out[i]
        for j in range(row.shape[0]):
            dst[j] = src[j] + row[j]


@njit(**_JIT)
def tanh_backward(g, y, out):
    """``g * (1 - y*y)`` with ``1 - y*y`` rounded once, as PyTorch's CPU kernel gets it from a fused
    multiply-add: near |y| = 1 the two roundings of numpy's form differ by tens of ulps. ``y*y`` of a
    float32 is exact in float64, so ``1 - y*y`` there is the fused result (LSTM and tanh-MLP gradients
    then equal PyTorch's bit for bit)."""
    for i in range(y.shape[0]):
        v = np.float64(y[i])
        out[i] = g[i] * F(1.0 - v * v)


@njit(**_JIT)
def sigmoid_backward(g, y, out):
    """``g * (1 - y) * y`` in PyTorch's order, each product rounded to float32 (no multiply-add to
    contract): numpy's three passes' floats in one."""
    for i in range(y.shape[0]):
        v = y[i]
        out[i] = g[i] * (F(1.0) - v) * v


@njit(**_JIT)
def relu_backward(g, y, out):
    """0 where the forward's output is <= 0, else ``g`` (PyTorch's threshold_backward: a NaN output
    passes its gradient)."""
    for i in range(y.shape[0]):
        out[i] = select(y[i] <= F(0.0), F(0.0), g[i])


# An update in place (``p.add_(g, alpha=-lr)``: ``out`` is ``z``) runs a loop over the arrays it reads
# and writes once: LLVM vectorises a loop only after a runtime check that ``out`` overlaps no input, and
# ``out`` that is an input fails the check and takes the scalar loop (mlp_b64's SGD step, 670k float32
# parameters: 0.31 ms, against 0.08 ms for the same fma in the vector loop; bit for bit the same).
@njit(**_JIT)
def _scaled_add_into(x, z, alpha):
    for i in range(x.shape[0]):
        z[i] = fma(x[i], alpha, z[i])


@njit(**_JIT)
def scaled_add(x, z, out, alpha):
    """``out = x * alpha + z`` rounded once: ATen's ``add(z, x, alpha=alpha)`` on float32 (an optimizer's
    ``p.add_(g, alpha=-lr)``), one pass where numpy needs float64 temporaries for the one rounding."""
    if out.ctypes.data == z.ctypes.data:
        _scaled_add_into(x, z, alpha)
        return
    for i in range(x.shape[0]):
        out[i] = fma(x[i], alpha, z[i])


@njit(**_JIT)
def _lerp_into(start, end, coeff, from_end):
    if from_end:
        for i in range(start.shape[0]):
            start[i] = fma(coeff, end[i] - start[i], end[i])
    else:
        for i in range(start.shape[0]):
            start[i] = fma(coeff, end[i] - start[i], start[i])


@njit(**_JIT)
def lerp(start, end, out, coeff, from_end):
    """``fma(coeff, end - start, end if from_end else start)``: ATen's lerp with a number weight
    (``coeff`` the weight, or ``weight - 1`` from the end when ``|weight| >= 0.5``)."""
    if out.ctypes.data == start.ctypes.data:       # ``start.lerp_(end, w)``: the vector loop (above)
        _lerp_into(start, end, coeff, from_end)
        return
    if from_end:
        for i in range(start.shape[0]):
            out[i] = fma(coeff, end[i] - start[i], end[i])
    else:
        for i in range(start.shape[0]):
            out[i] = fma(coeff, end[i] - start[i], start[i])


@njit(**_JIT, inline="always")
def _lerped(s, e, w):
    """ATen's lerp of one element: ``fma(w, e - s, s)`` where ``|w| < 0.5``, else ``fma(w - 1, e - s, e)``."""
    d = e - s
    return fma(w, d, s) if abs(w) < F(0.5) else fma(w - F(1.0), d, e)


@njit(**_JIT)
def _lerp_weights_into(start, end, weight):
    for i in range(start.shape[0]):
        start[i] = _lerped(start[i], end[i], weight[i])


@njit(**_JIT)
def lerp_weights(start, end, weight, out):
    """ATen's lerp with a tensor weight, element by element (``_lerped``); in place (``start.lerp_(end,
    weights)``) through a loop that LLVM vectorises without an overlap check."""
    if out.ctypes.data == start.ctypes.data:
        _lerp_weights_into(start, end, weight)
        return
    for i in range(start.shape[0]):
        out[i] = _lerped(start[i], end[i], weight[i])


@njit(**_JIT)
def _addcmul_into(a, t1, t2, value):
    for i in range(a.shape[0]):
        a[i] = fma(value * t1[i], t2[i], a[i])


@njit(**_JIT)
def addcmul(a, t1, t2, out, value):
    """``fma(value * t1, t2, a)`` (the product by ``value`` rounded first, as ATen's kernel; by 1 it is
    exact); in place (``a.addcmul_(t1, t2)``) through a loop LLVM vectorises without an overlap check."""
    if out.ctypes.data == a.ctypes.data:
        _addcmul_into(a, t1, t2, value)
        return
    for i in range(a.shape[0]):
        out[i] = fma(value * t1[i], t2[i], a[i])


@njit(**_JIT)
def _addcdiv_into(a, t1, t2, value):
    for i in range(a.shape[0]):
        a[i] = a[i] + (value * t1[i]) / t2[i]


@njit(**_JIT)
def addcdiv(a, t1, t2, out, value):
    """``a + (value * t1) / t2``, each step rounded (ATen's float32 order; no FMA; by 1 the product is
    exact)."""
    if out.ctypes.data == a.ctypes.data:
        _addcdiv_into(a, t1, t2, value)
        return
    for i in range(a.shape[0]):
        out[i] = a[i] + (value * t1[i]) / t2[i]


@njit(**_JIT, inline="always")
def _clamped(v, bound, upper):
    """``v`` where it is on the bound's side, equal (a zero keeps its sign) or NaN, else the bound."""
    if upper:
        return v if v <= bound or v != v else bound
    return v if v >= bound or v != v else bound


@njit(**_JIT)
def _clamp_into(x, bound, upper):
    for i in range(x.shape[0]):
        x[i] = _clamped(x[i], bound, upper)


@njit(**_JIT)
def clamp(x, out, bound, upper):
    """numpy's ``maximum(x, bound)`` (``minimum`` when ``upper``) by a number, as ``_clamped`` says
    (numpy's loop with a scalar operand is 2.5x slower than PyTorch's clamp_min); in place through a
    loop of one array, which LLVM vectorises without an overlap check."""
    if out.ctypes.data == x.ctypes.data:
        _clamp_into(x, bound, upper)
        return
    for i in range(x.shape[0]):
        out[i] = _clamped(x[i], bound, upper)


@njit(**_JIT)
def _sign_into(x):
    for i in range(x.shape[0]):
        v = x[i]
        x[i] = F(1.0) if v > F(0.0) else (F(-1.0) if v < F(0.0) else F(0.0))


@njit(**_JIT)
def sign(x, out):
    """ATen's ``(0 < x) - (x < 0)``: 0 for NaN and for -0.0."""
    if out.ctypes.data == x.ctypes.data:
        _sign_into(x)
        return
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = F(1.0) if v > F(0.0) else (F(-1.0) if v < F(0.0) else F(0.0))



@njit(**_JIT)
def _pow_number(x, out, params, exact):
    exponent, avx512 = params
    y = F(exponent)
    for i in range(x.shape[0]):
        if exact:
            out[i] = pow_sleef_u10(x[i], y, avx512)
        else:
            out[i] = F(math.pow(np.float64(x[i]), exponent))


@njit(**_JIT)
def pow_number(x, out, exponent, avx512, block, run):
    """``x ** exponent`` as ATen's float32 kernel for a number exponent (other than those it turns into
    products, roots or copies): Sleef's ``powf`` of the exponent rounded to float in the vector body,
    double ``pow`` rounded to float in the scalar tail (rows as ``sigmoid``'s). numpy's float32 ``powf``
    differs from both in the last bit for about one element in ten."""
    _aten_rows(_pow_number, (exponent, avx512), x, out, block, run)


# ATen's float32 log1p and expm1 (``IMPLEMENT_FLOAT/COMPLEX_KERNEL``, ``vec::map``) run Sleef over every
# element: the tail is a partial vector, not a scalar loop, and a strided input is copied to a buffer first,
# so neither the split nor the layout changes a result (numpy's differed in ~1 of 6 and 1 of 24 values).
@njit(**_JIT)
def log1p(x, out):
    """Sleef's ``log1pf_u10``; ``out`` may be ``x``. Its ``logf_u1`` branch (``x > 1e38``, NaN) is taken only
    when a first read-only pass finds such an element, as Sleef tests its mask (the core loop vectorises)."""
    beyond = False
    for i in range(x.shape[0]):
        beyond |= not x[i] <= _LOG1P_BOUND
    if beyond:
        for i in range(x.shape[0]):
            d = x[i]
            out[i] = log1p_sleef_core(d) if d <= _LOG1P_BOUND else log_sleef_u10(d)
    else:
        for i in range(x.shape[0]):
            out[i] = log1p_sleef_core(x[i])


@njit(**_JIT)
def expm1(x, out):
    """Sleef's ``expm1f_u10``; ``out`` may be ``x``."""
    for i in range(x.shape[0]):
        out[i] = expm1_sleef_u10(x[i])

# ---------------------------------------------------------------- how ATen walks an array
def _run(x) -> int:
    """The length of ATen's innermost loop over a non-dense ``x`` read in C order: the trailing dims whose
    strides nest, merged, if the last is unit-stride (``x[:, :k]``: rows of k); 0 when the last dim is
    strided (ATen's scalar loop for every element)."""
    k = x.ndim - 1
    if x.strides[k] != x.itemsize:
        return 0
    run = x.shape[k]
    while k > 0 and x.strides[k - 1] == x.shape[k] * x.strides[k]:
        k -= 1
        run *= x.shape[k]
    return run


_BLOCK = [0]


def _block() -> int:
    _BLOCK[0] = 2 * aten_lanes()
    return _BLOCK[0]


def aten_map1(small, x):
    """``aten_map(small.loop, (x,), ())`` with less Python on the small call (a third of a microsecond), and on
    an aligned float32 one the loop's compiled code without numba's dispatcher (0.1 us more): ``small`` is
    the loop's ``kernels.small_entry``."""
    n = x.size
    flags = x.flags
    if n <= PARALLEL_MIN and flags.c_contiguous:
        block = _BLOCK[0] or _block()
        if x.ndim == 1:
            out = flat = np.empty(n, x.dtype)
        else:   # the result owns its memory (a view's base is read by graphs and views)
            out = np.empty_like(x)
            x, flat = x.reshape(-1), out.reshape(-1)
        if flags.aligned and x.dtype is _F32:
            small.run(x, flat, block, n)
        else:
            small.loop(x, flat, block, n)
        return out
    return aten_map(small.loop, (x,), ())


def aten_block() -> int:
    """ATen's block of a pointwise loop here (two vectors), the ``block`` argument of ``aten_map``'s loops."""
    return _BLOCK[0] or _block()


def aten_map(loop, arrays, params, block: int = 0):
    """``loop(*flat arrays, flat out, *params, block, run)`` into a new array: float32 ``arrays`` of one shape
    read in the order ATen's elementwise loop (``cpu_kernel_vec``) visits them -- memory order when all are
    dense alike (C or F), one loop per ``parallel_for`` chunk (``_chunk``); else C order in rows of the
    shortest ``_run`` -- with ATen's split
    into vector body and scalar tail per loop, and, above ``PARALLEL_MIN``, threads cutting the flat arrays
    at multiples of the vector step (or of the rows). ``block``: a kernel's own vector step, where ATen runs its
    AVX2 code on every CPU (one it registers with ``REGISTER_DISPATCH`` alone: 16, not AVX512's 32)."""
    x = arrays[-1]
    block = block or _BLOCK[0] or _block()
    if x.size <= PARALLEL_MIN and all(a.flags.c_contiguous for a in arrays):    # the small call: one thread, no copies
        out = np.empty_like(x)
        if x.ndim == 1:
            loop(*arrays, out, *params, block, x.size)
        else:
            loop(*[a.reshape(-1) for a in arrays], out.reshape(-1), *params, block, x.size)
        return out
    n = x.size
    if all(a.flags.c_contiguous for a in arrays):
        order, run = "C", _chunk(n)
    elif all(a.flags.f_contiguous for a in arrays):
        order, run = "F", _chunk(n)
    else:       # TensorIterator's order is the first operand's; taken as C here, the loop the shortest run
        order, run = "C", min(_run(a) for a in arrays)
    out = np.empty(x.shape, np.float32, order=order)
    flats = [a.ravel(order=order) for a in arrays]
    if run == 0:
        run, block = n, n + 1
    parallel(loop, len(arrays) + 1, *flats, out.ravel(order=order), *params, block, run,
             align=block if run >= n else run)
    return out


def _chunk(n: int) -> int:
    """The length of ATen's loop over a dense array of ``n`` elements: ``parallel_for``'s chunk,
    ``ceil(n / tasks)``, each chunk a loop with a scalar tail of its own, so the elements that take the
    scalar formula depend on the thread count (at two threads, 100003 elements: the last 17 of each half,
    not the array's last 3). Read as rows of this length, the loop gives torch's floats at every count,
    split here or not."""
    return -(-n // split_count(n))


_F32 = np.dtype(np.float32)


def takes(*arrays) -> bool:
    """Whether ``aten_map`` takes these: numpy float32 arrays of one shape, not empty (any strides)."""
    x = arrays[-1]
    if type(x) is not np.ndarray or x.dtype != _F32 or not x.size:
        return False
    for a in arrays[:-1]:
        if type(a) is not np.ndarray or a.dtype != _F32 or a.shape != x.shape:
            return False
    return True


def gelu_mode(x, g=None) -> int:
    """Which code PyTorch runs for float32 gelu (erf form) on ``x``: oneDNN's kernel (1 on AVX512, 2 below)
    for a C-contiguous tensor of two or more elements (ATen's ``use_mkldnn``), ATen's own loop (0) else."""
    if x.size <= 1 or not x.flags.c_contiguous or (g is not None and not g.flags.c_contiguous):
        return 0
    return 1 if onednn_avx512() else 2

"""ATen's argument checks of max/avg pooling (``max_pool{1,2,3}d``, ``avg_pool{1,2,3}d`` and the
``lp_pool`` built on them), in ATen's order and with its messages, before any window is formed.

Each function takes the user's arguments and returns them as int tuples, raising what PyTorch raises:
``pooling_output_shape``'s three checks per spatial dim (stride not zero, padding non-negative and at
most half the effective kernel), then ``pool2d_shape_check`` / ``pool3d_shape_check`` (kernel,
stride and dilation positive, the input's rank and non-empty dims, padding at most half the kernel,
an output of at least one element). ``max_pool1d`` without indices has its own ``check_max_pool1d``;
with indices, and ``avg_pool1d``, go through the 2-d checks on the input with a unit height, as ATen
does (so their messages show that height).
"""
from __future__ import annotations

import functools

from ._ops import pool_output_size
from ..core.arguments import refuse_non_tensors

_WORDS = {2: "two", 3: "three"}


def _sizes(shape) -> str:
    return "[" + ", ".join(str(int(n)) for n in shape) + "]"


def _seq(v):
    """The user's int-or-sequence as a list of ints (a tensor or numpy scalar as its int)."""
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)]


def _expand(v: list, n: int) -> tuple:
    return tuple(v) * n if len(v) == 1 else tuple(v)


def _div_trunc(a: int, b: int) -> int:
    """C++ integer division (towards zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _output_size(size: int, k: int, p: int, s: int, d: int, ceil_mode: bool) -> int:
    """ATen's ``pooling_output_shape``: its checks, then the output length."""
    if s == 0:
        raise RuntimeError("stride should not be zero")
    if p < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    if p > _div_trunc((k - 1) * d + 1, 2):
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                           f"kernel_size={k} and dilation={d}")
    return pool_output_size(size, k, s, p, d, ceil_mode)


def _shape_check_2d(shape, k, s, p, d, out) -> None:
    """ATen's ``pool2d_shape_check`` on ``shape`` (C, H, W) or (N, C, H, W); tuples in (H, W) order."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = k, s, p, d
    if not (kw > 0 and kh > 0):
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if not (sw > 0 and sh > 0):
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if not (dh > 0 and dw > 0):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dh} dilationW: {dw}")
    ndim = len(shape)
    valid = ndim >= 3 and shape[1] != 0 and shape[2] != 0
    if not ((ndim == 3 and shape[0] != 0 and valid) or (ndim == 4 and valid and shape[3] != 0)):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{_sizes(shape)}")
    if not (kw // 2 >= pw and kh // 2 >= ph):
        raise RuntimeError("pad should be smaller than or equal to half of kernel size, but got "
                           f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}")
    oh, ow = out
    if ow < 1 or oh < 1:
        c, h, w = shape[-3:]
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{oh}x{ow}). "
                           "Output size is too small")


def _shape_check_3d(shape, k, s, p, d, out, fn: str, check_input_size: bool) -> None:
    """ATen's ``pool3d_shape_check``; tuples in (T, H, W) order."""
    (kt, kh, kw), (st, sh, sw), (pt, ph, pw), (dt, dh, dw) = k, s, p, d
    if not (kt > 0 and kw > 0 and kh > 0):
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {kt} kH: {kh} kW: {kw}")
    if not (st > 0 and sw > 0 and sh > 0):
        raise RuntimeError(f"stride should be greater than zero, but got dT: {st} dH: {sh} dW: {sw}")
    if not (dt > 0 and dw > 0 and dh > 0):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {dt} dilationH: {dh} "
                           f"dilationW: {dw}")
    ndim = len(shape)
    for i in range(ndim):
        if ndim == 5 and i == 0:       # the batch may be empty
            continue
        if shape[i] <= 0:
            # PyTorch 2.13 names dimension 0 here whichever dimension is empty
            raise RuntimeError(f"{fn}: Expected input's non-batch dimensions to have positive length, but input "
                               f"has a shape of {_sizes(shape)} and non-batch dimension 0 has length zero!")
    c, t, h, w = shape[-4:]
    if check_input_size and not (t >= kt and h >= kh and w >= kw):
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size (kT: {kt} kH: {kh} "
                           f"kW: {kw})")
    if not (kt // 2 >= pt and kw // 2 >= pw and kh // 2 >= ph):
        raise RuntimeError("pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {kt} kW: {kw} kH: {kh} padT: {pt} padW: {pw} padH: {ph}")
    ot, oh, ow = out
    if ot < 1 or ow < 1 or oh < 1:
        raise RuntimeError(f"Given input size: ({c}x{t}x{h}x{w}). Calculated output size: ({c}x{ot}x{oh}x{ow}). "
                           "Output size is too small")


def _args_nd(kind: str, nd: int, kernel_size, stride, padding, dilation):
    """The 2-d and 3-d forms' tuple-length checks; kernel, stride, padding, dilation as nd-tuples."""
    words = _WORDS[nd]
    avg3 = kind == "avg" and nd == 3       # avg_pool3d words its messages without 'either'
    either = "" if avg3 else "either "
    name = f"{kind}_pool{nd}d"
    k = _seq(kernel_size)
    if len(k) not in (1, nd):
        raise RuntimeError(f"{name}: kernel_size must {either}be a single int, or a tuple of {words} ints")
    s = [] if stride is None else _seq(stride)
    if len(s) not in (0, 1, nd):
        raise RuntimeError(f"{name}: stride must {either}be omitted, a single int, or a tuple of {words} ints")
    p = _seq(padding)
    if len(p) not in (1, nd):
        raise RuntimeError(f"{name}: padding must {either}be a single int, or a tuple of {words} ints")
    k = _expand(k, nd)
    s = _expand(s, nd) if s else k
    p = _expand(p, nd)
    if dilation is None:
        return k, s, p, (1,) * nd
    dl = _seq(dilation)
    if len(dl) not in (1, nd):
        raise RuntimeError(f"{name}: dilation must be either a single int, or a tuple of {words} ints")
    return k, s, p, _expand(dl, nd)


def _args_1d(name: str, kernel_size, stride, padding, dilation):
    """``check1d``'s messages (the 1-d forms that go through the 2-d op)."""
    out = []
    for arg, v in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding), ("dilation", dilation)):
        vals = [] if v is None else _seq(v)
        if arg == "stride" and not vals:
            vals = list(out[0])
        if vals and len(vals) != 1:
            raise RuntimeError(f"{name}() argument '{arg}' should contain one int (got {len(vals)})")
        out.append(tuple(vals))
    return out


def _check_rank_1d(shape, name: str) -> None:
    if len(shape) not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {len(shape)}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for {name})")


def _check_2d(shape, k, s, p, d, ceil_mode) -> None:
    out = tuple(_output_size(shape[i - 2], k[i], p[i], s[i], d[i], ceil_mode) for i in range(2))
    _shape_check_2d(shape, k, s, p, d, out)


def _hashable(*args) -> bool:
    """Whether every argument is an int, None or a tuple of ints (the cache's keys)."""
    for a in args:
        if type(a) is tuple:
            for x in a:
                if type(x) is not int:
                    return False
        elif type(a) is not int and a is not None:
            return False
    return True


def max_pool_args(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd: int):
    """Checks ``max_pool{nd}d``'s arguments as ATen does; returns kernel, stride, padding, dilation.
    The checks depend on the shape and the arguments alone: plain ints and int tuples are cached."""
    try:
        shape = tuple(input.shape)
    except AttributeError:
        refuse_non_tensors(f"max_pool{nd}d", input)
        raise
    if _hashable(kernel_size, stride, padding, dilation):
        return _max_pool_args_cached(shape, kernel_size, stride, padding, dilation, bool(ceil_mode),
                                     bool(return_indices), nd)
    return _max_pool_args(shape, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd)


def _max_pool_args(shape, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd: int):
    if nd == 1 and not return_indices:
        return _check_max_pool1d(shape, kernel_size, stride, padding, dilation, ceil_mode)
    if nd == 1:
        _check_rank_1d(shape, "max_pool1d")
        k, s, p, d = _args_1d("max_pool1d", kernel_size, stride, padding, dilation)
        _check_2d(shape[:-1] + (1, shape[-1]), (1,) + k, (1,) + s, (0,) + p, (1,) + d, ceil_mode)
        return k, s, p, d
    k, s, p, d = _args_nd("max", nd, kernel_size, stride, padding, dilation)
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for input")
    if nd == 2:
        _check_2d(shape, k, s, p, d, ceil_mode)
    else:
        out = tuple(_output_size(shape[i - 3], k[i], p[i], s[i], d[i], ceil_mode) for i in range(3))
        _shape_check_3d(shape, k, s, p, d, out, "max_pool3d_with_indices_out_cpu_template()", False)
    return k, s, p, d


def _check_max_pool1d(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """ATen's ``check_max_pool1d`` (``max_pool1d`` without indices)."""
    ndim = len(shape)
    if not ((ndim == 2 and shape[0] != 0 and shape[1] != 0) or (ndim == 3 and shape[1] != 0 and shape[2] != 0)):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{_sizes(shape)}")
    k = _seq(kernel_size)
    if len(k) != 1:
        raise RuntimeError("max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but "
                           f"got size {len(k)}")
    s = [] if stride is None else _seq(stride)
    if len(s) not in (0, 1):
        raise RuntimeError("max_pool1d() stride must be None, an int, list of ints, or tuple of ints of size 1 but "
                           f"got size {len(s)}")
    p = _seq(padding)
    if len(p) != 1:
        raise RuntimeError("max_pool1d() padding must be an int, list of ints, or tuple of ints of size 1 but got "
                           f"size {len(p)}")
    d = _seq(dilation)
    if len(d) != 1:
        raise RuntimeError("max_pool1d() dilation must be an int, list of ints or tuple of ints of size 1 but got "
                           f"size {len(d)}")
    k, s, p, d = k[0], (s or k)[0], p[0], d[0]
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    ow = _output_size(shape[-1], k, p, s, d, ceil_mode)
    if ow <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {ow}")
    return (k,), (s,), (p,), (d,)


def avg_pool_args(input, kernel_size, stride, padding, ceil_mode, divisor_override, nd: int):
    """Checks ``avg_pool{nd}d``'s arguments as ATen does; returns kernel, stride, padding (cached as
    ``max_pool_args``)."""
    try:
        shape = tuple(input.shape)
    except AttributeError:
        refuse_non_tensors(f"avg_pool{nd}d", input)
        raise
    if _hashable(kernel_size, stride, padding, divisor_override):
        return _avg_pool_args_cached(shape, kernel_size, stride, padding, bool(ceil_mode), divisor_override, nd)
    return _avg_pool_args(shape, kernel_size, stride, padding, ceil_mode, divisor_override, nd)


def _avg_pool_args(shape, kernel_size, stride, padding, ceil_mode, divisor_override, nd: int):
    ndim = len(shape)
    if nd == 1:
        _check_rank_1d(shape, "avg_pool1d")
        k, s, p, _ = _args_1d("avg_pool1d", kernel_size, stride, padding, None)
        _check_2d(shape[:-1] + (1, shape[-1]), (1,) + k, (1,) + s, (0,) + p, (1, 1), ceil_mode)
        return k, s, p
    k, s, p, d = _args_nd("avg", nd, kernel_size, stride, padding, None)
    if nd == 2:
        if divisor_override is not None and int(divisor_override) == 0:
            raise RuntimeError("divisor must be not zero")
        if ndim < 3:                   # ATen reads input.size(-3)
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                             f"{max(ndim, 1) - 1}], but got -3)")
        _check_2d(shape, k, s, p, d, ceil_mode)
        return k, s, p
    if ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    out = tuple(_output_size(shape[i - 3], k[i], p[i], s[i], 1, ceil_mode) for i in range(3))
    _shape_check_3d(shape, k, s, p, d, out, "avg_pool3d()", True)
    return k, s, p


# a failed check raises, and lru_cache keeps no result for it: only valid argument sets are cached
_max_pool_args_cached = functools.lru_cache(maxsize=512)(_max_pool_args)
_avg_pool_args_cached = functools.lru_cache(maxsize=512)(_avg_pool_args)


# ---------------------------------------------------------------- adaptive pooling
def _with_default(output_size, shape):
    """``F``'s ``_list_with_default``: ``None`` entries take the input's size."""
    if not isinstance(output_size, (tuple, list)):
        return output_size
    if len(shape) <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    return [s if v is None else v for v, s in zip(output_size, shape[-len(output_size):])]


def _empty_dims(shape, dims, name: str) -> None:
    for i in dims:
        if shape[i] <= 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {_sizes(shape)} with dimension {i % len(shape)} being empty")


def _output_1d(shape, output_size, name: str) -> int:
    _check_rank_1d(shape, name)
    out = _seq(output_size)
    if len(out) != 1:
        raise RuntimeError(f"{name}() argument 'output_size' should contain one int (got {len(out)})")
    return out[0]


def adaptive_avg_output(shape, output_size, nd: int) -> tuple:
    """The output size of ``adaptive_avg_pool{nd}d``, checked as ATen does; an all-ones size is a
    mean over the trailing dims, which ATen takes before it checks the input's rank and sizes."""
    shape = tuple(shape)
    if nd == 1:
        o = _output_1d(shape, output_size, "adaptive_avg_pool1d")
        adaptive_avg_output(shape[:-1] + (1, shape[-1]), (1, o), 2)     # ATen pools the input unsqueezed
        return (o,)
    out = _with_default(output_size, shape)
    out = [int(o) for o in out] if isinstance(out, (tuple, list)) else [int(out)] * nd
    name = f"adaptive_avg_pool{nd}d"
    if len(out) != nd:
        raise RuntimeError(f"{name}: output_size must be {nd}")
    if any(o < 0 for o in out):
        got = f"{out[0]}, {out[1]}" + (f",{out[2]}" if nd == 3 else "")   # sic: PyTorch's 3-d text has no space
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 0 but received {{{got}}}")
    if all(o == 1 for o in out):
        return tuple(out)
    ndim = len(shape)
    if nd == 2:
        if ndim not in (3, 4):
            raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got {_sizes(shape)}")
        _empty_dims(shape, (-2, -1), name)
    else:
        _empty_dims(shape, range(1, ndim), name)
        if ndim not in (4, 5):
            raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got {_sizes(shape)}")
    return tuple(out)


def adaptive_max_output(shape, output_size, nd: int) -> tuple:
    """The output size of ``adaptive_max_pool{nd}d``, checked as ATen does."""
    shape = tuple(shape)
    if nd == 1:
        o = _output_1d(shape, output_size, "adaptive_max_pool1d")
        _empty_dims(shape, range(1, len(shape)), "adaptive_max_pool1d")
        adaptive_max_output(shape[:-1] + (1, shape[-1]), (1, o), 2)     # ATen pools the input unsqueezed
        return (o,)
    out = _with_default(output_size, shape)
    out = [int(o) for o in out] if isinstance(out, (tuple, list)) else [int(out)] * nd
    name = f"adaptive_max_pool{nd}d"
    if len(shape) not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {_sizes(shape)}")
    _empty_dims(shape, range(1, len(shape)), name)
    if len(out) != nd:
        raise RuntimeError(f"{name}(): internal error: output_size.size() must be {nd}")
    bad = next((o for o in out if o < 0), None)
    if bad is not None:
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{_sizes(shape[:-nd] + tuple(out))}")
    return tuple(out)

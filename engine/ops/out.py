"""``out=``: the public functions PyTorch gives an out variant take ``out=``, all in one way.

The op families define each public function once, without ``out``; the same function is the
Tensor method (methods take no ``out=`` in PyTorch). ``out_variants`` wraps the names below for
the ``tapelab`` namespace: the function computes its result as usual, then ``write_out`` checks
``out`` and writes the result into it with PyTorch's rules:

- autograd: with grad mode on, no argument (``out`` included) may require grad;
- dtype: the result's dtype must be castable to ``out``'s (no float into an integer tensor, no
  number into a bool one); index outputs (``max(dim)``'s indices) must be int64;
- device: ``out`` is on the result's device;
- shape: an ``out`` of another shape is resized, with PyTorch's warning when it had elements.
"""
from __future__ import annotations

import functools
import warnings

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..base.grad_mode import is_grad_enabled
from ..base.pytype import tp_name
from ..core.creation import empty
from ..core.tensor import Tensor
from ._util import numpy_kwargs, takes_numpy_names

__all__ = ["OUT_FUNCTIONS", "LINALG_OUT_FUNCTIONS", "out_variants", "write_out"]

# tapelab's public functions that have an out= form in PyTorch 2.13 (the functions' own names)
OUT_FUNCTIONS = frozenset("""
abs absolute acos acosh add addcdiv addcmul addmm all amax amin any arange arccos arccosh arcsin arcsinh
arctan arctan2 arctanh argmax argmin argsort asin asinh atan atan2 atanh baddbmm bernoulli bitwise_and
bitwise_not bitwise_or bitwise_xor bmm cat ceil cholesky clamp clamp_max clamp_min clip column_stack concat
concatenate cos cosh cumprod cumsum diag div divide dot dstack empty eq erf erfc erfinv exp exp2 expm1 eye fix
floor floor_divide fmax fmin fmod frac full gather ge ger greater greater_equal gt hstack hypot index_add
index_copy index_select inner isneginf isposinf kron kthvalue le lerp less less_equal linspace log log10 log1p
log2 log_softmax logaddexp logical_and logical_not logical_or logical_xor logspace logsumexp lt masked_select
matmul max maximum mean median min minimum mm mode msort mul multinomial multiply mv nan_to_num ne neg negative
nonzero norm normal not_equal ones outer pow prod rand randint randn randperm reciprocal remainder round rsqrt
scatter scatter_add scatter_reduce searchsorted sgn sigmoid sign signbit sin sinh softmax sort sqrt square stack
std std_mean sub subtract sum take take_along_dim tan tanh tensordot topk tril triu true_divide trunc var
var_mean vdot vstack where xlogy zeros copysign digamma heaviside i0 igamma igammac lgamma nextafter sinc
bitwise_left_shift bitwise_right_shift gcd lcm
""".split())

# tapelab.linalg's functions that have an out= form in PyTorch 2.13 (linear_operator passes out=None)
LINALG_OUT_FUNCTIONS = frozenset("""
cholesky cholesky_ex cond cross det eig eigh eigvals eigvalsh householder_product inv inv_ex ldl_factor
ldl_factor_ex ldl_solve lu lu_factor lu_factor_ex lu_solve matmul matrix_norm matrix_power matrix_rank multi_dot
norm pinv qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vecdot vector_norm
""".split())

# factories make their result in out's dtype and on its device, as PyTorch's do
_FACTORIES = frozenset("arange empty eye full linspace logspace ones rand randint randn randperm zeros".split())



def out_variants(namespace: dict, names: frozenset = OUT_FUNCTIONS) -> dict:
    """``{name: out-taking function}`` for the ``names`` (``OUT_FUNCTIONS``) that ``namespace`` defines,
    each called by its own name (``arctan``, not ``atan``): graphs name nodes and code after it. Each
    lives at ``namespace``'s module under that name, so pickle finds it there (e3nn's Gate keeps
    ``torch.sigmoid`` in the model that ``torch.save`` writes)."""
    return {name: _with_out(namespace[name], name, namespace["__name__"]) for name in names
            if callable(namespace.get(name))}


def _with_out(fn, public_name: str, module: str):
    renames, keepdim = takes_numpy_names(fn)

    @functools.wraps(fn)
    def _out_variant(*args, out=None, **kwargs):  # "_": frame walkers (capture errors) skip it
        if out is None and not kwargs and _DISPATCH.functions is None:   # ``torch.tanh(x)``: the call as it is,
            return fn(*args)                                             # no empty keywords passed on
        if renames and kwargs:           # axis=/keepdims=, as PyTorch's argument parser takes them
            kwargs = numpy_kwargs(public_name, kwargs, keepdim)
        if _DISPATCH.functions is not None and has_tensor_like((*args, *kwargs.values(), out)):
            given = kwargs if out is None else {**kwargs, "out": out}     # the call as made: no out=None
            return handle_torch_function(_out_variant, (*args, *given.values()), *args, **given)
        if out is None:
            return fn(*args, **kwargs)
        name = fn.__name__
        if is_grad_enabled() and (_requires_grad(args) or _requires_grad(kwargs.values()) or _requires_grad((out,))):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               f"differentiation, but one of the arguments requires grad.")
        if name in _FACTORIES and isinstance(out, Tensor):
            if kwargs.get("dtype") is None:
                kwargs["dtype"] = out.dtype
            if kwargs.get("device") is None:
                kwargs["device"] = out.device
        return write_out(name, fn(*args, **kwargs), out)
    _out_variant.__name__ = _out_variant.__qualname__ = public_name
    _out_variant.__module__ = module
    return _out_variant


def _requires_grad(values) -> bool:
    for v in values:
        if isinstance(v, Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def write_out(name: str, result, out):
    """Write ``result`` (a tensor or a tuple of them) into ``out`` under PyTorch's rules; return ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors, "
                            f"got {type(out).__name__}")
        written = [_write_one(name, r, o, index=r.dtype is _dtype.int64 and i > 0)
                   for i, (r, o) in enumerate(zip(result, out))]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    return _write_one(name, result, out, index=False)


def _write_one(name: str, result: Tensor, out, index: bool) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {tp_name(out)}")
    if index and out.dtype is not _dtype.int64:
        raise RuntimeError(f"Expected out tensor to have dtype long int, but got {out.dtype.name} instead")
    if result.dtype._rank > out.dtype._rank:
        raise RuntimeError(f"result type {result.dtype.scalar_type} can't be cast to the desired output "
                           f"type {out.dtype.scalar_type}")
    if out.device != result.device:
        raise RuntimeError(f"{name}(): Expected out tensor to have device {result.device}, but got {out.device} "
                           f"instead")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(result.shape)}. This behavior "
                          f"is deprecated, and in a future PyTorch release outputs will not be resized unless "
                          f"they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
                          f"inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=4)
        out.data = empty(tuple(result.shape), dtype=out.dtype, device=out.device)
    return out.copy_(result)

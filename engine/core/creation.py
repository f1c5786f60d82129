"""Tensor creation: from data, filled, ranges and random; the public functions.

Every function here ends in ``apply`` of a factory op (``kind="factory"``, declared in
``factories.py``: ``full``, ``empty``, ``arange``, ``tensor`` ...) or a random op
(``kind="random"``, in ``random.py``: ``rand``, ``randn``, ``bernoulli`` ...), so modes see
tensors being born. Their params carry the ``dtype`` and ``device`` (see ``dispatch``).

The Tensor methods that make tensors (``Tensor(data)``, ``new_*``, unpickling,
``pin_memory``) are declared here, above the Tensor class, and bound by ``ops.install_methods``.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..base.dispatch_state import STATE as _DISPATCH
from .overrides import DisableTorchFunctionSubclass, handle_torch_function, has_tensor_like
from ..base import dtype as _dtype
from ..base.device import CPU, DEFAULT as _DEFAULT, cuda_available, device as Device
from ..base.pytype import tp_name
from ..base.user_frame import warn_at_user
from ..base.dtype import from_np, get_default_dtype
from ..base import layout as _layouts
from ..base.compressed import LAYOUT_NAMES, CompressedArray
from ..base.coo import COOArray
from ..base.layout import strided
from .arguments import int_argument
from .dispatch import apply
from .registry import NONE, Op
from .factories import ARANGE, EMPTY, EYE, FROM_DLPACK, FULL, LINSPACE, LOGSPACE, TENSOR, host_array
from .random import BERNOULLI, NORMAL, RAND, RANDINT, RANDN, RANDPERM, memory_order
from .tensor import _UNMADE, Size, Tensor

__all__ = ["tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "full", "empty", "empty_strided",
           "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace",
           "eye", "rand", "randn", "randint", "randperm", "normal", "bernoulli", "rand_like",
           "randn_like", "randint_like", "scalar_tensor", "FloatTensor", "DoubleTensor", "HalfTensor",
           "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


# ---------------------------------------------------------------- the public functions
def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Copy ``data`` (nested lists, numbers, numpy arrays, tensors) into a new tensor."""
    if _DISPATCH.functions is not None and has_tensor_like(()):   # an entered mode sees it (data is no argument
        given = {k: v for k, v in (("dtype", dtype), ("device", device), ("requires_grad", requires_grad),
                                   ("pin_memory", pin_memory)) if v}   # that takes part, as PyTorch's)
        return handle_torch_function(tensor, (), data, **given)
    _warn_copy_construct(data, "torch.tensor")
    return _copy(data, dtype, device, requires_grad)


def _copy(data, dtype, device, requires_grad: bool) -> Tensor:
    arr = host_array(data, _dtype.canonical(dtype))
    if not _NDARRAY_LIST_WARNED and arr.size and type(data) in (list, tuple) and _holds_ndarray(data):
        _warn_ndarray_list()
    return _finish(apply(TENSOR, data=arr, device=_dev(device)), requires_grad)


def _warn_copy_construct(data, call: str) -> None:
    """PyTorch's warning at the caller's line when a tensor is copied through ``call`` (FNO's
    ``torch.tensor(torch.linspace(...))`` grid prints it under torch)."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      f"sourceTensor.detach().clone().requires_grad_(True), rather than {call}(sourceTensor).",
                      UserWarning, stacklevel=3)


_NOT_WRITABLE_WARNED: list = []
_NDARRAY_LIST_WARNED: list = []


def _holds_ndarray(seq) -> bool:
    """Whether nested lists/tuples hold a numpy array at any depth (PyTorch's element-wise copy checks
    each element it stores); the element types are collected at C speed, so long lists of numbers cost little."""
    kinds = set(map(type, seq))
    if any(issubclass(k, np.ndarray) for k in kinds):
        return True
    return (list in kinds or tuple in kinds) and any(type(x) in (list, tuple) and _holds_ndarray(x) for x in seq)


def _warn_ndarray_list() -> None:
    """PyTorch's warning, once per process, when a tensor is built from a list of numpy arrays (nlp-tutorial's
    ``torch.FloatTensor(input_batch)`` prints it under torch), at the first caller's line outside tapelab."""
    _NDARRAY_LIST_WARNED.append(True)
    warn_at_user("Creating a tensor from a list of numpy.ndarrays is extremely slow. Please consider converting the "
                 "list to a single numpy.ndarray with numpy.array() before converting to a tensor.")


def _warn_not_writable() -> None:
    """PyTorch's warning, once per process, when a tensor shares a non-writable numpy array's memory
    (``as_tensor``/``from_numpy``; fastai's ``as_tensor(df.values)`` prints it under torch)."""
    if not _NOT_WRITABLE_WARNED:
        _NOT_WRITABLE_WARNED.append(True)
        warnings.warn("The given NumPy array is not writable, and PyTorch does not support non-writable tensors. "
                      "This means writing to this tensor will result in undefined behavior. You may want to copy the "
                      "array to protect its data or make it writable before converting it to a tensor. This type of "
                      "warning will be suppressed for the rest of this program.", UserWarning, stacklevel=3)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Share memory with ``data`` where possible (numpy arrays, tensors)."""
    if _DISPATCH.functions is not None and has_tensor_like((data,)):
        return handle_torch_function(as_tensor, (data,), data, dtype=dtype, device=device)
    dtype = _dtype.canonical(dtype)
    if isinstance(data, Tensor):
        return data.to(*(a for a in (device, dtype) if a is not None))
    if isinstance(data, np.ndarray) and _dev(device) is CPU:
        if not data.flags.writeable:
            _warn_not_writable()
        arr = data if dtype is None else data.astype(dtype.np, copy=False)
        from_np(arr.dtype)
        return apply(TENSOR, data=arr, device=CPU)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if not arr.flags.writeable:
        _warn_not_writable()
    from_np(arr.dtype)
    return apply(TENSOR, data=arr, device=CPU)


def from_dlpack(ext) -> Tensor:
    """Zero-copy import of any DLPack-capable array (numpy, cupy, PyTorch, JAX)."""
    dev_type = ext.__dlpack_device__()[0] if hasattr(ext, "__dlpack_device__") else 1
    dev = CPU if dev_type == 1 else Device("cuda", ext.__dlpack_device__()[1])
    return apply(FROM_DLPACK, ext=ext, device=dev)


_INT64_MAX = 2 ** 63 - 1
_SIZE_TYPES = (tuple, list, Size)


def _size(size, fn: str, keyword=None) -> tuple:
    """``size`` as a tuple of ints; bad sizes raise PyTorch's errors, named by the factory ``fn``.

    ``keyword`` is a ``size=`` given by name (``torch.empty(size=(2, 3))``), which PyTorch's
    factories accept in place of the positional sizes.
    """
    if keyword is None:   # the common call, zeros(64, 10) or zeros((64, 10)): plain non-negative ints
        dims = size[0] if len(size) == 1 and type(size[0]) in _SIZE_TYPES else size
        for s in dims:
            if type(s) is not int or s < 0 or s > _INT64_MAX:
                break
        else:
            return tuple(dims)
    if keyword is not None:
        if size:
            raise TypeError(f"{fn}() got multiple values for argument 'size'")
        if not isinstance(keyword, (tuple, list)):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not {tp_name(keyword)}")
        size = keyword
    bare = keyword is None and not (len(size) == 1 and isinstance(size[0], (tuple, list)))
    if not bare and keyword is None:
        size = size[0]
    if any(isinstance(s, Tensor) for s in size):
        size = [_size_index(s) for s in size]
    for i, s in enumerate(size):
        if type(s) is not int and not isinstance(s, numbers.Integral):
            raise TypeError(_bad_size_element(fn, i, s, bare, keyword is not None))
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        if s > _INT64_MAX:   # PyTorch's argument parser refuses it as it unpacks the size
            raise TypeError(f"{fn}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f'"Overflow when unpacking long long" (size {list(size)})')
    return tuple(map(int, size))


def _size_index(s):
    """A size element as PyTorch's parser reads one: an integer tensor of one element is its int
    (``x.new_zeros((n, chunks + 1))`` with ``chunks`` from ``torch.div(..., rounding_mode="trunc")``);
    anything else is left for the checks to refuse."""
    if isinstance(s, Tensor) and s._data.dtype.kind in "iu" and s.numel() == 1:
        return int(s.item())
    return s


def _bad_size_element(fn: str, i: int, s, bare: bool, by_name: bool) -> str:
    """PyTorch's argument parser's words for a size element that is not an int (kuangliu's
    ShuffleNet passes ``out_planes/4``, a float, to ``nn.Conv2d``)."""
    kind = tp_name(s)
    if i > 0:
        return (f"{fn}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                f'"type must be tuple of ints,but got {kind}"')
    if by_name:
        return f"{fn}(): argument 'size' must be tuple of ints, not tuple"
    if bare:
        return f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {kind}"
    return f"{fn}(): argument 'size' (position 1) must be tuple of ints, but found element of type {kind} at pos 0"


def _allocate(op, size: tuple, dtype, dev: Device, **params) -> Tensor:
    """``apply`` a factory that allocates ``size``; a size no storage can hold, or memory the
    allocator cannot give, raises PyTorch's RuntimeError (not the array library's errors)."""
    dtype = _dtype.canonical(dtype)
    if dtype is _dtype.bfloat16 and dev.type == "cuda":
        raise _dtype.bfloat16_on_cuda(f"{op.name}(dtype=bfloat16, device={dev})")
    try:
        return apply(op, size=size, dtype=dtype, device=dev, **params)
    except (MemoryError, ValueError, RuntimeError) as e:
        numel = math.prod(size)
        nbytes = numel * dtype.itemsize
        if max(numel, nbytes) > _INT64_MAX:
            raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)}") from None
        if not isinstance(e, MemoryError):
            raise
        if dev.type == "cuda":
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {nbytes} bytes.") from None
        raise RuntimeError(f"DefaultCPUAllocator: can't allocate memory: you tried to allocate {nbytes} "
                           f"bytes.") from None


def _strided(name: str, layout) -> None:
    """PyTorch's factories take ``layout=``; tapelab makes strided tensors (``to_sparse`` makes sparse ones)."""
    if layout is not None and layout is not strided:
        raise NotImplementedError(f"{name}(layout={layout}): tapelab's factories make strided tensors only "
                                  f"(use .to_sparse() for a sparse_coo one)")


def _dev(device) -> Device:
    return Device(device) if device is not None else _DEFAULT.device


def _fill(size: tuple, value, dtype, dev: Device, requires_grad: bool) -> Tensor:
    return _finish(_allocate(FULL, size, dtype or get_default_dtype(), dev, fill_value=value), requires_grad)


def _fill_like(input, value, dtype, device, requires_grad: bool) -> Tensor:
    """``value`` in a tensor like ``input``, laid out in its memory order (``_laid_out_like``)."""
    size, dt, dev = _like(input, dtype, device)
    laid = _laid_out_like(input, size, dt, dev)
    if laid is not None:
        return _finish(laid.fill_(value), requires_grad)
    return _fill(size, value, dt, dev, requires_grad)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad: bool = False,
          layout=None, pin_memory: bool = False, out=None) -> Tensor:
    _strided("zeros", layout)
    return _fill(_size(shape, "zeros", size), 0, dtype, _dev(device), requires_grad)


def ones(*shape, size=None, dtype=None, device=None, requires_grad: bool = False,
         layout=None, pin_memory: bool = False, out=None) -> Tensor:
    _strided("ones", layout)
    return _fill(_size(shape, "ones", size), 1, dtype, _dev(device), requires_grad)


def empty(*shape, size=None, dtype=None, device=None, requires_grad: bool = False, **_) -> Tensor:
    return _finish(_allocate(EMPTY, _size(shape, "empty", size), dtype or get_default_dtype(), _dev(device)),
                   requires_grad)


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor of ``size`` (tapelab's tensors are laid out densely: ``stride`` is
    accepted, the result is contiguous)."""
    if _DISPATCH.functions is not None and has_tensor_like((size, stride)):
        return handle_torch_function(empty_strided, (size, stride), size, stride, dtype=dtype, device=device,
                                     requires_grad=requires_grad, layout=layout, pin_memory=pin_memory)
    _strided("empty_strided", layout)
    return empty(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
         layout=None, pin_memory: bool = False) -> Tensor:
    _strided("full", layout)
    if dtype is None:
        dtype = _dtype.scalar_dtype(fill_value)
    return _fill(_size((size,) if isinstance(size, int) else tuple(size), "full"), fill_value, dtype, _dev(device),
                 requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((s,)):
        return handle_torch_function(scalar_tensor, (s,), s, dtype=dtype, device=device, requires_grad=requires_grad,
                                     layout=layout, pin_memory=pin_memory)
    _strided("scalar_tensor", layout)
    return full((), s, dtype=dtype or get_default_dtype(), device=device, requires_grad=requires_grad)


def _like(x: Tensor, dtype, device) -> tuple:
    """``x``'s shape, and the dtype and device of a tensor like it (no size checks: x's shape is valid)."""
    return x._data.shape, (_dtype.canonical(dtype) or x.dtype), (x._device if device is None else Device(device))


# a compressed tensor's ``*_like``: ``fill_value`` at its stored entries (zeros: no entries), as PyTorch's
_PATTERN_FILL = Op("sparse_compressed_fill_like", lambda xp, x, *, fill_value, dtype: x.filled(fill_value, dtype.np),
                   None, saves=NONE)


def _sparse_csr_refusal(kernel: str, input) -> NotImplementedError:
    """PyTorch's error for a random fill it has no sparse compressed kernel for."""
    return NotImplementedError(f"Could not run 'aten::{kernel}' with arguments from the 'SparseCsrCPU' backend "
                               f"({LAYOUT_NAMES[input.layout]} tensor); draw into a dense tensor first.")


def _compressed_like(input, value, dtype, layout, requires_grad) -> Tensor:
    if layout is not None and layout is not input.layout:
        raise RuntimeError(f"empty_like with different sparse layout is not supported (self is "
                           f"{LAYOUT_NAMES[input.layout]} but you requested {LAYOUT_NAMES.get(layout, 'Strided')})")
    return _finish(apply(_PATTERN_FILL, input, fill_value=value, dtype=_dtype.canonical(dtype) or input.dtype),
                   requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, layout=None, **_) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(zeros_like, (input,), input, dtype=dtype, device=device,
                                     requires_grad=requires_grad, layout=layout, **_)
    if type(input._data) is CompressedArray:
        return _compressed_like(input, 0, dtype, layout, requires_grad)
    _strided("zeros_like", layout)
    return _fill_like(input, 0, dtype, device, requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, layout=None, **_) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(ones_like, (input,), input, dtype=dtype, device=device,
                                     requires_grad=requires_grad, layout=layout, **_)
    if type(input._data) is CompressedArray:
        return _compressed_like(input, 1, dtype, layout, requires_grad)
    _strided("ones_like", layout)
    return _fill_like(input, 1, dtype, device, requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False, layout=None, **_) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(full_like, (input,), input, fill_value, dtype=dtype, device=device,
                                     requires_grad=requires_grad, layout=layout, **_)
    if type(input._data) is CompressedArray:
        return _compressed_like(input, fill_value, dtype, layout, requires_grad)
    _strided("full_like", layout)
    return _fill_like(input, fill_value, dtype, device, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, layout=None, **_) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(empty_like, (input,), input, dtype=dtype, device=device,
                                     requires_grad=requires_grad, layout=layout, **_)
    if type(input._data) is CompressedArray:
        return _compressed_like(input, 1.0, dtype, layout, requires_grad)   # its pattern (the values unset in PyTorch)
    _strided("empty_like", layout)
    size, dt, dev = _like(input, dtype, device)
    laid = _laid_out_like(input, size, dt, dev)
    if laid is not None:
        return _finish(laid, requires_grad)
    return _finish(apply(EMPTY, size=size, dtype=dt, device=dev), requires_grad)


def arange(start=None, end=None, step=None, *, dtype=None, device=None, requires_grad: bool = False,
           layout=None, pin_memory: bool = False) -> Tensor:
    _strided("arange", layout)
    # PyTorch's overloads: ``arange(end)``, ``arange(start, end, step=1)``, and ``end`` by keyword
    # alone (``arange(end=n)``, which ultralytics' assigner writes); a step needs both bounds
    if end is None:
        if start is None or step is not None:
            raise TypeError("arange() received an invalid combination of arguments - expected (Number end) "
                            "or (Number start, Number end, Number step = 1)")
        start, end = 0, start
    elif start is None:
        if step is not None:
            raise TypeError("arange() received an invalid combination of arguments - got (step, end): "
                            "a step needs start and end")
        start = 0
    if step is None:
        step = 1
    # a tensor bound counts as its number, int or float (``arange(n)`` of an int64 ``n`` is int64, as PyTorch's)
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    dtype = _dtype.canonical(dtype)
    if dtype is None:
        dtype = get_default_dtype() if any(isinstance(v, float) for v in vals) else _dtype.int64
    start, end, step = vals
    return _finish(apply(ARANGE, start=start, end=end, step=step, dtype=dtype, device=_dev(device)), requires_grad)


def _steps(steps, function: str) -> int:
    steps = int_argument(steps, function, "steps", 3)
    if steps < 0:
        raise RuntimeError(f"number of steps must be non-negative (got steps={steps})")
    return steps


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False,
             layout=None, pin_memory: bool = False) -> Tensor:
    _strided("linspace", layout)
    return _finish(apply(LINSPACE, start=float(start), end=float(end), steps=_steps(steps, "linspace"),
                         dtype=_dtype.canonical(dtype) or get_default_dtype(), device=_dev(device)), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False, layout=None, pin_memory: bool = False) -> Tensor:
    _strided("logspace", layout)
    return _finish(apply(LOGSPACE, start=float(start), end=float(end), steps=_steps(steps, "logspace"), base=base,
                         dtype=_dtype.canonical(dtype) or get_default_dtype(), device=_dev(device)), requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False,
        layout=None, pin_memory: bool = False) -> Tensor:
    _strided("eye", layout)
    n = int_argument(n, "eye", "n", 1)
    m = None if m is None else int_argument(m, "eye", "m", 2)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _finish(apply(EYE, n=n, m=m, dtype=_dtype.canonical(dtype) or get_default_dtype(), device=_dev(device)), requires_grad)


def rand(*shape, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False,
         layout=None, pin_memory: bool = False) -> Tensor:
    _strided("rand", layout)
    return _finish(apply(RAND, size=_size(shape, "rand", size), dtype=_dtype.canonical(dtype) or get_default_dtype(),
                         device=_dev(device), generator=generator), requires_grad)


def randn(*shape, size=None, generator=None, dtype=None, device=None, requires_grad: bool = False,
          layout=None, pin_memory: bool = False) -> Tensor:
    _strided("randn", layout)
    return _finish(apply(RANDN, size=_size(shape, "randn", size), dtype=_dtype.canonical(dtype) or get_default_dtype(),
                         device=_dev(device), generator=generator), requires_grad)


def randint(low=None, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False,
            layout=None, pin_memory: bool = False) -> Tensor:
    """PyTorch's two overloads, ``randint(high, size)`` and ``randint(low, high, size)``, positionally or
    by keyword (pykeen's negative sampler calls ``randint(high=n, size=(k,))``); ``size`` is a
    sequence, as PyTorch's parser requires."""
    _strided("randint", layout)
    if size is None:   # the positional randint(high, size): the arguments sit one place left
        if high is None or isinstance(high, numbers.Number):
            raise TypeError("randint() received an invalid combination of arguments - expected one of: "
                            "(int high, tuple of ints size, ...) or (int low, int high, tuple of ints size, ...)"
                            if high is None else
                            f"randint(): argument 'size' (position 2) must be tuple of ints, not {tp_name(high)}")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    elif low is None:
        low = 0
    if high is None:
        raise TypeError("randint() received an invalid combination of arguments - got (size=tuple, ), but "
                        "expected one of: (int high, tuple of ints size, ...) or (int low, int high, tuple of "
                        "ints size, ...)")
    if isinstance(size, numbers.Number):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not {tp_name(size)}")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _finish(apply(RANDINT, low=low, high=high, size=_size(tuple(size), "randint"),
                         dtype=_dtype.canonical(dtype) or _dtype.int64, device=_dev(device), generator=generator), requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False,
             layout=None, pin_memory: bool = False) -> Tensor:
    _strided("randperm", layout)
    return _finish(apply(RANDPERM, n=int_argument(n, "randperm", "n", 1), dtype=_dtype.canonical(dtype) or _dtype.int64, device=_dev(device), generator=generator),
                   requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False,
           layout=None, pin_memory: bool = False) -> Tensor:
    _strided("normal", layout)
    """Samples of N(mean, std); mean and std may be tensors (broadcast) or numbers."""
    if size is None:
        size = np.broadcast_shapes(tuple(np.shape(mean)), tuple(np.shape(std)))
    ref = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if dtype is None and ref is not None:
        dtype = ref.dtype
    dev = _dev(device if device is not None or ref is None else ref.device)
    # tensor parameters are inputs of the op (its device is theirs), values only: no graph
    mean, std = (a.detach().to(dev) if isinstance(a, Tensor) else a for a in (mean, std))
    return _finish(apply(NORMAL, mean, std, size=_size(tuple(size), "normal"), dtype=_dtype.canonical(dtype) or get_default_dtype(), device=dev,
                         generator=generator), requires_grad)


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    if p is not None and (p < 0 or p > 1):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    return apply(BERNOULLI, input, p=p, generator=generator)


def _laid_out_like(input, size, dt, dev) -> Tensor | None:
    """For a non-contiguous ``input``, an empty tensor with its memory order (PyTorch's
    ``empty_like``, which the other ``*_like`` factories call), so the draws of ``rand_like`` & co., and
    an in-place draw into ``zeros_like(x)`` or ``empty_like(x)``, land where PyTorch's do; else None."""
    order = memory_order(input._data)
    if order is None:
        return None
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return empty(tuple(size[d] for d in order), dtype=dt, device=dev).permute(*inverse)


def rand_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None,
              layout=None, pin_memory: bool = False, memory_format=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(rand_like, (input,), input, dtype=dtype, device=device,
                                     requires_grad=requires_grad, generator=generator, layout=layout,
                                     pin_memory=pin_memory, memory_format=memory_format)
    if type(input._data) is CompressedArray:
        raise _sparse_csr_refusal("uniform_", input)
    _strided("rand_like", layout)
    size, dt, dev = _like(input, dtype, device)
    laid = _laid_out_like(input, size, dt, dev)
    if laid is not None:
        return _finish(laid.uniform_(generator=generator), requires_grad)
    return _finish(apply(RAND, size=size, dtype=dt, device=dev, generator=generator), requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad: bool = False, generator=None,
               layout=None, pin_memory: bool = False, memory_format=None) -> Tensor:
    if _DISPATCH.functions is not None and has_tensor_like((input,)):
        return handle_torch_function(randn_like, (input,), input, dtype=dtype, device=device,
                                     requires_grad=requires_grad, generator=generator, layout=layout,
                                     pin_memory=pin_memory, memory_format=memory_format)
    if type(input._data) is CompressedArray:     # PyTorch's draws the values at the pattern
        raise NotImplementedError(f"randn_like: tapelab does not draw into a {LAYOUT_NAMES[input.layout]} tensor's "
                                  f"values; use torch.sparse_compressed_tensor(..., torch.randn(nnz), ...)")
    _strided("randn_like", layout)
    size, dt, dev = _like(input, dtype, device)
    laid = _laid_out_like(input, size, dt, dev)
    if laid is not None:
        return _finish(laid.normal_(generator=generator), requires_grad)
    return _finish(apply(RANDN, size=size, dtype=dt, device=dev, generator=generator), requires_grad)


def randint_like(input, low=None, high=None, *, dtype=None, device=None, generator=None,
                 layout=None, pin_memory: bool = False, memory_format=None, requires_grad: bool = False) -> Tensor:
    """``randint_like(input, high)``, ``(input, low, high)`` or ``(input, high=h)`` (Adahessian's Rademacher
    draws), as PyTorch's overloads."""
    if _DISPATCH.functions is not None and has_tensor_like((input, low, high)):
        return handle_torch_function(randint_like, (input, low, high), input, low, high=high, dtype=dtype,
                                     device=device, generator=generator, layout=layout, pin_memory=pin_memory,
                                     memory_format=memory_format, requires_grad=requires_grad)
    if type(input._data) is CompressedArray:
        raise _sparse_csr_refusal("random_.from", input)
    _strided("randint_like", layout)
    if low is None:
        if high is None:
            raise TypeError("randint_like() missing required argument 'high'")
        low, high = high, None
    size, dt, dev = _like(input, dtype, device)
    return randint(low, high, size, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


# ---------------------------------------------------------------- legacy typed constructors
class _LegacyTensorType(type):
    """``torch.FloatTensor`` and its kin: a constructor for one dtype on the cpu, and an
    ``isinstance`` test for tensors of that dtype on the cpu (not a Tensor subclass), as PyTorch's."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and obj._device.type == ("cuda" if cls.is_cuda else "cpu")
                and obj._data.dtype == cls.dtype.np)

    def __repr__(cls) -> str:
        return f"<class 'tapelab.{'cuda.' if cls.is_cuda else ''}{cls.__name__}'>"

    def __call__(cls, *args, device=None):
        """``T()`` (empty), ``T(*sizes)`` / ``T(Size)`` (uninitialised), ``T(data)`` (a copy in the
        dtype), ``T(tensor)`` (the same memory; the tensor must already have the dtype)."""
        if cls.is_cuda:         # tapelab.cuda.FloatTensor: on the current GPU
            if not cuda_available():
                raise TypeError(f"type torch.cuda.{cls.__name__} not available. Torch not compiled with CUDA enabled.")
            return _legacy_new(cls.__name__, cls.dtype, Device("cuda") if device is None else Device(device), args)
        if device is not None and Device(device).type != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{Device(device).type} was passed")
        return _legacy_new(cls.__name__, cls.dtype, CPU, args)


def _legacy_new(name: str, dt, dev, args) -> Tensor:
    """The legacy constructors' forms, in dtype ``dt`` on ``dev``: ``()`` empty, ``(*sizes)`` or
    ``(Size)`` uninitialised, ``(data)`` a copy, ``(tensor)`` the same memory (same dtype and device)."""
    if not args:
        return empty(0, dtype=dt, device=dev)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t.dtype != dt or t._device != dev:
            raise TypeError(f"expected {dt} on {dev} (got {t.dtype} on {t.device})")
        return t.detach()
    if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and isinstance(args[0], Size)):
        return empty(*args, dtype=dt, device=dev)
    if len(args) > 1:
        raise TypeError(f"new(): invalid arguments for {name}: {args!r}")
    return tensor(args[0], dtype=dt, device=dev)


def _legacy(name: str, dt, cuda: bool = False) -> type:
    return _LegacyTensorType(name, (), {"dtype": dt, "is_cuda": cuda, "is_sparse": False,
                                        "__module__": "tapelab.cuda" if cuda else "tapelab",
                                        "__doc__": f"Legacy constructor: {dt} on {'cuda' if cuda else 'cpu'}."})


FloatTensor = _legacy("FloatTensor", _dtype.float32)
DoubleTensor = _legacy("DoubleTensor", _dtype.float64)
HalfTensor = _legacy("HalfTensor", _dtype.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", _dtype.bfloat16)
LongTensor = _legacy("LongTensor", _dtype.int64)
IntTensor = _legacy("IntTensor", _dtype.int32)
ShortTensor = _legacy("ShortTensor", _dtype.int16)
CharTensor = _legacy("CharTensor", _dtype.int8)
ByteTensor = _legacy("ByteTensor", _dtype.uint8)
BoolTensor = _legacy("BoolTensor", _dtype.bool)
# ``tapelab.cuda.FloatTensor`` and kin (``torch.cuda.FloatTensor if use_cuda else torch.FloatTensor``)
CUDA_LEGACY = {t.__name__: _legacy(t.__name__, t.dtype, cuda=True)
               for t in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor,
                         CharTensor, ByteTensor, BoolTensor)}


# ---------------------------------------------------------------- Tensor methods declared here
def _init(self, *args, **kwargs):
    """``Tensor(data)`` or ``Tensor(*sizes)``: like ``torch.Tensor``, always the default float dtype.

    The memory is made by a dispatched factory; ``self`` (possibly a subclass such as
    ``nn.Parameter``) takes it over. PyTorch makes a tensor in ``__new__`` alone, so a subclass
    whose ``__new__`` returns a finished tensor (fastai's ``TensorBase(x)``: ``x.as_subclass(cls)``)
    is left as it is: only a tensor still without memory of its own is filled."""
    if self._data is not _UNMADE:
        return
    if not args:
        self._data = np.zeros(0, np.float32)
    elif len(args) == 1 and isinstance(args[0], Tensor):
        # ``torch.Tensor(t)`` (and ``Sub(t)``) is an alias of ``t``, as PyTorch's legacy constructor:
        # its dtype, its memory and version counter, and an autograd view of it when it needs grad
        with DisableTorchFunctionSubclass():
            alias = args[0].view_as(args[0])
        self._data, self.requires_grad, self.grad_fn = alias._data, alias.requires_grad, alias.grad_fn
        self._out_nr, self._vc, self._device = alias._out_nr, alias._vc, alias._device
        self.__dict__.update(alias.__dict__)
    elif len(args) == 1 and not isinstance(args[0], int):
        self._data = tensor(args[0], dtype=get_default_dtype())._data
    elif args:
        self._data = empty(*args)._data


def new(self, *args, device=None) -> Tensor:
    """``Tensor.new``, the legacy constructor in this tensor's dtype and on its device (or ``device``)."""
    return _legacy_new("new", self.dtype, self._device if device is None else Device(device), args)


def resize_(self, *sizes, memory_format=None) -> Tensor:
    """``Tensor.resize_``: the new shape over this tensor's memory when it holds enough elements,
    else over new memory with the old elements first (the rest uninitialised), as PyTorch's."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    n = math.prod(shape)
    flat = self._data.reshape(-1)
    if n > flat.size:
        grown = empty(n, dtype=self.dtype, device=self._device)._data
        grown[:flat.size] = flat
        flat = grown
    self._data = flat[:n].reshape(shape)
    self._vc[0] += 1
    return self


def resize_as_(self, other: Tensor, memory_format=None) -> Tensor:
    return resize_(self, tuple(other.shape))


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                      layout=None, pin_memory: bool = False) -> Tensor:
    """``empty_strided`` in this tensor's dtype and on its device."""
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self._device,
                         requires_grad=requires_grad, layout=layout)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _warn_copy_construct(data, "tensor.new_tensor")
    return _copy(data, dtype or self.dtype, device or self._device, requires_grad)


def new_zeros(self, *args, size=None, dtype=None, device=None, requires_grad: bool = False,
              layout=None, pin_memory: bool = False) -> Tensor:
    _strided("new_zeros", layout)
    return zeros(*(args if size is None else (size,)), dtype=dtype or self.dtype, device=device or self._device,
                     requires_grad=requires_grad)


def new_ones(self, *args, size=None, dtype=None, device=None, requires_grad: bool = False,
             layout=None, pin_memory: bool = False) -> Tensor:
    _strided("new_ones", layout)
    return ones(*(args if size is None else (size,)), dtype=dtype or self.dtype, device=device or self._device,
                    requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
             layout=None, pin_memory: bool = False) -> Tensor:
    _strided("new_full", layout)
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self._device,
                requires_grad=requires_grad)


def new_empty(self, *args, size=None, dtype=None, device=None, requires_grad: bool = False,
              layout=None, pin_memory: bool = False) -> Tensor:
    _strided("new_empty", layout)
    return empty(*(args if size is None else (size,)), dtype=dtype or self.dtype, device=device or self._device,
                     requires_grad=requires_grad)


def pin_memory(self) -> Tensor:
    """Page-locked host memory for faster copies to a GPU: cupy's pinned pool backs a copy."""
    if self._device is not CPU or not cuda_available():
        raise RuntimeError("Cannot access accelerator device when none is available." if self._device is CPU
                           else f"cannot pin '{self._device}' memory: only dense CPU tensors can be pinned")
    import cupy   # present: cuda_available() imported it
    mem = cupy.cuda.alloc_pinned_memory(self._data.nbytes)
    arr = np.frombuffer(mem, self._data.dtype, self._data.size).reshape(self._data.shape)
    np.copyto(arr, self._data)
    out = from_numpy(arr)
    out._pinned = mem            # keeps the pinned block alive with the tensor
    return out


def _array_wrap(self, arr, context=None, return_scalar: bool = False) -> Tensor:
    """A numpy ufunc's result on this tensor's values as a tensor (bool results as uint8), as PyTorch's."""
    arr = np.asarray(arr)
    arr = arr.astype(np.uint8) if arr.dtype == np.bool_ else arr
    return from_numpy(arr if arr.flags.c_contiguous else arr.copy())


def _sparse_parts(xp, *, parts, device):
    """A sparse tensor's data from its pickled host arrays (COO: indices, values; compressed: the
    compressed and plain indices, values)."""
    layout, arrays, shape, coalesced = parts
    arrays = [xp.asarray(a) for a in arrays]
    if layout == "sparse_coo":
        return COOArray(xp, *arrays, shape, coalesced)
    return CompressedArray(xp, getattr(_layouts, layout), *arrays, shape)


SPARSE_PARTS = Op("sparse_from_parts", _sparse_parts, kind="factory")


def _rebuild_sparse(parts, requires_grad, dev):
    """Unpickle a sparse tensor (``pickle``, ``copy``, a DataLoader worker's batch)."""
    return _finish(apply(SPARSE_PARTS, parts=parts, device=Device(dev)), requires_grad)


def _reduce_ex(self, protocol):
    data = self._data
    if type(data) in (COOArray, CompressedArray):   # PyTorch pickles sparse tensors too (by their index arrays)
        host = lambda a: a.get() if hasattr(a, "get") else a  # noqa: E731
        arrays = (data.indices, data.values) if type(data) is COOArray else (data.compressed, data.plain, data.values)
        parts = ("sparse_coo" if type(data) is COOArray else data.layout.name, tuple(host(a) for a in arrays),
                 data.shape, data.coalesced if type(data) is COOArray else False)
        return (_rebuild_sparse, (parts, False, str(self._device)))     # PyTorch's drops requires_grad here
    args = (self.__array__(), self.requires_grad, str(self._device))
    if type(self) is Tensor:
        return (_rebuild, args)
    # a subclass comes back as itself with its Python attributes, as PyTorch's _rebuild_from_type_v2
    return (_rebuild_from_type, (_rebuild, type(self), args, tensor_state(self)))


def tensor_state(t: Tensor) -> dict:
    """A tensor's own Python attributes (fastai's metadata on a ``TensorBase``), without the engine's
    bookkeeping (``_base`` of a view), which pickling a tensor or a subclass carries."""
    return {k: v for k, v in t.__dict__.items() if not hasattr(Tensor, k)}


def _rebuild_from_type(func, new_type, args, state):
    """Unpickle a Tensor subclass: the tensor, made ``new_type`` (``as_subclass``), with its attributes
    (through the class's own ``__setstate__`` when it has one, as PyTorch's)."""
    ret = func(*args)
    if type(ret) is not new_type:
        ret = ret.as_subclass(new_type)
    setstate = getattr(new_type, "__setstate__", None)
    if setstate is not None and setstate is not getattr(Tensor, "__setstate__", None) \
            and setstate is not getattr(object, "__setstate__", None):
        ret.__setstate__(state)
    else:
        for k, v in (state or {}).items():
            setattr(ret, k, v)
    return ret


def _rebuild(arr, requires_grad, dev):
    """Unpickle a tensor (old pickles name it ``tapelab.tensor._rebuild``, a re-export of this)."""
    return tensor(arr, requires_grad=requires_grad, device=dev)


OPERATORS = {"__init__": _init, "__reduce_ex__": _reduce_ex, "__array_wrap__": _array_wrap, "new": new, "resize_": resize_, "resize_as_": resize_as_,
             "new_empty_strided": new_empty_strided, "bernoulli": bernoulli,
             "new_tensor": new_tensor, "new_zeros": new_zeros,
             "new_ones": new_ones, "new_full": new_full, "new_empty": new_empty, "pin_memory": pin_memory}

"""dtype objects with PyTorch's names and PyTorch's type-promotion rules.

numpy promotes int with float to float64 and lets a 0-d float64 array widen a
float32 array; PyTorch does neither, so promotion is computed here and the
backend only ever sees operands that already share the result dtype.

``bfloat16`` arrays are ``ml_dtypes.bfloat16`` arrays: numpy gives that dtype the kind ``"V"``,
so code that asks "is this array floating?" tests ``kind in FLOATING_KINDS``. Complex arrays
(kind ``"c"``) are the fourth category: "can this carry a gradient?" tests ``kind in INEXACT_KINDS``.
"""
from __future__ import annotations

import builtins
import sys
import warnings

import ml_dtypes
import numpy as np

__all__ = ["finfo", "iinfo", "dtype", "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "bool", "half", "float", "double", "short", "int", "long",
           "complex64", "complex128", "cfloat", "cdouble", "complex32", "chalf", "get_default_dtype", "set_default_dtype",
           "promote_types", "result_type", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "qscheme",
           "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
           "per_channel_affine_float_qparams"]

_pybool = builtins.bool
FLOATING_KINDS = "fV"   # numpy's kind of float arrays; "V" is ml_dtypes' bfloat16 (the only void dtype here)
INEXACT_KINDS = "fVc"   # floating or complex: the kinds whose tensors can require grad


# PyTorch's ScalarType names ("expected scalar type Float but found Double")
_SCALAR_TYPES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
                 "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
                 "complex64": "ComplexFloat", "complex128": "ComplexDouble", "uint16": "UInt16", "uint32": "UInt32",
                 "uint64": "UInt64", "float8_e4m3fn": "Float8_e4m3fn", "float8_e5m2": "Float8_e5m2",
                 "float8_e4m3fnuz": "Float8_e4m3fnuz", "float8_e5m2fnuz": "Float8_e5m2fnuz", "complex32": "ComplexHalf",
                 "qint8": "QInt8", "quint8": "QUInt8", "qint32": "QInt32", "quint4x2": "QUInt4x2", "quint2x4": "QUInt2x4"}

# PyTorch's C++ type names ("expected dtype float for `end` but got dtype c10::BFloat16")
_CPP_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
              "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
              "float64": "double", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def package_name() -> str:
    """The name the package answers to: ``torch`` while ``install_aliases`` serves it as torch, else
    ``tapelab``. Reprs follow it, so an aliased program prints what PyTorch prints (kornia even parses
    ``str(dtype)[6:]``)."""
    return sys.modules[_PACKAGE].__name__


_PACKAGE = __name__.partition(".")[0]


class dtype:
    """A tensor element type, e.g. ``tapelab.float32``."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed", "_rank", "scalar_type",
                 "cpp_name")

    def __init__(self, name: str, np_dtype, rank: int):
        self.name = name
        self.scalar_type = _SCALAR_TYPES[name]   # PyTorch's c10 name, as its error messages spell the dtype
        self.cpp_name = _CPP_NAMES.get(name, self.scalar_type)   # its C++ type, as other messages spell it
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = self.np.kind in FLOATING_KINDS
        self.is_complex = self.np.kind == "c"
        self.is_signed = self.np.kind in "ifc" or self.is_floating_point
        self._rank = rank  # category: 0 bool, 1 integer, 2 floating, 3 complex

    def to_real(self) -> "dtype":
        """The dtype of this complex dtype's parts (any other dtype is its own)."""
        return _REAL.get(self, self)

    def to_complex(self) -> "dtype":
        """The complex dtype whose parts are this floating dtype (a complex dtype is its own)."""
        if self.is_complex:
            return self
        if self not in _COMPLEX:
            raise RuntimeError(f"Unknown Complex ScalarType for {self.name.capitalize()}: tapelab has complex64 "
                               f"(float32 parts) and complex128 (float64 parts)")
        return _COMPLEX[self]

    def __repr__(self) -> str:
        return f"{package_name()}.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


bool = dtype("bool", np.bool_, 0)
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
float16 = dtype("float16", np.float16, 2)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
complex64 = dtype("complex64", np.complex64, 3)
complex128 = dtype("complex128", np.complex128, 3)
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
cfloat, cdouble = complex64, complex128

BFLOAT16_NP = bfloat16.np   # numpy keeps one dtype object per dtype: tested with ``is``
ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
# PyTorch's storage dtypes: checkpoints and quantized weights hold them, casts and copies move them, but
# PyTorch promotes them only with themselves (and wide unsigned ints with floats), and has few kernels for them
uint16 = dtype("uint16", np.uint16, 1)
uint32 = dtype("uint32", np.uint32, 1)
uint64 = dtype("uint64", np.uint64, 1)
float8_e4m3fn = dtype("float8_e4m3fn", ml_dtypes.float8_e4m3fn, 2)
float8_e5m2 = dtype("float8_e5m2", ml_dtypes.float8_e5m2, 2)
float8_e4m3fnuz = dtype("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 2)
float8_e5m2fnuz = dtype("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 2)
_WIDE_UNSIGNED = (uint16, uint32, uint64)
_FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz)
STORAGE_ONLY = _WIDE_UNSIGNED + _FLOAT8


class _Unheld(dtype):
    """A dtype PyTorch names that tapelab holds no tensors of (numpy has no complex32): it compares,
    prints and pickles like the others, so dtype tables and membership tests that list it work
    (kornia's ``dtype in (..., torch.complex32, ...)``); a tensor of it is refused where the array
    dtype is asked for."""

    __slots__ = ()

    def __init__(self, name: str, itemsize: int, real: dtype) -> None:
        for attr, value in (("name", name), ("scalar_type", _SCALAR_TYPES[name]), ("itemsize", itemsize),
                            ("is_floating_point", False), ("is_complex", True), ("is_signed", True), ("_rank", 3)):
            object.__setattr__(self, attr, value)
        _REAL[self] = real

    @property
    def np(self):
        raise TypeError(f"tapelab has no {self.name} ({self.scalar_type}) tensors: numpy has no such array dtype; "
                        f"use complex64")


_REAL = {complex64: float32, complex128: float64}
complex32 = chalf = _Unheld("complex32", 4, float16)
# numpy has no complex32: float16 and bfloat16 parts widen to complex64, as PyTorch's promotion does
_COMPLEX = {float32: complex64, float64: complex128, float16: complex64, bfloat16: complex64}


class _Quantized(dtype):
    """A quantized dtype (``qint8``, ``quint8``, ``qint32``, the packed 4- and 2-bit ones): a quantized tensor's
    integer codes are of ``int_dtype``, read through a scale and zero point (``tapelab.ao``). No plain tensor
    holds it: asking for its array dtype is refused, as PyTorch refuses ``zeros(dtype=qint8)``."""

    __slots__ = ("int_dtype",)

    def __init__(self, name: str, int_dtype: dtype) -> None:
        for attr, value in (("name", name), ("scalar_type", _SCALAR_TYPES[name]), ("itemsize", int_dtype.itemsize),
                            ("is_floating_point", False), ("is_complex", False), ("is_signed", int_dtype.is_signed),
                            ("_rank", 1), ("int_dtype", int_dtype)):
            object.__setattr__(self, attr, value)

    @property
    def np(self):
        raise RuntimeError(f"{self.name} is a quantized dtype: make its tensors with quantize_per_tensor or "
                           f"quantize_per_channel")


# named as the class of every PyTorch dtype (``type(torch.qint8).__name__`` is ``dtype``); they pickle by name
_Unheld.__name__ = _Unheld.__qualname__ = _Quantized.__name__ = _Quantized.__qualname__ = "dtype"
qint8, quint8, qint32 = _Quantized("qint8", int8), _Quantized("quint8", uint8), _Quantized("qint32", int32)
quint4x2, quint2x4 = _Quantized("quint4x2", uint8), _Quantized("quint2x4", uint8)
QUANTIZED = (qint8, quint8, qint32, quint4x2, quint2x4)


class qscheme:
    """A quantization scheme (``tapelab.per_tensor_affine``, ...): how a quantized tensor's scales apply."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{package_name()}.{self.name}"

    def __reduce__(self):
        return (_qscheme_by_name, (self.name,))


per_tensor_affine, per_channel_affine = qscheme("per_tensor_affine"), qscheme("per_channel_affine")
per_tensor_symmetric, per_channel_symmetric = qscheme("per_tensor_symmetric"), qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
_QSCHEMES = {q.name: q for q in (per_tensor_affine, per_channel_affine, per_tensor_symmetric, per_channel_symmetric,
                                 per_channel_affine_float_qparams)}


def _qscheme_by_name(name: str) -> qscheme:
    return _QSCHEMES[name]


_BY_NP = {d.np: d for d in ALL + STORAGE_ONLY}
_BY_NAME = {d.name: d for d in ALL + STORAGE_ONLY + (complex32,) + QUANTIZED}


def astype(arr, to: dtype):
    """``arr`` as ``to``'s array dtype. PyTorch rounds a double to bfloat16 through float32
    (round to nearest even twice), so float64 goes that way too, bit for bit; complex to real keeps
    the real parts with PyTorch's warning."""
    if to is bfloat16 and arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind == "c" and to._rank < 3:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
        arr = arr.real
    return arr.astype(to.np, copy=False)


def bfloat16_on_cuda(what: str) -> TypeError:
    """The error for a bfloat16 tensor on cuda: cupy has no bfloat16 dtype."""
    return TypeError(f"{what}: tapelab keeps bfloat16 tensors on the cpu (cupy has no bfloat16 dtype); "
                     f"use float32 or float16 on cuda (.float() or .half() before moving)")


def in_float32(fwd, xp, *arrays, **params):
    """``fwd`` run in float32 on bfloat16 ``arrays``, its float result rounded back to bfloat16 once.

    numpy reduces bfloat16 in bfloat16 and has no bfloat16 GEMM; PyTorch's CPU kernels for
    matmul, convolution and reductions accumulate in float32. Those forwards test
    ``x.dtype is BFLOAT16_NP`` first and come here (a test, not a wrapper: no cost per call)."""
    out = fwd(xp, *[a.astype(np.float32) if getattr(a, "dtype", None) is BFLOAT16_NP else a for a in arrays],
              **params)
    if isinstance(out, tuple):
        return tuple(_narrow(o) for o in out)
    return _narrow(out)


def _narrow(arr, low=BFLOAT16_NP):
    return arr.astype(low) if getattr(arr, "dtype", None) == np.float32 else arr


REDUCED_NP = (BFLOAT16_NP, np.dtype(np.float16))   # the dtypes whose cpu kernels compute in float32 opmath


def in_opmath(fwd, xp, *arrays, **params):
    """``in_float32`` for bfloat16 and half alike: ``fwd`` in float32 on the arrays of the first reduced
    dtype among them, its float32 result(s) rounded back to that dtype once, as PyTorch's CPU kernels of
    softmax, layer_norm, gelu, sigmoid and rsqrt compute both (numpy's half ufuncs round each step)."""
    low = next(a.dtype for a in arrays if getattr(a, "dtype", None) in REDUCED_NP)
    out = fwd(xp, *[a.astype(np.float32) if getattr(a, "dtype", None) == low else a for a in arrays], **params)
    if isinstance(out, tuple):
        return tuple(_narrow(o, low) for o in out)
    return _narrow(out, low)


_PY_TYPES = {builtins.bool: bool, builtins.int: int64, builtins.float: float64, builtins.complex: complex128}


def canonical(d):
    """``d``, with Python's number types read as PyTorch reads them in a ``dtype=`` argument
    (``bool``, ``int`` -> int64, ``float`` -> float64, ``complex`` -> complex128)."""
    return _PY_TYPES.get(d, d)


def _by_name(name: str) -> dtype:
    return _BY_NAME[name]


def from_np(np_dtype) -> dtype:
    """The tapelab dtype of a numpy/cupy dtype; raises TypeError for unsupported ones."""
    try:
        return _BY_NP[np_dtype]
    except KeyError:
        raise TypeError(f"can't convert array of dtype {np_dtype}: tapelab supports "
                        f"{', '.join(d.name for d in ALL)}") from None


class _Defaults:
    float_dtype = float32


_defaults = _Defaults()


def get_default_dtype() -> dtype:
    return _defaults.float_dtype


def default_complex_dtype() -> dtype:
    """The dtype of a Python complex number: complex128 when the default dtype is float64, else complex64."""
    return complex128 if _defaults.float_dtype is float64 else complex64


def set_default_dtype(d: dtype) -> None:
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got {d}")
    _defaults.float_dtype = d


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's promote_types: like numpy's, except int with float gives that float, and
    complex with float gives the complex dtype of the wider float (complex64 with float64 is complex128)."""
    if a is b:
        return a
    if a in STORAGE_ONLY or b in STORAGE_ONLY:
        return _promote_storage_only(a, b)
    if a._rank == 3 or b._rank == 3:
        c, o = (a, b) if a._rank == 3 else (b, a)
        return complex128 if c is complex128 or o is float64 or o is complex128 else complex64
    if a._rank != b._rank and max(a._rank, b._rank) == 2:
        return a if a._rank == 2 else b
    return _BY_NP[np.promote_types(a.np, b.np)]


def _promote_storage_only(a: dtype, b: dtype) -> dtype:
    """PyTorch promotes a wide unsigned int with a float (to the float) and refuses every other pair."""
    if a in _FLOAT8 or b in _FLOAT8:
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote "
                           f"{a.scalar_type} and {b.scalar_type}")
    wide, other = (a, b) if a in _WIDE_UNSIGNED else (b, a)
    if other._rank >= 2:
        return other
    raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                       f"{a.scalar_type} and {b.scalar_type}")


def can_cast(from_: dtype, to: dtype) -> _pybool:
    """PyTorch's casting rule: never to a lower category (complex > floating > integer > bool)."""
    return from_._rank <= to._rank


def scalar_dtype(value) -> dtype:
    """The dtype PyTorch gives a Python number taking part in promotion."""
    if isinstance(value, _pybool):
        return bool
    if isinstance(value, builtins.int):
        return int64
    if isinstance(value, builtins.complex):
        return default_complex_dtype()
    return _defaults.float_dtype


def _combine(higher, lower):
    """c10's combine_categories: a lower-priority operand counts only through a higher category
    (a complex scalar makes a float32 tensor's result complex64: the float's own width)."""
    if higher is None:
        return lower
    if lower is None or higher._rank == 3:
        return higher
    if lower._rank == 3:
        return higher.to_complex() if higher._rank == 2 else lower
    if higher._rank == 2:
        return higher
    if higher is bool or lower._rank == 2:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> dtype:
    """torch.result_type over tensors and Python numbers (dim > 0, then 0-d, then scalars)."""
    dim = zero = wrapped = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if d is None:
            d = scalar_dtype(x)
            wrapped = d if wrapped is None else promote_types(wrapped, d)
        elif x.ndim == 0:
            zero = d if zero is None else promote_types(zero, d)
        else:
            dim = d if dim is None else promote_types(dim, d)
    return _combine(dim, _combine(zero, wrapped))


class finfo:
    """Machine limits of a floating dtype, like ``torch.finfo`` (a complex dtype's are its parts')."""

    def __init__(self, type: dtype | None = None):
        type = (type or _defaults.float_dtype).to_real()
        if not type.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type, got {type}")
        info = np.finfo(type.np)
        self.bits, self.dtype = info.bits, type.name
        self.eps, self.max, self.min = builtins.float(info.eps), builtins.float(info.max), builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.tiny)
        self.resolution = 10.0 ** -info.precision   # PyTorch's: a power of ten, not rounded to the dtype

    def __repr__(self) -> str:
        return _info_repr("finfo", resolution=self.resolution, min=self.min, max=self.max, eps=self.eps,
                          smallest_normal=self.tiny, tiny=self.tiny, dtype=self.dtype)


class iinfo:
    """Limits of an integer dtype, like ``torch.iinfo``."""

    def __init__(self, type: dtype):
        if type.is_floating_point or type.is_complex:
            raise TypeError(f"torch.iinfo() requires an integer input type, got {type}")
        if type is bool:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        info = np.iinfo((type.int_dtype if isinstance(type, _Quantized) else type).np)
        self.bits, self.dtype = info.bits, type.name
        self.max, self.min = builtins.int(info.max), builtins.int(info.min)

    def __repr__(self) -> str:
        return _info_repr("iinfo", min=self.min, max=self.max, dtype=self.dtype)


def _info_repr(kind: str, **fields) -> str:
    """PyTorch prints the limits as C++ streams a double (``%g``: ``max=3.40282e+38``, int64's
    ``max=9.22337e+18``), so a program printing ``finfo`` shows the same text."""
    shown = ", ".join(f"{k}={v if isinstance(v, str) else format(builtins.float(v), 'g')}" for k, v in fields.items())
    return f"{kind}({shown})"

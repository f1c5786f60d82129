"""``repr(tensor)`` in PyTorch's format, following ``set_printoptions`` (precision, threshold,
edgeitems, linewidth, sci_mode, profile): PyTorch's ``_tensor_str`` algorithm on host arrays
(one formatter over the printed values: int mode, fixed or scientific, a shared width;
summarised with ``...`` past ``threshold`` elements)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtype import FLOATING_KINDS, bool as bool_, default_complex_dtype, get_default_dtype, int64

__all__ = ["set_printoptions", "PRINT_OPTS", "tensor_repr"]


def _no_suffix(dt) -> bool:
    """PyTorch leaves out ``dtype=`` for the default dtype, its complex dtype, int64 and bool."""
    return dt is get_default_dtype() or dt is default_complex_dtype() or dt is int64 or dt is bool_


@dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """As ``torch.set_printoptions``: a ``profile`` ("default", "short", "full") sets the four
    numbers, explicit arguments override it; ``sci_mode`` is always set (None: automatic)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"Invalid profile: {profile}. the profile must be one of {list(_PROFILES)}")
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = _PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """One format for every value printed: chosen from the (summarised) values, as PyTorch's."""

    def __init__(self, arr: np.ndarray):
        self.floating = arr.dtype.kind in FLOATING_KINDS
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        p = PRINT_OPTS.precision
        flat = arr.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
        else:
            vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
            if vals.size:
                absv = np.abs(vals)
                lo, hi = absv.min(), absv.max()
                self.int_mode = bool(np.all(vals == np.ceil(vals)))
                self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) \
                    if PRINT_OPTS.sci_mode is None else PRINT_OPTS.sci_mode
                if self.sci_mode:
                    spec, extra = f".{p}e", 0
                elif self.int_mode:   # a "." follows each integer: one more character
                    spec, extra = ".0f", 1
                else:
                    spec, extra = f".{p}f", 0
                for v in vals.tolist():
                    self.max_width = max(self.max_width, len(format(v, spec)) + extra)

    def format(self, v) -> str:
        if self.floating:
            p = PRINT_OPTS.precision
            if self.sci_mode:
                s = format(v, f"{self.max_width}.{p}e")
            elif self.int_mode:
                s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
            else:
                s = format(v, f".{p}f")
        else:
            s = f"{v}"
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """PyTorch's complex format: the real parts and the imaginary parts each get their own
    formatter; a value prints as ``real+imagj`` (the imaginary part's padding dropped)."""

    def __init__(self, arr: np.ndarray):
        self.re, self.im = _Formatter(arr.real), _Formatter(arr.imag)
        self.max_width = self.re.max_width + self.im.max_width + 1   # the width a line is cut by

    def format(self, v) -> str:
        real = self.re.format(v.real)
        imag = (self.im.format(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _formatter(arr: np.ndarray):
    return _ComplexFormatter(arr) if arr.dtype.kind == "c" else _Formatter(arr)


def _summarized(arr: np.ndarray) -> np.ndarray:
    e = PRINT_OPTS.edgeitems
    if arr.ndim == 0:
        return arr
    if arr.ndim == 1:
        return np.concatenate((arr[:e], arr[-e:])) if arr.shape[0] > 2 * e else arr
    if not e:
        return arr[(slice(0, 0),) * arr.ndim]
    rows = list(range(e)) + list(range(arr.shape[0] - e, arr.shape[0])) if arr.shape[0] > 2 * e \
        else range(arr.shape[0])
    return np.stack([_summarized(arr[i]) for i in rows])


def _vector(arr: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    e = PRINT_OPTS.edgeitems
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2))))
    if summarize and not e:
        data = ["..."]
    elif summarize and arr.shape[0] > 2 * e:
        data = [fmt.format(v) for v in arr[:e].tolist()] + [" ..."] + [fmt.format(v) for v in arr[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in arr.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(arr: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if arr.ndim == 0:
        return fmt.format(arr.item())
    if arr.ndim == 1:
        return _vector(arr, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    n = arr.shape[0]
    if summarize and n > 2 * e:
        slices = ([_nested(arr[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."]
                  + [_nested(arr[i], indent + 1, summarize, fmt) for i in range(n - e, n)])
    else:
        slices = [_nested(arr[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def array_str(arr: np.ndarray, indent: int) -> str:
    """The body of a tensor's repr (what follows ``tensor(``), PyTorch's ``_tensor_str``."""
    if arr.size == 0:
        return "[]"
    summarize = arr.size > PRINT_OPTS.threshold
    fmt = _formatter(_summarized(arr) if summarize else arr)
    return _nested(arr, indent, summarize, fmt)


def _tensor_str(self, indent: int) -> str:
    """PyTorch's ``torch._tensor_str._tensor_str``: a tensor's values as its repr prints them (torch_geometric's
    OFF writer formats positions with it)."""
    return array_str(self.detach().__array__(), indent)


def _grad_extras(t) -> list:
    if t.grad_fn is not None:
        # the node's class name, as PyTorch prints it: CopySlices, whose name() is torch::autograd::CopySlices
        return [f"grad_fn=<{t.grad_fn.name().rpartition('::')[2]}>"]
    return ["requires_grad=True"] if t.requires_grad else []


def tensor_repr(t, prefix: str = "tensor(", suffixes: list = ()) -> str:
    """PyTorch's repr; ``prefix`` is ``"Sub("`` for a subclass ``Sub`` (``Tensor.__repr__`` says); ``suffixes``
    (the active modes': a dual tensor's ``tangent=``) come last."""
    if t.is_sparse:
        return _coo_repr(t)
    if t.layout.name.startswith("sparse_"):
        return _compressed_repr(t)
    if t.device.type == "meta":      # no values: PyTorch's placeholder
        extras = ["device='meta'", f"size={tuple(t.shape)}"] + \
            ([f"dtype={t.dtype!r}"] if t.dtype is not get_default_dtype() else []) + _grad_extras(t) + list(suffixes)
        return _add_suffixes(prefix + "...", extras, len(prefix))
    arr = t.detach().__array__()
    body = array_str(arr, len(prefix))
    extras = []
    if (arr.size == 0 and arr.shape != (0,)) or (arr.size and not PRINT_OPTS.edgeitems):
        extras.append(f"size={tuple(arr.shape)}")
    if not _no_suffix(t.dtype):
        extras.append(f"dtype={t.dtype!r}")
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    extras += _grad_extras(t) + list(suffixes)
    return _add_suffixes(prefix + body, extras, len(prefix))


def _coo_repr(t) -> str:
    """A sparse COO tensor as PyTorch prints it: its indices and values, then size, nnz, layout."""
    text, extras = _sparse_parts(t, (("indices", t._data.indices), ("values", t._data.values)))
    return _add_suffixes(text, extras, len("tensor("), force_newline=True)


def _sparse_parts(t, named: tuple) -> tuple:
    """A sparse tensor's printed arrays (``name=tensor(...)`` each, aligned under ``tensor(``) and its
    suffixes (device, size, nnz, dtype, layout, grad)."""
    indent = len("tensor(")
    parts = []
    for name, arr in named:
        arr = arr.get() if hasattr(arr, "get") else arr      # cupy: a host copy
        prefix = f"{name}=tensor("
        body = array_str(arr, indent + len(prefix)) + (f", size={tuple(arr.shape)}" if arr.size == 0 else "")
        parts.append(prefix + body + ")")
    extras = [f"device='{t.device}'"] if t.device.type != "cpu" else []
    extras += [f"size={tuple(t.shape)}", f"nnz={t._data.nnz}"]
    if not _no_suffix(t.dtype):
        extras.append(f"dtype={t.dtype!r}")
    extras += [f"layout={t.layout!r}"] + _grad_extras(t)
    return "tensor(" + (",\n" + " " * indent).join(parts), extras


def _compressed_repr(t) -> str:
    """A sparse compressed tensor as PyTorch prints it: its compressed and plain indices and values (no
    index dtype), then size, nnz, dtype, layout."""
    data = t._data
    row = t.layout.name in ("sparse_csr", "sparse_bsr")
    names = ("crow_indices", "col_indices") if row else ("ccol_indices", "row_indices")
    text, extras = _sparse_parts(t, tuple(zip(names + ("values",), (data.compressed, data.plain, data.values))))
    return _add_suffixes(text, extras, len("tensor("))


def _add_suffixes(text: str, suffixes: list, indent: int, force_newline: bool = False) -> str:
    """``, dtype=...`` and the other suffixes, each on a new line where it would pass ``linewidth``
    (the first one always, for a sparse tensor)."""
    parts = [text]
    last = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if force_newline or last + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last = indent + len(suffix)
            force_newline = False
        else:
            parts.append(", " + suffix)
            last += len(suffix) + 2
    return "".join(parts) + ")"

"""``torch.testing``: ``assert_close`` with PyTorch's per-dtype tolerances and messages, and
``make_tensor`` for random test inputs."""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .base import dtype as _dtype
from .base.grad_mode import no_grad
from .core import creation
from .core.tensor import Tensor

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# (rtol, atol) by dtype, as PyTorch's defaults; integers and bools compare exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _name(dtype) -> str:
    return str(dtype).split(".")[-1]


def _fail(msg: str, custom):
    raise AssertionError(custom(msg) if callable(custom) else (custom or msg))


def _as_tensor(x):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return creation.from_numpy(x)
    return None


def _compare_tensors(actual: Tensor, expected: Tensor, rtol, atol, equal_nan, check_device, check_dtype, msg,
                     where: str) -> None:
    for attr, a, e in (("shape", actual.shape, expected.shape),
                       ("device", actual.device, expected.device) if check_device else ("", 0, 0),
                       ("dtype", actual.dtype, expected.dtype) if check_dtype else ("", 0, 0)):
        if attr and a != e:
            left, right = (f"torch.{_name(a)}", f"torch.{_name(e)}") if attr == "dtype" else \
                (f"torch.Size({list(a)})", f"torch.Size({list(e)})") if attr == "shape" else (repr(a), repr(e))
            _fail(f"The values for attribute '{attr}' do not match: {left} != {right}.{where}", msg)
    if rtol is None:
        rtol, atol = _TOLERANCES.get(_name(actual.dtype), (0.0, 0.0))
        r2, a2 = _TOLERANCES.get(_name(expected.dtype), (0.0, 0.0))
        rtol, atol = max(rtol, r2), max(atol, a2)
    with no_grad():
        a, e = actual.detach().cpu().numpy(), expected.detach().cpu().numpy()
    if a.dtype != bool and e.dtype != bool:   # compare in the widest kind: complex keeps its imaginary parts
        wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(e) else np.float64
        a, e = a.astype(wide), e.astype(wide)
    if a.dtype == bool or e.dtype == bool:
        close = a == e
    else:
        close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    bad = ~close
    total, n_bad = close.size, int(bad.sum())
    kind = "equal" if rtol == 0 and atol == 0 else "close"
    lines = [f"{'Tensor-likes' if a.ndim else 'Scalars'} are not {kind}!", "",
             f"Mismatched elements: {n_bad} / {total} ({100.0 * n_bad / total:.1f}%)"]
    with np.errstate(all="ignore"):
        diff = np.abs(a - e).astype(np.float64)
        rel = diff / np.abs(e)
    diff = np.where(bad, diff, -1)
    rel = np.where(bad, rel, -1)
    i, j = np.unravel_index(np.nanargmax(diff), diff.shape), np.unravel_index(np.nanargmax(rel), rel.shape)
    lines.append(f"Greatest absolute difference: {diff[i]} at index {tuple(int(k) for k in i)} (up to {atol} allowed)")
    lines.append(f"Greatest relative difference: {rel[j]} at index {tuple(int(k) for k in j)} (up to {rtol} allowed)")
    _fail("\n".join(lines) + where, msg)


def assert_close(actual, expected, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False, msg=None) -> None:
    """Assert that ``actual`` and ``expected`` are close: tensors (same shape, device and dtype unless told
    otherwise, then ``|a - e| <= atol + rtol * |e|`` with PyTorch's defaults per dtype), Python numbers,
    and sequences or mappings of them, compared element by element."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    _assert(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, "")


def _assert(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, path: str) -> None:
    where = f"\n\nThe failure occurred for item {path}" if path else ""
    ta, te = _as_tensor(actual), _as_tensor(expected)
    if ta is not None or te is not None:
        if ta is None or te is None:
            _fail(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.", msg)
        _compare_tensors(ta, te, rtol, atol, equal_nan, check_device, check_dtype, msg, where)
        return
    if isinstance(actual, (bool, int, float)) and isinstance(expected, (bool, int, float)):
        if check_dtype and type(actual) is not type(expected):
            _fail(f"The values for attribute 'dtype' do not match: {type(actual)} != {type(expected)}.{where}", msg)
        r, t = (rtol, atol) if rtol is not None else ((1.3e-6, 1e-5) if isinstance(actual, float) else (0.0, 0.0))
        same = actual == expected or (equal_nan and isinstance(actual, float) and math.isnan(actual)
                                      and math.isnan(expected)) or abs(actual - expected) <= t + r * abs(expected)
        if not same:
            _fail(f"Scalars are not close!\n\nExpected {expected} but got {actual}.\nAbsolute difference: "
                  f"{abs(actual - expected)} (up to {t} allowed)\nRelative difference: "
                  f"{abs(actual - expected) / abs(expected) if expected else math.inf} (up to {r} allowed){where}", msg)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(map(str, set(expected) - set(actual)))}\nExtra keys in the actual mapping: "
                  f"{sorted(map(str, set(actual) - set(expected)))}{where}", msg)
        for k in expected:
            _assert(actual[k], expected[k], rtol, atol, equal_nan, check_device, check_dtype, msg,
                    f"{path}[{k!r}]")
        return
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and not isinstance(actual, str):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}{where}", msg)
        for i, (x, y) in enumerate(zip(actual, expected)):
            _assert(x, y, rtol, atol, equal_nan, check_device, check_dtype, msg, f"{path}[{i}]")
        return
    if actual != expected:
        _fail(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.", msg)


# assert_allclose's tolerances by dtype (looser than assert_close's); other dtypes compare exactly
_ALLCLOSE_TOLERANCES = {_dtype.float16: (1e-3, 1e-3), _dtype.float32: (1e-4, 1e-5), _dtype.float64: (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol: float | None = None, atol: float | None = None, equal_nan: bool = True,
                    msg: str = "") -> None:
    """The deprecated form, with PyTorch's FutureWarning: numbers become tensors (``expected`` in ``actual``'s
    dtype), dtypes and strides may differ, NaNs compare equal, and without tolerances each side's dtype
    gives its own (float32: rtol 1e-4, atol 1e-5), the larger taken."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future release. "
                  "Please use `torch.testing.assert_close()` instead. You can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = creation.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = creation.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(r for r, _ in pairs), max(a for _, a in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low: float | None = None, high: float | None = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A random tensor for tests: uniform in [low, high) (floats default to [-9, 9], integers to
    [-9, 10), bools are random), optionally without zeros or non-contiguous."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    rng = np.random.default_rng()
    name = _name(dtype)
    if name == "bool":
        values = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.is_floating_point:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        if lo > hi:
            raise ValueError(f"low must be smaller than high, but got low={lo} and high={hi}")
        values = rng.uniform(lo, hi, size=shape)
    else:
        info = np.iinfo(name)
        lo = max(info.min, -9 if low is None else math.ceil(low))
        hi = min(info.max, 10 if high is None else math.ceil(high))
        values = rng.integers(lo, max(hi, lo + 1), size=shape)
    if exclude_zero:
        values = np.where(values == 0, 1 if name == "bool" or not dtype.is_floating_point else np.finfo(
            np.float32).tiny if name != "float64" else np.finfo(np.float64).tiny, values)
    out = creation.tensor(values, dtype=dtype, device=device)
    if noncontiguous and out.numel() > 1:
        doubled = out.repeat_interleave(2, -1)
        out = doubled[..., ::2]
    if requires_grad:
        out.requires_grad_(True)
    return out

"""``torch.version``: the build facts libraries read to pick code paths (``torch.version.cuda is None``
means "no CUDA build"). tapelab's CUDA is cupy's: ``cuda`` is cupy's CUDA runtime version when cupy
imports and sees a device, read on first access so importing tapelab never imports cupy.

``__version__`` is the PyTorch release whose API tapelab implements, with tapelab's own version as
the local label (``2.13.0+tapelab.0.1.0``): programs gate features on ``torch.__version__``
(``>= "2.0"``, ``packaging.version.parse``), and "0.1.0" sent them down paths for a torch before 1.0.
As PyTorch's, it is a ``str`` that compares as a version, with strings and tuples."""
from __future__ import annotations

import re

__all__ = ["__version__", "TorchVersion", "debug", "git_version", "hip", "rocm", "xpu"]

TAPELAB = "0.1.0"     # tapelab's own release (pyproject.toml)
API = "2.13.0"        # the PyTorch release it implements and is tested against


def _release(v) -> tuple:
    """The numeric release of a version string or tuple, as a comparable tuple (``"2.1.0a0+x"`` -> (2, 1, 0))."""
    if isinstance(v, tuple):
        parts = [int(x) for x in v]
    else:
        m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(v))
        if m is None:
            raise ValueError(f"Invalid version: {v!r}")
        parts = [int(x) for x in m.group(1).split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class TorchVersion(str):
    """A version string that compares by release number (``"2.13.0+tapelab.0.1.0" >= "2.0"``)."""

    def _cmp(self, other, op) -> bool:
        try:
            return op(_release(self), _release(other))
        except (ValueError, TypeError):
            return NotImplemented

    def __lt__(self, other):
        return self._cmp(other, tuple.__lt__)

    def __le__(self, other):
        return self._cmp(other, tuple.__le__)

    def __gt__(self, other):
        return self._cmp(other, tuple.__gt__)

    def __ge__(self, other):
        return self._cmp(other, tuple.__ge__)

    def __eq__(self, other):
        if isinstance(other, str) and str.__eq__(self, other):
            return True
        return self._cmp(other, tuple.__eq__)

    __hash__ = str.__hash__


__version__ = TorchVersion(f"{API}+tapelab.{TAPELAB}")
debug = False
git_version = "unknown"
hip = None      # no ROCm build
rocm = None
xpu = None


def _cuda_runtime() -> str | None:
    from .base.device import cuda_available
    if not cuda_available():
        return None
    import cupy
    v = int(cupy.cuda.runtime.runtimeGetVersion())
    return f"{v // 1000}.{v % 1000 // 10}"


def __getattr__(name: str):
    if name == "cuda":
        return _cuda_runtime()
    raise AttributeError(f"module 'tapelab.version' has no attribute {name!r}")

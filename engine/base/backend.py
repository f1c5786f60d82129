"""The one place for numpy/cupy differences. Every function takes the array namespace ``xp``.

Op forwards receive ``xp`` (numpy on cpu, cupy on cuda) and call it directly where the two
libraries agree, which is nearly everywhere (cupy >= 13 has ``add.at``, ``lib.stride_tricks``,
``put_along_axis``, ``unique(axis=)``; cupy 14 has no ``ufunc.accumulate`` and no ``.at`` but
``add.at``, ``maximum.at`` and ``minimum.at``, and the simulated device below refuses them too).
Where they differ, the forward calls a shim from here instead of branching itself:

- ``special(xp)``: ``scipy.special`` or ``cupyx.scipy.special`` (erf, erfinv, ...);
- ``coo.sparse_module(xp)``: ``scipy.sparse`` or ``cupyx.scipy.sparse`` (sparse COO products);
- ``asnumpy(xp, a)``: a host copy (cupy arrays refuse implicit conversion);
- ``host(xp, a)``: a numpy array built on the host, moved into ``xp`` (index tables);
- ``divide_where(xp, a, b, where)``: cupy ufuncs take no ``where=``;
- ``ufunc_at(xp, name, target, index, values)``: ``xp.<name>.at``; cupy's ``add.at`` runs on the
  device, its others on the host (see there);
- ``transfer(arr, dev)``: an explicit copy between devices (the forward of ``Tensor.to``).

The second section holds ``simulated_cuda()``: a fake ``cuda:0`` backed by numpy (its arrays,
``SimArray``, live in ``_simarray.py``), so device checks, transfers and the "no implicit host
arrays" rule of cupy run in CPU-only CI.
"""
from __future__ import annotations

import contextlib
import importlib

import numpy as np

from .compressed import CompressedArray
from .coo import COOArray
from .simarray import SimArray, _SimNamespace
from .device import device

__all__ = ["is_numpy", "is_cupy", "special", "asnumpy", "host", "divide_where", "ufunc_at",
           "transfer", "simulated_cuda", "SimArray"]


def is_numpy(xp) -> bool:
    return xp is np


def is_cupy(xp) -> bool:
    return getattr(xp, "__name__", "") == "cupy"


_SPECIAL: dict = {}


def special(xp):
    """``scipy.special`` for numpy (and the simulated device), ``cupyx.scipy.special`` for cupy."""
    sp = _SPECIAL.get(xp)
    if sp is None:
        sp = _SPECIAL[xp] = importlib.import_module("cupyx.scipy.special" if is_cupy(xp) else "scipy.special")
    return sp


def asnumpy(xp, a) -> np.ndarray:
    """A numpy array with ``a``'s values (no copy on cpu)."""
    return a if isinstance(a, np.ndarray) else xp.asnumpy(a)


def host(xp, a):
    """``a``, a numpy array computed on the host, as an array of namespace ``xp``."""
    return a if xp is np else xp.asarray(a)


def divide_where(xp, a, b, where, fill=0):
    """``a / b`` where ``where`` holds, ``fill`` elsewhere (numpy's ``where=`` is not in cupy)."""
    safe = xp.where(where, b, 1)
    return xp.where(where, xp.divide(a, safe), fill)


def ufunc_at(xp, name: str, target, index, values) -> None:
    """``xp.<name>.at(target, index, values)``: unbuffered, so repeated indices all apply.

    On cupy only ``add.at`` runs on the device: cupy 14 has no ``multiply.at``, and its float64
    ``maximum.at``/``minimum.at`` disagreed with numpy on an H200 (bench/README.md). Those
    round-trip through the host, correct but slow (scatter_reduce's prod/amax/amin only)."""
    if name == "add" or not hasattr(xp, "cuda"):       # numpy, meta: their own .at
        getattr(xp, name).at(target, index, values)
        return
    t = asnumpy(xp, target)
    index = tuple(asnumpy(xp, i) if hasattr(i, "shape") else i for i in index) if isinstance(index, tuple) \
        else asnumpy(xp, index)
    getattr(np, name).at(t, index, asnumpy(xp, values) if hasattr(values, "shape") else values)
    target[...] = xp.asarray(t)


def transfer(arr, dev):
    """Copy ``arr`` (numpy or cupy) onto device ``dev``: the forward of every device move."""
    if type(arr) in (COOArray, CompressedArray):   # a sparse tensor's data: all of its arrays move
        return arr.moved(dev.xp, lambda a: transfer(a, dev))
    xp = dev.xp
    if dev.type == "cpu":
        get = getattr(arr, "get", None)         # cupy -> numpy
        return get() if get is not None else np.array(arr, copy=True)
    cuda = getattr(xp, "cuda", None)
    if cuda is None:
        return xp.asarray(arr)
    with cuda.Device(dev.index):                # numpy -> cupy, or cuda:i -> cuda:j
        return xp.array(arr, copy=True)


# ---------------------------------------------------------------- simulated cuda device (CPU tests)
_SIM_XP = None


@contextlib.contextmanager
def simulated_cuda(index: int = 0):
    """Within the block, ``tapelab.device('cuda:<index>')`` computes with numpy-backed SimArrays.

    Restores the real device afterwards. Not thread-safe; for tests and ``gpu_check --simulate``.
    """
    global _SIM_XP
    if _SIM_XP is None:
        _SIM_XP = _SimNamespace()
    dev = device("cuda", index)
    saved = dev._xp
    dev._xp = _SIM_XP
    try:
        yield dev
    finally:
        dev._xp = saved

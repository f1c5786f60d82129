"""The one place for numpy/cupy differences. Every function takes the array namespace ``xp``.

Op forwards receive ``xp`` (numpy on cpu, cupy on cuda) and call it directly where the two
libraries agree, which is nearly everywhere (cupy >= 13 has ``add.at``, ``lib.stride_tricks``,
``put_along_axis``, ``unique(axis=)``; cupy 14 has no ``ufunc.accumulate`` and no ``.at`` but
``add.at``, ``maximum.at`` and ``minimum.at``, and the simulated device below refuses them too).
Where they differ, the forward calls a shim from here instead of branching itself:

- ``special(xp)``: ``scipy.special``, or on cuda the names of ``cupyx.scipy.special`` declared in
  ``CUPY_SPECIAL`` and those of ``HOST_SPECIAL`` on the host (erf, erfinv, ..., airy);
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

__all__ = ["is_numpy", "is_cupy", "special", "CUPY_SPECIAL", "HOST_SPECIAL", "asnumpy", "host", "divide_where",
           "ufunc_at",
           "transfer", "simulated_cuda", "SimArray"]


def is_numpy(xp) -> bool:
    return xp is np


def is_cupy(xp) -> bool:
    return getattr(xp, "__name__", "") == "cupy"


_SPECIAL: dict = {}

# What ``cupyx.scipy.special`` holds in cupy 14 (14.2.0's __init__.py), the only names the cuda path
# takes from it: the simulated cuda device consults the same table, so CPU CI refuses a scipy.special
# function cupy lacks as cupy does (tests/test_special_cuda_edges.py checks the table against an
# installed cupy). cupy's Bessel kernels differ from scipy at inf and for large arguments:
# engine/ops/special_limits.py gives scipy's values there on every backend.
CUPY_SPECIAL = frozenset("""
    i0 i0e i1 i1e j0 j1 k0 k0e k1 k1e y0 y1 yn spherical_yn wright_bessel
    bdtr bdtrc bdtri btdtr btdtri fdtr fdtrc fdtri gdtr gdtrc nbdtr nbdtrc nbdtri pdtr pdtrc pdtri
    chdtr chdtrc chdtri ndtr log_ndtr ndtri logit expit log_expit boxcox boxcox1p inv_boxcox inv_boxcox1p
    entr huber kl_div pseudo_huber rel_entr gamma gammaln loggamma gammasgn gammainc gammaincinv gammaincc
    gammainccinv beta betaln betainc betaincinv digamma rgamma polygamma multigammaln poch erf erfc erfcx
    erfinv erfcinv lpmv sph_harm sph_harm_y binom exp1 expi expn softmax log_softmax zeta zetac lambertw
    sici shichi cbrt exp10 exp2 radian cosdg sindg tandg cotdg log1p expm1 exprel cosm1 round xlogy xlog1py
    logsumexp sinc ellipk ellipkm1 ellipj ellipkinc ellipeinc""".split())
# scipy.special functions tapelab uses that cupy 14 lacks: on cuda they run in scipy on the host, their
# arguments and results copied across (a round trip, as ufunc_at's; a stream capture refuses it)
HOST_SPECIAL = frozenset({"airy"})


class _DeviceSpecial:
    """The special-function namespace of a cuda array namespace (cupy's or the simulated device's):
    ``CUPY_SPECIAL`` from the device module, ``HOST_SPECIAL`` through scipy on the host, nothing else."""

    def __init__(self, xp, module):
        self._xp, self._module = xp, module

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in CUPY_SPECIAL:
            fn = getattr(self._module, name)
        elif name in HOST_SPECIAL:
            fn = _on_host(self._xp, getattr(importlib.import_module("scipy.special"), name))
        else:
            raise AttributeError(f"cupyx.scipy.special has no {name!r} in cupy 14 (backend.CUPY_SPECIAL): "
                                 f"add it to backend.HOST_SPECIAL to compute it on the host")
        setattr(self, name, fn)
        return fn


def _on_host(xp, fn):
    """``fn`` (a host function of arrays) on device arrays: arguments copied to the host, results back."""
    def call(*args, **kwargs):
        res = fn(*(asnumpy(xp, a) if hasattr(a, "shape") else a for a in args), **kwargs)
        return tuple(xp.asarray(r) for r in res) if isinstance(res, tuple) else xp.asarray(res)
    call.__name__ = getattr(fn, "__name__", "host_special")
    return call


def special(xp):
    """``scipy.special`` for numpy and meta; on cuda (cupy, and the simulated device with scipy behind
    it) the names of ``CUPY_SPECIAL`` and ``HOST_SPECIAL`` only."""
    sp = _SPECIAL.get(xp)
    if sp is None:
        if is_cupy(xp):
            sp = _DeviceSpecial(xp, importlib.import_module("cupyx.scipy.special"))
        elif not is_numpy(xp) and hasattr(xp, "cuda"):
            sp = _DeviceSpecial(xp, importlib.import_module("scipy.special"))
        else:
            sp = importlib.import_module("scipy.special")
        _SPECIAL[xp] = sp
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

"""Runtime settings with PyTorch's names: threads, default device, matmul precision,
deterministic algorithms."""
from __future__ import annotations

import os
import warnings

from .device import DEFAULT
from .device import device as _device

__all__ = ["set_num_threads", "get_num_threads", "set_default_device", "get_default_device",
           "set_float32_matmul_precision", "get_float32_matmul_precision", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled"]

_STATE = {"precision": "highest", "deterministic": False, "fill_uninitialized": True}
_LIMITER: list = []
# the thread count the environment asks for, read once at import as PyTorch's OpenMP runtime reads it
# when ``import torch`` loads it: a library that sets OMP_NUM_THREADS later (ultralytics does, on its
# own import) changes neither count, and sums split per thread stay split as PyTorch's
_ENV_THREADS = os.environ.get("OMP_NUM_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS") or ""


def set_num_threads(n: int) -> None:
    """Threads for tapelab's intra-op pool (GEMM blocks, fused loops), as ``torch.set_num_threads``;
    the BLAS under numpy is held at one thread, since tapelab splits its products itself."""
    if not isinstance(n, int) or n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, but got {n!r}")
    _STATE["threads"] = n
    _hold_blas()


def _hold_blas() -> None:
    """One BLAS thread per call: engine/base/pool.py's workers run the blocks, and a second pool
    of BLAS threads spinning beside them took their cores (issue 17)."""
    if not _LIMITER:
        from threadpoolctl import threadpool_limits
        _LIMITER.append(threadpool_limits(limits=1, user_api="blas"))


def fft_workers() -> int:
    """``scipy.fft``'s ``workers=``: the intra-op thread count."""
    return intra_op_threads()


def intra_op_threads() -> int:
    """Threads for tapelab's intra-op pool: ``set_num_threads``'s count, else
    ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` as the process started, else the usable CPUs.
    The first time this says more than one, the BLAS is held at one thread."""
    n = _STATE.get("threads")
    if n is None:
        env = _ENV_THREADS
        n = _STATE["threads"] = int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0))
        if n > 1:
            _hold_blas()
    return n


def get_num_threads() -> int:
    """The intra-op pool's thread count (``set_num_threads``)."""
    return intra_op_threads()


def set_default_device(device) -> None:
    """The device factories (``zeros``, ``randn``, ``nn.Linear``...) create on without ``device=``,
    in the calling thread (as PyTorch's, other threads keep theirs)."""
    DEFAULT.device = _device(device if device is not None else "cpu")


def get_default_device():
    """The calling thread's device for factories without ``device=`` (``with tapelab.device(...)``
    sets it for a block)."""
    return DEFAULT.device


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted and kept, as PyTorch's; no effect: tapelab's float32 matmuls are always full float32."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the "
                      f"set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _STATE["precision"] = precision


def get_float32_matmul_precision() -> str:
    return _STATE["precision"]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted and kept; tapelab's ops are deterministic already (one numpy or cupy kernel each)."""
    _STATE["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return _STATE["deterministic"]


def fills_uninitialized() -> bool:
    """Whether ``empty`` and its kin fill their memory (NaN, or an integer dtype's maximum), as PyTorch's
    do under ``use_deterministic_algorithms(True)`` unless ``torch.utils.deterministic.fill_uninitialized_memory``
    is switched off."""
    return _STATE["deterministic"] and _STATE["fill_uninitialized"]


def set_fill_uninitialized(mode: bool) -> None:
    if not isinstance(mode, bool):
        raise RuntimeError(f"expected a bool, but got {type(mode).__name__}")
    _STATE["fill_uninitialized"] = mode

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

_STATE = {"precision": "highest", "deterministic": False}
_LIMITER: list = []


def set_num_threads(n: int) -> None:
    """Threads for the BLAS under numpy (``threadpoolctl``), as ``torch.set_num_threads``."""
    if not isinstance(n, int) or n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, but got {n!r}")
    from threadpoolctl import threadpool_limits
    _LIMITER[:] = [threadpool_limits(limits=n, user_api="blas")]
    _STATE["threads"] = n


def fft_workers() -> int:
    """``scipy.fft``'s ``workers=``: the count given to ``set_num_threads``, else every core (-1)."""
    return _STATE.get("threads", -1)


def intra_op_threads() -> int:
    """Threads for tapelab's own parallel loops (engine/kernels): ``set_num_threads``'s count, else
    ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` as the process started, else the usable CPUs."""
    n = _STATE.get("threads")
    if n is None:
        env = os.environ.get("OMP_NUM_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS") or ""
        n = _STATE["env_threads"] = _STATE.get("env_threads") or (
            int(env) if env.isdigit() and int(env) > 0 else len(os.sched_getaffinity(0)))
    return n


def get_num_threads() -> int:
    from threadpoolctl import threadpool_info
    blas = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(blas) if blas else 1


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

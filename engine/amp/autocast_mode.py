"""``torch.autocast``: ops of PyTorch's cast lists run in lower precision, as a dispatch ``Mode``.

Autocast state is per thread, as in PyTorch: for each device type whether autocast is on and in
which dtype, whether casts of weights are cached, and how deeply autocast regions nest. While
some device type is on, the thread's ``_AutocastMode`` is on its mode stack. Its ``dispatch``
looks the op up in ``policy.POLICIES`` (by the declared op name), casts the floating inputs
the policy names, and hands the op on with itself off the stack, as PyTorch runs a dispatch
mode's handler: an outer mode, the tape and the profiler see the casts and the op. Casting is
an ordinary ``cast`` op, so the backward converts gradients back to each input's dtype and the
parameters' gradients come out in their own dtype.
"""
from __future__ import annotations

import functools
import threading
import warnings
import weakref

from ..base import dtype as _dtype
from ..base.device import cuda_available, device as _device
from ..base.dispatch_state import LOCAL
from ..core.dispatch import Mode, apply, pop_mode, push_mode
from ..core.tensor import Tensor
from ..ops.linalg import _contracts
from .policy import BANNED, BANNED_MESSAGE, FP32, FP32_UNLESS_DTYPE, LOWER, LOWER_IF_GEMM, POLICIES, PROMOTE

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "set_autocast_enabled",
           "get_autocast_dtype", "set_autocast_dtype", "is_autocast_cpu_enabled", "set_autocast_cpu_enabled",
           "get_autocast_cpu_dtype", "set_autocast_cpu_dtype", "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
           "autocast_increment_nesting", "autocast_decrement_nesting", "custom_fwd", "custom_bwd"]

DEVICE_TYPES = ("cpu", "cuda")
# PyTorch's other autocast backends: their state can be asked about, never turned on here
_OTHER_BACKENDS = frozenset(("xpu", "ipu", "hpu", "xla", "mps", "mtia", "maia", "privateuseone"))
_CPU_DTYPES = (_dtype.bfloat16, _dtype.float16)


class _State(threading.local):
    """One thread's autocast state (a new thread starts with autocast off, as in PyTorch)."""

    def __init__(self):
        self.enabled = dict.fromkeys(DEVICE_TYPES, False)
        self.dtype = {"cpu": _dtype.bfloat16, "cuda": _dtype.float16}
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}        # id(fp32 leaf weight) -> (weakref to it, its lower-precision cast)
        self.mode = None             # the _AutocastMode on this thread's stack while a device type is on


_STATE = _State()


def _device_type(device_type) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}': tapelab "
                           f"autocasts on {' and '.join(DEVICE_TYPES)}")
    return device_type


def _sync_mode() -> None:
    """Keep the thread's mode on its stack exactly while some device type is on."""
    state = _STATE
    on = any(state.enabled.values())
    if on and state.mode is None:
        state.mode = _AutocastMode()
        push_mode(state.mode)
    elif not on and state.mode is not None:
        mode, state.mode = state.mode, None
        if mode in LOCAL.modes:
            pop_mode(mode)


# ---------------------------------------------------------------- state functions (torch.*)
def is_autocast_available(device_type: str) -> bool:
    """Whether autocast works on ``device_type`` here."""
    return device_type in DEVICE_TYPES


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread (no argument: cuda, as PyTorch).

    Another of PyTorch's autocast backends is never on here (kornia asks about cpu, cuda, mps, xpu)."""
    if device_type in _OTHER_BACKENDS:
        return False
    return _STATE.enabled[_device_type("cuda" if device_type is None else device_type)]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``set_autocast_enabled(device_type, enabled)``, or the old ``set_autocast_enabled(enabled)`` (cuda)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _STATE.enabled[_device_type(device_type)] = bool(enabled)
    _sync_mode()


def get_autocast_dtype(device_type: str):
    return _STATE.dtype[_device_type(device_type)]


def set_autocast_dtype(device_type: str, dtype) -> None:
    _STATE.dtype[_device_type(device_type)] = dtype


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"torch.{old}() is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled() -> bool:
    _deprecated("is_autocast_cpu_enabled", "is_autocast_enabled('cpu')")
    return _STATE.enabled["cpu"]


def set_autocast_cpu_enabled(enabled: bool) -> None:
    _deprecated("set_autocast_cpu_enabled", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    _deprecated("get_autocast_cpu_dtype", "get_autocast_dtype('cpu')")
    return _STATE.dtype["cpu"]


def set_autocast_cpu_dtype(dtype) -> None:
    _deprecated("set_autocast_cpu_dtype", "set_autocast_dtype('cpu', dtype)")
    _STATE.dtype["cpu"] = dtype


def get_autocast_gpu_dtype():
    _deprecated("get_autocast_gpu_dtype", "get_autocast_dtype('cuda')")
    return _STATE.dtype["cuda"]


def set_autocast_gpu_dtype(dtype) -> None:
    _deprecated("set_autocast_gpu_dtype", "set_autocast_dtype('cuda', dtype)")
    _STATE.dtype["cuda"] = dtype


def is_autocast_cache_enabled() -> bool:
    return _STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    _STATE.cache.clear()


def autocast_increment_nesting() -> int:
    _STATE.nesting += 1
    return _STATE.nesting


def autocast_decrement_nesting() -> int:
    _STATE.nesting -= 1
    return _STATE.nesting


# ---------------------------------------------------------------- the context manager
class autocast:
    """Run the ops of PyTorch's autocast lists in lower precision inside a region.

    Args:
        device_type: ``"cpu"`` or ``"cuda"``.
        dtype: the lower precision (default: bfloat16 on cpu, float16 on cuda).
        enabled: False turns autocast off inside the region (also inside an enabled one).
        cache_enabled: cache the cast of each float32 weight within the region.

    >>> with tapelab.autocast("cpu"):
    ...     y = tapelab.nn.Linear(4, 2)(tapelab.ones(3, 4))
    >>> y.dtype
    tapelab.bfloat16

    Also a decorator: ``@tapelab.autocast("cpu")``.
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        self.device = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dtype
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if not isinstance(self.fast_dtype, _dtype.dtype):
            raise ValueError(f"Expected `dtype` of type `torch.dtype`, got: `{type(self.fast_dtype)}`")
        if self.device == "cpu" and enabled and self.fast_dtype not in _CPU_DTYPES:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                          stacklevel=2)
            enabled = False
        if self.device == "cuda" and enabled:
            if not cuda_usable():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                              stacklevel=2)
                enabled = False
            elif self.fast_dtype is _dtype.bfloat16:
                raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to "
                                   "float16. (tapelab keeps bfloat16 on the cpu: cupy has no bfloat16 dtype)")
        self._enabled = bool(enabled)

    def __enter__(self):
        state = _STATE
        self.prev = state.enabled[self.device]
        self.prev_fastdtype = state.dtype[self.device]
        self.prev_cache_enabled = state.cache_enabled
        state.enabled[self.device] = self._enabled
        state.dtype[self.device] = self.fast_dtype
        state.cache_enabled = self._cache_enabled
        autocast_increment_nesting()
        _sync_mode()
        return self

    def __exit__(self, *exc) -> None:
        state = _STATE
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        state.enabled[self.device] = self.prev
        state.dtype[self.device] = self.prev_fastdtype
        state.cache_enabled = self.prev_cache_enabled
        _sync_mode()

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return decorate_autocast


def cuda_usable() -> bool:
    """A cuda device to compute on: a real one, or the simulated one tests run on."""
    return cuda_available() or _device("cuda")._xp is not None


# ---------------------------------------------------------------- the mode
class _AutocastMode(Mode):
    """Casts an op's floating inputs per its policy, then hands the op to the rest of the stack."""

    def dispatch(self, op, args: tuple, params: dict):
        with self.aside():       # the casts and the op itself go to the modes below, as PyTorch's handlers run
            if op.kind == "compute":
                args = _autocast_args(op.name, args, params)
            return apply(op, *args, **params)

    def composite(self, name: str, fn, tensors: tuple):
        """The front end's tensors cast by the policy of PyTorch's op ``name`` (none: as given), its
        ops run with autocast aside, as ATen's kernel for ``name`` runs below the autocast key."""
        with self.aside():
            return self.below().composite(name, fn, _autocast_args(name, tensors, {}))

    # the other hooks belong to the mode below, if any: autocast only changes dtypes
    def write(self, target, src) -> None:
        self.below().write(target, src)

    def copy(self, src, copy) -> None:
        self.below().copy(src, copy)

    def accumulate(self, var, grad) -> bool:
        return self.below().accumulate(var, grad)

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        return self.below().call_module(module, forward, args, kwargs)


def _autocast_args(name: str, args: tuple, params: dict) -> tuple:
    """``args`` cast as the policy for the op named ``name`` says, on the device of its first tensor."""
    device = next((a._device.type for a in args if isinstance(a, Tensor)), None)
    state = _STATE
    if device is None or device not in state.enabled or not state.enabled[device]:
        return args
    policy = POLICIES[device].get(name)
    if policy == LOWER_IF_GEMM:  # einsum: ATen's is a bmm when it contracts a label operands share, else a mul
        policy = LOWER if _contracts(params["eq"]) else None
    if policy is None:
        return args
    if policy == LOWER:
        to = state.dtype[device]
    elif policy == FP32 or (policy == FP32_UNLESS_DTYPE and params.get("dtype") is None):
        to = _dtype.float32
    elif policy == PROMOTE:
        to = state.dtype[device]
        for a in args:
            if _eligible(a, device):
                to = _dtype.promote_types(to, a.dtype)
    elif policy == BANNED:
        raise RuntimeError(BANNED_MESSAGE)
    else:
        return args
    return tuple(_cast(a, to, policy == LOWER) if _eligible(a, device) else a for a in args)


def _eligible(a, device: str) -> bool:
    """A floating tensor on the autocast device that is not float64 (PyTorch never casts doubles)."""
    return (isinstance(a, Tensor) and a._device.type == device and a.dtype.is_floating_point
            and a.dtype is not _dtype.float64)


def _cast(t: Tensor, to, lower: bool) -> Tensor:
    """``t`` in ``to``; float32 leaf weights cast to lower precision once per autocast region."""
    if t.dtype is to:
        return t
    state = _STATE
    if not (lower and state.cache_enabled and t.dtype is _dtype.float32 and t.requires_grad
            and t.grad_fn is None and t._base is None):
        return t.to(to)
    hit = state.cache.get(id(t))
    if hit is not None and hit[0]() is t and hit[1].dtype is to:
        return hit[1]
    out = t.to(to)
    state.cache[id(t)] = (weakref.ref(t), out)
    return out


# ---------------------------------------------------------------- custom autograd functions
def custom_fwd(fwd=None, *, device_type: str = "cuda", cast_inputs=None):
    """Decorate a custom Function's ``forward``: with ``cast_inputs``, floating tensor arguments
    are cast to it and the forward runs with autocast off; otherwise the forward sees the state."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        enabled = is_autocast_enabled(device_type)
        if cast_inputs is None or not enabled:
            return fwd(*args, **kwargs)
        cast = [a.to(cast_inputs) if _eligible(a, device_type) else a for a in args]
        with autocast(device_type, enabled=False):
            return fwd(*cast, **{k: v.to(cast_inputs) if _eligible(v, device_type) else v
                                 for k, v in kwargs.items()})
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str = "cuda"):
    """Decorate a custom Function's ``backward``; tapelab's backward runs with the caller's state."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd

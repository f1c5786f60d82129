"""``torch.amp.GradScaler``: loss scaling for float16 training, with PyTorch's schedule.

``scale(loss)`` multiplies by the current scale so small float16 gradients do not flush to
zero; ``step(optimizer)`` unscales the gradients (``unscale_``), skips the step when any is
inf or nan, and ``update()`` halves the scale after a skipped step or doubles it after
``growth_interval`` clean ones. The scale and growth tracker are a float32 and an int32 0-d
tensor on the device of the first scaled output, as in PyTorch, so checkpoints agree.
"""
from __future__ import annotations

import enum
import math
import warnings
from collections import defaultdict

from ..base import dtype as _dtype
from ..base.grad_mode import no_grad
from ..core.creation import full
from ..core.tensor import Tensor
from .autocast_mode import cuda_usable

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scale the loss, unscale gradients, skip steps with inf/nan gradients and adapt the scale.

    Args:
        device: where the scale lives (``"cuda"`` by default, as in PyTorch; ``"cpu"`` works).
        init_scale, growth_factor, backoff_factor, growth_interval: the schedule.
        enabled: False makes every method a pass-through (``step`` just calls ``optimizer.step``).

    >>> scaler = tapelab.amp.GradScaler("cpu")
    >>> scaler.scale(loss).backward()
    >>> scaler.step(optimizer)
    >>> scaler.update()
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._device = device
        if enabled and device == "cuda" and not cuda_usable():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            enabled = False
        self._enabled = enabled
        if enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale, self._growth_factor, self._backoff_factor = init_scale, growth_factor, backoff_factor
        self._growth_interval, self._init_growth_tracker = growth_interval, 0
        self._scale: Tensor | None = None
        self._growth_tracker: Tensor | None = None
        self._per_optimizer_states: defaultdict = defaultdict(_fresh_state)

    # ---------------------------------------------------------------- scaling
    def _lazy_init(self, device) -> None:
        self._scale = full((), self._init_scale, dtype=_dtype.float32, device=device)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=_dtype.int32, device=device)

    def scale(self, outputs):
        """``outputs`` (a tensor, or tensors nested in lists, tuples and other iterables) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply_scale(value):
            if isinstance(value, Tensor):
                if self._scale is None:
                    self._lazy_init(value.device)
                return value * self._scale.to(value.device)
            if isinstance(value, (list, tuple)):
                scaled = [apply_scale(v) for v in value]
                return type(value)(scaled) if isinstance(value, list) or type(value) is tuple \
                    else type(value)(*scaled)
            if hasattr(value, "__iter__"):
                return map(apply_scale, value)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply_scale(outputs)

    def _checked(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        return self._scale, self._growth_tracker

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and note whether any is inf/nan."""
        if not self._enabled:
            return
        scale, _ = self._checked("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = scale.double().reciprocal().float()     # as PyTorch: 1/scale computed in double
        state["found_inf_per_device"] = self._unscale_grads(optimizer, inv_scale)
        state["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer, inv_scale: Tensor) -> dict:
        found: dict = {}
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = param.grad
                    if grad is None:
                        continue
                    if grad.dtype is _dtype.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if grad.is_sparse:
                        grad = param.grad = grad.coalesce()
                        grad = grad._values()
                    dev = grad.device
                    if dev not in found:
                        found[dev] = full((), 0.0, dtype=_dtype.float32, device=dev)
                    if not bool(grad.isfinite().all()):
                        found[dev].fill_(1.0)
                    grad.mul_(inv_scale.to(dev))
        if not found:          # no gradient at all: still an inf check, as PyTorch records one per device
            found[inv_scale.device] = full((), 0.0, dtype=_dtype.float32, device=inv_scale.device)
        return found

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` ran) and call ``optimizer.step`` unless a gradient was inf/nan."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._checked("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off after an inf/nan, grow after ``growth_interval`` clean steps, or set ``new_scale``."""
        if not self._enabled:
            return
        scale, tracker = self._checked("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                if (not isinstance(new_scale, Tensor) or new_scale.numel() != 1 or new_scale.requires_grad
                        or new_scale.device.type != scale.device.type):
                    raise AssertionError("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                                         "torch.FloatTensor with requires_grad=False.")
                scale.copy_(new_scale.reshape(()))
        else:
            found = [f for state in self._per_optimizer_states.values()
                     for f in state["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._update_scale(scale, tracker, sum(f.item() for f in found))
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _update_scale(self, scale: Tensor, tracker: Tensor, found_inf: float) -> None:
        """PyTorch's ``_amp_update_scale_``, with the scale kept in float32."""
        if found_inf:
            scale.mul_(self._backoff_factor)
            tracker.fill_(0)
            return
        successful = int(tracker.item()) + 1
        if successful == self._growth_interval:
            grown = scale * self._growth_factor
            if math.isfinite(grown.item()):
                scale.copy_(grown)
            tracker.fill_(0)
        else:
            tracker.fill_(successful)

    # ---------------------------------------------------------------- accessors and state
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker``
        ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

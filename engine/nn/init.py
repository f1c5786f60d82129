"""Parameter initialisers (``torch.nn.init``): in place, under no_grad, from tapelab's generators.

The distributions and their parameters are PyTorch's; the random streams are tapelab's own.
"""
from __future__ import annotations

import math
import warnings

from ..base.grad_mode import no_grad
from ..core import creation
from ..core.creation import randn
from ..core.overrides import overridable
from ..core.tensor import Tensor
from ..ops.compare import where

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
           "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_", "sparse_", "dirac_", "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform",
           "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (``nn.functional`` name)."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif (isinstance(param, int) and not isinstance(param, bool)) or isinstance(param, float):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive, tensor.size(0) * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, value: Tensor) -> Tensor:
    with no_grad():
        tensor.copy_(value)
    return tensor


def _like(tensor: Tensor) -> dict:
    return {"dtype": tensor.dtype, "device": tensor.device}


@overridable
def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    with no_grad():   # the in-place draw, so a seed gives PyTorch's numbers (core/cpu_stream.py)
        return tensor.uniform_(a, b, generator=generator)


@overridable
def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """N(mean, std) restricted to [a, b] by rejection, as PyTorch samples it (so a seed gives its
    numbers): normal draws redrawn where they fall outside when [a, b] holds over 30% of the mass,
    otherwise uniform proposals on [a, b] kept with probability pdf / pdf at the mode."""
    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    if tensor.is_meta:
        return tensor
    with no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            lo, hi = (creation.tensor(v, dtype=tensor.dtype).item() for v in (a, b))   # the dtype's bounds
            result = tensor.normal_(mean, std, generator=generator)
            while bool(((outside := (result < lo) | (result > hi))).any()):
                result = where(outside, creation.empty_like(result).normal_(mean, std, generator=generator), result)
            return tensor.copy_(result) if result is not tensor else tensor
        log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2

        def rejected(candidates: Tensor, pending: Tensor | None) -> Tensor:
            log_pdf = ((candidates - mean) / std).pow(2).mul(-0.5).sub(log_peak)
            reject = creation.empty_like(tensor).uniform_(generator=generator).log_().gt(log_pdf)
            return reject if pending is None else where(pending, reject, pending)
        pending = rejected(tensor.uniform_(a, b, generator=generator), None)
        result = tensor
        while bool(pending.any()):
            candidates = creation.empty_like(tensor).uniform_(a, b, generator=generator)
            result = where(pending, candidates, result)
            pending = rejected(candidates, pending)
        return tensor.copy_(result) if result is not tensor else tensor


@overridable
def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, creation.eye(*tensor.shape, **_like(tensor)))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


@overridable
def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR factorisation of a Gaussian sample."""
    from .. import linalg
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flat = randn(rows, cols, generator=generator, **_like(tensor))
    if rows < cols:
        flat = flat.t()
    q, r = linalg.qr(flat)
    q = q * r.diagonal().sign()
    if rows < cols:
        q = q.t()
    return _write(tensor, (q * gain).reshape(tensor.shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D tensor drawn from N(0, std) with ``ceil(sparsity * rows)`` random rows of each column
    zeroed (Martens 2010), as PyTorch's."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0.0, std, generator)
        for col in range(cols):
            tensor[creation.randperm(rows, generator=generator, device=tensor.device)[:zeros], col] = 0
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The identity of a convolution (3-5 dims): each of the ``groups`` blocks of output channels
    passes its input channels through at the kernel's centre."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.size(0) % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = tensor.size(0) // groups
    centre = tuple(k // 2 for k in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, tensor.size(1))):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def _deprecated(new):
    """The pre-underscore name PyTorch still keeps for ``new`` (``nn.init.xavier_uniform``), with its warning."""
    old = new.__name__[:-1]

    def init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)
    init.__name__ = init.__qualname__ = old
    init.__doc__ = f"Deprecated: ``{new.__name__}``."
    return init


uniform, normal, constant, eye, dirac, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, \
    orthogonal, sparse = map(_deprecated, (uniform_, normal_, constant_, eye_, dirac_, xavier_uniform_, xavier_normal_,
                                           kaiming_uniform_, kaiming_normal_, orthogonal_, sparse_))

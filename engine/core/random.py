"""Random number generation: ``manual_seed`` and ``Generator`` over numpy's PCG64, and the
random ops (``kind="random"``) that draw from them.

A random op's forward draws on the host from its param ``generator`` (None: the default
generator) before moving the numbers to the device, and draws nothing on the meta device,
as PyTorch's. The public functions (``rand``, ``randn`` ...) are in ``creation.py``.
"""
from __future__ import annotations

import json

import numpy as np

from ..base.device import CPU, device as _device
from ..base.meta import has_data
from .dispatch import apply
from .factories import TENSOR
from .registry import NONE, Op
from ..base.dtype import FLOATING_KINDS

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "default_generator",
           "get_rng_state", "set_rng_state"]


class Generator:
    """A source of random numbers, like ``torch.Generator`` (streams differ from PyTorch's)."""

    def __init__(self, device="cpu"):
        self.device = _device(device)   # a device, as PyTorch's (``generator.device.type``)
        self._seed = 67280421310721
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor on the cpu, as PyTorch's."""
        raw = json.dumps(self._rng.bit_generator.state).encode()
        return apply(TENSOR, data=np.frombuffer(raw, np.uint8).copy(), device=CPU)

    def set_state(self, state) -> "Generator":
        self._rng.bit_generator.state = json.loads(bytes(state.tolist()).decode())
        return self


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (and cupy's, when a GPU is in use)."""
    default_generator.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)


def rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


# ---------------------------------------------------------------- the random ops
def _draw(xp, draw, size, dtype):
    """``draw()`` (host numbers of ``size``) on ``xp``'s device; the meta device draws nothing."""
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    return xp.asarray(draw().astype(dtype.np, copy=False))


def _normal(xp, mean, std, *, size, dtype, device, generator):
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    if bool((xp.asarray(std) < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    # numpy's normal(mean, std) is exactly mean + std * standard_normal(), in double
    return (mean + std * xp.asarray(rng(generator).standard_normal(size))).astype(dtype.np)


def _bernoulli(xp, probs, *, p, generator):
    if not has_data(xp):
        return xp.empty(probs.shape, probs.dtype)
    if p is None and bool(((probs < 0) | (probs > 1)).any()):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    return (xp.asarray(rng(generator).random(probs.shape)) < (probs if p is None else p)).astype(probs.dtype)


def _complex_or_real(draw, size, dtype, scale=1.0):
    """``draw(size)``, or for a complex dtype real and imaginary parts drawn independently (PyTorch's
    complex ``rand`` is uniform in each part; complex ``randn`` has unit variance, ``1/2`` per part)."""
    if not dtype.is_complex:
        return draw(size)
    parts = draw((*size, 2)) * scale
    return parts[..., 0] + 1j * parts[..., 1]


RAND = Op("rand", lambda xp, *, size, dtype, device, generator:
          _draw(xp, lambda: _complex_or_real(rng(generator).random, size, dtype), size, dtype), kind="random")
RANDN = Op("randn", lambda xp, *, size, dtype, device, generator:
           _draw(xp, lambda: _complex_or_real(rng(generator).standard_normal, size, dtype, 0.5 ** 0.5), size, dtype),
           kind="random")
RANDINT = Op("randint", lambda xp, *, low, high, size, dtype, device, generator:
             _draw(xp, lambda: rng(generator).integers(low, high, size), size, dtype), kind="random")
RANDPERM = Op("randperm", lambda xp, *, n, dtype, device, generator:
              _draw(xp, lambda: rng(generator).permutation(n), (n,), dtype), kind="random")
NORMAL = Op("normal", _normal, kind="random")
BERNOULLI = Op("bernoulli", _bernoulli, kind="random")


# ---------------------------------------------------------------- in-place draws (``Tensor.uniform_`` ...)
# Each is an op on the tensor it fills: the forward draws numbers of the target's shape and
# dtype, ``autograd.views.apply_`` writes them into the target (the methods are declared in
# ``ops/sampling.py``). Their gradient to what the target held before is zero, as PyTorch's.
def _fill(xp, x, draw):
    """``draw(shape)`` (host doubles or ints) as an array like ``x`` on ``x``'s device."""
    if not has_data(xp):
        return xp.empty(x.shape, x.dtype)
    return xp.asarray(draw(x.shape).astype(x.dtype, copy=False))


def _no_grad_to_old_value(g, out, x, *probs, **params):
    return (None,) * (1 + len(probs))


def _random_bounds(dt: np.dtype, low, high):
    """PyTorch's ``random_`` range [low, high) for dtype ``dt`` (high None: to the dtype's top)."""
    if high is not None:
        return low, high
    if dt.kind == "b":
        return 0, 2
    if dt.kind in FLOATING_KINDS:   # integers representable exactly: up to 2**mantissa
        return 0, 2 ** (np.finfo(dt).nmant + 1) + 1
    return 0, int(np.iinfo(dt).max) + 1 if dt.itemsize < 8 else int(np.iinfo(dt).max)


def _bernoulli_fill(xp, x, *probs, p, generator):
    if not has_data(xp):
        return xp.empty(x.shape, x.dtype)
    prob = probs[0] if probs else p
    if probs and bool(((prob < 0) | (prob > 1)).any()):
        raise RuntimeError("bernoulli_: all elements of p must be in [0, 1]")
    u = xp.asarray(rng(generator).random(x.shape))
    return (u < prob).astype(x.dtype)


_FILL = dict(kind="random", saves=NONE)
UNIFORM_ = Op("uniform_", lambda xp, x, *, low, high, generator:
              _fill(xp, x, lambda s: rng(generator).uniform(low, high, s)), _no_grad_to_old_value, **_FILL)
NORMAL_ = Op("normal_", lambda xp, x, *, mean, std, generator:
             _fill(xp, x, lambda s: mean + std * rng(generator).standard_normal(s)), _no_grad_to_old_value, **_FILL)
LOG_NORMAL_ = Op("log_normal_", lambda xp, x, *, mean, std, generator:
                 _fill(xp, x, lambda s: rng(generator).lognormal(mean, std, s)), _no_grad_to_old_value, **_FILL)
EXPONENTIAL_ = Op("exponential_", lambda xp, x, *, lambd, generator:
                  _fill(xp, x, lambda s: rng(generator).exponential(1.0 / lambd, s)), _no_grad_to_old_value,
                  **_FILL)
CAUCHY_ = Op("cauchy_", lambda xp, x, *, median, sigma, generator:
             _fill(xp, x, lambda s: median + sigma * rng(generator).standard_cauchy(s)), _no_grad_to_old_value,
             **_FILL)
GEOMETRIC_ = Op("geometric_", lambda xp, x, *, p, generator:
                _fill(xp, x, lambda s: rng(generator).geometric(p, s)), _no_grad_to_old_value, **_FILL)
RANDOM_ = Op("random_", lambda xp, x, *, low, high, generator:
             _fill(xp, x, lambda s: rng(generator).integers(*_random_bounds(x.dtype, low, high), s)),
             _no_grad_to_old_value, **_FILL)
BERNOULLI_ = Op("bernoulli_", _bernoulli_fill, _no_grad_to_old_value, **_FILL)


def _multinomial(xp, probs, *, num_samples, replacement, generator):
    """Indices drawn from the rows of ``probs`` (1-D or 2-D, unnormalised): with replacement by
    inverting each row's CDF, without by the exponential-race trick (top-k of p / E, E ~ Exp(1))."""
    shape = probs.shape[:-1] + (num_samples,)
    if not has_data(xp):
        return xp.empty(shape, np.int64)
    p = xp.asarray(probs, dtype="float64").reshape(-1, probs.shape[-1])
    if not bool(xp.isfinite(p).all()) or bool((p < 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool((p.sum(-1) <= 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = rng(generator)
    if replacement:
        cdf = xp.cumsum(p, -1)
        cdf = cdf / cdf[:, -1:]
        u = xp.asarray(g.random((p.shape[0], num_samples)))
        idx = xp.stack([xp.searchsorted(c, r, side="right") for c, r in zip(cdf, u)])
        idx = xp.minimum(idx, p.shape[-1] - 1)
    else:
        keys = p / xp.asarray(g.exponential(1.0, p.shape))
        idx = xp.argsort(-keys, -1, kind="stable")[:, :num_samples]
    return idx.astype(np.int64).reshape(shape)


MULTINOMIAL = Op("multinomial", _multinomial, kind="random")

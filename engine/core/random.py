"""Random number generation: ``manual_seed`` and ``Generator`` (PyTorch's CPU stream, made by
``cpu_stream``), and the random ops (``kind="random"``) that draw from them.

A random op's forward draws on the host from its param ``generator`` (None: the default
generator) before moving the numbers to the device, and draws nothing on the meta device,
as PyTorch's. The public functions (``rand``, ``randn`` ...) are in ``creation.py``.
"""
from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator

import numpy as np

from ..base.backend import asnumpy
from ..base.device import CPU, device as _device
from ..base.iter_order import iterator_order
from ..base.meta import has_data
from . import cpu_stream as stream
from .dispatch import apply
from .factories import TENSOR
from .registry import NONE, Op

__all__ = ["Generator", "manual_seed", "seed", "initial_seed", "default_generator",
           "get_rng_state", "set_rng_state", "fork_rng"]


class Generator:
    """A source of random numbers, like ``torch.Generator``: the same seed gives PyTorch's CPU numbers
    for every random op (``cpu_stream`` says how); only a scrambled Sobol engine draws numpy's
    numbers from the same twister (``rng``)."""

    _DEFAULT_SEED = 67280421310721   # PyTorch's default CPU seed: numbers are fixed from the start

    def __init__(self, device="cpu"):
        self.device = _device(device)   # a device, as PyTorch's (``generator.device.type``)
        self.manual_seed(self._DEFAULT_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        seed = int(seed)
        if not -(1 << 63) <= seed < 1 << 64:
            raise RuntimeError(f"Overflow when unpacking long: manual_seed({seed}) needs a seed in "
                               f"[-2**63, 2**64)")
        self._seed = seed & ((1 << 64) - 1)   # PyTorch keeps the seed as uint64
        if not hasattr(self, "_bits"):       # made once: a fresh MT19937 hashes OS entropy (~0.1 ms)
            self._bits = stream.Twister()
            self._rng = np.random.Generator(self._bits)
        stream.seed_twister(self._bits, self._seed)
        self._normal = None   # Box-Muller's second number, returned by the next small normal draw
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor on the cpu in PyTorch's layout (``CPUGeneratorImplState``: seed,
        the twister's words and position, the kept normal), so a state saved under PyTorch restores
        here and continues with PyTorch's numbers, and the other way round."""
        st = self._bits.state["state"]
        raw = np.zeros((), _STATE)
        raw["seed"], raw["seeded"], raw["state"] = self._seed, 1, st["key"]
        pos = int(st["pos"])
        raw["left"], raw["next"] = (1, 0) if pos >= 624 else (625 - pos, pos)
        if self._normal is not None:
            raw["normal_is_valid"], raw["normal_y"] = 1, self._normal
        return apply(TENSOR, data=np.frombuffer(raw.tobytes(), np.uint8).copy(), device=CPU)

    def set_state(self, state) -> "Generator":
        raw = np.asarray(state.detach().cpu().numpy() if hasattr(state, "detach") else state, np.uint8)
        if raw.shape != (_STATE.itemsize,):
            raise RuntimeError(f"Expected a torch.ByteTensor of {_STATE.itemsize} bytes (a Generator.get_state()), "
                               f"got {raw.size} bytes")
        st = raw.view(_STATE)[0]
        left, nxt = int(st["left"]), int(st["next"])
        self._bits.state = {"bit_generator": type(self._bits).__name__,
                            "state": {"key": st["state"].astype(np.uint32), "pos": 624 if left == 1 else nxt}}
        self._seed = int(st["seed"])
        self._normal = float(st["normal_y"]) if st["normal_is_valid"] else None
        return self


# PyTorch's CPUGeneratorImplState, byte for byte (5056 bytes)
_STATE = np.dtype([("seed", "<u8"), ("left", "<i4"), ("seeded", "<i4"), ("next", "<u8"), ("state", "<u8", (624,)),
                   ("normal_x", "<f8"), ("normal_y", "<f8"), ("normal_rho", "<f8"), ("normal_is_valid", "<i4"),
                   ("pad", "<i4"), ("next_float_normal", "<f4"), ("next_float_normal_valid", "u1"),
                   ("pad2", "u1", (3,))])


default_generator = Generator()


_SEEDED: list = []   # callables seeding the device generators (``tapelab.cuda`` adds its manual_seed_all)


def on_manual_seed(fn) -> None:
    """Have ``manual_seed(s)`` also call ``fn(s)``: the device generators a layer above seed with it, as
    ``torch.manual_seed`` seeds every CUDA device."""
    _SEEDED.append(fn)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator and every device generator that registered (``on_manual_seed``)."""
    default_generator.manual_seed(seed)
    for fn in _SEEDED:
        fn(int(seed))
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str | None = None) -> Iterator[None]:
    """``torch.random.fork_rng``: the block draws from the default generator and leaves its state as it
    found it (reversible layers replay a block's dropout in backward). cuda tensors draw from this
    generator too here, so forking it forks theirs; ``devices`` only names them."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def rng(generator: Generator | None) -> np.random.Generator:
    """numpy's distributions over the generator's twister (the draws ``cpu_stream`` does not make)."""
    return (generator or default_generator)._rng


def _gen(generator: Generator | None) -> Generator:
    return generator or default_generator


# ---------------------------------------------------------------- the random ops
def _draw(xp, draw, size, dtype):
    """``draw()`` (host numbers of ``size``) on ``xp``'s device; the meta device draws nothing. The
    array owns its memory (a reshaped flat draw is copied), as a fresh tensor's storage does."""
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    host = draw().astype(dtype.np, copy=False)
    return xp.asarray(host if host.base is None else host.copy())


def _count(size) -> int:
    return math.prod(size)


def _normal(xp, mean, std, *, size, dtype, device, generator):
    """PyTorch's ``normal``: ``normal_(mean, std)`` for two numbers; ``normal_(0, std) + mean`` for a
    number ``std``; ``normal_(0, 1) * std + mean`` otherwise (each step rounded in ``dtype``)."""
    if not has_data(xp):
        return xp.empty(size, dtype.np)
    if bool((xp.asarray(std) < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    dt, g, n = dtype.np, _gen(generator), _count(size)
    if dtype.is_complex:
        return (mean + std * xp.asarray(_complex_draw(g, size, dt, True))).astype(dt)
    scalar_mean, scalar_std = isinstance(mean, numbers.Number), isinstance(std, numbers.Number)
    if scalar_mean and scalar_std:
        return xp.asarray(stream.normal(g, n, dt, float(mean), float(std)).reshape(size))
    if scalar_std:
        z = xp.asarray(stream.normal(g, n, dt, 0.0, float(std)).reshape(size))
        return (z + xp.asarray(mean, dt)).astype(dt)
    z = xp.asarray(stream.normal(g, n, dt).reshape(size))
    return ((z * xp.asarray(std, dt)).astype(dt) + xp.asarray(mean, dt)).astype(dt)


def memory_order(a) -> tuple | None:
    """``a``'s axes from the slowest to the fastest as PyTorch's ``empty_like(a)`` lays them out when ``a``
    is not C-contiguous (its strides' order; a broadcast axis, stride 0, keeps its place as in
    ``infer_dense_strides``: einops' ``repeat`` then dropout, ETSformer's damping layer), else None."""
    if a.ndim < 2 or a.flags.c_contiguous:
        return None
    perm = iterator_order(a.shape, (a,))
    return tuple(range(a.ndim)) if perm is None else tuple(perm[::-1])


def _in_memory_order(a, draw):
    """``draw(shape)`` laid over ``a``'s elements in memory order, as PyTorch's TensorIterator fills a
    tensor whose layout ``empty_like`` kept (dropout of a transposed attention output)."""
    order = memory_order(a)
    if order is None:
        return draw(a.shape)
    return draw(tuple(a.shape[d] for d in order)).transpose(np.argsort(order))


def _bernoulli_draw(xp, probs, p, generator, layout=None):
    """Host booleans of ``probs``' shape: below ``p`` (a number) or below each probability, drawn in
    the memory order of ``layout`` (the tensor being filled), or in index order without one."""
    bits = _gen(generator)._bits
    order = (lambda draw: _in_memory_order(layout, draw)) if layout is not None else (lambda draw: draw(probs.shape))
    if p is not None:
        return order(lambda s: stream.bernoulli(bits, _count(s), p).reshape(s))
    host = asnumpy(xp, probs)
    dt = stream.probability_dtype(host.dtype)
    return order(lambda s: stream.uniform(bits, _count(s), dt).reshape(s)) < host


def _bernoulli(xp, probs, *, p, generator):
    if not has_data(xp):
        return xp.empty(probs.shape, probs.dtype)
    if p is None and bool(((probs < 0) | (probs > 1)).any()):
        raise RuntimeError("bernoulli: all elements of input must be in [0, 1]")
    # ``bernoulli(probs)`` fills a fresh contiguous tensor; a number ``p`` is dropout's
    # ``empty_like(input).bernoulli_(p)``, which keeps the input's layout
    layout = None if p is None else probs
    return xp.asarray(_bernoulli_draw(xp, probs, p, generator, layout)).astype(probs.dtype)


def _complex_draw(g, size, dt, normal: bool, a: float = 0.0, b: float = 1.0) -> np.ndarray:
    """Complex numbers as PyTorch draws them: its real view (real, imaginary, real, ...) filled by
    ``uniform_(a, b)``, or by ``normal_(a, b / sqrt(2))`` (unit variance, half per part)."""
    n, real = 2 * _count(size), np.finfo(dt).dtype
    parts = stream.normal(g, n, real, a, b * 0.5 ** 0.5) if normal else stream.uniform(g._bits, n, real, a, b)
    return parts.view(np.dtype(dt)).reshape(size)


def _rand(size, dtype, generator):
    g = _gen(generator)
    if dtype.is_complex:
        return _complex_draw(g, size, dtype.np, False)
    return stream.uniform(g._bits, _count(size), dtype.np).reshape(size)


def _randn(size, dtype, generator):
    g = _gen(generator)
    if dtype.is_complex:
        return _complex_draw(g, size, dtype.np, True)
    return stream.normal(g, _count(size), dtype.np).reshape(size)


RAND = Op("rand", lambda xp, *, size, dtype, device, generator:
          _draw(xp, lambda: _rand(size, dtype, generator), size, dtype), kind="random")
RANDN = Op("randn", lambda xp, *, size, dtype, device, generator:
           _draw(xp, lambda: _randn(size, dtype, generator), size, dtype), kind="random")
RANDINT = Op("randint", lambda xp, *, low, high, size, dtype, device, generator:
             _draw(xp, lambda: stream.integers(_gen(generator)._bits, _count(size), low, high, dtype.np).reshape(size),
                   size, dtype), kind="random")
RANDPERM = Op("randperm", lambda xp, *, n, dtype, device, generator:
              _draw(xp, lambda: stream.permutation(_gen(generator)._bits, n), (n,), dtype), kind="random")
NORMAL = Op("normal", _normal, kind="random")
BERNOULLI = Op("bernoulli", _bernoulli, kind="random")


# ---------------------------------------------------------------- in-place draws (``Tensor.uniform_`` ...)
# Each is an op on the tensor it fills: the forward draws numbers of the target's shape and
# dtype, ``autograd.views.apply_`` writes them into the target (the methods are declared in
# ``ops/sampling.py``). Their gradient to what the target held before is zero, as PyTorch's.
def _fill(xp, x, draw):
    """``draw(shape)`` (host numbers) as an array like ``x`` on ``x``'s device, in ``x``'s memory order."""
    if not has_data(xp):
        return xp.empty(x.shape, x.dtype)
    return xp.asarray(_in_memory_order(x, draw).astype(x.dtype, copy=False))


def _no_grad_to_old_value(g, out, x, *probs, **params):
    return (None,) * (1 + len(probs))


def _random_fill(x, low, high, generator):
    """``random_``: the dtype's whole range without bounds (``sampling.random_`` passes 0, None),
    else ``[low, high)``."""
    bits, dt = _gen(generator)._bits, x.dtype
    if high is None:
        return lambda s: stream.full_range(bits, _count(s), dt).reshape(s)
    return lambda s: stream.integers(bits, _count(s), low, high, dt).reshape(s)


def _in_place_normal(x, mean, std, generator):
    g = _gen(generator)
    if x.dtype.kind == "c":
        return lambda s: _complex_draw(g, s, x.dtype, True, mean, std)
    if memory_order(x) is not None:   # PyTorch draws a non-contiguous tensor's normals one at a time
        return lambda s: stream.normal_serial(g, _count(s), mean, std).astype(x.dtype).reshape(s)
    return lambda s: stream.normal(g, _count(s), x.dtype, mean, std).reshape(s)


def _in_place_uniform(x, low, high, generator):
    g = _gen(generator)
    if x.dtype.kind == "c":
        return lambda s: _complex_draw(g, s, x.dtype, False, low, high)
    return lambda s: stream.uniform(g._bits, _count(s), x.dtype, low, high).reshape(s)


def _bernoulli_fill(xp, x, *probs, p, generator):
    if not has_data(xp):
        return xp.empty(x.shape, x.dtype)
    if not probs:
        return xp.asarray(_bernoulli_draw(xp, x, p, generator, x)).astype(x.dtype)
    if bool(((probs[0] < 0) | (probs[0] > 1)).any()):
        raise RuntimeError("bernoulli_: all elements of p must be in [0, 1]")
    return xp.asarray(_bernoulli_draw(xp, xp.broadcast_to(probs[0], x.shape), None, generator, x)).astype(x.dtype)


_FILL = dict(kind="random", saves=NONE)
UNIFORM_ = Op("uniform_", lambda xp, x, *, low, high, generator:
              _fill(xp, x, _in_place_uniform(x, low, high, generator)), _no_grad_to_old_value, **_FILL)
NORMAL_ = Op("normal_", lambda xp, x, *, mean, std, generator:
             _fill(xp, x, _in_place_normal(x, mean, std, generator)), _no_grad_to_old_value, **_FILL)
LOG_NORMAL_ = Op("log_normal_", lambda xp, x, *, mean, std, generator:
                 _fill(xp, x, lambda s: stream.log_normal(_gen(generator), _count(s), mean, std).reshape(s)),
                 _no_grad_to_old_value, **_FILL)
EXPONENTIAL_ = Op("exponential_", lambda xp, x, *, lambd, generator:
                  _fill(xp, x, lambda s: stream.exponential(_gen(generator)._bits, _count(s), lambd).reshape(s)),
                  _no_grad_to_old_value, **_FILL)
CAUCHY_ = Op("cauchy_", lambda xp, x, *, median, sigma, generator:
             _fill(xp, x, lambda s: stream.cauchy(_gen(generator)._bits, _count(s), median, sigma).reshape(s)),
             _no_grad_to_old_value, **_FILL)
GEOMETRIC_ = Op("geometric_", lambda xp, x, *, p, generator:
                _fill(xp, x, lambda s: stream.geometric(_gen(generator)._bits, _count(s), p).reshape(s)),
                _no_grad_to_old_value, **_FILL)
RANDOM_ = Op("random_", lambda xp, x, *, low, high, generator:
             _fill(xp, x, _random_fill(x, low, high, generator)), _no_grad_to_old_value, **_FILL)
BERNOULLI_ = Op("bernoulli_", _bernoulli_fill, _no_grad_to_old_value, **_FILL)


def _multinomial(xp, probs, *, num_samples, replacement, generator):
    """Indices drawn from the rows of ``probs`` (1-D or 2-D, unnormalised): more than one with
    replacement by searching each row's running sum, otherwise by the exponential-race trick
    (top-k of p / E, E ~ Exp(1)); both as PyTorch draws them (``cpu_stream``)."""
    shape = probs.shape[:-1] + (num_samples,)
    if not has_data(xp):
        return xp.empty(shape, np.int64)
    p = xp.asarray(probs, dtype="float64").reshape(-1, probs.shape[-1])
    if not bool(xp.isfinite(p).all()) or bool((p < 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool((p.sum(-1) <= 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    host = asnumpy(xp, probs)
    if replacement and num_samples > 1:
        idx = xp.asarray(stream.multinomial_with_replacement(_gen(generator)._bits,
                                                             host.reshape(-1, host.shape[-1]), num_samples))
    else:   # PyTorch's: probs / Exp(1) draws in the probabilities' dtype, the largest first
        q = stream.exponential(_gen(generator)._bits, host.size, 1.0).astype(host.dtype).reshape(p.shape)
        keys = xp.asarray(host.reshape(p.shape) / q)
        idx = xp.argsort(-keys, -1, kind="stable")[:, :num_samples]
    return idx.astype(np.int64).reshape(shape)


MULTINOMIAL = Op("multinomial", _multinomial, kind="random")

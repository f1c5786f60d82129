"""PyTorch's CPU random stream: the numbers ``torch.manual_seed(s)`` makes, bit for bit.

A generator is a 32-bit Mersenne Twister seeded by MT's standard ``init_genrand`` with the seed's
low 32 bits, as PyTorch's ``CPUGeneratorImpl`` is (numpy's ``MT19937`` runs the twister). What
follows turns its words into numbers the way ATen's CPU kernels do, so a seeded program draws the
same initial weights, data orders, dropout masks and noise under tapelab as under PyTorch:

- a 64-bit word is two 32-bit words, the first the high half;
- ``uniform_``/``rand``: the low ``digits`` bits of one word (two for float64) times ``2**-digits``,
  scaled to ``[low, high)`` in the dtype's accumulate type;
- ``normal_``/``randn``: under 16 numbers, Box-Muller in double one number at a time, the sine
  kept for the next call; from 16 up, all the uniforms first, then Box-Muller over blocks of 16
  (the tail block recomputed on 16 fresh uniforms): in double for float64, with libm's ``log``,
  ``cos`` and ``sin`` and the scale's multiply-add contracted, as GCC compiles ATen's loop (for half and bfloat16
  too, on float32 uniforms: close to PyTorch's, which rounds some intermediates to the dtype), and for
  float32 as the AVX2 kernel ATen runs on every
  x86 CPU with AVX2, with Cephes' float32 log and sincos polynomials, FMA-contracted where GCC
  contracts them (emulated in float64, where the product of two floats is exact);
- ``randint``/``random_``: a word modulo the range (two words when the range needs them);
- ``randperm``: Fisher-Yates, swapping ``i`` with ``i + word % (n - i)``;
- ``multinomial`` with replacement (more than one sample): per row, the running sum of the
  weights in their dtype divided by its total, searched for a double uniform per sample;
- ``exponential_``, ``cauchy_``, ``geometric_`` and ``log_normal_``: ATen's transformations of
  double uniforms (``log_normal_`` of the one-at-a-time double normals); gamma draws (Gamma, Beta,
  Dirichlet, Chi2, StudentT) by ATen's Marsaglia-Tsang over those normals and uniforms, ``poisson``
  by its transformed rejection or product of uniforms, ``binomial`` by BTRS or inversion;
- ``bernoulli``: a uniform below ``p`` (double for a number ``p``: PyTorch's default kernel; on
  Intel CPUs its MKL build draws ``bernoulli_(p)`` from MKL's stream instead, which this does not
  reproduce).

Complex draws fill the real view (real, imaginary, ...) as PyTorch's do. Only a scrambled
``SobolEngine`` seeds scipy's scrambling from numpy's distributions over the same twister: seeded
and reproducible, but not PyTorch's numbers.
"""
from __future__ import annotations

import ctypes
import math
import warnings

import numpy as np

from .. import kernels
from ..base.dtype import BFLOAT16_NP, from_np

_U64 = np.uint64
_F32 = np.float32
_MASK32 = 0xFFFFFFFF


def seed_twister(bits: np.random.MT19937, seed: int) -> None:
    """Put ``bits`` in the state of MT's ``init_genrand(seed & 0xffffffff)``, as PyTorch seeds: numpy's
    legacy integer seeding runs it (1 us; through a ``RandomState``'s state it took 150 us, paid at
    every DataLoader pass by its sampler's generator)."""
    bits._legacy_seeding(seed & _MASK32)   # RandomState.seed's own path (tests pin it to RandomState's state)


class Twister(np.random.MT19937):
    """numpy's ``MT19937`` whose state the loops of ``kernels/twister.py`` draw from in place: numpy's
    generator, its ``state`` and those loops share one position in one stream."""

    def key(self) -> np.ndarray:
        """The state as numpy keeps it, viewed in place: 624 uint32 words, then the position."""
        view = self.__dict__.get("_key")
        address = self.ctypes.state_address
        if view is None or view.ctypes.data != address:   # a copy made by pickle or deepcopy has its own state
            view = self.__dict__["_key"] = np.ctypeslib.as_array((ctypes.c_uint32 * 625).from_address(address))
        return view


def _twister(bits):
    """The loop module when it may draw from ``bits`` (a ``Twister``, loops on), else None."""
    return kernels.loops("twister") if type(bits) is Twister and kernels.enabled() else None


def words32(bits: np.random.MT19937, n: int) -> np.ndarray:
    """``n`` 32-bit words (uint32 from the loops, uint64 from numpy's ``random_raw``)."""
    loop = _twister(bits)
    if loop is None:
        return bits.random_raw(n)
    out = np.empty(n, np.uint32)
    with bits.lock:
        loop.words(bits.key(), out)
    return out


def words64(bits: np.random.MT19937, n: int, high_mask: int = _MASK32) -> np.ndarray:
    """``n`` 64-bit words, each two 32-bit ones (the first is the high half, ``& high_mask``)."""
    r = words32(bits, 2 * n).astype(_U64, copy=False).reshape(n, 2)
    high = r[:, 0] & _U64(high_mask) if high_mask != _MASK32 else r[:, 0]
    return (high << _U64(32)) | r[:, 1]


def _doubles53(bits, n: int) -> np.ndarray:
    """The 53-bit integers behind ``n`` double uniforms (``u = k * 2**-53``)."""
    loop = _twister(bits)
    if loop is None:
        return words64(bits, n, (1 << 21) - 1)
    out = np.empty(n, _U64)
    with bits.lock:
        loop.doubles53(bits.key(), out)
    return out


_DIGITS = {np.dtype(np.float16): 11, np.dtype(BFLOAT16_NP): 8, np.dtype(np.float32): 24,
           np.dtype(np.float64): 53}   # significand bits


def _digits(dt: np.dtype) -> int:
    return _DIGITS[dt]


_CHUNK = 1 << 20   # numbers made at a time: a billion-weight init needs no 8-byte temporaries of its size


def _chunked(n: int, dt, make) -> np.ndarray:
    """``n`` numbers of dtype ``dt``, ``make(m)`` drawing the next ``m`` of them, a chunk at a time."""
    if n <= _CHUNK:
        return make(n)
    out = np.empty(n, dt)
    for start in range(0, n, _CHUNK):
        out[start:start + _CHUNK] = make(min(_CHUNK, n - start))
    return out


def uniform(bits, n: int, dt: np.dtype, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``n`` numbers of float dtype ``dt`` uniform in ``[low, high)`` (half and bfloat16 are float32
    draws rounded, as ATen draws them in their math type)."""
    return _chunked(n, dt, lambda m: _uniform(bits, m, dt, low, high))


def _uniform(bits, n: int, dt: np.dtype, low: float, high: float) -> np.ndarray:
    if dt.itemsize < 4:   # float32 numbers rounded; one rounded up to ``high`` wraps to ``low``, as ATen's
        out = _uniform(bits, n, np.dtype(_F32), low, high).astype(dt)
        out[out == dt.type(high)] = dt.type(low)
        return out
    digits = _digits(dt)
    loop = _twister(bits) if dt == np.float32 else None
    if loop is not None:   # the words, masked, scaled and rounded in one pass
        out = np.empty(n, _F32)
        lo, hi = dt.type(low), dt.type(high)
        with bits.lock:
            loop.uniform_f32(bits.key(), out, np.float64(lo), np.float64(hi - lo), low == 0.0 and high == 1.0)
        return out
    raw = _doubles53(bits, n) if dt == np.float64 else words32(bits, n) & _U64((1 << digits) - 1)
    x = raw * (2.0 ** -digits)
    if low == 0.0 and high == 1.0:
        return x.astype(dt)
    lo, hi = dt.type(low), dt.type(high)
    # ``x * (high - low) + low`` in double, ATen's accumulate type (an FMA for float64; for float32
    # the double result rounds to the same float)
    if dt == np.float64:
        return fma(x, np.float64(hi - lo), np.float64(lo))
    return (x * np.float64(hi - lo) + np.float64(lo)).astype(dt)


def integers(bits, n: int, low: int, high: int, dt: np.dtype) -> np.ndarray:
    """``n`` integers in ``[low, high)`` as dtype ``dt`` (``randint``, ``random_(low, high)``): ATen's
    ``word % span + low``, one 64-bit word per number once the span reaches 2**28 (a 32-bit one below),
    a float dtype's bounds first moved to numbers it holds (``float_bounds``)."""
    low, high = checked_bounds(low, high, dt)
    span = high - low
    wide = span >= 1 << 28
    return _chunked(n, dt, lambda m: (((words64(bits, m) if wide else words32(bits, m)) % _U64(span))
                                      .astype(np.int64) + low).astype(dt))


def checked_bounds(low: int, high: int, dt: np.dtype) -> tuple[int, int]:
    """``[low, high)`` as ATen's ``random_`` takes it for dtype ``dt``: a float dtype's bounds moved to
    numbers it holds (``float_bounds``), then ``low`` and ``high - 1`` refused outside the dtype's range."""
    if dt in _DIGITS:
        low, high = float_bounds(low, high, dt)
        info = np.finfo(np.float32 if dt == BFLOAT16_NP else dt)
        lo, hi = (-3.3895313892515355e38, 3.3895313892515355e38) if dt == BFLOAT16_NP else (info.min, info.max)
    elif dt.kind == "b":
        lo, hi = 0, 1
    else:
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    for name, v in (("from", low), ("to - 1", high - 1)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{name} is out of bounds for {from_np(dt).cpp_name}")
    return low, high


def float_bounds(low: int, high: int, dt: np.dtype) -> tuple[int, int]:
    """ATen's ``update_from``/``update_to`` for a float dtype: a ``low`` that rounds down in ``dt`` moves
    up to the next number it holds, a ``high - 1`` that rounds up moves ``high`` down to one it holds;
    bounds past ``2**digits`` warn as PyTorch does (the dtype cannot hold every integer there)."""
    digits = _DIGITS[dt]

    def cast(v: int) -> int:
        """``v`` rounded to ``dt`` (ATen's cast; one past the dtype's range is left as it is, to be refused)."""
        x = (np.float64(v) if dt == np.float64 else np.float32(v)).astype(dt)
        return int(x) if np.isfinite(x) else v

    up = cast(low + 1)
    if up < low:
        low = up + (1 << ((abs(low + 1).bit_length() - 1) - digits + 1))
    down = cast(high - 1)
    if down >= high:
        high = down - (1 << ((abs(high - 1).bit_length() - 1) - digits + 1))
    if low >= high:
        raise RuntimeError("random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got "
                           f"from={low} >= to={high}")
    for name, v in (("from", low), ("to - 1", high - 1)):
        if not -(1 << digits) <= v <= 1 << digits:
            warnings.warn(f"{name} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations "
                          f"{from_np(dt).cpp_name} can support discrete uniform distribution only within this range. "
                          "This warning will become an error in version 1.7 release, please fix the code in advance",
                          stacklevel=2)
    return low, high


def full_range(bits, n: int, dt: np.dtype) -> np.ndarray:
    """``random_()`` without bounds: ``[0, 2**digits]`` for floats, ``[0, max]`` for integers."""
    if dt.kind == "b":
        top = 2
    elif dt in _DIGITS:
        top = (1 << _digits(dt)) + 1
    else:
        top = int(np.iinfo(dt).max) + 1
    wide = dt in (np.float64, np.int64)
    return _chunked(n, dt, lambda m: ((words64(bits, m) if wide else words32(bits, m)) % _U64(top)).astype(dt))


def permutation(bits, n: int) -> np.ndarray:
    """``randperm(n)``: Fisher-Yates with one 32-bit word per swap (the swaps in a numba loop where
    the loops are on)."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    picks = (words32(bits, n - 1) % np.arange(n, 1, -1, dtype=_U64)).astype(np.int64)
    if kernels.enabled():
        out = np.arange(n, dtype=np.int64)
        kernels.loops("shuffle").fisher_yates(out, picks)
        return out
    out = list(range(n))
    for i, z in enumerate(picks.tolist()):
        j = i + z
        out[i], out[j] = out[j], out[i]
    return np.array(out, np.int64)


def bernoulli(bits, n: int, p: float) -> np.ndarray:
    """``bernoulli_(p)`` for a number ``p``: a double uniform below ``p`` (bool array)."""
    # u < p exactly when its 53-bit integer is below p * 2**53 (both exact in double)
    loop = _twister(bits)
    if loop is not None:
        out = np.empty(n, np.bool_)
        with bits.lock:
            loop.below53(bits.key(), out, p * 2.0 ** 53)
        return out
    return _chunked(n, np.bool_, lambda m: _doubles53(bits, m) < p * 2.0 ** 53)


def probability_dtype(dt: np.dtype) -> np.dtype:
    """``bernoulli(probs)`` compares each probability with a uniform of its precision (float or double)."""
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _libm(name: str, values: np.ndarray, *args) -> np.ndarray | None:
    """``kernels/libm.py``'s loop ``name`` over double ``values`` (libm's functions, as ATen calls them),
    or None without the loops."""
    if not kernels.enabled():
        return None
    out = np.empty_like(values)
    getattr(kernels.loops("libm"), name)(values, *args, out)
    return out


def exponential(bits, n: int, lambd: float) -> np.ndarray:
    """``exponential_``: ``-1 / lambda * log1p(-u)`` on double uniforms (in double)."""
    u = uniform(bits, n, np.dtype(np.float64))
    out = _libm("exponential", u, float(lambd))
    return (-1.0 / lambd) * np.log1p(-u) if out is None else out


def cauchy(bits, n: int, median: float, sigma: float) -> np.ndarray:
    """``cauchy_``: ``median + sigma * tan(pi * (u - 0.5))`` on double uniforms."""
    u = uniform(bits, n, np.dtype(np.float64))
    out = _libm("cauchy", u, float(median), float(sigma))
    return median + sigma * np.tan(math.pi * (u - 0.5)) if out is None else out


def geometric(bits, n: int, p: float) -> np.ndarray:
    """``geometric_``: ``ceil(log(u) / log1p(-p))`` on double uniforms."""
    return np.ceil(np.log(uniform(bits, n, np.dtype(np.float64))) / math.log1p(-p))


def log_normal(gen, n: int, mean: float, std: float) -> np.ndarray:
    """``log_normal_``: ``exp`` of the one-at-a-time double normals (the kept sine included)."""
    z = normal_serial(gen, n, mean, std)
    out = _libm("exp", z)
    return np.exp(z) if out is None else out


def multinomial_with_replacement(bits, weights: np.ndarray, n_sample: int) -> np.ndarray:
    """Indices for each row of 2-D ``weights``: the first category whose normalised running sum
    reaches the row's next double uniform."""
    out = np.empty((weights.shape[0], n_sample), np.int64)
    for i, row in enumerate(weights):
        cum = np.cumsum(row, dtype=row.dtype)
        cum = cum / cum[-1]
        u = uniform(bits, n_sample, np.dtype(np.float64))
        out[i] = np.minimum(np.searchsorted(cum.astype(np.float64), u, side="left"), row.shape[0] - 1)
    return out


# ---------------------------------------------------------------- normal
def normal(gen, n: int, dt: np.dtype, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """``n`` numbers of N(mean, std) as ATen's ``normal_`` draws them for a contiguous tensor;
    ``gen`` carries the twister (``_bits``) and the cached Box-Muller sine (``_normal``)."""
    if n < 16:
        return normal_serial(gen, n, mean, std).astype(dt)
    if dt == np.float32:
        return _normal_fill_avx2(gen._bits, n, _F32(mean), _F32(std))
    udt = np.dtype(np.float64 if dt == np.float64 else _F32)
    if dt.itemsize < 4:   # half and bfloat16: ATen draws the whole blocks' uniforms only, then the tail's
        data = np.empty(n)
        data[:n // 16 * 16] = uniform(gen._bits, n // 16 * 16, udt)
    else:
        data = uniform(gen._bits, n, udt).astype(np.float64, copy=False)
    tail = uniform(gen._bits, 16 if n % 16 else 0, udt).astype(np.float64)
    if kernels.enabled():   # libm's log, cos and sin, as ATen's double loop calls them (kernels/normal.py)
        return kernels.loops("normal").fill_f64(data, tail, mean, std, data).astype(dt, copy=False)

    def fill(block):
        radius = np.sqrt(-2 * np.log(1 - block[:, :8]))
        theta = 2.0 * math.pi * block[:, 8:]
        return fma(np.concatenate([radius * np.cos(theta), radius * np.sin(theta)], 1), np.float64(std), np.float64(mean))
    _blocks(data, tail, fill)
    return data.astype(dt, copy=False)


def _blocks(data: np.ndarray, tail_uniforms: np.ndarray, fill) -> None:
    """ATen's ``normal_fill`` layout: whole blocks of 16 in place, then (if ``n % 16``) the last
    16 positions again from 16 fresh uniforms."""
    n = data.shape[0]
    whole = n // 16 * 16
    for start in range(0, whole, _CHUNK):
        part = data[start:min(start + _CHUNK, whole)]
        part[:] = fill(part.reshape(-1, 16)).ravel()
    if n % 16:
        data[n - 16:] = fill(tail_uniforms[:16].reshape(1, 16)).ravel()


def normal_serial(gen, n: int, mean: float, std: float) -> np.ndarray:
    """``at::normal_distribution<double>`` (a small or non-contiguous ``normal_``): two double
    uniforms give a cosine to return and a sine to keep; the next draw returns the kept one first
    (it survives across calls)."""
    out = []
    if n and gen._normal is not None:
        out.append(gen._normal)
        gen._normal = None
    pairs = (n - len(out) + 1) // 2
    if pairs:   # every pair's two uniforms drawn at once: a numpy call per number cost ~4 us
        words = _doubles53(gen._bits, 2 * pairs).tolist()
        for p in range(pairs):
            cos, sin = _box_muller(words[2 * p] * 2.0 ** -53, words[2 * p + 1] * 2.0 ** -53)
            out.append(cos)
            if len(out) < n:
                out.append(sin)
            else:
                gen._normal = sin
    return np.array([z * std + mean for z in out], np.float64).reshape(n)


def _uniform_one(bits) -> float:
    """One double uniform, as a Python float."""
    return int(_doubles53(bits, 1)[0]) * 2.0 ** -53


def _normal_one(gen) -> float:
    if gen._normal is not None:
        z, gen._normal = gen._normal, None
        return z
    cos, gen._normal = _box_muller(_uniform_one(gen._bits), _uniform_one(gen._bits))
    return cos


def _box_muller(u1: float, u2: float) -> tuple[float, float]:
    """The cosine and sine normals of two double uniforms, as ``at::normal_distribution<double>``."""
    radius = math.sqrt(-2.0 * math.log1p(-u2))
    theta = 2.0 * math.pi * u1
    return radius * math.cos(theta), radius * math.sin(theta)


def poisson(bits, rates: np.ndarray) -> np.ndarray:
    """``torch.poisson``: per rate in order, ATen's ``sample_poisson`` on double uniforms: the
    transformed rejection of Hoermann (1993) from a rate of 10, else multiplying uniforms until the
    product falls to ``exp(-rate)``. Returns doubles."""
    return np.array([_poisson_one(bits, lam) for lam in rates.ravel().tolist()], np.float64).reshape(rates.shape)


def _poisson_one(bits, lam: float) -> float:
    if lam >= 10:
        slam, loglam = math.sqrt(lam), math.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = _uniform_one(bits) - 0.5
            v = _uniform_one(bits)
            us = 0.5 - abs(u)
            k = math.floor((2 * a / us + b) * u + lam + 0.43)
            if us >= 0.07 and v <= vr:
                return k
            if k < 0 or (us < 0.013 and v > us):
                continue
            if math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b) <= -lam + k * loglam - math.lgamma(k + 1.0):
                return k
    if lam == 0:
        return 0
    limit, count, product = math.exp(-lam), 0, 1.0
    while True:
        product *= _uniform_one(bits)
        if product <= limit:
            return count
        count += 1


def _rounding(dt: np.dtype):
    """A Python float rounded to ``dt``'s precision (float32 below double), as ATen's scalar_t steps."""
    return (lambda v: v) if dt == np.float64 else (lambda v: float(np.float32(v)))


def binomial(bits, counts: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """``torch.binomial``: per (count, prob) in order, ATen's ``sample_binomial`` on double uniforms:
    BTRS (Hoermann's transformed rejection) when count * p >= 10, else geometric-waiting-time
    inversion, on the smaller of p and 1 - p; the steps ATen does in the input's float precision
    rounded to it. Returns doubles."""
    to_dtype = _rounding(counts.dtype)
    return np.array([_binomial_one(bits, c, p, to_dtype) for c, p in zip(counts.ravel().tolist(), probs.ravel().tolist())],
                    np.float64).reshape(counts.shape)


def _binomial_one(bits, count: float, prob: float, to_dtype) -> float:
    if count <= 0 or prob <= 0:
        return 0.0
    if prob >= 1:
        return count
    if prob <= 0.5:
        return _btrs(bits, count, prob, to_dtype) if to_dtype(count * prob) >= 10 else _inversion(bits, count, prob, to_dtype)
    q = to_dtype(1.0 - prob)
    k = _btrs(bits, count, q, to_dtype) if to_dtype(count * q) >= 10 else _inversion(bits, count, q, to_dtype)
    return to_dtype(count - k)


def _inversion(bits, count: float, prob: float, to_dtype) -> float:
    """Count the geometric waiting times that fit in ``count`` trials."""
    total, successes, log_q = 0.0, 0.0, math.log1p(-prob)
    while True:
        total += math.ceil(math.log(_uniform_one(bits)) / log_q)
        if total > count:
            return successes
        successes = to_dtype(successes + 1)


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: float) -> float:
    """``log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi) / 2``: a table to 9, then its series."""
    if k <= 9:
        return _STIRLING_TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _btrs(bits, count: float, prob: float, to_dtype) -> float:
    """Hoermann's BTRS as ATen writes it (its missing log in the bound included)."""
    stddev = math.sqrt(to_dtype(to_dtype(count * prob) * to_dtype(1 - prob)))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = to_dtype(count * prob) + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / to_dtype(1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(to_dtype(to_dtype(count + 1) * prob))
    while True:
        u = _uniform_one(bits) - 0.5
        v = _uniform_one(bits)
        us = 0.5 - abs(u)
        k = to_dtype(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > count:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = math.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * math.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * math.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * math.log(r * (count - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k) - _stirling_tail(count - k))
        if v <= bound:
            return k


_F32_0331 = float(np.float32(0.0331))
_F32_THIRD = float(np.float32(1.0) / np.float32(3.0))


def gamma(gen, alphas: np.ndarray) -> np.ndarray:
    """Standard gamma draws, one per element in order (``torch._standard_gamma``, ATen's
    ``sample_gamma``): Marsaglia-Tsang on the one-at-a-time double normals and double uniforms, an
    ``alpha < 1`` boosted by ``(1 - u) ** (1 / alpha)``; the arithmetic ATen does in the input's
    float precision rounded to it. Returns doubles."""
    if _twister(gen._bits) is not None:   # the same loop compiled (kernels/gamma_draws.py)
        out = np.empty(alphas.size, np.float64)
        normal = np.array([gen._normal is not None, gen._normal or 0.0])
        with gen._bits.lock:
            kernels.loops("gamma_draws").gamma(gen._bits.key(), alphas.astype(np.float64).ravel(),
                                               alphas.dtype != np.float64, normal, out)
        gen._normal = float(normal[1]) if normal[0] else None
        return out.reshape(alphas.shape)
    to_dtype = _rounding(alphas.dtype)
    return np.array([_gamma_one(gen, a, to_dtype) for a in alphas.ravel().tolist()],
                    np.float64).reshape(alphas.shape)


def _gamma_one(gen, alpha: float, to_dtype) -> float:
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        scale *= (1.0 - _uniform_one(gen._bits)) ** to_dtype(1.0 / alpha)
        alpha = to_dtype(alpha + 1.0)
    d = to_dtype(alpha - _F32_THIRD)   # ATen subtracts the float 1.0f / 3.0f for every dtype
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = _normal_one(gen)
        y = 1.0 + c * x
        while y <= 0:
            x = _normal_one(gen)
            y = 1.0 + c * x
        v = y * y * y
        u = 1.0 - _uniform_one(gen._bits)
        xx = x * x
        if u < 1.0 - _F32_0331 * xx * xx or math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


def _fma(a, b, c) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (the product of two floats is exact in double)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(_F32)


def fma(a, b, c) -> np.ndarray:
    """``a * b + c`` with one rounding, as the FMA GCC makes of ATen's float loops: float32 through
    double; float64 from the exact product (Veltkamp-Dekker) and an exact sum (Knuth's TwoSum)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.dtype != np.float64:
        return _fma(a, b, c)
    p = a * b
    a_hi, b_hi = _split(a), _split(b)
    a_lo, b_lo = a - a_hi, b - b_hi
    p_err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo     # a * b == p + p_err
    s = p + c
    z = s - p
    s_err = (p - (s - z)) + (c - z)                                           # p + c == s + s_err
    return s + (s_err + p_err)


def _split(x: np.ndarray) -> np.ndarray:
    """The high 26 bits of each double (Veltkamp's split)."""
    t = x * 134217729.0   # 2**27 + 1
    return t - (t - x)


_LOG_P = tuple(map(_F32, (7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                          -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1)))
_MIN_NORMAL = np.array([0x00800000], np.int32).view(_F32)[0]


def _log_f32(x: np.ndarray) -> np.ndarray:
    """Cephes' float32 ``logf`` for x in (0, 1], as the AVX2 kernel evaluates it."""
    x = np.maximum(x, _MIN_NORMAL)
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(_F32) + _F32(1)
    x = ((bits & ~0x7F800000) | np.int32(0x3F000000)).view(_F32)          # mantissa in [0.5, 1)
    small = x < _F32(0.707106781186547524)
    x = (x - _F32(1)) + np.where(small, x, _F32(0))
    e = e - small.astype(_F32)
    z = x * x
    y = np.full_like(x, _LOG_P[0])
    for p in _LOG_P[1:]:
        y = _fma(y, x, p)
    y = y * x
    y = _fma(y, z, e * _F32(-2.12194440e-4))
    y = _fma(z, _F32(-0.5), y)
    return _fma(e, _F32(0.693359375), x + y)


def _sincos_f32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cephes' float32 ``sincosf`` for x >= 0, as the AVX2 kernel evaluates it."""
    j = (x * _F32(1.27323954473516)).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(_F32)
    for dp in (-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8):
        x = _fma(y, _F32(dp), x)
    z = x * x
    c = _fma(np.full_like(x, _F32(2.443315711809948E-005)), z, _F32(-1.388731625493765E-003))
    c = _fma(c, z, _F32(4.166664568298827E-002))
    c = _fma(c * z, z, -(z * _F32(0.5))) + _F32(1)
    s = _fma(np.full_like(x, _F32(-1.9515295891E-4)), z, _F32(8.3321608736E-3))
    s = _fma(s, z, _F32(-1.6666654611E-1))
    s = _fma(s * z, x, x)
    sine_poly = (j & 2) == 0
    sin, cos = np.where(sine_poly, s, c), np.where(sine_poly, c, s)
    return np.where((j & 4) != 0, -sin, sin), np.where((~(j - 2) & 4) != 0, -cos, cos)


_NO_TAIL = np.empty(0, _F32)   # a whole number of blocks draws no tail uniforms


def _normal_fill_avx2(bits, n: int, mean: np.float32, std: np.float32) -> np.ndarray:
    data = uniform(bits, n, np.dtype(_F32))
    tail = uniform(bits, 16, np.dtype(_F32)) if n % 16 else _NO_TAIL
    if kernels.enabled():   # the same arithmetic in one pass (kernels/normal.py)
        return kernels.loops("normal").fill_f32(data, tail, mean, std, np.empty_like(data))

    def fill(block):
        radius = np.sqrt(_F32(-2) * _log_f32(_F32(1) - block[:, :8]))
        sin, cos = _sincos_f32(_F32(2 * math.pi) * block[:, 8:])
        return np.concatenate([_fma(radius * cos, std, mean), _fma(radius * sin, std, mean)], 1)
    _blocks(data, tail, fill)
    return data

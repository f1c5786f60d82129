"""The 32-bit Mersenne Twister's words, drawn in numba from numpy's own ``MT19937`` state.

``core/cpu_stream.py`` turns twister words into PyTorch's numbers. numpy's ``random_raw`` hands out
one word per call of its C ``next_raw`` through a function pointer and widens each to uint64: 2.7 ns
a word on the project machine, most of ``randn(50176)``'s time and 0.13 ms of it (PyTorch 0.17 ms
for the whole draw). Here the state array is read and written where numpy keeps it
(``state_address``: 624 words, then the position as a C int), the twist and the tempering run as
flat loops LLVM vectorises, and the common draws (float32 uniforms, the 53-bit integers behind
double uniforms, a Bernoulli mask) are made in the same pass, so numpy's generator, its ``state``
and these loops always agree on the next word.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["words", "uniform_f32", "doubles53", "below53"]

_JIT = dict(cache=True, nogil=True, error_model="numpy")
_N, _M = 624, 397
_UPPER, _LOWER = np.uint64(0x80000000), np.uint64(0x7FFFFFFF)
_MATRIX_A = np.uint64(0x9908B0DF)
_B, _C = np.uint64(0x9D2C5680), np.uint64(0xEFC60000)
_ONE = np.uint64(1)
_S1, _S7, _S11, _S15, _S18, _S32 = (np.uint64(s) for s in (1, 7, 11, 15, 18, 32))
_LOW21 = np.uint64((1 << 21) - 1)


@njit(**_JIT, inline="always")
def _mix(key, i, j, k):
    """The twist of word ``i`` from words ``i`` and ``j`` (its successor) and ``k`` (397 on)."""
    y = (np.uint64(key[i]) & _UPPER) | (np.uint64(key[j]) & _LOWER)
    key[i] = np.uint64(key[k]) ^ (y >> _S1) ^ ((y & _ONE) * _MATRIX_A)


@njit(**_JIT)
def _twist(key):
    """Regenerate the 624 words in place (the standard order: later words read earlier new ones)."""
    for i in range(_N - _M):
        _mix(key, i, i + 1, i + _M)
    for i in range(_N - _M, _N - 1):
        _mix(key, i, i + 1, i + _M - _N)
    _mix(key, _N - 1, 0, _M - 1)


@njit(**_JIT, inline="always")
def _temper(w):
    y = np.uint64(w)
    y ^= y >> _S11
    y ^= (y << _S7) & _B
    y ^= (y << _S15) & _C
    return y ^ (y >> _S18)


@njit(**_JIT)
def words(key, out):
    """Fill uint32 ``out`` with the next words; ``key`` is the state (625 uint32: the words, then
    the position)."""
    pos = np.int64(key[_N])
    n = out.shape[0]
    i = 0
    while i < n:
        if pos >= _N:
            _twist(key)
            pos = 0
        m = min(_N - pos, n - i)
        for k in range(m):
            out[i + k] = _temper(key[pos + k])
        i += m
        pos += m
    key[_N] = pos


@njit(**_JIT)
def uniform_f32(key, out, low, scale, plain):
    """float32 uniforms: the low 24 bits of a word times ``2**-24`` (exact), then, unless ``plain``,
    ``x * scale + low`` in double rounded once to float32 (ATen's accumulate type)."""
    pos = np.int64(key[_N])
    n = out.shape[0]
    mask = np.uint64((1 << 24) - 1)
    unit = 2.0 ** -24
    i = 0
    while i < n:
        if pos >= _N:
            _twist(key)
            pos = 0
        m = min(_N - pos, n - i)
        if plain:
            for k in range(m):
                out[i + k] = np.float32(np.float64(_temper(key[pos + k]) & mask) * unit)
        else:
            for k in range(m):
                out[i + k] = np.float32(np.float64(_temper(key[pos + k]) & mask) * unit * scale + low)
        i += m
        pos += m
    key[_N] = pos


@njit(**_JIT)
def doubles53(key, out):
    """uint64 ``out``: the 53-bit integers behind double uniforms, each from two words (the first
    gives the high 21 bits)."""
    pair = np.empty(2 * out.shape[0], np.uint32)
    words(key, pair)
    for k in range(out.shape[0]):
        out[k] = ((np.uint64(pair[2 * k]) & _LOW21) << _S32) | np.uint64(pair[2 * k + 1])


@njit(**_JIT)
def below53(key, out, threshold):
    """bool ``out``: whether each double uniform's 53-bit integer is below ``threshold``
    (``bernoulli_(p)`` with ``threshold = p * 2**53``)."""
    pair = np.empty(2 * out.shape[0], np.uint32)
    words(key, pair)
    for k in range(out.shape[0]):
        out[k] = np.float64(((np.uint64(pair[2 * k]) & _LOW21) << _S32) | np.uint64(pair[2 * k + 1])) < threshold

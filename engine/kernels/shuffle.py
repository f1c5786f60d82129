"""Fisher-Yates over precomputed picks: ``randperm``'s swaps (``core/cpu_stream.permutation``), one
sequential pass that numpy cannot vectorise (each swap reads the last one's result); in Python it
was ~1 ms for a 6400-sample dataset's shuffle at every DataLoader pass."""
from __future__ import annotations

from numba import njit

__all__ = ["fisher_yates"]


@njit(cache=True, nogil=True)
def fisher_yates(out, picks):
    """Swap ``out[i]`` with ``out[i + picks[i]]`` for each ``i`` in order, in place."""
    for i in range(picks.shape[0]):
        j = i + picks[i]
        out[i], out[j] = out[j], out[i]

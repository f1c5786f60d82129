"""One fixture maker for tests that run at several intra-op thread counts: tapelab and torch both set to
the parametrised count (conftest's autouse fixture restores both after each test)."""
from __future__ import annotations

from collections.abc import Sequence

import pytest


def thread_counts(counts: Sequence[int], *, loops: bool = False, ids=None):
    """A ``threads`` fixture over ``counts``; with ``loops`` the eager kernels' numba loops are switched on
    too (conftest restores that switch as well)."""
    @pytest.fixture(params=list(counts), ids=ids)
    def threads(request):
        import tapelab
        import torch
        if loops:
            from tapelab import kernels
            kernels.set_enabled(True)
        tapelab.set_num_threads(request.param)
        torch.set_num_threads(request.param)
        return request.param
    return threads


def loops_at_one_thread():
    """An autouse fixture for tests that compare the eager kernels' loops with torch's bit for bit: both
    libraries at one thread (torch's vector loops split the work otherwise), skipped where the loops are off."""
    @pytest.fixture(autouse=True)
    def loops_at_one_thread():
        from tapelab import kernels
        import torch
        if not kernels.enabled():
            pytest.skip("the fused loops are off")
        torch.set_num_threads(1)
    return loops_at_one_thread

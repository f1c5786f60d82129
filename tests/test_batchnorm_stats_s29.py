"""Batch norm's running statistics updated on the arrays while nobody watches (``functional_core.
update_running_stats``, session 29): torch's floats over several steps and momenta, the same floats and
version counts as the in-place ops a watcher sees, and the ops themselves under a dispatch mode."""
from __future__ import annotations

import numpy as np
import torch

import tapelab
from tapelab.utils._python_dispatch import TorchDispatchMode

RNG = np.random.default_rng(29)


class _Seen(TorchDispatchMode):
    """Records the names of the ops dispatched under it."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _steps(lib, xs, momentum, mode=None):
    bn = lib.nn.BatchNorm2d(6, momentum=momentum)
    versions = []
    for x in xs:
        if mode is None:
            bn(lib.tensor(x))
        else:
            with mode:
                bn(lib.tensor(x))
        versions.append((bn.running_mean._version, bn.running_var._version))
    return bn.running_mean.detach().numpy().copy(), bn.running_var.detach().numpy().copy(), versions


def test_running_statistics_are_torchs_and_the_watched_paths():
    xs = [(RNG.standard_normal((5, 6, 4, 3)) * (i + 1) + i).astype(np.float32) for i in range(4)]
    for momentum in (0.1, 0.3, 1.0):
        want = _steps(torch, xs, momentum)
        plain = _steps(tapelab, xs, momentum)
        seen = _Seen()
        watched = _steps(tapelab, xs, momentum, seen)
        for got in (plain, watched):
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        assert plain[2] == watched[2]                       # each write counted as the in-place ops count it
        assert seen.names.count("<op copy>") == len(xs) and seen.names.count("<op mul>") == 4 * len(xs)

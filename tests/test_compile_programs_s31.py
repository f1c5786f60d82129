"""``tapelab.compile`` where session 30 left it unlike ``torch.compile``: globals a module's ``forward``
reads are guarded, value guards compare as torch's (NaN equal to NaN, ``1`` unlike ``1.0``), and the
graph breaks of a data-dependent branch or ``.item()`` (against eager and PyTorch)."""
import math

import numpy as np
import pytest

import tapelab

torch = pytest.importorskip("torch")

GAIN = 1.0
TABLE = {"shift": 0.0}


class GlobalReader(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tapelab.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x) * GAIN + TABLE["shift"]


def test_globals_read_in_a_module_forward_are_guarded():
    global GAIN
    tapelab.manual_seed(0)
    m = GlobalReader()
    c = tapelab.compile(m)
    x = tapelab.randn(2, 4)
    try:
        for gain, shift in ((1.0, 0.0), (1.0, 0.0), (2.0, 0.0), (2.0, 5.0), (0.5, -1.0)):
            GAIN, TABLE["shift"] = gain, shift
            np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    finally:
        GAIN, TABLE["shift"] = 1.0, 0.0


class Inner(tapelab.nn.Module):
    def forward(self, x):
        return x * GAIN


class Outer(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) + 1.0


def test_globals_read_in_a_submodule_forward_are_guarded():
    global GAIN
    c = tapelab.compile(Outer())
    x = tapelab.ones(2)
    try:
        assert c(x).tolist() == [2.0, 2.0] and c(x).tolist() == [2.0, 2.0]
        GAIN = 3.0
        assert c(x).tolist() == [4.0, 4.0]
    finally:
        GAIN = 1.0


class NanScaled(tapelab.nn.Module):
    def __init__(self, value):
        super().__init__()
        self.fill = value

    def forward(self, x):
        return x.nan_to_num(nan=0.0) + 1.0 if math.isnan(self.fill) else x + self.fill


@pytest.mark.parametrize("fresh_object", [False, True])
def test_nan_attribute_keeps_its_entry(fresh_object):
    m = NanScaled(float("nan"))
    c = tapelab.compile(m)
    x = tapelab.ones(3)
    for _ in range(4):
        if fresh_object:
            m.fill = float("nan")          # a new NaN object each call: still the same value to a guard
        assert c(x).tolist() == [2.0, 2.0, 2.0]
    assert len(c._compiled.cache) == 1 and c._compiled.value_recompiles == 0
    m.fill = 2.0
    assert c(x).tolist() == [3.0, 3.0, 3.0] and c._compiled.value_recompiles == 1


def test_nan_global_and_closure_keep_their_entry():
    limit = [float("nan")]

    @tapelab.compile
    def f(x):
        return x + 1.0 if limit[0] != limit[0] else x

    x = tapelab.ones(2)
    for _ in range(4):
        limit[0] = float("nan")
        assert f(x).tolist() == [2.0, 2.0]
    assert len(f.cache) == 1 and f.value_recompiles == 0


def test_int_to_float_attribute_recompiles():
    class Mul(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x * self.k

    m = Mul()
    c = tapelab.compile(m)
    x = tapelab.arange(3)                 # int64: x * 2 stays int64, x * 2.0 is float32 (as torch)
    assert c(x).dtype == tapelab.int64 and c(x).dtype == tapelab.int64
    m.k = 2.0
    assert c(x).dtype == tapelab.float32 == m(x).dtype
    assert torch.arange(3).mul(2.0).dtype == torch.float32

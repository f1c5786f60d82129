"""Our float32 GEMM (engine/kernels/sgemm.py) runs every operand layout through one compiled body
(numba compiled one per layout, ~7 s each in a fresh install): C, F and strided operands, whole,
split and stacked, give the same floats as C-contiguous ones, and torch's values."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tapelab import kernels

pytest.importorskip("numba")   # the [jit] extra

SG = kernels.loops("sgemm")


def _reference(a, b):
    return torch.from_numpy(np.ascontiguousarray(a)).double().mm(torch.from_numpy(np.ascontiguousarray(b)).double()).numpy()


@pytest.mark.parametrize("m,k,n", [(20, 64, 200), (37, 300, 45), (64, 96, 128)])
def test_layouts_share_the_floats_and_one_compiled_body(m, k, n):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = np.empty((m, n), np.float32)
    SG.matmul_into(a, b, want)
    np.testing.assert_allclose(want, _reference(a, b), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    wide_b = np.zeros((k, n + 7), np.float32)
    wide_b[:, :n] = b
    wide_out = np.zeros((m, n + 3), np.float32)
    layouts = {
        "F a": (np.asfortranarray(a), b, np.empty((m, n), np.float32)),
        "strided b": (a, wide_b[:, :n], np.empty((m, n), np.float32)),
        "strided out": (a, b, wide_out[:, :n]),
    }
    for name, (x, y, out) in layouts.items():
        for parts in (1, 2):
            out[...] = np.nan
            SG.matmul_into(x, y, out, parts=parts)
            assert np.array_equal(out, want), (name, parts)


def test_stacks_share_the_floats_and_one_compiled_body():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 24, 40)).astype(np.float32)
    b = rng.standard_normal((3, 40, 50)).astype(np.float32)
    want = np.empty((3, 24, 50), np.float32)
    SG.matmul_batch_into(a, b, want)
    for p in range(3):
        np.testing.assert_allclose(want[p], _reference(a[p], b[p]), rtol=1e-4, atol=1e-3)
        one = np.empty((24, 50), np.float32)
        SG.matmul_into(a[p], b[p], one)
        assert np.array_equal(want[p], one)
    for x, y in ((a, np.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)),
                 (np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1), b)):
        for parts in (1, 2):
            out = np.full((3, 24, 50), np.nan, np.float32)
            SG.matmul_batch_into(x, y, out, parts=parts)
            assert np.array_equal(out, want), parts


# every layout, whole, split and stacked, in a process with an empty numba cache (a warm one loads
# the callers' code with the body linked in and compiles, so lists, nothing)
FRESH_PROCESS = """
import numpy as np
from tapelab import kernels
SG = kernels.loops("sgemm")
a, b = np.ones((20, 64), np.float32), np.ones((64, 200), np.float32)
for x, y, out in ((a, b, np.empty((20, 200), np.float32)), (np.asfortranarray(a), b, np.empty((20, 200), np.float32)),
                  (a, np.zeros((64, 207), np.float32)[:, :200], np.zeros((20, 203), np.float32)[:, :200])):
    for parts in (1, 2):
        SG.matmul_into(x, y, out, parts=parts)
for parts in (1, 2):
    SG.matmul_batch_into(np.ones((3, 20, 64), np.float32), np.ones((3, 64, 200), np.float32), np.empty((3, 20, 200), np.float32), parts=parts)
print(len(SG._sgemm_part.signatures))
"""


def test_one_compiled_body_for_every_layout(tmp_path, empty_cache_compiles):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "1"

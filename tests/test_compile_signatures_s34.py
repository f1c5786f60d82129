"""A kernel that other kernels call is compiled once: the numbers its callers pass are int64, not
literals (numba types a written ``0`` or ``4`` as ``Literal[int]``, a signature of its own, ~0.3-0.8 s
of compile each in a fresh install). A fresh process in an empty numba cache runs every caller of
sum_order's and batchnorm's shared kernels, checks column sums and the batch
norm output bit for bit against torch, and counts the compiled bodies."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tapelab import kernels

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="the shared kernels are numba loops")

FRESH_PROCESS = r'''
import importlib
import numpy as np
import torch
import tapelab

so = importlib.import_module("tapelab.kernels.sum_order")
bn = importlib.import_module("tapelab.kernels.batchnorm")
rng = np.random.default_rng(0)
torch.set_num_threads(1)
for rows, cols in ((64, 10), (64, 512), (1024, 128), (7, 3), (3000, 37), (40000, 3)):
    a = rng.standard_normal(rows * cols).astype(np.float32)
    want = torch.from_numpy(a).reshape(rows, cols)
    for threads in (1, 2):
        out = np.empty(cols, np.float32)
        so.column_sums(a, cols, threads, out)
        if threads == 1:
            assert np.array_equal(out, want.sum(0).numpy()), (rows, cols)
        out = np.empty(rows, np.float32)
        so.row_sums(a, cols, out)
        assert np.array_equal(out, [so.total(a[r * cols:(r + 1) * cols], 1) for r in range(rows)]), (rows, cols)
        so.total(a, threads)   # its floats against torch: tests/test_sum_order.py

# batch norm statistics of 24 channels: 16 side by side, then 8
x = rng.standard_normal((4, 24, 10)).astype(np.float32)
w, b = np.ones(24, np.float32), np.zeros(24, np.float32)
out, mean, var = np.empty_like(x), np.empty(24, np.float32), np.empty(24, np.float32)
bn.forward(x, w, b, 1e-5, out, mean, var)
want = torch.nn.functional.batch_norm(torch.from_numpy(x), None, None, training=True, eps=1e-5)
assert np.array_equal(out, want.numpy())

shared = [so._cascade, so._add_rows, so._ilp_sum, so._blocks, so._columns, so._row_sum, bn._vec_stats]
print(" ".join(f"{k.py_func.__name__}:{len(k.signatures)}" for k in shared))
'''


def test_shared_kernels_compile_once(tmp_path, empty_cache_compiles):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(item.split(":") for item in done.stdout.split())
    assert counts == {name: "1" for name in counts} and len(counts) == 7, counts

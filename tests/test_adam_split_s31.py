"""Adam's fused loops and their square root split over the threads above ATen's grain (``optim/_foreach.py``,
``kernels.vml.unary_split``), as PyTorch's per-op kernels split theirs: the same floats as PyTorch's AdamW
and as one thread's, and at one thread no numba thread started."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.kernels import vml

# under the grain (one call), in the pool's timed range, and over REGION_SPLIT_MIN (split untimed)
SHAPES = [(7, 5), (300, 130), (640, 384), (384,)]


def _adamw_run(lib, n_threads: int, steps: int = 3):
    lib.set_num_threads(n_threads)
    rng = np.random.default_rng(3)
    params = [lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in SHAPES]
    opt = lib.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                           {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                          lr=1e-2, betas=(0.9, 0.95))
    for _ in range(steps):
        for p in params:
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        opt.step()
    states = [opt.state[p] for p in params]
    return ([p.detach().numpy().copy() for p in params] + [s["exp_avg"].numpy().copy() for s in states]
            + [s["exp_avg_sq"].numpy().copy() for s in states])


def test_adamw_split_over_two_threads_is_pytorchs_and_one_threads_floats():
    pytest.importorskip("numba")
    before = torch.get_num_threads()
    try:
        two = _adamw_run(tapelab, 2)
        one = _adamw_run(tapelab, 1)
        reference = _adamw_run(torch, 2)
    finally:
        tapelab.set_num_threads(before)
        torch.set_num_threads(before)
    for got, alone, want in zip(two, one, reference):
        np.testing.assert_array_equal(got, alone)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size", [5, kernels.PARALLEL_MIN + 3, 3 * kernels.REGION_SPLIT_MIN + 1])
def test_split_square_root_is_one_vml_calls(size):
    """Every number of the split square root is the one-call VML result (``sqrt``'s forward), for a size
    under the grain, in the timed range and over the untimed split."""
    if not vml.available():
        pytest.skip("MKL's vector math is not installed")
    from tapelab.ops.elementwise import _sqrt_fwd
    before = torch.get_num_threads()
    tapelab.set_num_threads(2)
    try:
        a = np.random.default_rng(size).random(size, dtype=np.float32) * 1e3
        for _ in range(3):   # the pool's timed range runs each way
            np.testing.assert_array_equal(vml.unary_split("sqrt", a), _sqrt_fwd(np, a))
    finally:
        tapelab.set_num_threads(before)


SCRIPT = textwrap.dedent("""
    import numba.np.ufunc.parallel as numba_threads
    import tapelab
    tapelab.set_num_threads(1)
    p = tapelab.randn(640, 384, requires_grad=True)
    p.grad = tapelab.randn(640, 384)
    tapelab.optim.AdamW([p], lr=1e-3).step()
    print(numba_threads._is_initialized)
""")


def test_one_thread_adam_starts_no_numba_threads():
    """At one thread the split loops run as one call: no region, so numba's threads stay unstarted."""
    pytest.importorskip("numba")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "False", done.stdout

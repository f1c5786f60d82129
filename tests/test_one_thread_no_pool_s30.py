"""At one thread tapelab starts no threads of numba's: calling a ``parallel=True`` function starts them even
where its ``prange`` does not run, and with them the OpenMP runtime's team, which then ran torch's ops in the
same process on two threads after ``torch.set_num_threads(1)`` (bench/run.py's one-thread table read torch's
CNN, ResNet and LSTM steps 30-40% short). Linear's bias GEMM and attention's one-region forward and backward
take their one-part loops at one thread."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numba.np.ufunc.parallel as numba_threads
    import tapelab as torch
    from tapelab import kernels
    torch.set_num_threads(1)
    calls = kernels.loops("blas_call")
    x = torch.randn(1024, 128)
    lin = torch.nn.Linear(128, 128)
    q, k, v = (torch.randn(16, 4, 64, 32, requires_grad=True) for _ in range(3))
    lin(x).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    taken = [len(f.signatures) > 0 for f in (calls.sgemm_bias_whole, calls.sgemm_attention_whole,
                                             calls.sgemm_attention_backward_whole)]
    print(taken, numba_threads._is_initialized)
""")


def test_one_thread_steps_start_no_numba_threads():
    pytest.importorskip("numba")
    from tapelab.kernels import blas
    if not blas.available():
        pytest.skip("MKL's GEMM is not installed: the one-region paths do not run")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[True, True, True] False", done.stdout

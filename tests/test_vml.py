"""MKL's vector math (``kernels/vml.py``): with the ``mkl`` package installed, ``exp``, ``log``, ``sqrt``,
``sin``, ``tanh``, ``erf`` and the rest that PyTorch's cpu kernels run through VML give PyTorch's numbers
bit for bit in float32 and float64 (numpy's own functions differ in the last bit of up to 40%), also
in place, non-contiguous and inside the Adam step's denominator; without MKL the numpy forms stay."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tapelab
from tapelab.kernels import vml

pytestmark = pytest.mark.skipif(not vml.available(), reason="MKL's vector math is not installed (the [mkl] extra)")

RNG = np.random.default_rng(0)
DOMAINS = {"wide": RNG.standard_normal(4099) * 3, "unit": RNG.uniform(-1, 1, 4099),
           "positive": np.abs(RNG.standard_normal(4099)) * 3 + 1e-3}
FUNCTIONS = [("exp", "wide"), ("log", "positive"), ("log10", "positive"), ("log2", "positive"), ("sqrt", "positive"),
             ("sin", "wide"), ("cos", "wide"), ("tan", "wide"), ("asin", "unit"), ("acos", "unit"), ("atan", "wide"),
             ("tanh", "wide"), ("erf", "wide"), ("erfc", "wide"), ("erfinv", "unit")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,domain", FUNCTIONS, ids=[f for f, _ in FUNCTIONS])
def test_unary_ops_are_pytorchs_bit_for_bit(name, domain, dtype):
    x = DOMAINS[domain].astype(dtype)
    want = getattr(torch, name)(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(getattr(tapelab, name)(tapelab.tensor(x)).numpy(), want)
    # a strided view, a transposed matrix (the result keeps its layout), a small tensor, in place
    np.testing.assert_array_equal(getattr(tapelab, name)(tapelab.tensor(x)[::3]).numpy(), want[::3])
    m = tapelab.tensor(x[:4096]).reshape(64, 64).t()
    out = getattr(tapelab, name)(m)
    assert out.stride() == m.stride()
    np.testing.assert_array_equal(out.numpy(), want[:4096].reshape(64, 64).T)
    # below MIN_SIZE numbers numpy's function (a VML call costs more there): within its ulps
    tol = 3e-7 if dtype == "float32" else 1e-15
    np.testing.assert_allclose(getattr(tapelab, name)(tapelab.tensor(x[:5])).numpy(), want[:5], rtol=tol)
    t = tapelab.tensor(x)
    getattr(t, name + "_")()
    np.testing.assert_array_equal(t.numpy(), want)


def test_adam_steps_are_pytorchs_bit_for_bit():
    """PyTorch's single-tensor Adam divides by ``exp_avg_sq.sqrt()``, VML's square root at every size: the
    fused step takes it between its two loops, the numpy step in its formula."""
    for shape in ((96, 64), (10,)):   # a matrix, and a bias under VML's MIN_SIZE (still VML's root here)
        w0 = RNG.standard_normal(shape).astype(np.float32)
        grads = [RNG.standard_normal(shape).astype(np.float32) for _ in range(4)]
        for cls, kw in (("Adam", {}), ("AdamW", {"weight_decay": 0.01}), ("Adam", {"amsgrad": True})):
            pt, pl = torch.nn.Parameter(torch.tensor(w0)), tapelab.nn.Parameter(tapelab.tensor(w0))
            ot, ol = getattr(torch.optim, cls)([pt], lr=1e-3, **kw), getattr(tapelab.optim, cls)([pl], lr=1e-3, **kw)
            for g in grads:
                pt.grad, pl.grad = torch.tensor(g), tapelab.tensor(g)
                ot.step()
                ol.step()
            np.testing.assert_array_equal(pl.detach().numpy(), pt.detach().numpy())


def test_without_vml_the_numpy_functions_run():
    """``TAPELAB_VML=0`` (read at import) keeps the ops on numpy's functions."""
    code = ("import numpy as np, tapelab; from tapelab.kernels import vml; "
            "x = np.linspace(-80, 80, 4096, dtype=np.float32); "
            "assert not vml.available(); "
            "np.testing.assert_array_equal(tapelab.exp(tapelab.tensor(x)).numpy(), np.exp(x))")
    env = dict(os.environ, TAPELAB_VML="0")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)

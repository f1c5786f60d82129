"""Train-mode batch norm's numba loops (engine/kernels/batchnorm.py) agree with the numpy
formulas they replace and with PyTorch: output, batch statistics and the three gradients,
with and without the affine parameters, 2-D to 4-D (BatchNorm1d's (N, C, L) and BatchNorm2d)."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import kernels
from tapelab.nn import _ops

pytest.importorskip("numba")


@pytest.fixture
def loops_on():
    kernels.set_enabled(True)


@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (3, 6, 10), (2, 5, 1, 9)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_loops_match_numpy_formulas(shape, affine):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)     # an offset mean: centred sums matter
    g = rng.standard_normal(shape).astype(np.float32)
    c = shape[1]
    params = {"both": (rng.standard_normal(c), rng.standard_normal(c)), "weight": (rng.standard_normal(c),),
              "none": ()}[affine]
    params = tuple(p.astype(np.float32) for p in params)
    dims = (0,) + tuple(range(2, len(shape)))
    kw = dict(dims=dims, eps=1e-5, has_weight=affine != "none")
    res = []
    for on in (True, False):
        kernels.set_enabled(on)
        fwd = _ops._bn_fwd(np, x, *params, **kw)
        bwd = _ops._bn_grads_fwd(np, g, x, *params, **kw) if params else (_ops._bn_bwd_fwd(np, g, x, dims=dims,
                                                                                          eps=1e-5),)
        res.append(fwd + tuple(bwd))
    for got, ref in zip(*res):
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


@pytest.mark.parametrize("cls,shape", [(torch.nn.BatchNorm2d, (8, 4, 6, 6)), (torch.nn.BatchNorm1d, (8, 4, 12))])
def test_batchnorm_layer_with_loops_matches_torch(loops_on, cls, shape):
    """The layer's output, running statistics and input/weight/bias gradients, float32, against PyTorch."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    out = []
    for lib in (tapelab, torch):
        bn = getattr(lib.nn, cls.__name__)(shape[1])
        with (lib.no_grad()):
            bn.weight.copy_(lib.tensor(np.linspace(0.5, 1.5, shape[1], dtype=np.float32)))
            bn.bias.copy_(lib.tensor(np.linspace(-1, 1, shape[1], dtype=np.float32)))
        xt = lib.tensor(x, requires_grad=True)
        y = bn(xt)
        y.backward(lib.tensor(g))
        out.append([t.detach().numpy() for t in (y, bn.running_mean, bn.running_var, xt.grad, bn.weight.grad,
                                                 bn.bias.grad)])
    for got, ref in zip(*out):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(ref).max()))

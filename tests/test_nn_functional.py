"""nn.functional against PyTorch: conv/pool/unfold/interpolate/normalisation/softmax and friends,
gradcheck and gradgradcheck of the new primitives, and a performance sanity check."""
from __future__ import annotations


import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_layers import arr, close

TF = torch.nn.functional
LF = tl.nn.functional


def both(fn_name, *arrays, grad=True, tol=1e-9, **kwargs):
    """Run ``F.<fn_name>`` in both libraries; compare outputs and input gradients."""
    tin = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
           for a in arrays]
    lin = [tl.tensor(a, requires_grad=grad and a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
           for a in arrays]
    to, lo = getattr(TF, fn_name)(*tin, **kwargs), getattr(LF, fn_name)(*lin, **kwargs)
    close(lo, to, tol, fn_name)
    if grad and to.requires_grad:
        g = np.random.default_rng(2).standard_normal(tuple(to.shape))
        to.backward(torch.tensor(g))
        lo.backward(tl.tensor(g))
        for a, b in zip(lin, tin):
            if isinstance(b, torch.Tensor) and b.requires_grad:
                close(a.grad, b.grad, tol, f"{fn_name} grad")
    return lo, to


CASES = [
    ("conv2d", [(2, 4, 7, 6), (6, 2, 3, 2), (6,)], dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)),
    ("conv1d", [(2, 3, 9), (4, 3, 3)], dict(padding="same")),
    ("conv3d", [(1, 2, 5, 4, 4), (3, 2, 2, 3, 2)], dict(stride=(1, 2, 1), padding=(1, 0, 1))),
    ("conv_transpose2d", [(2, 4, 4, 3), (4, 3, 3, 3), (6,)], dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose1d", [(2, 3, 5), (3, 2, 3)], dict(stride=2, dilation=2)),
    ("max_pool1d", [(2, 3, 10)], dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool2d", [(2, 3, 7, 9)], dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), dilation=(1, 2))),
    ("avg_pool1d", [(2, 3, 10)], dict(kernel_size=4, stride=3, padding=2, count_include_pad=False,
                                       ceil_mode=True)),
    ("avg_pool2d", [(2, 3, 7, 9)], dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
    ("adaptive_avg_pool1d", [(2, 3, 11)], dict(output_size=4)),
    ("adaptive_avg_pool2d", [(2, 3, 7, 9)], dict(output_size=(4, 5))),
    ("unfold", [(2, 3, 7, 6)], dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2))),
    ("fold", [(2, 12, 16)], dict(output_size=(5, 6), kernel_size=2, stride=(1, 2), padding=(0, 1))),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(7, 9), mode="nearest")),
    ("interpolate", [(2, 3, 6, 8)], dict(scale_factor=0.5, mode="nearest")),
    ("interpolate", [(2, 3, 5, 4)], dict(scale_factor=1.7, mode="nearest")),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(7, 9), mode="bilinear", align_corners=False)),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(7, 3), mode="bilinear", align_corners=True)),
    ("interpolate", [(2, 3, 5, 4)], dict(scale_factor=2, mode="bilinear")),
    ("interpolate", [(2, 3, 5)], dict(size=8, mode="linear")),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(7, 9), mode="nearest-exact")),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(9, 7), mode="bicubic", align_corners=False)),
    ("interpolate", [(2, 3, 5, 4)], dict(size=(3, 7), mode="bicubic", align_corners=True)),
    ("interpolate", [(2, 3, 5, 4)], dict(scale_factor=1.7, mode="bicubic")),
    ("interpolate", [(2, 3, 9, 8)], dict(size=(4, 11), mode="bilinear", antialias=True)),
    ("interpolate", [(2, 3, 9, 8)], dict(size=(4, 3), mode="bilinear", antialias=True, align_corners=True)),
    ("interpolate", [(2, 3, 9, 8)], dict(scale_factor=0.5, mode="bicubic", antialias=True)),
    ("interpolate", [(2, 3, 9, 8)], dict(size=(12, 3), mode="bicubic", antialias=True)),
    ("interpolate", [(2, 3, 9, 8)], dict(size=(4, 5), mode="area")),
    ("interpolate", [(2, 3, 9)], dict(scale_factor=0.4, mode="area")),
    ("normalize", [(3, 4)], dict(p=2.0, dim=1)),
    ("normalize", [(3, 4, 2)], dict(p=1.0, dim=-1)),
    ("cosine_similarity", [(3, 5), (3, 5)], dict(dim=1)),
    ("cosine_similarity", [(4, 5), (1, 5)], dict(dim=-1)),
    ("linear", [(4, 3), (2, 3), (2,)], {}),
    ("bilinear", [(4, 3), (4, 2), (5, 3, 2), (5,)], {}),
    ("pad", [(2, 3, 4)], dict(pad=(1, 2, 0, 1), value=0.5)),
    ("pad", [(2, 3, 4)], dict(pad=(2, 1), mode="reflect")),
    ("softmax", [(3, 5)], dict(dim=-1)),
    ("log_softmax", [(3, 5, 2)], dict(dim=1)),
    ("gelu", [(3, 4)], dict(approximate="tanh")),
    ("leaky_relu", [(3, 4)], dict(negative_slope=0.3)),
    ("softplus", [(3, 4)], dict(beta=0.5, threshold=2.0)),
]


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_functional_matches_torch(i):
    name, shapes, kwargs = CASES[i]
    both(name, *[arr(*s) for s in shapes], **kwargs)


@pytest.mark.parametrize("fn,shape,arg", [("layer_norm", (3, 4, 5), (4, 5)), ("group_norm", (3, 6, 4), 3)])
def test_norm_functionals(fn, shape, arg):
    x, w, b = arr(*shape), arr(*((4, 5) if fn == "layer_norm" else (6,))), arr(*((4, 5) if fn == "layer_norm" else (6,)))
    tin = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    lin = [tl.tensor(a, requires_grad=True) for a in (x, w, b)]
    to = getattr(TF, fn)(tin[0], arg, tin[1], tin[2], eps=1e-3)
    lo = getattr(LF, fn)(lin[0], arg, lin[1], lin[2], eps=1e-3)
    close(lo, to)
    to.pow(3).sum().backward()
    lo.pow(3).sum().backward()
    for a, b in zip(lin, tin):
        close(a.grad, b.grad)


def test_batch_norm_functional_updates_running_stats():
    x = arr(6, 3, 4)
    for training in (True, False):
        rm_t, rv_t = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        rm_l, rv_l = tl.zeros(3, dtype=tl.float64), tl.ones(3, dtype=tl.float64)
        w, b = arr(3), arr(3)
        lo = LF.batch_norm(tl.tensor(x), rm_l, rv_l, tl.tensor(w), tl.tensor(b), training, 0.2, 1e-3)
        to = TF.batch_norm(torch.tensor(x), rm_t, rv_t, torch.tensor(w), torch.tensor(b), training, 0.2, 1e-3)
        close(lo, to)
        close(rm_l, rm_t)
        close(rv_l, rv_t)


def test_embedding_functional():
    w = arr(7, 3)
    idx = np.array([[0, 6, 2], [2, 2, 5]])
    lo, to = both("embedding", idx, w, padding_idx=2)
    with pytest.raises(IndexError):
        LF.embedding(tl.tensor([7]), tl.tensor(w))


def test_one_hot_and_dropout_exports():
    np.testing.assert_array_equal(LF.one_hot(tl.tensor([0, 2]), 3).numpy(), [[1, 0, 0], [0, 0, 1]])
    x = tl.ones(4)
    assert LF.dropout(x, 0.5, training=False) is x


def test_softmax_is_stable_for_large_inputs():
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4, -1e4]])
    close(LF.softmax(tl.tensor(x), dim=1), TF.softmax(torch.tensor(x), dim=1))
    close(LF.log_softmax(tl.tensor(x), dim=1), TF.log_softmax(torch.tensor(x), dim=1))


def test_softmax_implicit_dim_warns_like_torch():
    x = arr(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        lo = LF.softmax(tl.tensor(x))
    with pytest.warns(UserWarning):
        to = TF.softmax(torch.tensor(x))
    close(lo, to)


def test_softmax_dtype_argument():
    out = LF.softmax(tl.randn(2, 3), dim=1, dtype=tl.float64)
    assert out.dtype == tl.float64


def test_max_pool_with_indices_functional():
    x = arr(1, 2, 6, 7)
    lo, li = LF.max_pool2d(tl.tensor(x), 3, 2, 1, return_indices=True)
    to, ti = TF.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    close(lo, to)
    np.testing.assert_array_equal(li.numpy(), ti.numpy())


def test_fold_checks_block_count_like_torch():
    with pytest.raises(RuntimeError, match=r"calculated number of sliding blocks 4 \* 4 = 16, but got input.size\(2\)=12"):
        LF.fold(tl.randn(2, 12, 12), (5, 6), 2, stride=(1, 2), padding=(0, 1))


def test_interpolate_errors():
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        LF.interpolate(tl.randn(1, 1, 3, 3))
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear and bicubic modes"):
        LF.interpolate(tl.randn(1, 1, 3, 3), size=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
        LF.interpolate(tl.randn(1, 1, 3, 3), size=4, mode="nearest", align_corners=True)


# ---------------------------------------------------------------- second order
def _f64(*shape):
    return tl.tensor(arr(*shape), requires_grad=True)


PRIMITIVES = {
    "conv2d": (lambda x, w: LF.conv2d(x, w, stride=2, padding=1, dilation=(1, 2), groups=2),
               [(1, 4, 5, 6), (2, 2, 2, 3)]),
    "conv1d": (lambda x, w: LF.conv1d(x, w, padding="same"), [(2, 2, 5), (3, 2, 4)]),
    "conv_transpose2d": (lambda x, w: LF.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
                         [(1, 2, 3, 3), (2, 3, 3, 2)]),
    "max_pool2d": (lambda x: LF.max_pool2d(x, 3, 2, 1), [(1, 2, 5, 6)]),
    "avg_pool2d": (lambda x: LF.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                   [(1, 2, 5, 6)]),
    "adaptive_avg_pool2d": (lambda x: LF.adaptive_avg_pool2d(x, (2, 4)), [(1, 2, 5, 6)]),
    "unfold": (lambda x: LF.unfold(x, 2, padding=1, stride=2), [(1, 2, 4, 5)]),
    "fold": (lambda x: LF.fold(x, (3, 4), 2), [(1, 8, 6)]),
    "interpolate": (lambda x: LF.interpolate(x, scale_factor=1.5, mode="bilinear"), [(1, 2, 3, 4)]),
    "embedding": (lambda w: LF.embedding(tl.tensor([[1, 3, 1], [0, 2, 3]]), w), [(4, 3)]),
    "layer_norm": (lambda x, w: LF.layer_norm(x, (4,), w), [(3, 4), (4,)]),
    "cross_entropy": (lambda x: LF.cross_entropy(x, tl.tensor([1, 0, 2]), label_smoothing=0.1), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_gradcheck_and_gradgradcheck(name):
    fn, shapes = PRIMITIVES[name]
    inputs = tuple(_f64(*s) for s in shapes)
    assert tl.autograd.gradcheck(fn, inputs)
    assert tl.autograd.gradgradcheck(fn, inputs)


def test_conv_double_backward_matches_torch():
    x, w = arr(1, 2, 5, 5), arr(3, 2, 3, 3)
    grads = []
    for lib, F in ((torch, TF), (tl, LF)):
        tx, tw = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = F.conv2d(tx, tw, padding=1, stride=2)
        gx, = lib.autograd.grad(y.pow(2).sum(), tx, create_graph=True)
        gx.sum().backward()
        grads.append((gx.detach().numpy().copy(), tw.grad.numpy().copy(), tx.grad.numpy().copy()))
    for a, b in zip(*grads):
        close(a, b)

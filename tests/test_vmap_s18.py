"""vmap, session 18, against real ``torch.func``: jacrev/jacfwd/jvp/hessian batched inside vmap (and vmap
inside them), the batching rules of the ops researchers put under vmap (masks and index_put, attention,
convolutions with batched weights, normalisation, embedding, linalg, losses, scans, sorts), PyTorch's
errors inside vmap, and the per-sample gradients of a small CNN and Transformer."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.core.dispatch import Mode
from test_vmap_s17 import _close as _close_s17

RNG = np.random.default_rng(18)
X = RNG.standard_normal((6, 3))


def _np(t):
    if isinstance(t, dict):
        return {k: _np(v) for k, v in sorted(t.items())}
    if isinstance(t, (tuple, list)):
        return [_np(v) for v in t]
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, rtol=1e-7, atol=1e-9):
    _close_s17(a, b, rtol, atol)


class _Ops(Mode):
    """The names of the ops that reach the dispatcher below the vmap levels."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


# ---------------------------------------------------------------- 1. transforms inside vmap
def _transforms(m):
    F = m.func
    m.manual_seed(0)
    net = m.nn.Sequential(m.nn.Linear(3, 16), m.nn.Tanh(), m.nn.Linear(16, 2)).double()
    u = lambda x: net(x).sum()
    x = m.tensor(X)
    out = [F.vmap(F.jacrev(net))(x),
           F.vmap(F.jacfwd(lambda z: (z.sin() * z[0], (z ** 3).sum())))(x),
           F.vmap(F.hessian(u))(x),
           F.vmap(lambda p: m.trace(F.hessian(u)(p)))(x),   # a PINN's per-point Laplacian
           F.vmap(F.jacrev(F.jacrev(lambda z: (z ** 2).sum() * z.sin().sum())))(x),
           F.vmap(lambda p, t: F.jvp(net, (p,), (t,)))(x, x.cos()),
           F.vmap(lambda p: F.jvp(lambda z: z.exp() * z.sum(), (p,), (m.ones(3, dtype=m.float64),))[1])(x),
           F.jacrev(F.vmap(lambda z: (z * z.sum()).sin()))(x[:3]),
           F.hessian(lambda z: F.vmap(u)(z).sum())(x[:2]),
           F.vmap(F.jacrev(lambda a, b: a * b.sum(), argnums=(0, 1)))(x, x.exp()),
           F.vmap(F.jacrev(lambda w, z: (w * z).tanh()), in_dims=(None, 0))(x[0], x),
           F.vmap(F.jacrev(lambda z: (z.sin(), z.sum()), has_aux=True))(x),
           F.vmap(F.vmap(F.jacrev(lambda z: z.sin() * z.sum())))(x.reshape(2, 3, 3))]
    params = {k: v.detach() for k, v in net.named_parameters()}
    out.append(F.vmap(F.jacrev(lambda p, z: F.functional_call(net, p, (z,))), in_dims=(None, 0))(params, x))
    F.vmap(F.jacrev(net))(x).pow(2).sum().backward()   # the batched Jacobians stay on the module's graph
    out.append(net[0].weight.grad)
    return out


def test_jacobians_hessians_jvp_inside_vmap_as_torch():
    _close(_np(_transforms(tl)), _np(_transforms(torch)))


def test_hessian_inside_vmap_runs_batched():
    """vmap(hessian) differentiates every point in one pass per level: the ops run once, not once per point."""
    tl.manual_seed(0)
    net = tl.nn.Sequential(tl.nn.Linear(2, 16), tl.nn.Tanh(), tl.nn.Linear(16, 1))
    with _Ops() as seen, warnings.catch_warnings():
        warnings.simplefilter("error")
        tl.func.vmap(lambda p: tl.trace(tl.func.hessian(lambda z: net(z).sum())(p)))(tl.randn(64, 2))
    assert seen.names.count("tanh") == 1 and len(seen.names) < 120


# ---------------------------------------------------------------- 2. batching rules (no per-slice fallback)
def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


M5 = _f32(4, 5, 5)
SPD = (M5 @ M5.transpose(0, 2, 1) + 5 * np.eye(5)).astype(np.float32)
X3 = _f32(4, 3, 5)
IDX = RNG.integers(0, 5, (4, 3))
QKV = [_f32(4, 2, 3, 8) for _ in range(3)]
W5 = [1.0, 2.0, 3.0, 1.0, 0.5]


def _setitem(key, value):
    def f(x, *rest):
        u = x.clone()
        u[key(rest)] = value(rest)
        return u
    return f


RULES = {
    "index_put": (lambda m: lambda x, i, v: (x.index_put((m.tensor([0, 1]), i), v),
                                             x.index_put((m.tensor([2]),), m.tensor(1.0), accumulate=True)),
                  (X3, IDX[:, :2], _f32(4, 2))),
    "setitem_index_middle": (lambda m: _setitem(lambda r: (slice(None), m.tensor([0, 2])), lambda r: r[0]),
                             (X3, _f32(4, 3, 2))),
    "setitem_unbatched_value": (lambda m: _setitem(lambda r: (slice(None), m.tensor([0, 2])), lambda r: m.tensor(W5[:2])),
                                (X3,)),
    "setitem_batched_index": (lambda m: _setitem(lambda r: r[0], lambda r: 0.0), (X3[:, 0], IDX[:, :2])),
    "setitem_fixed_mask": (lambda m: _setitem(lambda r: m.tensor(X3[0] > 0), lambda r: -1.0), (X3,)),
    "fixed_mask_getitem": (lambda m: lambda x: (x[m.tensor(X3[0] > 0)], x[:, m.tensor([True, False, True, True, False])]),
                           (X3,)),
    "index_add_copy_fill": (lambda m: lambda x, s: (x.index_add(1, m.tensor([0, 2, 2]), s),
                                                    x.index_copy(1, m.tensor([4, 0, 1]), s),
                                                    x.index_fill(1, m.tensor([1]), -1.0)), (X3, _f32(4, 3, 3))),
    "masks": (lambda m: lambda x, k: (x.masked_fill(k, -1.0), m.where(k, x, x * 2), m.where(k, x, m.tensor(2.0))),
              (X3, X3[::-1] > 0)),
    "sdpa": (lambda m: lambda q, k, v: (m.nn.functional.scaled_dot_product_attention(q, k, v),
                                        m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                                        m.nn.functional.scaled_dot_product_attention(q, m.tensor(QKV[1][0]), m.tensor(QKV[2][0]))), QKV),
    "sdpa_batched_mask": (lambda m: lambda q, mask: m.nn.functional.scaled_dot_product_attention(
        q, q, q, attn_mask=mask), (QKV[0], QKV[1][:, 0, :, :3] > -0.5)),
    "attention_by_hand": (lambda m: lambda q, k, v: ((q @ k.transpose(-1, -2)) / 8 ** .5).softmax(-1) @ v, QKV),
    "conv2d_batched_weight": (lambda m: lambda x, w: (m.nn.functional.conv2d(x, w, padding=1),
                                                      m.nn.functional.conv2d(x[:, :1], w[:, :1], stride=2)),
                              (_f32(3, 2, 2, 6, 6), _f32(3, 4, 2, 3, 3))),
    "conv1d_groups_batched_weight": (lambda m: lambda x, w: m.nn.functional.conv1d(x, w, groups=2),
                                     (_f32(3, 2, 4, 7), _f32(3, 4, 2, 3))),
    "layer_norm_batched_affine": (lambda m: lambda x, w, b: (m.nn.functional.layer_norm(x, (5,), w, b),
                                                             m.nn.functional.layer_norm(x, (3, 5), None, b.expand(3, 5)),
                                                             m.nn.functional.layer_norm(x[0], (5,), w)),
                                  (X3, _f32(4, 5), _f32(4, 5))),
    "batch_norm_batch_stats": (lambda m: lambda x, w: (
        m.nn.functional.batch_norm(x, None, None, m.tensor([1., 2, 3]), m.tensor([0., 1, 0]), training=True),
        m.nn.functional.batch_norm(x, None, None, w, None, training=True)), (_f32(4, 5, 3, 2), _f32(4, 3))),
    "batch_norm_batched_running_stats": (lambda m: lambda x, rm, rv: (m.nn.functional.batch_norm(x, rm, rv, training=True),
                                                                      rm * 1, rv * 1),
                                         (_f32(4, 5, 3), _f32(4, 3), np.abs(_f32(4, 3)) + 1)),
    "embedding_batched_table": (lambda m: lambda w, i: (m.nn.functional.embedding(i, w),
                                                        m.nn.functional.embedding(m.tensor(IDX[0]), w)),
                                (_f32(4, 6, 3), IDX)),
    "linalg": (lambda m: lambda a, b: (m.linalg.solve(a, b), m.linalg.inv(a), m.linalg.det(a), m.linalg.slogdet(a)[1],
                                       m.linalg.cholesky(a), m.linalg.eigh(a)[0], m.linalg.eigvalsh(a),
                                       m.linalg.svdvals(a), m.linalg.norm(a), m.linalg.vector_norm(a, dim=-1),
                                       m.linalg.matrix_norm(a), m.linalg.qr(a)[1].abs(), m.linalg.pinv(a),
                                       m.linalg.lu_factor(a)[0]), (SPD, _f32(4, 5))),
    "losses": (lambda m: lambda x, t, p: (m.nn.functional.cross_entropy(x, t, weight=m.tensor(W5)),
                                          m.nn.functional.cross_entropy(x, t, weight=m.tensor(W5), ignore_index=2),
                                          m.nn.functional.cross_entropy(x, t, label_smoothing=0.2),
                                          m.nn.functional.cross_entropy(x, t, label_smoothing=0.2, reduction="none"),
                                          m.nn.functional.cross_entropy(x, p.softmax(-1), weight=m.tensor(W5)),
                                          m.nn.functional.nll_loss(x.log_softmax(-1), t, weight=m.tensor(W5))),
               (X3, IDX, X3[::-1].copy())),
    "scans_gather_sort": (lambda m: lambda x, i: (x.cumsum(0), x.cumprod(-1), m.logcumsumexp(x, 1), x.gather(1, i),
                                                  m.zeros(3, 5).scatter_add(1, i, x[:, :2]), x.sort(0).values,
                                                  x.topk(2, dim=0).values, x.prod(), x.repeat(2, 1), x.tile(2)),
                          (X3, np.tile(IDX[:, :, None], (1, 1, 2)))),
    "einsum_diag_unfold": (lambda m: lambda a, b, img: (m.einsum("bij,jk->bik", a, b), m.einsum("bij,bkj->bik", a, a),
                                                        m.diag(a[0, 0]), m.diag_embed(a[0]),
                                                        m.nn.functional.unfold(img, 2)),
                           (_f32(4, 2, 3, 5), _f32(4, 5, 2), _f32(4, 1, 2, 4, 4))),
    "searchsorted_eig_fft": (lambda m: lambda s, v, a: (m.searchsorted(s.sort().values, v), m.bucketize(v, m.tensor(W5[:3])),
                                                         m.searchsorted(s.sort().values, v[0]),
                                                         m.linalg.eigvals(a @ a.mT).real.sort().values,
                                                         m.fft.rfft(a).abs(), m.fft.fft2(a).real,
                                                         m.view_as_real(m.fft.fft(a))),
                             (_f32(4, 6), _f32(4, 2, 3), M5)),
}


@pytest.mark.parametrize("name", list(RULES))
def test_batching_rules_as_torch_without_fallback(name):
    make, arrays = RULES[name]
    got = {}
    for m in (tl, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if m is tl:
                warnings.filterwarnings("error", "There is a performance drop")
            got[m.__name__] = _np(m.func.vmap(make(m))(*[m.tensor(a) for a in arrays]))
    _close(got["tapelab"], got["torch"], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- 3. PyTorch's errors inside vmap
def _refusals(m):
    ones = m.ones(4, 3)

    def setitem_int(t):
        z = m.zeros(3)
        z[0] = t[0]
        return z

    def setitem_index(t):
        z = m.zeros(3)
        z[m.tensor([0, 1])] = t[:2]
        return z
    return {
        "backward": lambda t: t.sum().backward(),
        "autograd_grad": lambda t: m.autograd.grad(t.sum(), t),   # the output is named first, as torch's
        "item": lambda t: t.sum().item(),
        "float": lambda t: float(t[0]),
        "tolist": lambda t: t.tolist(),
        "control_flow": lambda t: t if t.sum() > 0 else -t,
        "randomness": lambda t: t + m.rand(3),
        "dropout": lambda t: m.nn.functional.dropout(t),
        "bool_mask_getitem": lambda t: t[t > 0],
        "bool_mask_setitem": lambda t: t.clone().__setitem__(t > 0, 1.0),
        "masked_select": lambda t: t.masked_select(t > 0),
        "unique": lambda t: t.unique(),
        "add_into_unbatched": lambda t: ones[0].add_(t),
        "mul_into_unbatched": lambda t: m.zeros(3).mul_(t),
        "copy_into_unbatched": lambda t: ones[0].copy_(t),
        "setitem_into_unbatched": setitem_int,
        "index_put_into_unbatched": setitem_index,
        "clamp_into_unbatched": lambda t: m.zeros(3).clamp_(min=t),
        "fill_into_unbatched": lambda t: m.zeros(3).fill_(t[0]),
        "batch_norm_running_stats": lambda t: m.nn.functional.batch_norm(t[None].repeat(2, 1), m.zeros(3), m.ones(3),
                                                                         training=True),
        "batch_norm_module": lambda t: m.nn.BatchNorm1d(3)(t[None].repeat(2, 1)),
    }


def test_refusals_inside_vmap_as_torch():
    x = X.astype(np.float32)[:4]
    seen = {}
    for m in (tl, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, f in _refusals(m).items():
                with pytest.raises(Exception) as info:
                    m.func.vmap(f)(m.tensor(x).requires_grad_(name == "backward"))
                seen.setdefault(name, []).append((info.type.__name__, str(info.value)))
    for name, (ours, theirs) in seen.items():
        assert ours == theirs, name


def test_linalg_errors_name_the_slice_as_torch():
    out = []
    for m in (tl, torch):
        a = m.eye(3).repeat(2, 1, 1)
        a[1] = 0
        for f in (m.linalg.inv, lambda z: m.linalg.solve(z, m.ones(3)), m.linalg.cholesky, m.linalg.lu_factor):
            with pytest.raises(RuntimeError) as info:
                m.func.vmap(f)(a)
            out.append(str(info.value))
    assert out[:4] == out[4:] and "(Batch element 1)" in out[0]


def test_backward_ops_batch_under_batched_cotangents():
    """``vmap(vjp_fn)`` (jacrev's recipe): the backward ops of a conv-relu-pool net, a Transformer encoder
    layer, an embedding and unbind run batched (convolution_transpose/_weight, max-pool, norm and
    embedding backwards, unbind's write-back), as torch's values."""
    def nets(m):
        m.manual_seed(0)
        yield m.nn.Sequential(m.nn.Conv2d(1, 3, 3), m.nn.ReLU(), m.nn.MaxPool2d(2), m.nn.Flatten(),
                              m.nn.Linear(12, 4)), (2, 1, 6, 6)
        yield m.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (1, 3, 8)
        yield (lambda z: m.nn.functional.embedding(m.tensor([[0, 2], [1, 1]]), z).sum(-1)), (3, 4)
        yield (lambda z: m.stack([r.sin() for r in z.unbind(1)], 0) * z.chunk(2, 0)[0].sum()), (2, 3)
    data = [RNG.standard_normal(shape).astype(np.float32) for _, shape in nets(tl)]
    got = {}
    for m in (tl, torch):
        for k, ((net, _), x) in enumerate(zip(nets(m), data)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if m is tl:
                    warnings.filterwarnings("error", "There is a performance drop")
                out, fn = m.func.vjp(net, m.tensor(x))
                n = out.numel()
                got[m.__name__, k] = _np(m.func.vmap(fn)(m.eye(n).reshape(n, *out.shape))[0])
                if k == 0:   # jacrev takes the same batched backward (its rows a vmap level of their own)
                    got[m.__name__, k, "jacrev"] = _np(m.func.jacrev(net)(m.tensor(x)))
    for key in got:
        if key[0] == "tapelab":
            _close(got[key], got[("torch",) + key[1:]], rtol=1e-4, atol=1e-5)

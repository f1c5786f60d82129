"""``vmap`` batches each op once for the whole batch (``core/batching.py``), against real ``torch.func``:
values and shapes of the batching rules (elementwise, reductions, views, matmul, linear, convolution,
losses), nested levels, ``in_dims``/``out_dims`` pytrees, ``chunk_size``, ``randomness``, composition with
``grad``/``vjp``/``jacrev`` in both orders (per-sample gradients, ensembles, batched Jacobians and
Hessians), the slow fallback's warning, in-place ops and PyTorch's errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.core import batching

RNG = np.random.default_rng(17)
X = RNG.standard_normal((4, 3, 5))
W = RNG.standard_normal((6, 5))


def _np(t):
    if isinstance(t, dict):
        return {k: _np(v) for k, v in t.items()}
    if isinstance(t, (tuple, list)):
        return type(t)(_np(v) for v in t)
    return t.detach().numpy() if hasattr(t, "detach") else t


def _close(a, b, rtol=1e-6, atol=1e-8):
    if isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            _close(a[k], b[k], rtol, atol)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol, atol)
    else:
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _both(make, *arrays, **kw):
    """``vmap(make(lib), **kw)`` on the arrays under tapelab and torch; returns both results as numpy."""
    out = []
    for lib in (tl, torch):
        out.append(_np(lib.func.vmap(make(lib), **kw)(*[lib.tensor(a) for a in arrays])))
    return out


class _Ops(batching.BatchMode.__base__):
    """Counts the ops that reach the dispatcher below vmap (one per op when batched, one per slice when not)."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, args, params):
        self.names.append(op.name)
        return super().dispatch(op, args, params)


CASES = {
    "elementwise": (lambda m: lambda x: (x.sin() * 2 + x.sum(0)).relu() - x.exp().clamp(0, 3), (X,), {}),
    "broadcast_unbatched": (lambda m: lambda x: x + m.tensor(W[0]) * m.tensor(2.0), (X,), {}),
    "where": (lambda m: lambda x: m.where(x > 0, x, x * 0.1), (X,), {}),
    "reductions": (lambda m: lambda x: (x.mean(), x.sum((0, 1)), x.amax(1), x.var(0), x.logsumexp(-1),
                                        x.norm(), x.std(1, keepdim=True)), (X,), {}),
    "dims": (lambda m: lambda x: (x.softmax(-1), m.nn.functional.log_softmax(x, 0), x.cumsum(1),
                                  x.argmax(1), x.max(1).values, x.sort(-1).values, x.topk(2).indices), (X,), {}),
    "views": (lambda m: lambda x: (x.t().reshape(-1)[2:7], x.unsqueeze(0).expand(2, 3, 5).permute(2, 0, 1)[..., 1],
                                   x[:, None, 1:].flatten(), x.transpose(0, 1).contiguous().view(5, 3)), (X,), {}),
    "cat_stack": (lambda m: lambda x, y: (m.cat([x, y], 1), m.stack([x, y], -1), m.cat([x, x * 2]).max(0).values),
                  (X, X * 3), {}),
    "linear_batched_weight": (lambda m: lambda x, w: m.nn.functional.linear(x, w, w[:, 0]),
                              (X, np.stack([W] * 4) * np.arange(1, 5)[:, None, None]), {}),
    "cross_entropy": (lambda m: lambda x, t: (m.nn.functional.cross_entropy(x, t),
                                              m.nn.functional.cross_entropy(x, t, reduction="sum"),
                                              m.nn.functional.cross_entropy(x, t, reduction="none"),
                                              m.nn.functional.nll_loss(x.log_softmax(-1), t, ignore_index=1)),
                      (X, RNG.integers(0, 5, (4, 3))), {}),
    "losses": (lambda m: lambda x, y: (m.nn.functional.mse_loss(x, y), m.nn.functional.mse_loss(x, y, reduction="sum"),
                                       m.nn.functional.binary_cross_entropy_with_logits(x, y.sigmoid())),
               (X, X[::-1].copy()), {}),
    "conv": (lambda m: lambda x, w: (m.nn.functional.conv1d(x, w), m.nn.functional.conv1d(x, w[0:1].expand(4, 3, 2))),
             (RNG.standard_normal((3, 2, 3, 7)), RNG.standard_normal((3, 4, 3, 2))), {}),
    "pooling": (lambda m: lambda x: (m.nn.functional.max_pool2d(x, 2), m.nn.functional.avg_pool2d(x, 2),
                                     m.nn.functional.max_pool2d(x, 3, 1, 1), m.nn.functional.max_pool1d(x[0], 2)),
                (RNG.standard_normal((3, 2, 2, 6, 6)),), {}),
    "advanced_indexing": (lambda m: lambda t, k: (t[:, k], t[m.tensor([0, 2]), k], t[..., k], t[1, :, k],
                                                 t[m.tensor([0, 2]), k, 1:], t[:, :, m.tensor([1, 0])]),
                          (RNG.standard_normal((4, 3, 5, 6)), RNG.integers(0, 5, (4, 2))), {}),
    "layer_norm_embedding": (lambda m: lambda x, i: (m.nn.functional.layer_norm(x, (5,)),
                                                     m.nn.functional.embedding(i, m.tensor(W))),
                             (X, RNG.integers(0, 6, (4, 3))), {}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rules_against_torch(name):
    make, arrays, kw = CASES[name]
    ours, theirs = _both(make, *arrays, **kw)
    _close(ours, theirs)


def test_matmul_rules_every_rank_pair():
    a3, m2, v1 = X, RNG.standard_normal((4, 5, 2)), RNG.standard_normal((4, 5))
    for f in (lambda a, b, c: a @ b, lambda a, b, c: c @ b, lambda a, b, c: a @ c, lambda a, b, c: c @ c,
              lambda a, b, c: b.transpose(-1, -2) @ c):
        ours, theirs = _both(lambda m: f, a3, m2, v1)
        _close(ours, theirs)
    # one side batched only, the other given whole (in_dims None)
    for dims in ((0, None), (None, 0)):
        ours, theirs = _both(lambda m: lambda a, b: a @ b, X[0] if dims[0] is None else X,
                             m2[0] if dims[1] is None else m2, in_dims=dims)
        _close(ours, theirs)


def test_ops_run_once_for_the_batch():
    """The batched run reaches the dispatcher with one op per op, not one per slice."""
    x = tl.tensor(RNG.standard_normal((64, 32)).astype(np.float32))
    with _Ops() as seen:
        tl.func.vmap(lambda t: (t.sin() @ tl.ones(32, 8)).softmax(-1).sum())(x)
    assert seen.names.count("sin") == 1 and seen.names.count("softmax") == 1 and "stack" not in seen.names


def test_per_sample_gradients_as_torch():
    def run(m):
        m.manual_seed(0)
        model = m.nn.Sequential(m.nn.Linear(8, 16), m.nn.Tanh(), m.nn.Linear(16, 3))
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss_fn(p, x, y):
            out = m.func.functional_call(model, p, (x.unsqueeze(0),))
            return m.nn.functional.cross_entropy(out, y.unsqueeze(0))
        x = m.tensor(RNG_X)
        y = m.tensor(RNG_Y)
        g = m.func.vmap(m.func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
        gv = m.func.vmap(m.func.grad_and_value(loss_fn), in_dims=(None, 0, 0))(params, x, y)
        return g, gv
    (g1, gv1), (g2, gv2) = run(tl), run(torch)
    _close(_np(g1), _np(g2), rtol=1e-5, atol=1e-6)
    _close(_np(gv1), _np(gv2), rtol=1e-5, atol=1e-6)
    assert tuple(g1["0.weight"].shape) == (10, 16, 8)


RNG_X = RNG.standard_normal((10, 8)).astype(np.float32)
RNG_Y = RNG.integers(0, 3, 10)


def test_ensemble_and_backward_through_vmap():
    def run(m):
        m.manual_seed(1)
        models = [m.nn.Sequential(m.nn.Linear(5, 7), m.nn.ReLU(), m.nn.Linear(7, 2)) for _ in range(3)]
        params, buffers = m.func.stack_module_state(models)
        base = models[0]
        x = m.tensor(X[0].astype(np.float32))
        out = m.func.vmap(lambda p, b, x: m.func.functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(
            params, buffers, x)
        out.square().sum().backward()
        xs = m.tensor(X[:3].astype(np.float32))
        out2 = m.func.vmap(lambda p, b, x: m.func.functional_call(base, (p, b), (x,)))(params, buffers, xs)
        return out, params["0.weight"].grad, out2
    _close(_np(run(tl)), _np(run(torch)), rtol=1e-5, atol=1e-6)


def test_batched_jacobians_hessians_and_vjp():
    def run(m):
        f = lambda x: (x.sin() * x[0], (x ** 3).sum())
        xs = m.tensor(X[:, 0])
        jac = m.func.vmap(m.func.jacrev(f))(xs)
        hes = m.func.vmap(m.func.hessian(lambda x: (x ** 3).sum() * x[1]))(xs)
        out, vjp_fn = m.func.vjp(lambda x: x.sin() * 2, xs[0])
        rows = m.func.vmap(vjp_fn)(m.eye(5, dtype=m.float64))
        per = m.func.vmap(lambda x, c: m.func.vjp(lambda z: z.exp() * z.sum(), x)[1](c))(xs, xs.cos())
        g_outside = m.func.grad(lambda w: m.func.vmap(lambda x: (x * w).sin().sum())(xs).sum())(xs[0])
        return jac, hes, rows, per, g_outside
    _close(_np(run(tl)), _np(run(torch)))


def test_nested_vmap_and_grad_of_grad():
    def run(m):
        a, b = m.tensor(X), m.tensor(X[:, 0])
        nested = m.func.vmap(m.func.vmap(lambda x, y: (x * y).sum() + x.softmax(0)[0], in_dims=(0, None)))(a, b)
        inner_out = m.func.vmap(lambda x: m.func.vmap(lambda r: r @ x)(a[0]), out_dims=1)(a[1])
        second = m.func.vmap(m.func.grad(m.func.grad(lambda x: x.sin() * x)))(b[:, 0])
        per = m.func.vmap(m.func.vmap(m.func.grad(lambda w, x: (w * x).sum() ** 2), in_dims=(None, 0)),
                          in_dims=(0, None))(b, a[0])
        return nested, inner_out, second, per
    _close(_np(run(tl)), _np(run(torch)))


def test_in_dims_out_dims_trees_and_chunks():
    def f(d, s):
        return {"a": d["x"] * s, "b": (d["x"].sum(), d["y"] @ d["y"])}
    a, y = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 4))

    def run(m, chunk):
        return m.func.vmap(f, in_dims=({"x": 0, "y": 1}, None), out_dims={"a": 1, "b": (0, 0)},
                           chunk_size=chunk)({"x": m.tensor(a), "y": m.tensor(y)}, m.tensor(2.0))
    for chunk in (None, 1, 3):
        _close(_np(run(tl, chunk)), _np(run(torch, chunk)))
    ours, theirs = _both(lambda m: lambda x: (x, m.ones(2), m.ones(3)), X, in_dims=2, out_dims=(-1, 0, None))
    _close(ours, theirs)


def test_randomness():
    x = tl.tensor(X)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        tl.func.vmap(lambda t: t + tl.randn(5))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        tl.func.vmap(lambda t: tl.nn.functional.dropout(t, 0.5))(x)
    with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
        tl.func.vmap(lambda t: tl.bernoulli(t.sigmoid()), randomness="same")(x)
    with pytest.raises(RuntimeError, match="different inplace randomness on an unbatched tensor"):
        tl.func.vmap(lambda t: tl.zeros(5).normal_() + t, randomness="different")(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        tl.func.vmap(lambda t: t, randomness="foo")
    tl.manual_seed(0)
    same = tl.func.vmap(lambda t: t * 0 + tl.randn(3, 5), randomness="same")(x)
    diff = tl.func.vmap(lambda t: t * 0 + tl.randn(3, 5), randomness="different")(x)
    assert tuple(same.shape) == tuple(diff.shape) == (4, 3, 5)
    assert (same == same[0]).all() and not (diff == diff[0]).all()
    drop = tl.func.vmap(lambda t: tl.nn.functional.dropout(tl.ones_like(t), 0.5), randomness="same")(x)
    assert (drop == drop[0]).all() and set(np.unique(drop.numpy())) <= {0.0, 2.0}
    inplace = tl.func.vmap(lambda t: t.clone().normal_(), randomness="same")(x)
    assert (inplace == inplace[0]).all()
    inplace = tl.func.vmap(lambda t: t.clone().uniform_(), randomness="different")(x)
    assert not (inplace == inplace[0]).all()


def test_fallback_warns_as_torch_and_computes_per_slice():
    def make(m):
        return lambda t: m.histc(t, bins=4, min=-2, max=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours, theirs = _both(make, X)
    _close(ours, theirs)
    assert any("There is a performance drop because we have not yet implemented the batching rule for aten::histc"
               in str(w.message) and w.category is UserWarning for w in caught)


def test_inplace_on_batched_values():
    def make(m):
        def f(t):
            u = t.clone()
            u.add_(1).mul_(t)
            u[0] = 0.5
            return u
        return f
    ours, theirs = _both(make, X)
    _close(ours, theirs)

    def views(m):   # in-place views change the batched value's own shape
        def f(t):
            u = t.clone()
            u.unsqueeze_(0)
            u.transpose_(1, 2)
            return u * 2, t[:, None].clone().squeeze_()
        return f
    ours, theirs = _both(views, X)
    _close(ours, theirs)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        tl.func.vmap(lambda t: tl.zeros(3, 5).add_(t))(tl.tensor(X))


def test_errors_as_torch():
    x = tl.tensor(X)
    for lib in (tl, torch):
        t = lib.tensor(X)
        with pytest.raises(RuntimeError, match=r"calling \.item\(\) on a Tensor"):
            lib.func.vmap(lambda v: v.sum().item())(t)
        with pytest.raises(RuntimeError, match="data-dependent control flow"):
            lib.func.vmap(lambda v: v if v.sum() > 0 else -v)(t)
        with pytest.raises(RuntimeError, match="dynamic shape"):
            lib.func.vmap(lambda v: v.nonzero())(t)
        with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
            lib.func.vmap(lambda v: v, out_dims=None)(t)
        with pytest.raises(ValueError, match="must only return Tensors, got type <class 'int'>"):
            lib.func.vmap(lambda v: 3)(t)
        with pytest.raises(ValueError, match="same size in the mapped dimension"):
            lib.func.vmap(lambda a, b: a + b)(t, lib.ones(5, 5))
        with pytest.raises(ValueError, match="expected in_dim to satisfy -3 <= in_dim < 3"):
            lib.func.vmap(lambda a: a, in_dims=3)(t)
        with pytest.raises(ValueError, match="expected `in_dims` to be int or a"):
            lib.func.vmap(lambda a: a, in_dims=None)(t)
        with pytest.raises(ValueError, match="not compatible with the structure of `inputs`"):
            lib.func.vmap(lambda a, b: a, in_dims=(0,))(t, t)
        with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
            lib.func.vmap(lambda a: a, chunk_size=0)
        with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
            lib.func.vmap(lib.func.grad(lambda v: v))(t)
    assert tuple(tl.func.vmap(lambda v: tl.ones(2))(x).shape) == (4, 2)


def test_per_sample_grads_faster_than_a_loop():
    """The batched run does ~20 ops for the whole batch; the per-slice loop did them 64 times."""
    import time
    tl.manual_seed(0)
    model = tl.nn.Sequential(tl.nn.Linear(32, 64), tl.nn.ReLU(), tl.nn.Linear(64, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(p, x, y):
        return tl.nn.functional.cross_entropy(tl.func.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))
    x, y = tl.randn(64, 32), tl.randint(0, 10, (64,))
    g = tl.func.vmap(tl.func.grad(loss_fn), in_dims=(None, 0, 0))
    g(params, x, y)
    start = time.perf_counter()
    g(params, x, y)
    batched = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(64):
        tl.func.grad(loss_fn)(params, x[i], y[i])
    assert batched < (time.perf_counter() - start) / 2


def test_vmap_over_vjp_fn_batches_the_backward():
    """``vmap(vjp_fn)(eye)`` (jacrev's recipe) runs one backward pass with batched cotangents: Jacobians
    of an MLP, a conv net, layer norm + softmax, a loss and advanced indexing, as torch's."""
    def nets(m):
        m.manual_seed(0)
        yield m.nn.Sequential(m.nn.Linear(6, 8), m.nn.Tanh(), m.nn.Linear(8, 4), m.nn.ReLU()), (3, 6)
        yield m.nn.Sequential(m.nn.Conv1d(2, 3, 3), m.nn.GELU(), m.nn.Flatten(), m.nn.Linear(12, 5)), (2, 2, 6)
        yield m.nn.Sequential(m.nn.Linear(6, 8), m.nn.LayerNorm(8), m.nn.Softmax(-1)), (3, 6)
        yield (lambda z: m.nn.functional.cross_entropy(z, m.tensor([1, 0, 2]))), (3, 4)
        yield (lambda z: m.nn.functional.log_softmax(z * 2, 1)[:, 1:].sum(1) + z[m.tensor([0, 2])].exp().sum()), (3, 4)
    data = [RNG.standard_normal(shape).astype(np.float32) for _, shape in nets(tl)]
    got = {}
    for m in (tl, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k, ((net, _), x) in enumerate(zip(nets(m), data)):
                out, fn = m.func.vjp(net, m.tensor(x))
                n = out.numel()
                got[m.__name__, k] = m.func.vmap(fn)(m.eye(n).reshape(n, *out.shape))[0].detach().numpy()
    for k in range(len(data)):
        _close(got["tapelab", k], got["torch", k], rtol=1e-5, atol=1e-6)


def test_per_sample_grads_and_ensemble_of_a_cnn():
    def run(m):
        m.manual_seed(3)
        net = m.nn.Sequential(m.nn.Conv2d(1, 3, 3), m.nn.ReLU(), m.nn.Flatten(), m.nn.Linear(12, 2))
        params = {k: v.detach() for k, v in net.named_parameters()}
        x = m.tensor(RNG_IMG)
        y = m.tensor([0, 1, 1, 0, 1])

        def loss(p, xi, yi):
            return m.nn.functional.cross_entropy(m.func.functional_call(net, p, (xi[None],)), yi[None])
        per = m.func.vmap(m.func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
        m.manual_seed(4)
        nets = [m.nn.Sequential(m.nn.Conv2d(1, 3, 3), m.nn.Tanh(), m.nn.Flatten(), m.nn.Linear(12, 2))
                for _ in range(3)]
        stacked, bufs = m.func.stack_module_state(nets)
        out = m.func.vmap(lambda p, b: m.func.functional_call(nets[0], (p, b), (x,)))(stacked, bufs)
        out.pow(2).mean().backward()
        return per, out, stacked["0.weight"].grad, stacked["3.bias"].grad
    _close(_np(run(tl)), _np(run(torch)), rtol=1e-5, atol=1e-6)


RNG_IMG = RNG.standard_normal((5, 1, 4, 4)).astype(np.float32)


def test_promotion_zero_dim_values_and_modules_as_torch():
    """A batched 0-d operand promotes as the 0-d tensor it is (not its physical vector); 0-d values reduce,
    stack and index; argmax over all dims; eval-mode batch norm with its running statistics."""
    x32 = X[:, 0].astype(np.float32)

    def run(m):
        x = m.tensor(x32)
        bn = m.nn.BatchNorm1d(5)
        bn.eval()
        return (m.func.vmap(lambda r, s: r * s)(x, m.arange(4.0, dtype=m.float64)),
                m.func.vmap(lambda r, s: r + s)(m.arange(4), x[:, 0]),
                m.func.vmap(lambda r: (r.sum() * 2).sum())(x),
                m.func.vmap(lambda r: m.stack([r.sum(), r.max()]))(x),
                m.func.vmap(lambda r, i: r[i])(x, m.tensor([0, 1, 2, 4])),
                m.func.vmap(lambda r: r.clamp(min=0).argmax())(x),
                m.func.vmap(lambda r: bn(r[None]))(x))
    _close(_np(run(tl)), _np(run(torch)))


def test_inplace_ops_under_grad_inside_vmap():
    """Per-sample gradients through ``nn.ReLU(inplace=True)`` and in-place arithmetic on a batched value:
    the in-place result keeps its history (Mode.inplace), as torch's."""
    def run(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(4, 6), m.nn.ReLU(inplace=True), m.nn.Linear(6, 2))
        params = {k: v.detach() for k, v in net.named_parameters()}
        x = m.tensor(RNG_X[:5, :4])

        def loss(p, xi):
            return m.func.functional_call(net, p, (xi[None],)).square().sum()

        def f(t):
            u = t * 1
            u.mul_(2).add_(t.sin())
            return u.sum()
        return m.func.vmap(m.func.grad(loss), in_dims=(None, 0))(params, x), m.func.vmap(m.func.grad(f))(x)
    _close(_np(run(tl)), _np(run(torch)), rtol=1e-5, atol=1e-6)


def test_jacrev_runs_one_batched_backward_and_stays_differentiable():
    """jacrev (and autograd.functional.jacobian) take every row in one backward pass with the rows of an
    identity as batched cotangents, as torch's jacrev vmaps its vjp; recorded (create_graph) for a module
    whose parameters require grad, so a loss of the Jacobian or Hessian backpropagates into them."""
    def run(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(2, 8), m.nn.Tanh(), m.nn.Linear(8, 3))
        x = m.tensor(RNG_X[0, :2])
        jac = m.func.jacrev(net)(x)
        jac.pow(2).sum().backward()
        g1 = net[0].weight.grad.clone()
        net.zero_grad()
        hes = m.func.hessian(lambda z: net(z).sum())(x)
        hes.sum().backward()
        plain = m.autograd.functional.jacobian(lambda z: (z.sin() * z.sum()).tanh(), x.detach())
        return jac, g1, net[2].weight.grad, hes, net[0].weight.grad, plain
    _close(_np(run(tl)), _np(run(torch)), rtol=1e-5, atol=1e-6)
    with _Ops() as seen:
        tl.func.jacrev(lambda z: (z.tanh() @ tl.ones(40, 100)).sin())(tl.tensor(RNG_X[0, :4].repeat(10)))
    assert seen.names.count("tanh_backward") == 1 and len(seen.names) < 60   # not once per row (100 rows)

"""The fused eager loops (engine/kernels) compute what the ops' numpy formulas compute: float32
values and gradients of softmax, log_softmax, cross_entropy, layer_norm, gelu, relu and causal
attention within float32 rounding of the numpy path and of PyTorch, and the Adam/AdamW step bit
for bit. Each case runs once with the loops on and once off (``kernels.set_enabled``)."""
import zlib

import numpy as np
import pytest
import torch

import tapelab
import tapelab.nn.functional as F
from tapelab import kernels

pytest.importorskip("numba")   # the [jit] extra: without it the loops are off and the numpy path is the only one


def _case(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))     # the same data whichever tests run first
    x = rng.standard_normal((6, 5, 33)).astype(np.float32) * 3
    if name == "softmax":
        return [x], lambda m, a: m.nn.functional.softmax(a, dim=-1)
    if name == "log_softmax":
        return [x], lambda m, a: m.nn.functional.log_softmax(a, dim=-1)
    if name == "gelu":
        return [x], lambda m, a: m.nn.functional.gelu(a)
    if name == "gelu_tanh":
        return [x], lambda m, a: m.nn.functional.gelu(a, approximate="tanh")
    if name == "relu":
        x[0, 0, :3] = 0.0      # relu's gradient at 0 is 0
        return [x], lambda m, a: m.relu(a)
    if name == "layer_norm":
        w, b = rng.standard_normal(33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
        return [x, w, b], lambda m, a, w, b: m.nn.functional.layer_norm(a, (33,), w, b)
    if name == "layer_norm_plain":
        return [x], lambda m, a: m.nn.functional.layer_norm(a, (5, 33))
    if name == "cross_entropy":
        t = rng.integers(0, 33, 30)
        return [x.reshape(30, 33)], lambda m, a: m.nn.functional.cross_entropy(a, m.tensor(t))
    qkv = [rng.standard_normal((2, 3, 9, 8)).astype(np.float32) for _ in range(3)]
    causal = name == "attention_causal"
    return qkv, lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


CASES = ["softmax", "log_softmax", "gelu", "gelu_tanh", "relu", "layer_norm", "layer_norm_plain", "cross_entropy",
         "attention", "attention_causal"]


def _run(m, arrays, fn):
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    y = fn(m, *xs)
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(m.tensor(g))
    return [y.detach().numpy()] + [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_match_pytorch(name, loops):
    arrays, fn = _case(name)
    got = _run(tapelab, arrays, fn)
    want = _run(torch, arrays, fn)
    # gelu_tanh's gradient near x = -5 is 1 - t^2 with t within an ulp of -1, times x k (1 + 3 c x^2)
    # ~ 20: float32 leaves ~1e-6 there on any path
    atol = 5e-6 if name == "gelu_tanh" else 2e-6
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=atol)


@pytest.mark.parametrize("name", CASES)
def test_loops_agree_with_the_numpy_formulas(name):
    arrays, fn = _case(name)
    kernels.set_enabled(True)
    fused = _run(tapelab, arrays, fn)
    kernels.set_enabled(False)
    plain = _run(tapelab, arrays, fn)
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)   # 1 + tanh near -1 cancels: ulps of 1


def test_relu_keeps_nan_and_infinities():
    x = np.array([np.nan, -np.inf, np.inf, -1.0, 0.0, 2.5], np.float32)
    kernels.set_enabled(True)
    t = tapelab.tensor(x, requires_grad=True)
    y = tapelab.relu(t)
    y.backward(tapelab.ones(6))
    ref = torch.tensor(x, requires_grad=True)
    torch.relu(ref).backward(torch.ones(6))
    np.testing.assert_array_equal(y.detach().numpy(), torch.relu(ref).detach().numpy())
    np.testing.assert_array_equal(t.grad.numpy(), ref.grad.numpy())


def test_nan_and_inf_rows_behave_as_numpy():
    x = np.array([[0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [1.0, 2.0, 3.0]], np.float32)
    for f in (F.softmax, F.log_softmax):
        kernels.set_enabled(True)
        fused = f(tapelab.tensor(x), dim=1).numpy()
        kernels.set_enabled(False)
        plain = f(tapelab.tensor(x), dim=1).numpy()
        np.testing.assert_array_equal(np.isnan(fused), np.isnan(plain))
        np.testing.assert_allclose(fused[~np.isnan(fused)], plain[~np.isnan(plain)], rtol=1e-6)


CE_VARIANTS = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
               dict(ignore_index=2, reduction="none"), dict(weight=True), dict(weight=True, ignore_index=2),
               dict(label_smoothing=0.2), dict(label_smoothing=0.1, weight=True, ignore_index=2, reduction="sum"),
               dict(label_smoothing=0.3, reduction="none")]


@pytest.mark.parametrize("kw", CE_VARIANTS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "plain")
def test_cross_entropy_variants_match_pytorch(kw, loops):
    """(N, C) cross-entropy from logits, every reduction with ignored rows, class weights and label
    smoothing: loss and gradient against torch (the fused loops and the formulas). Row 3 has a -inf
    logit off its target (a masked class), row 4 a large one."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((40, 37)).astype(np.float32) * 3
    t = rng.integers(0, 37, 40)
    t[[1, 5, 9]] = 2
    x[3, (t[3] + 1) % 37] = -np.inf
    x[4, 0] = 80.0
    w = rng.uniform(0.2, 2.0, 37).astype(np.float32)
    (loss, grad), (want_loss, want_grad) = _class_loss_both("cross_entropy", x, t, w, kw)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-5, atol=1e-7)


def _class_loss_both(name: str, x, t, w, kw) -> list:
    """``(loss, x.grad)`` of ``nn.functional.<name>`` under tapelab and torch (``weight=`` in ``kw``
    marks that ``w`` is passed), backward from one fixed random cotangent; float32 checked."""
    res = []
    for m in (tapelab, torch):
        xt = m.tensor(x, requires_grad=True)
        args = dict(kw, weight=m.tensor(w)) if kw.get("weight") else kw
        loss = getattr(m.nn.functional, name)(xt, m.tensor(t), **args)
        g = np.random.default_rng(1).standard_normal(tuple(loss.shape)).astype(np.float32)
        loss.backward(m.tensor(g))
        res.append((loss.detach().numpy(), xt.grad.numpy()))
        assert res[-1][0].dtype == res[-1][1].dtype == np.float32
    return res


NLL_VARIANTS = [kw for kw in CE_VARIANTS if "label_smoothing" not in kw] + [dict(weight="zero", ignore_index=2)]


@pytest.mark.parametrize("kw", NLL_VARIANTS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "plain")
def test_nll_loss_variants_match_pytorch(kw, loops):
    """(N, C) float32 nll_loss of log-probabilities (the gather loop and the formulas): every
    reduction, ignored rows (one holding -inf at its target), class weights (one of 0);
    loss and gradient against torch."""
    rng = np.random.default_rng(23)
    x = rng.standard_normal((40, 37)).astype(np.float32) * 3
    t = rng.integers(0, 37, 40)
    t[[1, 5, 9]] = 2
    w = rng.uniform(0.2, 2.0, 37).astype(np.float32)
    if kw.get("weight") == "zero":
        w[t[7]] = 0.0
    x = np.log(np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True))
    x[5, 2] = -np.inf
    (loss, grad), (want_loss, want_grad) = _class_loss_both("nll_loss", x, t, w, kw)
    if "ignore_index" in kw or kw.get("weight") == "zero":
        np.testing.assert_array_equal(np.signbit(grad[5]), np.signbit(want_grad[5]))
    np.testing.assert_allclose(loss, want_loss, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-6, atol=0)


def test_cross_entropy_all_ignored_and_bad_target():
    """Every row ignored: the mean is 0/0 = nan and the gradient 0, as torch (nll_loss too, also
    over (N, C, d)); a target outside the classes raises IndexError on both paths."""
    x = np.random.default_rng(3).standard_normal((5, 20)).astype(np.float32)
    for on in (True, False):
        kernels.set_enabled(on)
        for f, xs in ((F.cross_entropy, x), (F.nll_loss, x), (F.nll_loss, x.reshape(5, 4, 5))):
            xt = tapelab.tensor(xs, requires_grad=True)
            loss = f(xt, tapelab.full((5,) + xs.shape[2:], -100, dtype=tapelab.int64))
            loss.backward()
            assert np.isnan(loss.item()) and not xt.grad.numpy().any()
        with pytest.raises(IndexError, match="Target 20 is out of bounds"):
            F.cross_entropy(tapelab.tensor(x), tapelab.tensor([0, 1, 20, 3, 4]))
    ref = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(ref, torch.full((5,), -100)).backward()
    assert not ref.grad.any()


@pytest.mark.parametrize("width", [3, 16, 37, 256])
def test_row_max_keeps_nan_and_inf_and_matches_torch(width):
    """The row max (compared as integer keys): a nan of either sign or an inf anywhere still decides
    the row, and softmax, log_softmax and causal attention agree with torch."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((9, width)).astype(np.float32) * 4
    x[1, width - 1] = np.nan
    x[2, width // 2] = np.nan
    x[3, width // 3] = np.inf
    x[4, :] = -np.inf
    x[5, width - 1] = 50.0             # the max in the tail (or the last lane)
    x[6, 7 % width] = 60.0             # the max in the last of the eight lanes
    x[7, width // 2] = np.array(0xFFC00000, np.uint32).view(np.float32)   # a nan with the sign bit set
    kernels.set_enabled(True)
    for f, tf in ((F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)):
        got, want = f(tapelab.tensor(x), dim=1).numpy(), tf(torch.tensor(x), dim=1).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=2e-6, atol=1e-7)
    q, k, v = (rng.standard_normal((2, 3, width, 8)).astype(np.float32) for _ in range(3))
    got = F.scaled_dot_product_attention(*map(tapelab.tensor, (q, k, v)), is_causal=True).numpy()
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=True).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt_name,kw", [("AdamW", dict(weight_decay=0.1, betas=(0.9, 0.95))),
                                         ("Adam", dict(weight_decay=0.01)), ("Adam", dict(betas=(0.3, 0.999))),
                                         ("AdamW", dict(weight_decay=0.0))])
def test_adam_step_is_bitwise_the_numpy_step(opt_name, kw):
    def train(on):
        old = kernels.set_enabled(on)
        try:
            rng = np.random.default_rng(2)
            ps = [tapelab.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
                  for s in ((7, 5), (5,), (3, 2, 4))]
            opt = getattr(tapelab.optim, opt_name)(ps, lr=1e-2, **kw)
            for i in range(4):
                for p in ps:
                    p.grad = tapelab.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                if i == 1:
                    ps[1].grad = None      # its step count falls behind the others'
                opt.step()
            return [p.detach().numpy().copy() for p in ps] + \
                [opt.state[p][k].numpy().copy() for p in ps for k in ("exp_avg", "exp_avg_sq")]
        finally:
            kernels.set_enabled(old)
    for a, b in zip(train(True), train(False)):
        np.testing.assert_array_equal(a, b)


def test_switch_leaves_other_dtypes_on_numpy():
    assert not kernels.use(np, np.zeros(3))                  # float64
    assert not kernels.use(np, np.zeros((3, 4), np.float32).T)  # not C-contiguous
    assert not kernels.use(object(), np.zeros(3, np.float32))   # not numpy's namespace


def test_row_blocks_on_two_threads_give_the_one_thread_values():
    """Above kernels.PARALLEL_MIN elements the loops split rows across threads (causal attention in
    blocks of whole query sets): each row is computed as on one thread, so the values are equal."""
    rng = np.random.default_rng(3)
    x = tapelab.tensor(rng.standard_normal((2100, 130)).astype(np.float32), requires_grad=True)
    q, k, v = (tapelab.tensor(rng.standard_normal((2, 10, 120, 16)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    w, b = (tapelab.tensor(rng.standard_normal(130).astype(np.float32)) for _ in range(2))

    def run():
        outs = [F.softmax(x, -1), F.log_softmax(x, -1), F.gelu(x), F.layer_norm(x, (130,), w, b),
                F.scaled_dot_product_attention(q, k, v, is_causal=True)]
        sum(o.sum() for o in outs).backward()
        res = [o.detach().numpy() for o in outs] + [t.grad.numpy() for t in (x, q, k, v)]
        for t in (x, q, k, v):
            t.grad = None
        return res

    assert min(x.numel(), 2 * 10 * 120 * 120) >= kernels.PARALLEL_MIN
    tapelab.set_num_threads(1)
    one = run()
    tapelab.set_num_threads(2)
    two = run()
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float", "dropout"])
def test_attention_backward_reuses_the_forward_weights(mask, loops):
    """Unwatched, attention keeps its weights for the backward (two ops); under a tape it is the one
    op that recomputes them. Same weights, same arithmetic: the gradients are equal bit for bit."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((2, 3, 7, 8)).astype(np.float32) for _ in range(3)]
    m = {"bool": rng.random((7, 7)) > 0.3, "float": rng.standard_normal((7, 7)).astype(np.float32)}.get(mask)
    gy = tapelab.tensor(rng.standard_normal((2, 3, 7, 8)).astype(np.float32))

    def run():
        xs = [tapelab.tensor(a, requires_grad=True) for a in arrays]
        mt = None if m is None else tapelab.tensor(m, requires_grad=mask == "float")
        tapelab.manual_seed(0)
        y = F.scaled_dot_product_attention(*xs, attn_mask=mt, is_causal=mask == "causal",
                                           dropout_p=0.3 if mask == "dropout" else 0.0)
        y.backward(gy)
        grads = [t.grad.numpy() for t in xs] + ([mt.grad.numpy()] if mask == "float" else [])
        return y, [y.detach().numpy()] + grads

    y, saved = run()
    assert y.grad_fn.op.name == "scaled_dot_product_attention_saved_weights"
    assert y.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"   # PyTorch's CPU node
    assert len(y.grad_fn.next_functions) == 3 + (mask in ("bool", "float")) + (mask == "dropout")   # none to the weights
    with tapelab.tape() as t:
        y, recomputed = run()
    assert y.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    assert [n.op for n in t.nodes].count("scaled_dot_product_attention") == 1
    for a, b in zip(saved, recomputed):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [16, 511, 512, 4096])
def test_tanh_backward_is_atens_bit_for_bit_below_and_above_the_loop_size(n):
    """``g * (1 - y*y)`` with ``1 - y*y`` rounded once, as ATen's tanh_backward: small tensors take numpy's
    float64 form, large ones the fused loop; both equal torch's kernel on the same ``g`` and ``y``."""
    import torch
    from tapelab.ops.elementwise import _tanh_bw_fwd
    rng = np.random.default_rng(n)
    y = np.tanh(rng.standard_normal(n).astype(np.float32) * 3).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    want = torch.ops.aten.tanh_backward(torch.tensor(g), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(_tanh_bw_fwd(np, g, y), want)

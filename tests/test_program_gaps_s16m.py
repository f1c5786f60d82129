"""Gaps found by running training-utility libraries unchanged under ``install_aliases()``
(pytorch-metric-learning, torch-optimizer, lion-pytorch, schedulefree, ema-pytorch, entmax,
pytorch-ignite, skorch), each checked against real torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _pair(shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    return a, b


# ---------------------------------------------------------------- in-place methods by keyword
@pytest.mark.parametrize("call", [
    lambda x, y: x.lerp_(end=y, weight=0.3),
    lambda x, y: x.lerp_(y, weight=0.7),
    lambda x, y: x.lerp_(y, weight=x.new_tensor(0.25)),
    lambda x, y: x.mul_(other=y),
    lambda x, y: x.abs_().pow_(exponent=2),
    lambda x, y: x.atan2_(other=y),
    lambda x, y: x.clamp_min_(min=0.1),
    lambda x, y: x.fmod_(other=2.0),
    lambda x, y: x.copysign_(other=y),
], ids=["lerp_end_weight", "lerp_weight", "lerp_tensor_weight", "mul_other", "pow_exponent", "atan2_other",
        "clamp_min_min", "fmod_other", "copysign_other"])
def test_inplace_method_takes_torch_keywords(call):
    """schedulefree's ``AdamWScheduleFree.eval()`` writes ``p.lerp_(end=z, weight=1 - 1/beta1)``;
    torch takes every in-place method's operands by their documented names."""
    a, b = _pair()
    want = call(torch.from_numpy(a.copy()), torch.from_numpy(b))
    got = call(tapelab.tensor(a.copy()), tapelab.tensor(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_inplace_method_refuses_unknown_keywords(m):
    """A misspelt or missing operand is torch's TypeError, not a failure inside the kernel."""
    x = m.ones(2)
    with pytest.raises(TypeError, match="lerp_"):
        x.lerp_(weight=0.5)
    with pytest.raises(TypeError, match="lerp_"):
        x.lerp_(x, 0.5, foo=1)
    assert x.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- pickling an optimizer a scheduler wraps
@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_optimizer_pickles_without_the_schedulers_step_wrapper(m):
    """skorch's ``NeuralNet.__getstate__`` pickles ``optimizer_`` (plain ``pickle``) and deepcopies
    nets; torch's ``Optimizer.__getstate__`` keeps only defaults, state and param_groups, so the
    copy's ``step`` is its own, not the scheduler's wrapper that steps the original."""
    import copy
    import pickle
    m.manual_seed(0)
    lin = m.nn.Linear(3, 2)
    opt = m.optim.Adam(lin.parameters(), lr=0.1)
    sched = m.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    lin(m.ones(1, 3)).sum().backward()
    opt.step()
    sched.step()
    before = lin.weight.detach().clone()
    dup = copy.deepcopy(opt)
    assert "step" not in vars(dup) and len(dup.state) == 2
    dup.param_groups[0]["params"] = [p.detach().clone().requires_grad_() for p in lin.parameters()]
    for p in dup.param_groups[0]["params"]:
        p.grad = m.ones_like(p)
    dup.step()
    assert m.equal(lin.weight, before)                  # the original's weights did not move
    again = pickle.loads(pickle.dumps(sched))
    assert again.get_last_lr() == [0.05] and again.optimizer.param_groups[0]["lr"] == 0.05
    again.step()
    assert again.get_last_lr() == [0.025]


# ---------------------------------------------------------------- optimizer hooks
@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_optimizer_step_hooks(m):
    """ema-pytorch's ``EMA.add_to_optimizer_post_step_hook`` calls ``optimizer.register_step_post_hook``;
    torch runs global then own pre-hooks with ``args`` holding the optimizer first, lets a pre-hook
    replace ``(args, kwargs)``, and runs own then global post-hooks."""
    from importlib import import_module
    optimizer_module = import_module(f"{m.__name__}.optim.optimizer")
    m.manual_seed(0)
    lin = m.nn.Linear(3, 2)
    opt = m.optim.SGD(lin.parameters(), lr=0.1)
    log = []
    own = [opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", a[0] is o, len(a), sorted(k)))),
           opt.register_step_post_hook(lambda o, a, k: log.append("post"))]
    glob = [optimizer_module.register_optimizer_step_pre_hook(lambda o, a, k: log.append("gpre")),
            optimizer_module.register_optimizer_step_post_hook(lambda o, a, k: log.append("gpost"))]
    try:
        opt.step()
    finally:
        for h in glob:
            h.remove()
    assert log == ["gpre", ("pre", True, 1, []), "post", "gpost"]
    for h in own:
        h.remove()

    def closure():
        opt.zero_grad()
        loss = lin(m.ones(1, 3)).sum()
        loss.backward()
        return loss
    with opt.register_step_pre_hook(lambda o, a, k: (a, {"closure": closure})):
        assert opt.step() is not None
    with opt.register_step_pre_hook(lambda o, a, k: 5):
        with pytest.raises(RuntimeError, match=r"new_kwargs\), but got 5"):
            opt.step()


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_optimizer_state_dict_hooks(m):
    """torch's optimizer state-dict hooks: a post-hook's dict replaces the result, a load pre-hook
    sees a shallow copy and may hand back the dict to load, the post-hook runs after loading."""
    opt = m.optim.SGD(m.nn.Linear(2, 1).parameters(), lr=0.1)
    log = []
    opt.register_state_dict_pre_hook(lambda o: log.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_state_dict_post_hook(lambda o, sd: log.append(sorted(sd)), prepend=True)
    sd = opt.state_dict()
    assert sorted(sd) == ["extra", "param_groups", "state"]
    assert log == ["pre", ["param_groups", "state"]]

    def drop_extra(o, d):
        d.pop("extra")
        log.append("lpre")
    opt.register_load_state_dict_pre_hook(drop_extra)
    opt.register_load_state_dict_post_hook(lambda o: log.append("lpost"))
    sd["param_groups"][0]["lr"] = 0.5
    opt.load_state_dict(sd)
    assert "extra" in sd and log[-2:] == ["lpre", "lpost"] and opt.param_groups[0]["lr"] == 0.5


# ---------------------------------------------------------------- LR schedulers
@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_reduce_lr_on_plateau_calls_reduce_lr_with_the_epoch(m):
    """ignite's ``ReduceLROnPlateauScheduler`` replaces ``scheduler._reduce_lr`` by a method taking
    ``epoch``; torch's ``step`` calls ``self._reduce_lr(epoch)``."""
    opt = m.optim.SGD([m.zeros(2, requires_grad=True)], lr=0.1)
    sched = m.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    sched.step(1.0)
    sched.step(2.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    called = []
    sched._reduce_lr = called.append
    sched.step(3.0)
    sched.step(4.0)
    assert called == [3, 4]


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_schedulers_fill_a_tensor_learning_rate_in_place(m):
    """torch's schedulers write a tensor ``lr`` with ``fill_`` (``_update_param_group_val``), so
    the tensor a caller (or a captured graph) holds follows the schedule."""
    opt = m.optim.SGD([m.zeros(2, requires_grad=True)], lr=m.tensor(0.1))
    held = opt.param_groups[0]["lr"]
    sched = m.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is held and held.item() == pytest.approx(0.05)
    plateau = m.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    plateau.step(1.0)
    plateau.step(2.0)
    assert opt.param_groups[0]["lr"] is held and held.item() == pytest.approx(0.005)


# ---------------------------------------------------------------- lerp / addcmul / addcdiv rounding
_ROUNDING_DTYPES = ["float32", "float16", "bfloat16"]


def _three(dtype: str, n: int = 4099):
    """Operands as torch and tapelab tensors of ``dtype`` (n not a multiple of any vector width)."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(n), 3 * rng.standard_normal(n), np.abs(rng.standard_normal(n)) + 0.1]
    ts = [torch.tensor(a, dtype=torch.float32).to(getattr(torch, dtype)) for a in arrays]
    ls = [tapelab.tensor(t.float().numpy()).to(getattr(tapelab, dtype)) for t in ts]
    return ts, ls


def _bits(t) -> np.ndarray:
    return t.float().numpy() if hasattr(t, "numpy") else t


@pytest.mark.parametrize("dtype", _ROUNDING_DTYPES)
@pytest.mark.parametrize("weight", [0.1, 0.7, 1 - 0.999, 0.999, 2 / 3, -0.3, 1.7, "tensor"])
def test_lerp_rounds_as_torchs_fused_multiply_add(dtype, weight):
    """ema-pytorch's ``ema.lerp_(p, 1 - decay)``, schedulefree's ``y.lerp_(z, ckp1)`` and Lion: torch's
    CPU lerp is ``fma(w or w - 1, end - start, start or end)`` in float32, rounded once; the
    product rounded first differed in the last bit of about a quarter of the elements."""
    (ta, tb, tc), (la, lb, lc) = _three(dtype)
    if weight == "tensor":
        tw, lw = (tc - 0.6) * 2, (lc - 0.6) * 2
    else:
        tw = lw = weight
    np.testing.assert_array_equal(_bits(la.lerp(lb, lw)), _bits(ta.lerp(tb, tw)))
    np.testing.assert_array_equal(_bits(la.clone().lerp_(lb, lw)), _bits(ta.clone().lerp_(tb, tw)))


@pytest.mark.parametrize("dtype", _ROUNDING_DTYPES + ["float64"])
@pytest.mark.parametrize("value", [1, 0.37, -0.01, 2])
def test_addcmul_and_addcdiv_round_as_torch(dtype, value):
    """Adam's ``exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)`` and
    ``p.addcdiv_(exp_avg, denom, value=-step_size)``: torch's addcmul is ``fma(value * t1, t2,
    input)`` (float32 opmath), its addcdiv ``input + (value * t1) / t2``. (float64 addcmul is a
    float64 fused multiply-add, left out.)"""
    (ta, tb, tc), (la, lb, lc) = _three(dtype)
    if dtype != "float64":
        np.testing.assert_array_equal(_bits(la.addcmul(lb, lc, value=value)), _bits(ta.addcmul(tb, tc, value=value)))
        np.testing.assert_array_equal(_bits(la.clone().addcmul_(lb[:1], lc, value=value)),
                                      _bits(ta.clone().addcmul_(tb[:1], tc, value=value)))
    np.testing.assert_array_equal(_bits(la.addcdiv(lb, lc, value=value)), _bits(ta.addcdiv(tb, tc, value=value)))
    np.testing.assert_array_equal(_bits(la[::2].clone().addcdiv_(lb[::2], lc[::2], value=value)),
                                  _bits(ta[::2].clone().addcdiv_(tb[::2], tc[::2], value=value)))


@pytest.mark.parametrize("alpha", [0.3, -0.01, 2.5, 2, -1e-3])
def test_add_and_sub_with_alpha_round_as_torchs_fused_multiply_add(alpha):
    """SGD's ``p.add_(grad, alpha=-lr)`` and torch-optimizer's many ``add_(x, alpha=...)``: torch's
    float32 kernel is ``fma(other, alpha, input)``, one rounding; the product rounded first (a
    ``mul`` then an ``add``) differed in the last bit of about one element in five."""
    (ta, tb, _), (la, lb, _) = _three("float32")
    for f in (lambda a, b: a.add(b, alpha=alpha), lambda a, b: a.clone().add_(b, alpha=alpha),
              lambda a, b: a.sub(b, alpha=alpha), lambda a, b: a.clone().sub_(b, alpha=alpha),
              lambda a, b: a[::2].add(b[::2], alpha=alpha), lambda a, b: a.add(b[:1], alpha=alpha)):
        np.testing.assert_array_equal(_bits(f(la, lb)), _bits(f(ta, tb)))
    np.testing.assert_array_equal(_bits(tapelab.rsub(la, lb, alpha=alpha)), _bits(torch.rsub(ta, tb, alpha=alpha)))


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_add_with_alpha_gradients_and_half_overflow(m):
    """The fused op's backward is torch's (``grad * alpha`` for ``other``); an ``alpha`` float16
    cannot hold is torch's RuntimeError."""
    x = m.tensor([1.0, 2.0], requires_grad=True)
    y = m.tensor([3.0, 4.0], requires_grad=True)
    x.add(y, alpha=0.5).sub(y, alpha=2.0).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and y.grad.tolist() == [-1.5, -1.5]
    h = m.ones(2, dtype=m.float16)
    with pytest.raises(RuntimeError, match="cannot be converted to type c10::Half without overflow"):
        h.add(h, alpha=1e6)
    assert m.arange(3).add(m.arange(3), alpha=3).tolist() == [0, 4, 8]


@pytest.mark.parametrize("name,kw", [("Adamax", dict(weight_decay=0.1)), ("SGD", dict(momentum=0.9, weight_decay=0.1)),
                                     ("SGD", dict(momentum=0.9, dampening=0.1, nesterov=False)),
                                     ("SGD", dict(momentum=0.9, nesterov=True)), ("ASGD", {})])
def test_optimizer_steps_equal_torch_bit_for_bit(name, kw):
    """Updates made of add(alpha)/lerp/addcmul/addcdiv/mul (no sqrt, whose last bit this machine's
    torch rounds its own way) equal torch's exactly with torch's fused rounding, on the array fast
    path and on the per-tensor path."""
    rng = np.random.default_rng(0)
    start = rng.standard_normal((67, 33)).astype(np.float32)
    grads = [rng.standard_normal((67, 33)).astype(np.float32) for _ in range(4)]
    results = []
    for lib, extra in ((torch, {}), (tapelab, {}), (tapelab, dict(foreach=False))):
        p = lib.tensor(start.copy(), requires_grad=True)
        opt = getattr(lib.optim, name)([p], lr=1e-2, **kw, **extra)
        for g in grads:
            p.grad = lib.tensor(g)
            opt.step()
        results.append(p.detach().numpy())
    np.testing.assert_array_equal(results[1], results[0])
    np.testing.assert_array_equal(results[2], results[0])


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_cuda_autocast_without_cuda_warns_with_torchs_words(m):
    """ignite's ``create_supervised_trainer(amp_mode='amp')`` enters ``autocast('cuda')`` on a cpu
    machine; torch warns "CUDA is not available or torch_xla is imported. Disabling autocast."."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with m.autocast("cuda") as ctx:
            assert not m.is_autocast_enabled("cuda")
    assert [str(w.message) for w in caught] == ["CUDA is not available or torch_xla is imported. Disabling autocast."]
    assert caught[0].category is UserWarning and ctx is not None


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_list_index_read_as_a_tuple_warns_as_torch(m):
    """pytorch-metric-learning's HistogramLoss reads ``mat[[anchors, positives]]``: torch takes the list
    as a tuple and warns each time, naming the caller's line; a plain list of ints does not warn."""
    import warnings
    x = m.arange(24.0).reshape(4, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        picked = x[[m.tensor([0, 1]), m.tensor([2, 3])]]
        x[[slice(None), 1]] = 0.0
        rows = x[[0, 2]]
    assert picked.tolist() == [2.0, 9.0] and x[:, 1].tolist() == [0.0] * 4 and tuple(rows.shape) == (2, 6)
    assert len(caught) == 2 and all(w.filename == __file__ and w.category is UserWarning for w in caught)
    assert str(caught[0].message).startswith("Using a non-tuple sequence for multidimensional indexing is deprecated")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("dim", [0, -1, None, (0, 2)])
def test_var_and_std_accumulate_in_float64_as_atens_welford(dtype, dim):
    """ema/metric code and ignite's metrics take ``x.var(0)``/``x.std(0)``: ATen's Welford reduction
    accumulates a float32 tensor in float64 and rounds once, so float32 arithmetic differed in the
    last bit of about half the variances. ``var_mean``'s variance too (its mean is Welford's, also
    float64)."""
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((33, 7, 20)) * 3 + 0.5).astype(np.float32)
    t = torch.tensor(data).to(getattr(torch, dtype))
    lt = tapelab.tensor(data).to(getattr(tapelab, dtype))
    for f in (lambda m, x: x.var(dim), lambda m, x: x.std(dim, correction=0), lambda m, x: m.var_mean(x, dim)[0],
              lambda m, x: m.std_mean(x, dim)[0]):
        np.testing.assert_array_equal(_bits(f(tapelab, lt)), _bits(f(torch, t)))


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_takes_torchs_matrix_product_path(mode):
    """pytorch-metric-learning's LpDistance calls ``torch.cdist``: with more than 25 rows (or when
    asked) torch computes ``|x|^2 - 2 x.y + |y|^2`` as one GEMM, so offset data's distance to itself
    is 0.125, not 0, and other distances move by ~1e-5 relative; the gradient is 0 where a distance
    is 0."""
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((30, 8)) * 10 + 100).astype(np.float32)
    weights = rng.standard_normal((30, 30)).astype(np.float32)
    got = []
    for m in (torch, tapelab):
        x = m.tensor(data, requires_grad=True)
        d = m.cdist(x, x, compute_mode=mode)
        (d * m.tensor(weights)).sum().backward()
        got.append((d.detach().numpy(), x.grad.numpy()))
    (td, tg), (ld, lg) = got
    assert np.array_equal(np.diagonal(ld) == 0, np.diagonal(td) == 0)
    np.testing.assert_allclose(ld, td, rtol=2e-7, atol=1e-6)   # torch's sqrt may be an ulp off here
    np.testing.assert_allclose(lg, tg, rtol=1e-4, atol=1e-3 * np.abs(tg).max())
    for m in (torch, tapelab):
        with pytest.raises(ValueError, match="bad is not a valid value for compute_mode"):
            m.cdist(m.ones(2, 2), m.ones(2, 2), compute_mode="bad")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("dim", [0, 1, None, (0, 2)])
def test_one_norm_and_cdist_add_in_sequence_as_aten(dtype, dim):
    """ATen's generic reduction loop (1- and p-norms, cdist's direct path) adds each output's terms
    one at a time in memory order (float16/bfloat16 in float32); numpy's pairwise sum differed in
    the last bit of most 1-norms and p=1 distances (pytorch-metric-learning's LpDistance(p=1))."""
    rng = np.random.default_rng(5)
    data = (rng.standard_normal((9, 40, 6)) * 2 + 0.3).astype(np.float32)
    t = torch.tensor(data).to(getattr(torch, dtype))
    lt = tapelab.tensor(data).to(getattr(tapelab, dtype))
    for ord_ in (1, 0.5):
        np.testing.assert_array_equal(_bits(tapelab.linalg.vector_norm(lt, ord_, dim=dim)),
                                      _bits(torch.linalg.vector_norm(t, ord_, dim=dim)))
    if dtype == "float32" and dim == 0:
        a, b = data[0], data[1, :30]
        np.testing.assert_array_equal(tapelab.cdist(tapelab.tensor(a), tapelab.tensor(b), p=1).numpy(),
                                      torch.cdist(torch.tensor(a), torch.tensor(b), p=1).numpy())
        np.testing.assert_allclose(   # p=2's squares add the same way; this machine's torch sqrt may be an ulp off
            tapelab.cdist(tapelab.tensor(a), tapelab.tensor(b), compute_mode="donot_use_mm_for_euclid_dist").numpy(),
            torch.cdist(torch.tensor(a), torch.tensor(b), compute_mode="donot_use_mm_for_euclid_dist").numpy(), rtol=2e-7)


@pytest.mark.parametrize("call", [lambda x: x.sum((0, -2)), lambda x: x.var((1, 1, 0, 0)),
                                  lambda x: x.amax((1, 0, 0, 1))])
def test_repeated_reduction_dims_are_named_as_aten(call):
    """A duplicated dim (``vector_norm(x, 2, (0, -2))`` met while probing norms) is torch's RuntimeError
    naming the first wrapped dim seen twice: "dim 0 appears multiple times in the list of dims"."""
    messages = []
    for m in (torch, tapelab):
        with pytest.raises(RuntimeError) as info:
            call(m.zeros(3, 4))
        messages.append(str(info.value))
    assert messages[1] == messages[0]

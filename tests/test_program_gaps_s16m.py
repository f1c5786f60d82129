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

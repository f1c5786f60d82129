"""tapelab.amp.GradScaler against torch.amp.GradScaler on the cpu: the scale trajectory, skipped
steps on an injected inf/nan gradient, parameters, unscale_ with clipping, state dicts, the
disabled pass-through and the misuse errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab

_W = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
_X = np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32)
_Y = np.random.default_rng(2).standard_normal((8, 3)).astype(np.float32)


def _train(m, steps=9, bad=(3, 6), clip=False, **scaler_kw):
    """SGD on a linear model; at the steps in ``bad`` one gradient entry is made inf (then nan)."""
    model = m.nn.Linear(5, 3)
    with m.no_grad():
        model.weight.copy_(m.tensor(_W))
        model.bias.zero_()
    opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = m.amp.GradScaler("cpu", **scaler_kw)
    x, y = m.tensor(_X), m.tensor(_Y)
    trail = []
    for step in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        scaler.scale(loss).backward()
        if step in bad:
            model.weight.grad[0, 0] = float("inf") if step == bad[0] else float("nan")
        if clip:
            scaler.unscale_(opt)
            m.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        scaler.step(opt)
        scaler.update()
        trail.append((scaler.get_scale(), scaler.state_dict().get("_growth_tracker"),
                      model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()))
    return trail, scaler


@pytest.mark.parametrize("clip", [False, True])
def test_scale_trajectory_and_parameters_match_torch(clip):
    got, _ = _train(tapelab, clip=clip, init_scale=2.0 ** 10, growth_interval=2)
    want, _ = _train(torch, clip=clip, init_scale=2.0 ** 10, growth_interval=2)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert got[3][0] == got[2][0] / 2            # the inf step backed off and skipped
    for (_, _, gw, gb), (_, _, ww, wb) in zip(got, want):
        np.testing.assert_allclose(gw, ww, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gb, wb, rtol=1e-5, atol=1e-6)


def test_skipped_step_leaves_parameters_unchanged():
    trail, _ = _train(tapelab, steps=4, bad=(3, 99), init_scale=8.0)
    np.testing.assert_array_equal(trail[3][2], trail[2][2])


def test_state_dict_roundtrip_like_torch():
    _, scaler = _train(tapelab, steps=5, init_scale=2.0 ** 10, growth_interval=3)
    _, reference = _train(torch, steps=5, init_scale=2.0 ** 10, growth_interval=3)
    assert scaler.state_dict() == reference.state_dict()
    fresh = tapelab.amp.GradScaler("cpu")
    fresh.load_state_dict(scaler.state_dict())
    assert fresh.state_dict() == scaler.state_dict() and fresh.get_scale() == scaler.get_scale()
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        fresh.load_state_dict(tapelab.amp.GradScaler("cpu", enabled=False).state_dict())


def test_disabled_is_a_pass_through():
    for m in (tapelab, torch):
        scaler = m.amp.GradScaler("cpu", enabled=False)
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=1.0)
        loss = (p * 3).sum()
        assert scaler.scale(loss) is loss
        loss.backward()
        scaler.step(opt)
        scaler.update()
        assert p.tolist() == [-2.0, -2.0] and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
        assert not scaler.is_enabled()


def test_misuse_raises_like_torch():
    for m in (tapelab, torch):
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=1.0)
        scaler = m.amp.GradScaler("cpu")
        with pytest.raises(AssertionError, match="did not use scaler.scale"):
            scaler.step(opt)
        scaler.scale((p * 2).sum()).backward()
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
            scaler.unscale_(opt)
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
            scaler.step(opt)
        with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
            scaler.step(opt, closure=lambda: 0)
        scaler.update(4.0)
        assert scaler.get_scale() == 4.0
        half = m.nn.Parameter(m.ones(2, dtype=m.float16))
        half.grad = m.ones(2, dtype=m.float16)
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            scaler.unscale_(m.optim.SGD([half], lr=1.0))


def test_scale_nested_outputs_and_cuda_without_a_gpu():
    scaler = tapelab.amp.GradScaler("cpu", init_scale=4.0)
    a, b = tapelab.ones(2), tapelab.ones(1)
    out = scaler.scale([a, (b, b)])
    assert out[0].tolist() == [4.0, 4.0] and out[1][1].tolist() == [4.0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert not tapelab.amp.GradScaler().is_enabled()           # device "cuda", no GPU here
    assert any("CUDA is not available" in str(x.message) for x in w)


def test_amp_training_loop_matches_torch():
    """The usual loop: forward under cpu autocast, scaled backward, step, update."""
    w1 = np.random.default_rng(5).standard_normal((16, 5)).astype(np.float32) * 0.3
    w2 = np.random.default_rng(6).standard_normal((3, 16)).astype(np.float32) * 0.3
    runs = []
    for m in (tapelab, torch):
        l1, l2 = m.nn.Linear(5, 16, bias=False), m.nn.Linear(16, 3, bias=False)
        with m.no_grad():
            l1.weight.copy_(m.tensor(w1))
            l2.weight.copy_(m.tensor(w2))
        model = m.nn.Sequential(l1, m.nn.ReLU(), l2)
        opt = m.optim.Adam(model.parameters(), lr=1e-2)
        scaler = m.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
        x, y = m.tensor(_X), m.tensor([0, 1, 2, 0, 1, 2, 0, 1])
        trail = []
        for _ in range(5):
            opt.zero_grad()
            with m.autocast("cpu"):
                out = model(x)
                loss = m.nn.functional.cross_entropy(out, y)
            assert out.dtype == m.bfloat16
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            trail.append((loss.item(), scaler.get_scale()))
        runs.append(trail)
    got, want = runs
    assert [g[1] for g in got] == [w[1] for w in want]
    np.testing.assert_allclose([g[0] for g in got], [w[0] for w in want], rtol=2e-2)


def test_float16_loop_on_the_simulated_cuda_device():
    """cuda autocast runs matmuls in float16; the scaler skips the step whose gradients overflow."""
    from tapelab.base.backend import simulated_cuda
    with simulated_cuda():
        model = tapelab.nn.Linear(5, 3, bias=False).to("cuda")   # with a bias, linear is matmul then add
        opt = tapelab.optim.SGD(model.parameters(), lr=0.1)
        scaler = tapelab.amp.GradScaler("cuda", init_scale=2.0 ** 4)
        x = tapelab.tensor(_X, device="cuda")
        scales = []
        for step in range(3):
            opt.zero_grad()
            with tapelab.autocast("cuda"):
                out = model(x)
                loss = (out.float() ** 2).mean()
            assert out.dtype is tapelab.float16 and scaler.is_enabled()
            scaler.scale(loss).backward()
            assert model.weight.grad.dtype is tapelab.float32 and model.weight.grad.device.type == "cuda"
            if step == 1:
                model.weight.grad[0, 0] = float("inf")
            before = model.weight.detach().clone()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            assert (model.weight.detach() == before).all().item() == (step == 1)
        assert scales == [16.0, 8.0, 8.0]

"""torch.optim and torch.utils.data names of the coverage push: Adafactor, Muon, swa_utils and
StackDataset, each run beside torch from the same weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

R = np.random.default_rng(0)


def _pair(shapes):
    arrays = [R.standard_normal(s) for s in shapes]
    return ([torch.tensor(a, requires_grad=True) for a in arrays],
            [tapelab.tensor(a, requires_grad=True) for a in arrays])


def _run(make, shapes, steps=4, rtol=1e-7, atol=1e-9):
    tp, lp = _pair(shapes)
    topt, lopt = make(torch, tp), make(tapelab, lp)
    for _ in range(steps):
        for m, params, opt in ((torch, tp, topt), (tapelab, lp, lopt)):
            opt.zero_grad()
            loss = sum(((p * p).sum() + p.sin().sum()) for p in params)
            loss.backward()
            opt.step()
    for t, l in zip(tp, lp):
        np.testing.assert_allclose(l.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kwargs", [{}, {"weight_decay": 0.1, "lr": 0.05}, {"eps": (1e-8, 1e-2), "d": 2.0},
                                    {"maximize": True, "beta2_decay": -0.5}])
def test_adafactor_matches_torch(kwargs):
    _run(lambda m, p: m.optim.Adafactor(p, **kwargs), [(3, 4), (5,), (2, 3, 4)])


@pytest.mark.parametrize("kwargs", [{}, {"nesterov": False, "adjust_lr_fn": "match_rms_adamw", "lr": 0.02},
                                    {"momentum": 0.9, "weight_decay": 0.0, "ns_steps": 3}])
def test_muon_matches_torch_to_bfloat16_precision(kwargs):
    # PyTorch runs the Newton-Schulz iteration in bfloat16; tapelab in the parameter's dtype
    _run(lambda m, p: m.optim.Muon(p, **kwargs), [(4, 6), (7, 3)], rtol=2e-2, atol=2e-3)


def test_muon_refuses_non_matrices():
    for m in (torch, tapelab):
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            m.optim.Muon([m.zeros(3, requires_grad=True)])
        with pytest.raises(ValueError, match="Adjust learning rate function bogus is not supported"):
            m.optim.Muon([m.zeros(3, 3, requires_grad=True)], adjust_lr_fn="bogus")


def _models():
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    lmod = tapelab.nn.Sequential(tapelab.nn.Linear(3, 4), tapelab.nn.BatchNorm1d(4), tapelab.nn.Linear(4, 2)).double()
    lmod.load_state_dict({k: tapelab.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, lmod


@pytest.mark.parametrize("kind", ["swa", "ema", "ema_multi", "swa_buffers"])
def test_averaged_model_matches_torch(kind):
    t, lmod = _models()
    avgs = {}
    for m, model in ((torch, t), (tapelab, lmod)):
        su = m.optim.swa_utils
        kw = {"swa": {}, "ema": {"avg_fn": su.get_ema_avg_fn(0.9)}, "ema_multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
              "swa_buffers": {"use_buffers": True}}[kind]
        avgs[m] = su.AveragedModel(model, **kw)
    x = R.standard_normal((5, 3))
    for step in range(3):
        for m, model in ((torch, t), (tapelab, lmod)):
            with m.no_grad():
                for p in model.parameters():
                    p.mul_(0.9).add_(0.1 * (step + 1))
            model(m.tensor(x))              # moves the BatchNorm statistics
            avgs[m].update_parameters(model)
    ts, ls = avgs[torch].state_dict(), avgs[tapelab].state_dict()
    assert list(ts) == list(ls)
    for k in ts:
        np.testing.assert_allclose(ls[k].numpy(), ts[k].numpy(), rtol=1e-12, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(avgs[tapelab](tapelab.tensor(x)).detach().numpy(),
                               avgs[torch](torch.tensor(x)).detach().numpy(), rtol=1e-10)


def test_update_bn_and_swalr_match_torch():
    t, lmod = _models()
    data = [R.standard_normal((4, 3)) for _ in range(3)]
    torch.optim.swa_utils.update_bn([(torch.tensor(d), 0) for d in data], t)
    tapelab.optim.swa_utils.update_bn([(tapelab.tensor(d), 0) for d in data], lmod)
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(lmod.state_dict()[k].numpy(), v.numpy(), rtol=1e-12, err_msg=k)
    assert lmod[1].momentum == 0.1 and lmod.training
    for strategy, epochs in (("cos", 3), ("linear", 2), ("cos", 0)):
        lrs = {}
        for m in (torch, tapelab):
            p = m.zeros(2, requires_grad=True)
            opt = m.optim.SGD([{"params": [p]}, {"params": [m.zeros(1, requires_grad=True)], "lr": 0.3}], lr=0.5)
            sched = m.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy)
            seen = []
            for _ in range(5):
                opt.step()
                sched.step()
                seen.append(sched.get_last_lr())
            lrs[m] = seen
        np.testing.assert_allclose(np.array(lrs[tapelab]), np.array(lrs[torch]), rtol=1e-12)


def test_swalr_errors():
    for m in (torch, tapelab):
        opt = m.optim.SGD([m.zeros(1, requires_grad=True)], lr=0.1)
        with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
            m.optim.swa_utils.SWALR(opt, 0.01, anneal_strategy="step")
        with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
            m.optim.swa_utils.SWALR(opt, 0.01, anneal_epochs=-1)
        with pytest.raises(ValueError, match="Invalid decay value"):
            m.optim.swa_utils.get_ema_avg_fn(1.5)


def test_stack_dataset_matches_torch():
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6)
    for m in (torch, tapelab):
        a, b = m.utils.data.TensorDataset(m.tensor(x)), m.tensor(y)
        tup = m.utils.data.StackDataset(a, b)
        named = m.utils.data.StackDataset(image=a, label=b)
        assert len(tup) == 6 and tup[2][1].item() == 2 and tup[2][0][0].tolist() == [4.0, 5.0]
        assert named[3]["label"].item() == 3
        batch = named.__getitems__([0, 5])
        assert [d["label"].item() for d in batch] == [0, 5]
        loader = m.utils.data.DataLoader(named, batch_size=4)
        first = next(iter(loader))
        assert sorted(first) == ["image", "label"] and first["label"].tolist() == [0, 1, 2, 3]
        with pytest.raises(ValueError, match="Size mismatch between datasets"):
            m.utils.data.StackDataset(a, m.tensor(y[:3]))
        with pytest.raises(ValueError, match="At least one dataset should be passed"):
            m.utils.data.StackDataset()


def test_swap_in_optimizer_params_and_state_matches_torch():
    x = R.standard_normal((3, 2))
    results = {}
    for m in (torch, tapelab):
        live = m.tensor(x, requires_grad=True)
        opt = m.optim.SGD([live], lr=0.1, momentum=0.9)
        live.grad = m.ones(3, 2, dtype=m.float64)
        opt.step()
        other = m.tensor(x * 2)
        other.grad = m.ones(3, 2, dtype=m.float64) * 3
        osd = opt.state_dict()
        osd = {"state": {0: {"momentum_buffer": osd["state"][0]["momentum_buffer"].clone()}},
               "param_groups": [dict(osd["param_groups"][0], lr=0.5)]}
        with m.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, osd):
            assert opt.param_groups[0]["params"][0] is other and opt.param_groups[0]["lr"] == 0.5
            opt.step()
        assert opt.param_groups[0]["params"][0] is live and opt.param_groups[0]["lr"] == 0.1
        results[m] = (live.detach().numpy().copy(), other.numpy().copy(),
                      osd["state"][0]["momentum_buffer"].numpy().copy(),
                      opt.state[live]["momentum_buffer"].numpy().copy())
        bad = {"state": {}, "param_groups": [{"params": [0, 1]}]}
        with pytest.raises(RuntimeError, match="different number of params"):
            with m.optim.swap_in_optimizer_params_and_state(opt, {"w": other}, bad):
                pass
    for t, l in zip(results[torch], results[tapelab]):
        np.testing.assert_allclose(l, t, rtol=1e-12)

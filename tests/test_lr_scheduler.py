"""Learning-rate schedules against PyTorch: identical lr (and momentum) sequences over 40 steps."""
import io
import warnings

import pytest
import torch

import tapelab
from tapelab.serialization import load, save

STEPS = 40


def _opt(lib, kind="SGD", groups=2):
    params = [lib.zeros(2, requires_grad=True) for _ in range(groups)]
    pgroups = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "SGD":
        return lib.optim.SGD(pgroups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(pgroups, lr=0.1)


SCHEDULES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.93),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=12, eta_min=0.001),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=lambda e: 0.97 ** e + 0.01 * (e % 3)),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 1 / (e + 1), lambda e: 0.9 ** e]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=15),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=6),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=30, power=2.0),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 1.0], total_steps=STEPS + 1),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(o, max_lr=0.8, epochs=4, steps_per_epoch=11,
                                                          anneal_strategy="linear", three_phase=True,
                                                          pct_start=0.25),
    "OneCycleLR-no-momentum": lambda m, o: m.OneCycleLR(o, max_lr=0.3, total_steps=STEPS + 1,
                                                        cycle_momentum=False, div_factor=10.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.01),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.CosineAnnealingLR(o, T_max=20)], milestones=[5]),
    "SequentialLR-3": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9),
            m.StepLR(o, step_size=5)], milestones=[8, 20]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ExponentialLR(o, gamma=0.95), m.MultiStepLR(o, milestones=[10, 20])]),
}


def _trace(lib, name, kind, steps=STEPS):
    opt = _opt(lib, kind)
    sched = SCHEDULES[name](lib.optim.lr_scheduler, opt)
    out = [(sched.get_last_lr(), _momenta(opt))]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append((sched.get_last_lr(), _momenta(opt)))
    return out


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_matches_torch(name, kind):
    ours, theirs = _trace(tapelab, name, kind), _trace(torch, name, kind)
    for step, ((lr_a, m_a), (lr_b, m_b)) in enumerate(zip(ours, theirs)):
        assert lr_a == pytest.approx(lr_b, rel=1e-12, abs=1e-15), f"lr differs at step {step}"
        assert m_a == pytest.approx(m_b, rel=1e-12), f"momentum differs at step {step}"


def _resume_trace(lib, name, kind, via_file):
    opt = _opt(lib, kind)
    sched = SCHEDULES[name](lib.optim.lr_scheduler, opt)
    for _ in range(13):
        opt.step()
        sched.step()
    sd, opt_sd = sched.state_dict(), opt.state_dict()
    if via_file:
        buf = io.BytesIO()
        save({"sched": sd, "opt": opt_sd}, buf)
        buf.seek(0)
        both = load(buf)
        sd, opt_sd = both["sched"], both["opt"]
    opt2 = _opt(lib, kind)
    sched2 = SCHEDULES[name](lib.optim.lr_scheduler, opt2)
    opt2.load_state_dict(opt_sd)
    sched2.load_state_dict(sd)
    out = []
    for _ in range(STEPS - 13):
        opt2.step()
        sched2.step()
        out.append(sched2.get_last_lr())
    return out


@pytest.mark.parametrize("via_file", [False, True], ids=["in-memory", "save-load"])
@pytest.mark.parametrize("name", ["StepLR", "CosineAnnealingLR", "OneCycleLR-cos", "SequentialLR",
                                  "LinearLR", "LambdaLR", "ChainedScheduler"])
def test_state_dict_resume(name, via_file):
    uninterrupted = [lr for lr, _ in _trace(torch, name, "SGD")[14:]]
    resumed = _resume_trace(tapelab, name, "SGD", via_file)
    for a, b in zip(resumed, uninterrupted):
        assert a == pytest.approx(b, rel=1e-12)


METRICS = [1.0, 0.9, 0.91, 0.92, 0.93, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.6, 0.7, 0.8, 0.9,
           1.0, 1.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=1),
                                dict(patience=2, cooldown=3, min_lr=0.02),
                                dict(patience=0, threshold=0.05, threshold_mode="abs", min_lr=[0.0, 0.05]),
                                dict(mode="max", threshold_mode="abs", patience=1, eps=0.05)])
def test_reduce_on_plateau_matches_torch(kw):
    seqs = []
    for lib in (tapelab, torch):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        seq = []
        for m in METRICS:
            opt.step()
            sched.step(m)
            seq.append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter, sched.best))
        seqs.append(seq)
    assert seqs[0] == seqs[1]


def test_reduce_on_plateau_accepts_a_tensor_metric_and_round_trips():
    opt = _opt(tapelab)
    sched = tapelab.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    sched.step(tapelab.tensor(1.0))
    sched.step(tapelab.tensor(2.0))
    assert sched.get_last_lr() == pytest.approx([0.01, 0.02])
    other = tapelab.optim.lr_scheduler.ReduceLROnPlateau(_opt(tapelab))
    other.load_state_dict(sched.state_dict())
    assert other.patience == 0 and other.best == 1.0


def test_errors_and_warnings():
    sch = tapelab.optim.lr_scheduler
    opt = _opt(tapelab)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        sch.StepLR(object(), 3)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        sch.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode foo is unknown"):
        sch.ReduceLROnPlateau(opt, mode="foo")
    with pytest.raises(ValueError, match="total_steps OR"):
        sch.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        sch.StepLR(_opt(tapelab), 3, last_epoch=5)
    with pytest.raises(ValueError, match="number of milestones"):
        sch.SequentialLR(opt, [sch.StepLR(opt, 2), sch.StepLR(opt, 3)], milestones=[])
    one = sch.OneCycleLR(_opt(tapelab), max_lr=1.0, total_steps=2)
    one.optimizer.step()
    one.step()
    one.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        one.step()
    opt = _opt(tapelab)
    s = sch.StepLR(opt, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    opt = _opt(tapelab)
    s = sch.StepLR(opt, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()


def test_scheduler_state_dict_holds_plain_values():
    opt = _opt(tapelab)
    sched = tapelab.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5)
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["lr_lambdas"] == [None, None]
    assert sd["base_lrs"] == [0.1, 0.2] and sd["last_epoch"] == 0


@pytest.mark.parametrize("T_mult", [1, 2])
def test_warm_restarts_with_fractional_epochs_matches_torch(T_mult):
    seqs = []
    for lib in (tapelab, torch):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=T_mult)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in range(8):
                for i in range(4):
                    opt.step()
                    sched.step(epoch + i / 4)
                    seq.append(sched.get_last_lr())
        seqs.append(seq)
    for a, b in zip(*seqs):
        assert a == pytest.approx(b, rel=1e-12)

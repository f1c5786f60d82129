"""Optimizers against PyTorch: same parameters, same gradients, 25 steps, every state buffer
(float64 to 1e-10, float32), one table for every per-step optimizer."""
import io

import numpy as np
import pytest
import torch

import tapelab
from tapelab import optim
from tapelab.serialization import load, save

STEPS = 25
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}

BASE_CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.5, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, maximize=True, betas=(0.8, 0.9), eps=1e-6)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.05)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
]
# NAdam, RAdam, Adadelta, Rprop and ASGD (tests/test_optim_extras.py resumes these its own way)
EXTRA_CONFIGS = [
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("NAdam", dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), maximize=True)),  # rho_t > 5 from step 6
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("Adadelta", dict(maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("Rprop", dict(lr=0.05, maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.6, t0=5, weight_decay=0.1)),
    ("ASGD", dict(lr=0.05, t0=3, maximize=True)),
]
CONFIGS = BASE_CONFIGS + EXTRA_CONFIGS
def config_ids(configs) -> list[str]:
    return [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}" for name, kw in configs]


IDS = config_ids(CONFIGS)


def _shapes():
    return [(4, 3), (3,), ()]


def _grads(seed=0, steps=STEPS):
    """Synthetic gradient streams; the middle parameter has no gradient on some steps."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(steps):
        gs = [rng.standard_normal(s) for s in _shapes()]
        if step % 7 == 3:
            gs[1] = None
        if step % 5 == 2:  # repeated signs and exact zeros exercise Rprop's three branches
            gs[0] = np.where(np.arange(12).reshape(4, 3) % 3 == 0, 0.0, gs[0])
        out.append(gs)
    return out


def _params(lib, dtype, seed=1):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s), dtype=getattr(lib, dtype), requires_grad=True) for s in _shapes()]


def _make(lib, name, kw, params):
    groups = [{"params": params[:2]}, {"params": params[2:], "lr": kw.get("lr", 0.01) * 0.5}]
    return getattr(lib.optim, name)(groups, **kw)


def _run(lib, opt, params, grads, dtype):
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = None if g is None else lib.tensor(g, dtype=getattr(lib, dtype))
        opt.step()


def _np(x):
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    if isinstance(x, tapelab.Tensor):
        return np.asarray(x.detach().__array__())
    return np.asarray(x)


def _assert_same(ours, theirs, dtype):
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), _np(b), **TOL[dtype])


def _assert_same_state(t_opt, th_opt, t_params, th_params, dtype):
    for tp, hp in zip(t_params, th_params):
        ts, hs = t_opt.state[tp], th_opt.state[hp]
        assert set(ts) == set(hs)
        for key in hs:
            if key == "step":
                assert float(ts[key]) == float(hs[key])
            elif hs[key] is not None:
                if isinstance(hs[key], torch.Tensor):
                    assert ts[key].dtype.name == str(hs[key].dtype).split(".")[1], key
                np.testing.assert_allclose(_np(ts[key]), _np(hs[key]), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_matches_torch(name, kw, dtype):
    grads = _grads()
    tp, hp = _params(tapelab, dtype), _params(torch, dtype)
    topt = _make(tapelab, name, kw, tp)
    hopt = _make(torch, name, dict(kw, foreach=False), hp)
    _run(tapelab, topt, tp, grads, dtype)
    _run(torch, hopt, hp, grads, dtype)
    _assert_same(tp, hp, dtype)
    _assert_same_state(topt, hopt, tp, hp, dtype)
    assert all(p.dtype == getattr(tapelab, dtype) for p in tp)


@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_state_dict_format_matches_torch(name, kw):
    grads = _grads(steps=3)
    tp, hp = _params(tapelab, "float64"), _params(torch, "float64")
    topt, hopt = _make(tapelab, name, kw, tp), _make(torch, name, kw, hp)
    _run(tapelab, topt, tp, grads, "float64")
    _run(torch, hopt, hp, grads, "float64")
    ours, theirs = topt.state_dict(), hopt.state_dict()
    assert ours["param_groups"] == theirs["param_groups"]
    assert set(ours["state"]) == set(theirs["state"])
    for i, st in theirs["state"].items():
        assert set(ours["state"][i]) == set(st)
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                assert ours["state"][i][key].dtype.name == str(value.dtype).split(".")[1], key
                assert tuple(ours["state"][i][key].shape) == tuple(value.shape)


def _via_file(sd):
    buf = io.BytesIO()
    save(sd, buf)
    buf.seek(0)
    return load(buf)


@pytest.mark.parametrize("roundtrip", [lambda sd: sd, _via_file], ids=["in-memory", "save-load"])
@pytest.mark.parametrize("name,kw", BASE_CONFIGS, ids=config_ids(BASE_CONFIGS))
def test_state_dict_resume_mid_training(name, kw, roundtrip):
    grads = _grads()
    hp = _params(torch, "float64")
    hopt = _make(torch, name, kw, hp)
    _run(torch, hopt, hp, grads, "float64")

    tp = _params(tapelab, "float64")
    first = _make(tapelab, name, kw, tp)
    _run(tapelab, first, tp, grads[:10], "float64")
    sd = roundtrip(first.state_dict())
    fresh = [tapelab.tensor(p.detach().__array__().copy(), requires_grad=True) for p in tp]
    second = _make(tapelab, name, dict(kw, lr=123.0), fresh)  # load_state_dict restores the lr
    second.load_state_dict(sd)
    _run(tapelab, second, fresh, grads[10:], "float64")
    _assert_same(fresh, hp, "float64")
    if roundtrip is _via_file:  # loading copies: the first optimizer's buffers are not shared
        for p0, p1 in zip(tp, fresh):
            for key, value in first.state[p0].items():
                if isinstance(value, tapelab.Tensor):
                    assert second.state[p1][key] is not value


def test_loads_a_torch_state_dict():
    grads = _grads()
    hp = _params(torch, "float64")
    hopt = _make(torch, "Adam", dict(lr=0.01, amsgrad=True), hp)
    _run(torch, hopt, hp, grads[:10], "float64")

    def convert(x):
        if isinstance(x, torch.Tensor):
            return tapelab.tensor(x.numpy())
        if isinstance(x, dict):
            return {k: convert(v) for k, v in x.items()}
        if isinstance(x, list):
            return [convert(v) for v in x]
        return x
    tp = [tapelab.tensor(p.detach().numpy().copy(), requires_grad=True) for p in hp]
    topt = _make(tapelab, "Adam", dict(lr=0.01, amsgrad=True), tp)
    topt.load_state_dict(convert(hopt.state_dict()))
    _run(tapelab, topt, tp, grads[10:], "float64")
    _run(torch, hopt, hp, grads[10:], "float64")
    _assert_same(tp, hp, "float64")


def test_load_state_dict_casts_to_parameter_dtype():
    p = tapelab.zeros(3, dtype=tapelab.float32, requires_grad=True)
    opt = optim.Adam([p])
    sd = {"state": {0: {"step": tapelab.tensor(2.0), "exp_avg": tapelab.ones(3, dtype=tapelab.float64),
                        "exp_avg_sq": tapelab.ones(3, dtype=tapelab.float64)}},
          "param_groups": opt.state_dict()["param_groups"]}
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype == tapelab.float32
    assert opt.state[p]["step"] == 2.0


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, centered=True))])
def test_mlp_training_matches_torch(name, kw):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    init = [rng.standard_normal((4, 8)) * 0.5, np.zeros(8), rng.standard_normal((8, 1)) * 0.5]
    results = []
    for lib in (tapelab, torch):
        params = [lib.tensor(a, requires_grad=True) for a in init]
        opt = getattr(lib.optim, name)(params, **kw)
        X, Y = lib.tensor(x), lib.tensor(y)
        losses = []
        for _ in range(20):
            def closure():
                opt.zero_grad()
                w1, b1, w2 = params
                loss = ((lib.tanh(X @ w1 + b1) @ w2 - Y) ** 2).mean()
                loss.backward()
                return loss
            losses.append(float(opt.step(closure).detach()))
        results.append((losses, [_np(p) for p in params]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10)
    _assert_same(results[0][1], results[1][1], "float64")


def test_step_runs_under_no_grad_and_closure_with_grad():
    p = tapelab.ones(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    seen = []

    def closure():
        seen.append(tapelab.is_grad_enabled())
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with tapelab.no_grad():
        loss = opt.step(closure)
    assert seen == [True] and float(loss) == 2.0
    assert p.grad_fn is None and p.is_leaf
    np.testing.assert_allclose(p.detach().__array__(), [0.8, 0.8])


def test_zero_grad():
    p = tapelab.ones(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.grad = tapelab.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_param_groups_and_errors():
    a = tapelab.ones(2, requires_grad=True)
    b = tapelab.ones(3, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(a, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([a], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {a}}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": opt.state_dict()["param_groups"][:1]})
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([a, a], lr=0.1)


def test_required_lr_and_repr():
    from tapelab.optim.optimizer import required

    class Plain(optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))
    with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
        Plain([tapelab.ones(1, requires_grad=True)])
    opt = optim.SGD([tapelab.ones(1, requires_grad=True)], lr=0.1)
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0\n")


def test_named_parameters_are_accepted():
    a = tapelab.ones(2, requires_grad=True)
    opt = optim.Adam([("w", a)])
    assert opt.param_groups[0]["param_names"] == ["w"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w"]


def test_end_to_end_training_loop_matches_torch(tmp_path):
    """nn.Sequential + DataLoader + AdamW + OneCycleLR, checkpointed halfway through tapelab.save."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((24, 4)), rng.standard_normal((24, 1))

    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()

    reference = build(torch)
    weights = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}

    def train(lib, model, epochs, opt=None, sched=None):
        loader = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(lib.tensor(x), lib.tensor(y)), batch_size=5)
        opt = opt or lib.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        sched = sched or lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=4 * len(loader))
        losses = []
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss = lib.nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
        return losses, opt, sched

    expected, _, _ = train(torch, reference, 4)
    model = build(tapelab)
    model.load_state_dict({k: tapelab.tensor(v) for k, v in weights.items()})
    first, opt, sched = train(tapelab, model, 2)
    save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "ckpt.tl")
    ckpt = load(tmp_path / "ckpt.tl")
    model2 = build(tapelab)
    model2.load_state_dict(ckpt["model"])
    opt2 = optim.AdamW(model2.parameters(), lr=0.01, weight_decay=0.1)
    sched2 = optim.lr_scheduler.OneCycleLR(opt2, max_lr=0.05, total_steps=20)
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    second, _, _ = train(tapelab, model2, 2, opt2, sched2)
    np.testing.assert_allclose(first + second, expected, rtol=1e-10)

"""NAdam, RAdam, Adadelta, Rprop, ASGD, LBFGS, CyclicLR and WeightedRandomSampler against PyTorch.

The per-step optimizers' parity runs are in test_optim.py's table (EXTRA_CONFIGS); here they
are resumed mid-training against PyTorch resumed the same way. LBFGS: the iterates of
closure-driven runs on a quadratic and on Rosenbrock, with and without the strong-Wolfe line search.
"""
import numpy as np
import pytest
import torch
from test_optim import (EXTRA_CONFIGS, _assert_same, _assert_same_state, _grads, _make, _np, _params, _run,
                        _via_file, config_ids)

import tapelab
from tapelab import optim


def _resumed(lib, name, kw, grads, roundtrip):
    """10 steps, state_dict (through ``roundtrip``), a fresh optimizer loads it, 15 more steps."""
    params = _params(lib, "float64")
    first = _make(lib, name, kw, params)
    _run(lib, first, params, grads[:10], "float64")
    sd = roundtrip(first.state_dict())
    fresh = [lib.tensor(_np(p).copy(), requires_grad=True) for p in params]
    second = _make(lib, name, dict(kw, lr=123.0), fresh)  # load_state_dict restores the lr
    second.load_state_dict(sd)
    _run(lib, second, fresh, grads[10:], "float64")
    return fresh, second


@pytest.mark.parametrize("roundtrip", [lambda sd: sd, _via_file], ids=["in-memory", "save-load"])
@pytest.mark.parametrize("name,kw", EXTRA_CONFIGS, ids=config_ids(EXTRA_CONFIGS))
def test_state_dict_resume_mid_training(name, kw, roundtrip):
    """Loading casts the 0-d float32 scalars (mu_product, eta, mu) to the parameter dtype, as
    PyTorch does, so the reference is PyTorch resumed the same way."""
    grads = _grads()
    ours, topt = _resumed(tapelab, name, kw, grads, roundtrip)
    theirs, hopt = _resumed(torch, name, kw, grads, lambda sd: sd)
    _assert_same(ours, theirs, "float64")
    _assert_same_state(topt, hopt, ours, theirs, "float64")


def test_errors():
    a = tapelab.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid momentum_decay value"):
        optim.NAdam([a], momentum_decay=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.RAdam([a], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid rho value"):
        optim.Adadelta([a], rho=1.5)
    with pytest.raises(ValueError, match="Invalid eta values"):
        optim.Rprop([a], etas=(1.2, 0.5))
    with pytest.raises(ValueError, match="Invalid weight_decay value"):
        optim.ASGD([a], weight_decay=-0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.LBFGS([a], lr=-1)
    b = tapelab.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])


# ---------------------------------------------------------------- LBFGS
_RNG = np.random.default_rng(3)
_M = _RNG.standard_normal((6, 6))
_A = _M @ _M.T + 0.5 * np.eye(6)
_B = _RNG.standard_normal(6)


def _quadratic(lib, x):
    A, b = lib.tensor(_A, dtype=x.dtype), lib.tensor(_B, dtype=x.dtype)
    return 0.5 * (x @ (A @ x)) - b @ x


def _rosenbrock(lib, x):
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


def _quadratic_np(x):
    return 0.5 * x @ (_A @ x) - _B @ x, _A @ x - _B


def _rosenbrock_np(x):
    g = np.zeros_like(x)
    g[:-1] += -2 * (1 - x[:-1]) - 400 * x[:-1] * (x[1:] - x[:-1] ** 2)
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum(), g


PROBLEMS = {"quadratic": (_quadratic, _quadratic_np, np.zeros(6)),
            "rosenbrock": (_rosenbrock, _rosenbrock_np, np.array([-1.2, 1.0, -0.5, 0.8]))}
LBFGS_CONFIGS = [
    dict(),
    dict(line_search_fn="strong_wolfe"),
    dict(history_size=3, max_iter=5),
    dict(history_size=3, max_iter=7, line_search_fn="strong_wolfe"),
    dict(lr=0.5, max_iter=4, max_eval=6, tolerance_change=1e-12),
]
LBFGS_IDS = ["-".join(f"{k}={v}" for k, v in kw.items()) or "defaults" for kw in LBFGS_CONFIGS]


def _lbfgs_trace(lib, problem, kw, dtype, steps, numpy_closure):
    """Iterates and closure evaluations of ``steps`` LBFGS steps.

    With ``numpy_closure`` the loss and gradient are computed in float64 numpy from the
    parameter values and handed over as ``.grad`` (so both libraries see bit-identical
    gradients and only the optimizer's arithmetic is compared); otherwise through autograd.
    """
    f, f_np, x0 = PROBLEMS[problem]
    # two parameters (a matrix-shaped one and a vector) exercise the flat gather / scatter
    a = lib.tensor(x0[:2].reshape(2, 1), dtype=getattr(lib, dtype), requires_grad=True)
    b = lib.tensor(x0[2:], dtype=getattr(lib, dtype), requires_grad=True)
    opt = lib.optim.LBFGS([a, b], **kw)
    evals = []

    def closure():
        opt.zero_grad()
        if numpy_closure:
            loss, g = f_np(np.concatenate([_np(a).reshape(-1), _np(b)]).astype(np.float64))
            a.grad = lib.tensor(g[:2].reshape(2, 1), dtype=a.dtype)
            b.grad = lib.tensor(g[2:], dtype=b.dtype)
            loss = lib.tensor(loss, dtype=a.dtype)
        else:
            loss = f(lib, lib.cat([a.reshape(-1), b]))
            loss.backward()
        evals.append(loss.item())
        return loss
    trace = []
    for _ in range(steps):
        loss = opt.step(closure)
        trace.append((float(loss.detach()), np.concatenate([_np(a).reshape(-1), _np(b)])))
    return trace, evals, opt


def _horizon(kw):
    """About 20 L-BFGS iterations: the last-bit differences of fused multiply-adds (torch's
    ``add(alpha=)`` rounds once, numpy twice) grow along Rosenbrock's valley past that."""
    return 1 if kw.get("max_iter", 20) == 20 else 3


def _compare_lbfgs(ours, theirs, tol, same_evals=True, state=True):
    (ours, our_evals, topt), (theirs, their_evals, hopt) = ours, theirs
    if same_evals:  # the same number of closure calls, at the same points
        assert len(our_evals) == len(their_evals)
        np.testing.assert_allclose(our_evals, their_evals, **tol)
    for (la, xa), (lb, xb) in zip(ours, theirs):
        np.testing.assert_allclose(la, lb, **tol)
        np.testing.assert_allclose(xa, xb, **tol)
    ts = topt.state[topt.param_groups[0]["params"][0]]
    hs = hopt.state[hopt.param_groups[0]["params"][0]]
    assert set(ts) == set(hs)
    if same_evals:
        assert ts["n_iter"] == hs["n_iter"] and ts["func_evals"] == hs["func_evals"]
    if state:
        for key in ("d", "prev_flat_grad", "H_diag", "t"):
            np.testing.assert_allclose(_np(ts[key]), _np(hs[key]), **tol)
        assert len(ts["old_dirs"]) == len(hs["old_dirs"])
        for key in ("old_dirs", "old_stps", "ro"):
            for x, y in zip(ts[key], hs[key]):
                np.testing.assert_allclose(_np(x), _np(y), **tol)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw", LBFGS_CONFIGS, ids=LBFGS_IDS)
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_lbfgs_matches_torch(problem, kw, dtype):
    """Bit-identical gradients: every closure call, iterate and history entry agrees with torch
    (float32: the iterates and call counts; ``ys``-derived scalars cancel too much to compare)."""
    f64 = dtype == "float64"
    tol = dict(rtol=1e-9, atol=1e-12) if f64 else dict(rtol=1e-3, atol=1e-5)
    _compare_lbfgs(_lbfgs_trace(tapelab, problem, kw, dtype, _horizon(kw), True),
                   _lbfgs_trace(torch, problem, kw, dtype, _horizon(kw), True), tol, state=f64)


@pytest.mark.parametrize("kw", LBFGS_CONFIGS, ids=LBFGS_IDS)
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_lbfgs_autograd_closure_matches_torch(problem, kw):
    """The ordinary closure (autograd) in float64; its gradients differ from torch's in the last
    bit, so a little looser than the bit-identical-gradient comparison."""
    _compare_lbfgs(_lbfgs_trace(tapelab, problem, kw, "float64", _horizon(kw), False),
                   _lbfgs_trace(torch, problem, kw, "float64", _horizon(kw), False), dict(rtol=1e-8, atol=1e-11))


def test_lbfgs_converges_on_the_quadratic():
    x = tapelab.zeros(6, dtype=tapelab.float64, requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=50)

    def closure():
        opt.zero_grad()
        loss = _quadratic(tapelab, x)
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(_np(x), np.linalg.solve(_A, _B), rtol=1e-4)
    assert float(_quadratic(tapelab, x)) <= float(_quadratic_np(np.linalg.solve(_A, _B))[0]) + 1e-9


def test_lbfgs_state_dict_resume():
    """Two steps, state_dict through tapelab.save, a fresh LBFGS loads it: same iterates as torch."""
    f, _, x0 = PROBLEMS["rosenbrock"]
    kw = dict(history_size=4, max_iter=5, line_search_fn="strong_wolfe")

    def run(lib, x, opt, steps):
        def closure():
            opt.zero_grad()
            loss = f(lib, x)
            loss.backward()
            return loss
        return [float(opt.step(closure).detach()) for _ in range(steps)]

    hx = torch.tensor(x0, requires_grad=True)
    hopt = torch.optim.LBFGS([hx], **kw)
    expected = run(torch, hx, hopt, 5)

    tx = tapelab.tensor(x0, requires_grad=True)
    topt = optim.LBFGS([tx], **kw)
    first = run(tapelab, tx, topt, 2)
    sd = _via_file(topt.state_dict())
    tx2 = tapelab.tensor(_np(tx).copy(), requires_grad=True)
    topt2 = optim.LBFGS([tx2], **kw)
    topt2.load_state_dict(sd)
    second = run(tapelab, tx2, topt2, 3)
    np.testing.assert_allclose(first + second, expected, rtol=1e-9)
    np.testing.assert_allclose(_np(tx2), hx.detach().numpy(), rtol=1e-9)


# ---------------------------------------------------------------- CyclicLR
def _opt(lib, kind):
    params = [lib.zeros(2, requires_grad=True) for _ in range(2)]
    groups = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(groups, lr=0.1)


CYCLIC = {
    "triangular": dict(base_lr=0.01, max_lr=0.1, step_size_up=4),
    "triangular-asym": dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=7),
    "triangular2": dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2"),
    "exp_range": dict(base_lr=0.001, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.97),
    "custom-iterations": dict(base_lr=0.01, max_lr=0.1, step_size_up=4, scale_fn=lambda x: 1 / (1 + 0.1 * x),
                              scale_mode="iterations", base_momentum=[0.7, 0.75], max_momentum=0.95),
    "no-momentum": dict(base_lr=0.01, max_lr=0.1, step_size_up=4, cycle_momentum=False),
}


def _cyclic_trace(lib, kw, kind, steps=40):
    opt = _opt(lib, kind)
    sched = lib.optim.lr_scheduler.CyclicLR(opt, **kw)
    out = [(sched.get_last_lr(), _momenta(opt))]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append((sched.get_last_lr(), _momenta(opt)))
    return out


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(CYCLIC))
def test_cyclic_lr_matches_torch(name, kind):
    ours, theirs = _cyclic_trace(tapelab, CYCLIC[name], kind), _cyclic_trace(torch, CYCLIC[name], kind)
    for step, ((lr_a, m_a), (lr_b, m_b)) in enumerate(zip(ours, theirs)):
        assert lr_a == pytest.approx(lr_b, rel=1e-12, abs=1e-15), f"lr differs at step {step}"
        assert m_a == pytest.approx(m_b, rel=1e-12), f"momentum differs at step {step}"


@pytest.mark.parametrize("via_file", [False, True], ids=["in-memory", "save-load"])
@pytest.mark.parametrize("name", ["triangular2", "exp_range", "triangular-asym"])
def test_cyclic_lr_state_dict_resume(name, via_file):
    expected = _cyclic_trace(torch, CYCLIC[name], "SGD")[14:]
    opt = _opt(tapelab, "SGD")
    sched = tapelab.optim.lr_scheduler.CyclicLR(opt, **CYCLIC[name])
    for _ in range(13):
        opt.step()
        sched.step()
    sd, opt_sd = sched.state_dict(), opt.state_dict()
    assert "_scale_fn_ref" not in sd and sd["_scale_fn_custom"] is None
    if via_file:
        both = _via_file({"sched": sd, "opt": opt_sd})
        sd, opt_sd = both["sched"], both["opt"]
    opt2 = _opt(tapelab, "SGD")
    sched2 = tapelab.optim.lr_scheduler.CyclicLR(opt2, base_lr=0.5, max_lr=0.9, step_size_up=1, mode="exp_range")
    opt2.load_state_dict(opt_sd)
    sched2.load_state_dict(sd)
    got = []
    for _ in range(40 - 13):
        opt2.step()
        sched2.step()
        got.append((sched2.get_last_lr(), _momenta(opt2)))
    for (lr_a, m_a), (lr_b, m_b) in zip(got, expected):
        assert lr_a == pytest.approx(lr_b, rel=1e-12)
        assert m_a == pytest.approx(m_b, rel=1e-12)


def test_cyclic_lr_errors():
    sch = tapelab.optim.lr_scheduler
    with pytest.raises(ValueError, match="mode is invalid"):
        sch.CyclicLR(_opt(tapelab, "SGD"), 0.01, 0.1, mode="sawtooth")
    p = tapelab.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        sch.CyclicLR(optim.Adadelta([p]), 0.01, 0.1)
    with pytest.raises(ValueError, match="base_lr must have the same length as optimizer.param_groups"):
        sch.CyclicLR(_opt(tapelab, "SGD"), [0.01, 0.02, 0.03], 0.1)
    sch.CyclicLR(optim.Adadelta([p]), 0.01, 0.1, cycle_momentum=False)  # fine without momentum


# ---------------------------------------------------------------- WeightedRandomSampler
def _chi2_ok(counts, probs):
    """A chi-square goodness-of-fit check at roughly the 1e-4 level (dof <= 9)."""
    n = counts.sum()
    expected = n * probs
    stat = ((counts - expected) ** 2 / expected).sum()
    return stat < 40.0


def test_weighted_sampler_with_replacement_distribution():
    weights = [1.0, 2.0, 3.0, 4.0, 0.0, 10.0]
    gen = tapelab.Generator().manual_seed(0)
    sampler = tapelab.utils.data.WeightedRandomSampler(weights, 20000, generator=gen)
    assert len(sampler) == 20000
    idx = np.array(list(sampler))
    assert idx.dtype.kind == "i" and set(idx.tolist()) <= {0, 1, 2, 3, 5}
    counts = np.bincount(idx, minlength=6)
    assert counts[4] == 0
    probs = np.array(weights) / sum(weights)
    keep = probs > 0
    assert _chi2_ok(counts[keep], probs[keep])
    assert all(isinstance(i, int) for i in list(sampler)[:5])


def test_weighted_sampler_without_replacement():
    weights = tapelab.tensor([0.1, 5.0, 0.2, 3.0, 0.3])
    gen = tapelab.Generator().manual_seed(1)
    sampler = tapelab.utils.data.WeightedRandomSampler(weights, 3, replacement=False, generator=gen)
    firsts = []
    for _ in range(3000):
        draw = list(sampler)
        assert len(draw) == 3 and len(set(draw)) == 3
        firsts.append(draw[0])
    # the first draw of sampling without replacement follows the weights
    probs = np.array([0.1, 5.0, 0.2, 3.0, 0.3]) / 8.6
    assert _chi2_ok(np.bincount(firsts, minlength=5), probs)
    full = list(tapelab.utils.data.WeightedRandomSampler([1.0, 1.0, 1.0, 1.0], 4, replacement=False))
    assert sorted(full) == [0, 1, 2, 3]
    # as torch.multinomial: zero-weight categories fill in only after every positive one
    for _ in range(20):
        draw = list(tapelab.utils.data.WeightedRandomSampler([0.0, 2.0, 0.0, 1.0], 3, replacement=False))
        assert set(draw[:2]) == {1, 3} and draw[2] in (0, 2)


def test_weighted_sampler_seeding_and_errors():
    WRS = tapelab.utils.data.WeightedRandomSampler
    draws = [list(WRS([1, 2, 3], 50, generator=tapelab.Generator().manual_seed(7))) for _ in range(2)]
    assert draws[0] == draws[1]
    tapelab.manual_seed(3)
    a = list(WRS([1, 2, 3], 50))
    tapelab.manual_seed(3)
    assert list(WRS([1, 2, 3], 50)) == a
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        WRS([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        WRS([1.0, 2.0], 2, replacement=1)
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WRS([[1.0, 2.0]], 2)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        list(WRS([1.0, 2.0], 3, replacement=False))
    with pytest.raises(RuntimeError, match="element < 0"):
        list(WRS([1.0, -2.0], 3))
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        list(WRS([0.0, 0.0], 3))
    assert WRS(tapelab.tensor([1, 2]), 3).weights.dtype == tapelab.float64


def test_weighted_sampler_in_a_dataloader():
    data = tapelab.utils.data
    ds = data.TensorDataset(tapelab.arange(6))
    sampler = data.WeightedRandomSampler([0, 0, 0, 1, 0, 0], 8, generator=tapelab.Generator().manual_seed(0))
    batches = [b[0].tolist() for b in data.DataLoader(ds, batch_size=4, sampler=sampler)]
    assert batches == [[3, 3, 3, 3], [3, 3, 3, 3]]


@pytest.mark.parametrize("name", ["NAdam", "ASGD"])
def test_scalar_state_follows_the_default_dtype(name):
    """PyTorch keeps mu_product / eta / mu in float64 under a float64 default dtype."""
    keys = {"NAdam": ["mu_product"], "ASGD": ["eta", "mu"]}[name]
    old = tapelab.get_default_dtype()
    try:
        for dtype in (tapelab.float64, tapelab.float32):
            tapelab.set_default_dtype(dtype)
            p = tapelab.ones(2, dtype=tapelab.float32, requires_grad=True)
            opt = getattr(optim, name)([p])
            p.grad = tapelab.ones(2, dtype=tapelab.float32)
            opt.step()
            assert all(opt.state[p][k].dtype == dtype for k in keys)
    finally:
        tapelab.set_default_dtype(old)


def test_tensor_lr_and_closure():
    """A float64 tensor lr (torch computes the step coefficients as tensors in lr's dtype; with a
    float32 tensor they round to float32 there, which tapelab, reading lr as a number, does not)."""
    p = tapelab.ones(3, dtype=tapelab.float64, requires_grad=True)
    h = torch.ones(3, dtype=torch.float64, requires_grad=True)
    results = []
    for lib, x in ((tapelab, p), (torch, h)):
        opt = lib.optim.NAdam([x], lr=lib.tensor(0.05, dtype=lib.float64))

        def closure():
            opt.zero_grad()
            loss = (x * x).sum()
            loss.backward()
            return loss
        losses = [float(opt.step(closure).detach()) for _ in range(5)]
        results.append((losses, _np(x)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)

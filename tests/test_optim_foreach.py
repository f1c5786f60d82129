"""Multi-tensor optimizer steps (``engine/optim/_foreach.py``): SGD, Adam and AdamW updating a
group's arrays at once while nobody watches. Against PyTorch's single-tensor and foreach
implementations (several steps, parameter groups, weight decay, amsgrad, maximize), bit for bit
against tapelab's own per-parameter Tensor path, and still one named group on a tape."""
import numpy as np
import pytest
import torch

import tapelab
from tapelab import optim

STEPS = 12
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=1e-5, atol=1e-6)}

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, maximize=True, betas=(0.3, 0.9), eps=1e-6)),   # lerp's other side
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}" for n, kw in CONFIGS]
SHAPES = [(5, 4), (4,), (), (3, 2)]


def _grads(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for step in range(STEPS):
        gs = [rng.standard_normal(s) for s in SHAPES]
        if step % 4 == 2:
            gs[1] = None          # a parameter without a gradient this step
        out.append(gs)
    return out


def _params(lib, dtype):
    rng = np.random.default_rng(1)
    return [lib.tensor(rng.standard_normal(s), dtype=getattr(lib, dtype), requires_grad=True) for s in SHAPES]


def _make(lib, name, kw, params, **impl):
    groups = [{"params": params[:2]}, {"params": params[2:], "lr": kw.get("lr", 0.01) * 0.5,
                                       "weight_decay": 0.02}]
    return getattr(lib.optim, name)(groups, **kw, **impl)


def _run(lib, opt, params, dtype):
    for gs in _grads():
        for p, g in zip(params, gs):
            p.grad = None if g is None else lib.tensor(g, dtype=getattr(lib, dtype))
        opt.step()


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


def _states(opt, params):
    return [{k: (float(v) if k == "step" else _np(v)) for k, v in opt.state[p].items()} for p in params]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("torch_foreach", [False, True])
@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_multi_tensor_step_matches_torch(name, kw, torch_foreach, dtype):
    tp, hp = _params(tapelab, dtype), _params(torch, dtype)
    topt = _make(tapelab, name, kw, tp)                 # foreach=None: the multi-tensor step
    hopt = _make(torch, name, kw, hp, foreach=torch_foreach)
    _run(tapelab, topt, tp, dtype)
    _run(torch, hopt, hp, dtype)
    for a, b in zip(tp, hp):
        np.testing.assert_allclose(_np(a), _np(b), **TOL[dtype])
    for ts, hs in zip(_states(topt, tp), _states(hopt, hp)):
        assert set(ts) == set(hs)
        for key in hs:
            np.testing.assert_allclose(ts[key], hs[key], **TOL[dtype])


@pytest.mark.parametrize("impl", [dict(foreach=True), dict(fused=True)], ids=["foreach", "fused"])
@pytest.mark.parametrize("name,kw", CONFIGS, ids=IDS)
def test_multi_tensor_step_equals_the_tensor_path_bit_for_bit(name, kw, impl):
    fast, slow = _params(tapelab, "float32"), _params(tapelab, "float32")
    fopt = _make(tapelab, name, kw, fast, **impl)
    sopt = _make(tapelab, name, kw, slow, foreach=False)
    _run(tapelab, fopt, fast, "float32")
    _run(tapelab, sopt, slow, "float32")
    for a, b in zip(fast, slow):
        assert np.array_equal(_np(a), _np(b))
    for fs, ss in zip(_states(fopt, fast), _states(sopt, slow)):
        assert fs.keys() == ss.keys() and all(np.array_equal(fs[k], ss[k]) for k in fs)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_fused_and_foreach_together_is_refused_as_in_torch(name):
    for lib in (torch, tapelab):
        p = lib.zeros(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
            getattr(lib.optim, name)([p], lr=0.1, fused=True, foreach=True)
    assert optim.Adam([tapelab.zeros(2, requires_grad=True)], fused=True).param_groups[0]["fused"] is True


def test_the_update_bumps_versions_so_saved_values_are_checked():
    """An update between forward and backward is an in-place write, as in PyTorch."""
    for lib in (torch, tapelab):
        w = lib.ones(3, requires_grad=True)
        opt = lib.optim.Adam([w], lr=0.1)
        w.grad = lib.ones(3)
        loss = (w * w).sum()
        before = w._version
        opt.step()
        assert w._version > before
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_watched_steps_take_the_tensor_path_under_the_named_scope(name):
    """Under a tape each update is recorded op by op inside ``optimizer.step (<name>)``."""
    net = tapelab.nn.Linear(3, 2)
    opt = getattr(optim, name)(net.parameters(), lr=0.1)
    net(tapelab.ones(4, 3)).sum().backward()
    with tapelab.tape() as t:
        opt.step()
    scope = f"optimizer.step ({name})"
    ops = [n for n in t.nodes if n.kind == "forward"]
    assert ops and {n.module for n in ops} == {scope}

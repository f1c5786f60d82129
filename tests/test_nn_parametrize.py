"""``nn.utils.parametrize``, ``nn.utils.parametrizations`` and the older hook-based
``nn.utils.weight_norm`` / ``spectral_norm`` against PyTorch: the same weights copied into both
give the same outputs, gradients w.r.t. the originals, state_dict keys and values, power
iterations, removals and errors."""
from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest
import torch

import tapelab

TP, LP = torch.nn.utils.parametrize, tapelab.nn.utils.parametrize
TZ, LZ = torch.nn.utils.parametrizations, tapelab.nn.utils.parametrizations

# (constructor over a module m, input shape)
MODULES = {
    "linear": (lambda m: m.Linear(5, 4), (3, 5)),
    "conv2d": (lambda m: m.Conv2d(3, 4, 3), (2, 3, 6, 6)),
    "conv_transpose2d": (lambda m: m.ConvTranspose2d(3, 4, 3), (2, 3, 5, 5)),
}
SQUARE = {"square": (lambda m: m.Linear(4, 4), (3, 4))}


def tl(x: torch.Tensor) -> tapelab.Tensor:
    return tapelab.tensor(x.detach().numpy().copy())


def npy(x) -> np.ndarray:
    return x.detach().numpy()


def close(a, b, atol=1e-5) -> None:
    np.testing.assert_allclose(npy(a), npy(b), rtol=1e-5, atol=atol)


def pair(kind: str, apply=lambda m, mod: mod, seed: int = 0):
    """The torch module (``apply``-ed), the same on tapelab with torch's state_dict loaded, an input each."""
    ctor, shape = {**MODULES, **SQUARE}[kind]
    torch.manual_seed(seed)
    t_mod = apply(torch, ctor(torch.nn))
    l_mod = apply(tapelab, ctor(tapelab.nn))
    assert list(l_mod.state_dict()) == list(t_mod.state_dict())
    l_mod.load_state_dict({k: tl(v) for k, v in t_mod.state_dict().items()})
    x = torch.randn(*shape)
    return t_mod, l_mod, x, tl(x)


def same_state(t_mod, l_mod) -> None:
    t_sd, l_sd = t_mod.state_dict(), l_mod.state_dict()
    assert list(l_sd) == list(t_sd)
    for k in t_sd:
        close(l_sd[k], t_sd[k])


def same_error(t_fn, l_fn):
    with pytest.raises(Exception) as t_err:
        t_fn()
    with pytest.raises(type(t_err.value)) as l_err:
        l_fn()
    assert str(l_err.value).replace("tapelab.", "torch.") == str(t_err.value)


def _P(m):
    return m.nn.utils.parametrizations


# ---------------------------------------------------------------- weight_norm
@pytest.mark.parametrize("kind", list(MODULES))
@pytest.mark.parametrize("dim", [0, None])
def test_weight_norm(kind, dim):
    t_mod, l_mod, x, lx = pair(kind, lambda m, mod: _P(m).weight_norm(mod, dim=dim))
    assert list(l_mod.state_dict())[-2:] == ["parametrizations.weight.original0",
                                             "parametrizations.weight.original1"]
    same_state(t_mod, l_mod)
    close(l_mod.weight, t_mod.weight)
    t_mod(x).square().sum().backward()
    l_mod(lx).square().sum().backward()
    for name, p in t_mod.named_parameters():
        close(l_mod.get_parameter(name).grad, p.grad, atol=1e-4)
    assert type(l_mod).__name__ == type(t_mod).__name__ == f"Parametrized{type(t_mod).__bases__[0].__name__}"


# ---------------------------------------------------------------- spectral_norm
@pytest.mark.parametrize("kind", list(MODULES))
def test_spectral_norm_power_iteration(kind):
    t_mod, l_mod, x, lx = pair(kind, lambda m, mod: _P(m).spectral_norm(mod))
    assert list(l_mod.state_dict()) == ["bias", "parametrizations.weight.original",
                                        "parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    assert l_mod.parametrizations.weight[0].dim == (1 if kind == "conv_transpose2d" else 0)
    for _ in range(3):   # training mode: every read runs one power-iteration step on u, v
        for mod in (t_mod, l_mod):
            mod.zero_grad()
        t_out, l_out = t_mod(x), l_mod(lx)
        close(l_out, t_out)
        t_out.square().sum().backward()
        l_out.square().sum().backward()
        same_state(t_mod, l_mod)
        close(l_mod.parametrizations.weight.original.grad, t_mod.parametrizations.weight.original.grad, 1e-4)
    t_mod.eval(), l_mod.eval()
    u = l_mod.parametrizations.weight[0]._u.clone()
    close(l_mod(lx), t_mod(x))
    close(l_mod(lx), t_mod(x))
    close(l_mod.parametrizations.weight[0]._u, u, atol=0)   # eval reads the stored vectors
    same_state(t_mod, l_mod)


def test_spectral_norm_is_one_and_options():
    torch.manual_seed(1)
    m = LZ.spectral_norm(tapelab.nn.Linear(6, 4), n_power_iterations=20, eps=1e-10, dim=1)
    sn = m.parametrizations.weight[0]
    assert (sn.n_power_iterations, sn.eps, sn.dim) == (20, 1e-10, 1)
    m(tapelab.randn(2, 6))
    assert abs(float(tapelab.linalg.matrix_norm(m.weight, 2)) - 1.0) < 1e-4


# ---------------------------------------------------------------- orthogonal
@pytest.mark.parametrize("shape,orth_map", [((4, 4), None), ((5, 3), None), ((3, 5), None),
                                            ((4, 4), "cayley"), ((5, 3), "matrix_exp"), ((3, 5), "cayley")])
def test_orthogonal(shape, orth_map):
    torch.manual_seed(2)
    t_mod, l_mod = torch.nn.Linear(shape[1], shape[0], bias=False), tapelab.nn.Linear(shape[1], shape[0], bias=False)
    l_mod.weight.data = tl(t_mod.weight)
    t_mod = TZ.orthogonal(t_mod, orthogonal_map=orth_map)
    l_mod = LZ.orthogonal(l_mod, orthogonal_map=orth_map)
    if shape[0] == shape[1]:   # base: the QR of the weight, signs fixed (a frame completed at random otherwise)
        same_state(t_mod, l_mod)
    assert l_mod.parametrizations.weight[0].orthogonal_map.name == t_mod.parametrizations.weight[0].orthogonal_map.name
    assert list(l_mod.state_dict()) == list(t_mod.state_dict()) == ["parametrizations.weight.original",
                                                                    "parametrizations.weight.0.base"]
    l_mod.load_state_dict({k: tl(v) for k, v in t_mod.state_dict().items()})
    with torch.no_grad():   # move off -I so the map is exercised; householder reads the diagonal's sign as an int
        t_mod.parametrizations.weight.original.add_(0.3 * torch.randn(shape) * (1 - torch.eye(*shape)))
    l_mod.parametrizations.weight.original.data = tl(t_mod.parametrizations.weight.original)
    w = l_mod.weight
    close(w, t_mod.weight)
    k = min(shape)
    gram = w.mT @ w if shape[0] >= shape[1] else w @ w.mT
    close(gram, torch.eye(k), atol=1e-5)
    x = torch.randn(2, shape[1])
    t_mod(x).sin().sum().backward()
    l_mod(tl(x)).sin().sum().backward()
    close(l_mod.parametrizations.weight.original.grad, t_mod.parametrizations.weight.original.grad, 1e-4)


def test_orthogonal_assignment_and_no_trivialization():
    torch.manual_seed(3)
    w = torch.randn(5, 3)
    t_mod = TZ.orthogonal(torch.nn.Linear(3, 5, bias=False), use_trivialization=False)
    l_mod = LZ.orthogonal(tapelab.nn.Linear(3, 5, bias=False), use_trivialization=False)
    t_mod.weight = w   # right_inverse through geqrf: the Householder vectors and signs
    l_mod.weight = tl(w)
    close(l_mod.parametrizations.weight.original, t_mod.parametrizations.weight.original)
    close(l_mod.weight, t_mod.weight)
    q = torch.linalg.qr(torch.randn(4, 4)).Q   # an orthogonal matrix assigned reads back as itself
    sq = LZ.orthogonal(tapelab.nn.Linear(4, 4, bias=False))
    sq.weight = tl(q)
    close(sq.weight, q)
    same_error(lambda: TZ.orthogonal(torch.nn.Linear(4, 4), use_trivialization=False).__setattr__("weight", q),
               lambda: LZ.orthogonal(tapelab.nn.Linear(4, 4), use_trivialization=False).__setattr__("weight", tl(q)))


# ---------------------------------------------------------------- the older hook-based forms
@pytest.mark.parametrize("kind", list(MODULES))
def test_old_weight_norm(kind):
    def apply(m, mod):
        with pytest.warns(FutureWarning, match="deprecated"):
            return m.nn.utils.weight_norm(mod, dim=1)
    t_mod, l_mod, x, lx = pair(kind, apply)
    assert list(l_mod.state_dict()) == ["bias", "weight_g", "weight_v"]
    same_state(t_mod, l_mod)
    t_mod(x).square().sum().backward()
    l_mod(lx).square().sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        close(getattr(l_mod, name).grad, getattr(t_mod, name).grad, 1e-4)
    torch.nn.utils.remove_weight_norm(t_mod)
    tapelab.nn.utils.remove_weight_norm(l_mod)
    assert isinstance(l_mod.weight, tapelab.nn.Parameter) and not l_mod._forward_pre_hooks
    same_state(t_mod, l_mod)
    same_error(lambda: torch.nn.utils.remove_weight_norm(t_mod), lambda: tapelab.nn.utils.remove_weight_norm(l_mod))


@pytest.mark.parametrize("kind", list(MODULES))
def test_old_spectral_norm(kind):
    t_mod, l_mod, x, lx = pair(kind, lambda m, mod: m.nn.utils.spectral_norm(mod))
    assert list(l_mod.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    for _ in range(3):
        t_mod.zero_grad(), l_mod.zero_grad()
        t_out, l_out = t_mod(x), l_mod(lx)
        close(l_out, t_out)
        t_out.square().sum().backward()
        l_out.square().sum().backward()
        same_state(t_mod, l_mod)
        close(l_mod.weight_orig.grad, t_mod.weight_orig.grad, 1e-4)
    t_mod.eval(), l_mod.eval()
    close(l_mod(lx), t_mod(x))
    same_state(t_mod, l_mod)
    torch.nn.utils.remove_spectral_norm(t_mod)
    tapelab.nn.utils.remove_spectral_norm(l_mod)
    same_state(t_mod, l_mod)
    assert list(l_mod.state_dict()) == ["bias", "weight"]
    same_error(lambda: torch.nn.utils.remove_spectral_norm(t_mod),
               lambda: tapelab.nn.utils.remove_spectral_norm(l_mod))


def test_old_forms_refuse_a_second_hook():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(lambda: torch.nn.utils.weight_norm(torch.nn.utils.weight_norm(torch.nn.Linear(2, 2))),
                   lambda: tapelab.nn.utils.weight_norm(tapelab.nn.utils.weight_norm(tapelab.nn.Linear(2, 2))))
    same_error(lambda: torch.nn.utils.spectral_norm(torch.nn.utils.spectral_norm(torch.nn.Linear(2, 2))),
               lambda: tapelab.nn.utils.spectral_norm(tapelab.nn.utils.spectral_norm(tapelab.nn.Linear(2, 2))))


# ---------------------------------------------------------------- removal
@pytest.mark.parametrize("leave", [True, False])
def test_remove_spectral_norm_parametrization(leave):
    t_mod, l_mod, x, lx = pair("conv2d", lambda m, mod: _P(m).spectral_norm(mod))
    t_mod(x), l_mod(lx)
    TP.remove_parametrizations(t_mod, "weight", leave_parametrized=leave)
    LP.remove_parametrizations(l_mod, "weight", leave_parametrized=leave)
    assert type(l_mod) is tapelab.nn.Conv2d and not LP.is_parametrized(l_mod)
    assert not hasattr(l_mod, "parametrizations")
    assert isinstance(l_mod.weight, tapelab.nn.Parameter)
    same_state(t_mod, l_mod)
    assert list(l_mod.state_dict()) == ["bias", "weight"]
    close(l_mod(lx), t_mod(x))


def test_remove_weight_norm_parametrization():
    t_mod, l_mod, x, lx = pair("linear", lambda m, mod: _P(m).weight_norm(mod))
    TP.remove_parametrizations(t_mod, "weight")
    LP.remove_parametrizations(l_mod, "weight")
    same_state(t_mod, l_mod)
    assert isinstance(l_mod.weight, tapelab.nn.Parameter) and l_mod.weight.is_leaf
    t_mod, l_mod, x, lx = pair("linear", lambda m, mod: _P(m).weight_norm(mod))
    same_error(lambda: TP.remove_parametrizations(t_mod, "weight", leave_parametrized=False),
               lambda: LP.remove_parametrizations(l_mod, "weight", leave_parametrized=False))


# ---------------------------------------------------------------- a custom parametrization
def _symmetric(m):
    class Symmetric(m.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):
            return A.triu()
    return Symmetric()


def _scale(m):
    class Scale(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = m.nn.Parameter(m.tensor(2.0))

        def forward(self, X):
            return X * self.s

        def right_inverse(self, Y):
            return Y / self.s
    return Scale()


def test_custom_parametrization_chain():
    def apply(m, mod):
        m.nn.utils.parametrize.register_parametrization(mod, "weight", _symmetric(m))
        return m.nn.utils.parametrize.register_parametrization(mod, "weight", _scale(m))
    t_mod, l_mod, x, lx = pair("square", apply)
    assert list(l_mod.state_dict()) == ["bias", "parametrizations.weight.original", "parametrizations.weight.1.s"]
    assert isinstance(l_mod.parametrizations.weight, LP.ParametrizationList) and len(l_mod.parametrizations.weight) == 2
    close(l_mod.weight, t_mod.weight)
    close(l_mod.weight, l_mod.weight.T)
    t_mod(x).pow(3).sum().backward()
    l_mod(lx).pow(3).sum().backward()
    for name, p in t_mod.named_parameters():
        close(l_mod.get_parameter(name).grad, p.grad, 1e-4)
    a = torch.randn(4, 4)
    a = a + a.T
    t_mod.weight, l_mod.weight = a, tl(a)   # assignment runs right_inverse, last registered first
    same_state(t_mod, l_mod)
    close(l_mod.weight, a)
    assert LP.type_before_parametrizations(l_mod) is tapelab.nn.Linear
    assert LP.is_parametrized(l_mod) and LP.is_parametrized(l_mod, "weight") and not LP.is_parametrized(l_mod, "bias")


def test_parametrized_buffer_and_tuple_originals():
    class Split(tapelab.nn.Module):
        def forward(self, a, b):
            return a + b

        def right_inverse(self, x):
            return x * 0.25, x * 0.75
    m = tapelab.nn.BatchNorm1d(3)
    LP.register_parametrization(m, "running_var", Split())
    assert "parametrizations.running_var.original0" in m.state_dict()
    assert not m.parametrizations.running_var.original0.requires_grad   # buffers stay buffers
    close(m.running_var, torch.ones(3))


def test_cached():
    calls = []

    class Counting(tapelab.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2
    m = LP.register_parametrization(tapelab.nn.Linear(3, 3), "weight", Counting())
    calls.clear()
    assert m.weight is not m.weight and len(calls) == 2
    with LP.cached():
        with LP.cached():
            w = m.weight
        assert m.weight is w and len(calls) == 3
    assert m.weight is not w and len(calls) == 4


def test_copy_and_pickle():
    m = LZ.spectral_norm(tapelab.nn.Linear(3, 2))
    c = copy.deepcopy(m)
    close(c.weight, m.weight)
    assert type(c) is type(m) and c.parametrizations.weight.original is not m.parametrizations.weight.original
    same_error(lambda: pickle.dumps(TZ.spectral_norm(torch.nn.Linear(3, 2))), lambda: pickle.dumps(m))


def test_transfer_parametrizations():
    src = LZ.weight_norm(tapelab.nn.Linear(3, 2))
    dst = LP.transfer_parametrizations_and_params(src, tapelab.nn.Linear(3, 2))
    assert dst.parametrizations.weight.original1 is src.parametrizations.weight.original1
    close(dst.weight, src.weight)


# ---------------------------------------------------------------- errors
class _Shape(torch.nn.Module):
    def forward(self, X):
        return X[0]


class _LShape(tapelab.nn.Module):
    def forward(self, X):
        return X[0]


def test_errors():
    same_error(lambda: TP.register_parametrization(torch.nn.Linear(3, 3), "weigh", _symmetric(torch)),
               lambda: LP.register_parametrization(tapelab.nn.Linear(3, 3), "weigh", _symmetric(tapelab)))
    same_error(lambda: TP.remove_parametrizations(torch.nn.Linear(3, 3), "weight"),
               lambda: LP.remove_parametrizations(tapelab.nn.Linear(3, 3), "weight"))
    same_error(lambda: TP.register_parametrization(torch.nn.Linear(3, 3), "weight", _Shape()),
               lambda: LP.register_parametrization(tapelab.nn.Linear(3, 3), "weight", _LShape()))
    same_error(lambda: TP.register_parametrization(TZ.weight_norm(torch.nn.Linear(3, 3)), "weight", _Shape()),
               lambda: LP.register_parametrization(LZ.weight_norm(tapelab.nn.Linear(3, 3)), "weight", _LShape()))
    same_error(lambda: TZ.spectral_norm(torch.nn.Linear(3, 3), dim=2),
               lambda: LZ.spectral_norm(tapelab.nn.Linear(3, 3), dim=2))
    same_error(lambda: TZ.spectral_norm(torch.nn.Linear(3, 3), n_power_iterations=0),
               lambda: LZ.spectral_norm(tapelab.nn.Linear(3, 3), n_power_iterations=0))
    same_error(lambda: TZ.orthogonal(torch.nn.Linear(3, 3), "bias"),
               lambda: LZ.orthogonal(tapelab.nn.Linear(3, 3), "bias"))
    same_error(lambda: TZ.orthogonal(torch.nn.Linear(3, 3), orthogonal_map="qr"),
               lambda: LZ.orthogonal(tapelab.nn.Linear(3, 3), orthogonal_map="qr"))
    same_error(lambda: TZ.orthogonal(torch.nn.Linear(3, 3), "missing"),
               lambda: LZ.orthogonal(tapelab.nn.Linear(3, 3), "missing"))


def test_import_paths_under_aliases():
    with tapelab.install_aliases():
        import torch.nn.utils.parametrize as P
        from torch.nn.utils.parametrizations import orthogonal, spectral_norm, weight_norm  # noqa: F401
        from torch.nn.utils import remove_spectral_norm, remove_weight_norm  # noqa: F401
        assert P is tapelab.nn.utils.parametrize and spectral_norm is LZ.spectral_norm


def test_weight_norm_loads_the_older_keys():
    """A checkpoint of the hook-based weight_norm (HiFi-GAN's) loads into the parametrized form."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = torch.nn.Sequential(torch.nn.utils.weight_norm(torch.nn.Conv1d(2, 3, 3)))
    t_mod = torch.nn.Sequential(TZ.weight_norm(torch.nn.Conv1d(2, 3, 3)))
    l_mod = tapelab.nn.Sequential(LZ.weight_norm(tapelab.nn.Conv1d(2, 3, 3)))
    t_mod.load_state_dict(old.state_dict())
    l_mod.load_state_dict({k: tl(v) for k, v in old.state_dict().items()})
    same_state(t_mod, l_mod)
    close(l_mod[0].weight, old[0].weight)


@pytest.mark.parametrize("make", [lambda m: _P(m).weight_norm(m.nn.Linear(3, 4)),
                                  lambda m: _P(m).spectral_norm(m.nn.Linear(3, 4)).eval(),
                                  lambda m: _P(m).orthogonal(m.nn.Linear(3, 3)),
                                  lambda m: _P(m).orthogonal(m.nn.Linear(3, 4)),
                                  lambda m: _P(m).orthogonal(m.nn.Linear(3, 3), orthogonal_map="cayley")],
                         ids=["weight_norm", "spectral_norm", "matrix_exp", "householder", "cayley"])
def test_gradcheck_float64(make):
    mod = make(tapelab).double()
    plist = mod.parametrizations.weight
    originals = [getattr(plist, n) for n in ("original", "original0", "original1") if hasattr(plist, n)]
    with tapelab.no_grad():   # off the -I the orthogonal maps start from
        for o in originals:
            o.add_(0.1 * tapelab.randn(*o.shape, dtype=tapelab.float64))

    inputs = tuple(o.detach().clone().requires_grad_(True) for o in originals)

    def weight(*values):   # what mod.weight computes, from the originals given
        return plist[0](*values)
    assert tapelab.autograd.gradcheck(weight, inputs)
    assert tapelab.autograd.gradgradcheck(weight, inputs)


@pytest.mark.parametrize("layer", ["RNN", "LSTM"])
def test_orthogonal_recurrent_weight(layer):
    """An orthogonal RNN: the recurrent layer reads its parametrized weight on every call."""
    torch.manual_seed(4)
    t_mod = TZ.orthogonal(getattr(torch.nn, layer)(4, 5), "weight_hh_l0")
    l_mod = LZ.orthogonal(getattr(tapelab.nn, layer)(4, 5), "weight_hh_l0")
    l_mod.load_state_dict({k: tl(v) for k, v in t_mod.state_dict().items()})
    square = (5, 5) if layer == "RNN" else (20, 5)
    with torch.no_grad():
        t_mod.parametrizations.weight_hh_l0.original.add_(0.2 * torch.randn(square) * (1 - torch.eye(*square)))
    l_mod.parametrizations.weight_hh_l0.original.data = tl(t_mod.parametrizations.weight_hh_l0.original)
    x = torch.randn(6, 2, 4)
    t_out, l_out = t_mod(x)[0], l_mod(tl(x))[0]
    close(l_out, t_out)   # matrix_exp is torch's own algorithm (engine/ops/linalg_matrix_exp.py)
    t_out.sum().backward()
    l_out.sum().backward()
    close(l_mod.parametrizations.weight_hh_l0.original.grad, t_mod.parametrizations.weight_hh_l0.original.grad, 1e-4)


def test_repr_and_names():
    t_mod, l_mod = TZ.spectral_norm(torch.nn.Linear(3, 3)), LZ.spectral_norm(tapelab.nn.Linear(3, 3))
    assert repr(l_mod) == repr(t_mod)
    assert [n for n, _ in l_mod.named_parameters()] == [n for n, _ in t_mod.named_parameters()]
    same_error(lambda: setattr(t_mod, "weight", torch.nn.Parameter(torch.ones(3, 3))),
               lambda: setattr(l_mod, "weight", tapelab.nn.Parameter(tapelab.ones(3, 3))))


def test_unsafe_shape_change_keeps_the_parameter():
    """``unsafe=True``: right_inverse may reshape the original, in place (an optimizer holding the
    Parameter keeps it), and removal leaves the parametrized shape in the same Parameter."""
    results = []
    for m in (torch, tapelab):
        class Flat(m.nn.Module):
            def forward(self, x):
                return x.reshape(4, 3)

            def right_inverse(self, w):
                return w.reshape(-1)

        class Twice(m.nn.Module):
            def forward(self, x):
                return m.cat([x, x], 0)
        lin = m.nn.Linear(3, 4)
        p, w0 = lin.weight, lin.weight.detach().clone()
        P = m.nn.utils.parametrize
        P.register_parametrization(lin, "weight", Flat(), unsafe=True)
        row = [tuple(lin.parametrizations.weight.original.shape), lin.parametrizations.weight.original is p,
               bool((lin.weight == w0).all())]
        P.register_parametrization(lin, "weight", Twice(), unsafe=True)
        row += [tuple(lin.weight.shape), lin.parametrizations.weight.unsafe]
        P.remove_parametrizations(lin, "weight")
        row += [tuple(lin.weight.shape), lin.weight is p, type(lin).__name__]
        results.append(row)
    assert results[1] == results[0] == [(12,), True, True, (8, 3), True, (8, 3), True, "Linear"]


def _gan_and_vocoder_program() -> list[float]:
    """A probe-style program written against ``torch``: a spectral-norm discriminator, a
    weight-normed vocoder conv (removed for inference), an orthogonal layer; three Adam steps."""
    import torch
    import torch.nn.utils.parametrize as P
    from torch import nn
    from torch.nn.utils import remove_weight_norm, weight_norm
    from torch.nn.utils.parametrizations import orthogonal, spectral_norm

    def fill(module):   # the same numbers under either library
        with torch.no_grad():
            for i, (_, t) in enumerate(sorted(module.state_dict(keep_vars=True).items())):
                k = torch.arange(t.numel(), dtype=torch.float32)   # a quadratic phase: full rank
                t.copy_((k * k * (0.37 + 0.01 * i)).sin().reshape(t.shape) * 0.5)

    disc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(4 * 4 * 4, 1))
    voc = nn.Conv1d(2, 3, 3, padding=1)
    rot = nn.Linear(4, 4, bias=False)
    for m in (disc, voc, rot):
        fill(m)
    spectral_norm(disc[0])
    spectral_norm(disc[3])
    for sn in (disc[0].parametrizations.weight[0], disc[3].parametrizations.weight[0]):
        sn._u.copy_(nn.functional.normalize(torch.ones_like(sn._u), dim=0))
        sn._v.copy_(nn.functional.normalize(torch.linspace(1, 2, sn._v.numel()), dim=0))
    voc = weight_norm(voc)
    orthogonal(rot)
    params = list(disc.parameters()) + list(voc.parameters()) + list(rot.parameters())
    opt = torch.optim.Adam(params, lr=0.01)
    x = torch.linspace(-1, 1, 2 * 36).reshape(2, 1, 6, 6)
    s = torch.linspace(-1, 1, 2 * 2 * 5).reshape(2, 2, 5)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with P.cached():
            loss = disc(x).square().mean() + voc(s).abs().mean() + rot(x[0, 0, :4, 1:5]).pow(3).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    disc.eval()
    remove_weight_norm(voc)
    P.remove_parametrizations(rot, "weight")
    losses += [disc(x).sum().item(), voc(s).sum().item(), rot.weight.sum().item()]
    return losses


def test_program_under_aliases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = _gan_and_vocoder_program()
        with tapelab.install_aliases():
            got = _gan_and_vocoder_program()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

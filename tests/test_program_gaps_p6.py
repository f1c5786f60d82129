"""Gaps found by running new families of research programs seeded under torch and under
``install_aliases()`` and diffing what they print: a Fourier neural operator (rfft2/irfft2, complex
weights, complex einsum), S4D (complex parameters through ``view_as_complex``, Vandermonde kernels,
FFT convolution), a minimal Mamba (selective scan loop, softplus, depthwise conv1d, tied embeddings)
and its log-space parallel scan (complex log, logcumsumexp), RWKV's time-mix recurrence with its
L2Wrap ``autograd.Function``, KAN layers (B-spline bases, ``linalg.lstsq``, LBFGS), MAML
(``autograd.grad(create_graph=True)`` through ``functional_call``, learn2learn's clone/update of
``_parameters``; ``torch.func`` grad/vmap/jacrev/linearize, ensembles by ``stack_module_state``), a
PINN (grad of grad, LBFGS with a closure, ``autograd.functional.hessian``), a DDPM on 2-D toy data
with an EMA of the weights (and ``AveragedModel``), stable-baselines3's PPO code paths
(distributions, ``clip_grad_norm_``, state-dict round trips through ``BytesIO``), EGNN/GAT/DGCNN
message passing (``scatter_add_``, ``scatter_reduce``, ``index_add_``, k-NN by ``topk``), and smaller
ones: DEQ with Anderson acceleration and a backward hook, capsule routing, neural cellular automata,
surrogate-gradient spiking nets, slot attention, sparsemax, SimCLR, distillation, rotary embeddings
through complex numbers, FFJORD's trace estimator and Langevin sampling of an energy model.
Each test exercises the API pattern directly and compares with real torch (no program is imported)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab


# ---------------------------------------------------------------- message passing: scatter_reduce gradients
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin", "mean", "sum"])
def test_scatter_reduce_gradients_match_torch(reduce, include_self):
    """Graph pooling by ``scatter_reduce``: 'prod' had no gradient at all, and amax/amin with
    ``include_self=False`` split a tie with the unused input differently from PyTorch (which counts
    it). Small integers make ties and zeros (one and several per place) common."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.integers(-2, 3, (4, 3)).astype(np.float64)
        src = rng.integers(-2, 3, (6, 3)).astype(np.float64)
        idx, g = rng.integers(0, 4, (6, 3)), rng.standard_normal((4, 3))
        results = []
        for m in (tapelab, torch):
            a, s = m.tensor(x, requires_grad=True), m.tensor(src, requires_grad=True)
            out = a.scatter_reduce(0, m.tensor(idx), s, reduce=reduce, include_self=include_self)
            results.append([out.detach().numpy(), *(t.numpy() for t in m.autograd.grad(out, (a, s), m.tensor(g)))])
        for ours, theirs in zip(*results):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_double_backward_matches_torch(include_self):
    """The prod gradient is built from ops, so it differentiates again (a lone zero factor included)."""
    rng = np.random.default_rng(1)
    x, src = rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    src[0, 0] = x[1, 1] = 0
    idx = rng.integers(0, 4, (6, 3))
    results = []
    for m in (tapelab, torch):
        a, s = m.tensor(x, requires_grad=True), m.tensor(src, requires_grad=True)
        out = a.scatter_reduce(0, m.tensor(idx), s, reduce="prod", include_self=include_self)
        ga, gs = m.autograd.grad((out ** 2).sum(), (a, s), create_graph=True)
        results.append([t.detach().numpy() for t in (ga, gs, *m.autograd.grad(ga.sum() + (gs ** 2).sum(), (a, s)))])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- FNO: copying a tensor through torch.tensor
def _warnings_of(call) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]


def test_copy_constructing_a_tensor_warns_at_the_callers_line_as_torch():
    """FNO's grid ``torch.tensor(torch.linspace(0, 1, n), dtype=torch.float)`` warns under PyTorch (use
    ``detach().clone()``), as does ``x.new_tensor(x)``; lists, arrays and ``as_tensor`` do not."""
    for calls in ([lambda m: m.tensor(m.linspace(0, 1, 3), dtype=m.float)],
                  [lambda m: m.ones(2).new_tensor(m.ones(2))],
                  [lambda m: m.tensor([1.0]), lambda m: m.ones(2).new_tensor([2.0]),
                   lambda m: m.as_tensor(m.ones(2)), lambda m: m.tensor(np.ones(2))]):
        for call in calls:
            assert _warnings_of(lambda: call(tapelab)) == _warnings_of(lambda: call(torch))
    assert _warnings_of(lambda: tapelab.tensor(tapelab.ones(1)))


# ---------------------------------------------------------------- printed results: what an aliased program shows
def test_return_types_print_as_torch_under_aliases():
    """``print(x.max(0))`` and ``print(x.shape)`` in an aliased program printed ``tapelab.return_types.max(...)``
    and ``tapelab.Size([...])``; without the aliases they keep tapelab's name."""
    x = np.array([[1.0, 3.0], [2.0, 0.0]], dtype=np.float32)

    def printed(m):
        return [repr(m.tensor(x).max(0)), repr(m.sort(m.tensor(x), 1)), repr(m.linalg.slogdet(m.tensor(x))),
                repr(m.tensor(x).shape), str(m.tensor(x)[0].shape)]
    with tapelab.install_aliases():
        import torch as aliased
        ours = printed(aliased)
    assert ours == printed(torch)
    assert [text.split("(")[0] for text in printed(tapelab)[::3]] == ["tapelab.return_types.max", "tapelab.Size"]


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "complex64"])
def test_finfo_prints_as_torch(name):
    """``print(torch.finfo(dtype))`` shows the limits as PyTorch's C++ stream does (``%g``)."""
    ours, theirs = tapelab.finfo(getattr(tapelab, name)), torch.finfo(getattr(torch, name))
    assert (repr(ours), str(ours)) == (repr(theirs), str(theirs))


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "int32", "int64", "bool"])
def test_iinfo_prints_and_refuses_as_torch(name):
    """int32/int64 limits print as doubles (``9.22337e+18``); ``iinfo(torch.bool)`` raises TypeError."""
    try:
        theirs = repr(torch.iinfo(getattr(torch, name)))
    except TypeError as e:
        with pytest.raises(TypeError, match=str(e)):
            tapelab.iinfo(getattr(tapelab, name))
        return
    assert repr(tapelab.iinfo(getattr(tapelab, name))) == theirs


# ---------------------------------------------------------------- torch.func: linearize
def test_func_linearize_matches_torch():
    """``torch.func.linearize`` (missing): the value and a reusable jvp at the primals, with PyTorch's
    checks of the tangents' structure, shapes and dtypes."""
    results = []
    for m in (tapelab, torch):
        x = m.tensor([0.3, 0.7], requires_grad=True)
        value, jvp_fn = m.func.linearize(lambda a, b: (a.sin() * b, (a * b).sum()), x, m.tensor([2.0, -1.0]))
        products = [jvp_fn(m.ones(2), m.zeros(2)), jvp_fn(m.tensor([0.5, 1.0]), m.tensor([1.0, 3.0]))]
        errors = []
        for bad in [(m.ones(3), m.ones(2)), (m.ones(2),), (m.ones(2, dtype=m.float64), m.ones(2))]:
            with pytest.raises(RuntimeError) as e:
                jvp_fn(*bad)
            errors.append(str(e.value).split(" ")[0])
        results.append(([t.detach().numpy() for t in value] + [t.detach().numpy() for p in products for t in p],
                        errors))
    (ours, our_errors), (theirs, their_errors) = results
    assert len(ours) == len(theirs) == 6 and our_errors == their_errors
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_func_jvp_with_aux_and_jacrev_chunk_size_match_torch():
    """MAML/PINN code: ``jvp(..., has_aux=True)`` raised NotImplementedError, ``jacrev(chunk_size=)`` a
    TypeError; a non-positive chunk size raises PyTorch's ValueError."""
    results = []
    for m in (tapelab, torch):
        x = m.tensor([0.3, 0.7, 1.1])
        value, product, aux = m.func.jvp(lambda t: (t.sin().sum(), t.cos()), (x,), (m.ones(3),), has_aux=True)
        jac = m.func.jacrev(lambda t: t.sin() * t, chunk_size=1)(x)
        with pytest.raises(ValueError, match="`chunk_size` should be greater than 0"):
            m.func.jacrev(m.sin, chunk_size=0)(x)
        results.append([t.numpy() for t in (value, product, aux, jac)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_func_replace_all_batch_norm_modules_matches_torch():
    """MAML over a model with batch norm: the running statistics go (None) and forward uses the batch's."""
    results = []
    for m in (tapelab, torch):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.BatchNorm1d(4, track_running_stats=False))
        assert m.func.replace_all_batch_norm_modules_(net) is net
        stats = [(b.running_mean, b.running_var, b.num_batches_tracked, b.track_running_stats) for b in net[1:]]
        assert stats == [(None, None, None, False)] * 2 and dict(net.named_buffers()) == {}
        results.append(net.eval()(m.arange(6.0).reshape(2, 3)).detach().numpy())
    np.testing.assert_allclose(*results, rtol=1e-6)


def test_stateless_functional_call_warns_and_calls_as_torch():
    """Older MAML code imports ``torch.nn.utils.stateless.functional_call`` (the module was missing):
    PyTorch's FutureWarning at the caller's line, then ``torch.func.functional_call``'s result."""
    results = []
    for m in (tapelab, torch):
        m.manual_seed(0)
        net = m.nn.Linear(3, 2)
        doubled = {k: v * 2 for k, v in net.named_parameters()}
        caught = _warnings_of(lambda: results.append(
            m.nn.utils.stateless.functional_call(net, doubled, (m.ones(1, 3),)).detach().numpy()))
        results.append(caught)
    np.testing.assert_allclose(results[0], results[2], rtol=1e-6)
    assert results[1] == results[3] and results[1][0][0] is FutureWarning

"""Gaps found in session 23 (helper D) running opacus, higher, torchopt, pykeen, pytorch-tabnet, deepxde,
torch-ema, pytorch-msssim, rtdl (revisiting-models, num-embeddings) and torch.func MAML/ensembling
programs unchanged under ``install_aliases()``, each pattern written here directly (none of those
libraries is imported) and checked against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- RNN's _flat_weights list
def test_assigning_an_rnns_flat_weights_list_runs_forward_with_those_weights():
    """higher's functional RNNs swap fast weights in and then reassign ``module._flat_weights``; PyTorch
    keeps a plain list there, tapelab's read-only property raised AttributeError."""
    outs = []
    for m in (torch, tapelab):
        m.manual_seed(0)
        lstm = m.nn.LSTM(3, 4, batch_first=True)
        x = m.arange(24.).reshape(2, 4, 3) / 24
        lstm._flat_weights = [lstm._parameters[n] for n in lstm._flat_weights_names]   # unchanged entries
        before = lstm(x)[0]
        new = [m.nn.Parameter(p.detach() * 0.5) for p in lstm._flat_weights]
        lstm._flat_weights = new                 # changed entries: what forward reads from then on
        names = lstm._flat_weights_names
        outs.append((_np(before), _np(lstm(x)[0]), [getattr(lstm, n) is w for n, w in zip(names, new)]
                     if m is tapelab else None))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-5, atol=1e-6)
    assert all(outs[1][2])


# ---------------------------------------------------------------- torch.distributed.rpc / autograd names
def test_rpc_api_and_constants_submodules_and_dist_autograd_context_exist():
    """torchopt's pytree module reads ``rpc.api.UNSET_RPC_TIMEOUT`` at import and its distributed module
    imports ``DistAutogradContext``; tapelab had neither submodule nor the class."""
    import tapelab.distributed.autograd as tl_autograd
    import tapelab.distributed.rpc as tl_rpc
    import torch.distributed.autograd as pt_autograd
    import torch.distributed.rpc as pt_rpc
    for name in ("UNSET_RPC_TIMEOUT", "DEFAULT_RPC_TIMEOUT_SEC", "DEFAULT_NUM_WORKER_THREADS",
                 "DEFAULT_INIT_METHOD", "DEFAULT_SHUTDOWN_TIMEOUT", "DEFAULT_PROCESS_GROUP_TIMEOUT"):
        assert getattr(tl_rpc.constants, name) == getattr(pt_rpc.constants, name), name
    for name in ("UNSET_RPC_TIMEOUT", "rpc_sync", "rpc_async", "remote", "RRef", "get_worker_info", "shutdown"):
        assert hasattr(pt_rpc.api, name) and hasattr(tl_rpc.api, name), name
    assert tl_rpc.api.rpc_sync is tl_rpc.rpc_sync
    assert isinstance(pt_autograd.DistAutogradContext, type) and isinstance(tl_autograd.DistAutogradContext, type)
    opts = tl_rpc.TensorPipeRpcBackendOptions()
    ref = pt_rpc.TensorPipeRpcBackendOptions()
    assert (opts.num_worker_threads, opts.rpc_timeout, opts.init_method) == \
        (ref.num_worker_threads, ref.rpc_timeout, ref.init_method)


# ---------------------------------------------------------------- vjp_fn differentiable in its cotangents
def _vjp_cases(m):
    from_vjp = {}
    x = m.tensor([0.3, 0.5, 0.7])
    _, f = m.func.vjp(m.sin, x)
    ct = m.ones(3, requires_grad=True)
    r = f(ct * 2)[0]
    from_vjp["requires_grad"] = r.requires_grad
    r.pow(2).sum().backward()
    from_vjp["ct.grad"] = _np(ct.grad)
    with m.no_grad():      # inside a custom Function's backward: the vjp of a vjp (torchopt's normal CG)
        _, f3 = m.func.vjp(lambda z: z.pow(3), x)
        _, transpose = m.func.vjp(lambda u: f3(u)[0], m.ones(3))
        from_vjp["vjp_of_vjp"] = _np(transpose(m.tensor([1., 2., 3.]))[0])
    from_vjp["grad_of_vjp"] = _np(m.func.grad(lambda u: f3(u)[0].sum())(m.ones(3)))
    from_vjp["vmap_grad_of_vjp"] = _np(m.vmap(m.func.grad(lambda u: (f3(u)[0] * u).sum()))(m.eye(3)))
    return from_vjp


def test_vjp_fn_output_is_differentiable_in_its_cotangents():
    """torchopt's implicit differentiation (``custom_root`` with ``solve_normal_cg``) transposes the
    optimality condition's vjp by taking ``vjp`` of ``vjp_fn`` inside a Function's backward; PyTorch's
    ``vjp_fn`` result stays on the cotangents' graph, tapelab's was cut (RuntimeError: element 0 of
    tensors does not require grad)."""
    pt, tl = _vjp_cases(torch), _vjp_cases(tapelab)
    assert pt["requires_grad"] is tl["requires_grad"] is True
    for k in ("ct.grad", "vjp_of_vjp", "grad_of_vjp", "vmap_grad_of_vjp"):
        np.testing.assert_allclose(tl[k], pt[k], rtol=1e-6, err_msg=k)


def test_vjp_fn_with_plain_cotangents_stays_off_the_graph():
    """The other side: cotangents that need no gradient give results that need none (no graph kept)."""
    for m in (torch, tapelab):
        _, f = m.func.vjp(m.sin, m.tensor([0.3, 0.5]))
        assert f(m.ones(2))[0].requires_grad is False


# ---------------------------------------------------------------- detach_ after a consumer recorded it
def _detached_cases(m):
    out = {}

    def run(name, fn):
        x = m.tensor([1., 2., 3.], requires_grad=True)
        try:
            fn(x).backward()
            out[name] = _np(x.grad)
        except RuntimeError as e:
            out[name] = type(e).__name__
    run("detach_", lambda x: _mul_then(m, x * 3, lambda t: t.detach_()))
    run("detach_zero_", lambda x: _mul_then(m, x * 3, lambda t: t.detach_().zero_()))
    run("buffer_plus_norm", lambda x: _mul_then(m, m.zeros(1) + x.norm(p=2, dim=-1).mean(),
                                                 lambda t: t.detach_().zero_()))
    run("saved_output_zeroed", lambda x: _mul_then(m, x.norm(), lambda t: t.detach_().zero_()))
    t = m.tensor([1., 2.], requires_grad=True) * 2
    t.detach_()
    out["flags"] = (t.requires_grad, t.is_leaf, t.grad_fn)
    return out


def _mul_then(m, t, after):
    r = 0.1 * t if t.ndim else t * 0.1
    after(t)
    return r.sum()


def test_detach_in_place_leaves_earlier_consumers_gradients():
    """pykeen's regularizer returns ``weight * term`` and then ``term.detach_().zero_()``: PyTorch's
    backward still reaches the embeddings through the product (an input's gradient follows the edge
    the forward recorded), tapelab's vjp read the detached input's ``requires_grad`` and dropped it,
    so every regularized model (DistMult, ComplEx) trained on the wrong gradient."""
    import tapelab.core.node as node
    flag = node.DETACHED_IN_PLACE[0]
    try:
        pt, tl = _detached_cases(torch), _detached_cases(tapelab)
    finally:   # the flag routes the engine's walk through OpNode.run for good: keep the suite's default
        node.DETACHED_IN_PLACE[0] = flag
    assert pt["saved_output_zeroed"] == tl["saved_output_zeroed"] == "RuntimeError"
    for k in ("detach_", "detach_zero_", "buffer_plus_norm"):
        np.testing.assert_allclose(tl[k], pt[k], rtol=1e-6, err_msg=k)
    assert pt["flags"] == tl["flags"] == (False, True, None)


# ---------------------------------------------------------------- randint's keyword overloads
_RANDINT = ["randint(high=5, size=(3,))", "randint(5, size=(3,))", "randint(2, 5, (3,))",
            "randint(low=2, high=5, size=(3,))", "randint(2, high=5, size=[2, 2])",
            "randint(high=5, size=(4,), dtype=L.int32)", "randint(high=5, size=3)", "randint(size=(3,))",
            "randint(5)", "randint(0, 5)", "randint(5, 2, (3,))"]


@pytest.mark.parametrize("call", _RANDINT)
def test_randint_overloads_by_keyword(call):
    """pykeen's negative sampler calls ``torch.randint(high=n, size=(k,))``: tapelab's required ``low``
    raised TypeError; the malformed calls raise PyTorch's exception types."""
    seen = []
    for L in (torch, tapelab):
        L.manual_seed(0)
        try:
            r = eval("L." + call)
            seen.append((r.tolist(), str(r.dtype).split(".")[-1]))
        except (TypeError, RuntimeError) as e:
            seen.append(type(e).__name__)
    assert seen[0] == seen[1]


# ---------------------------------------------------------------- small names and messages
def test_torch_optim_adamw_module_path():
    """pykeen imports ``from torch.optim.adamw import AdamW``."""
    with tapelab.install_aliases():
        from torch.optim.adamw import AdamW
        import torch as aliased
        assert AdamW is aliased.optim.AdamW
    import torch.optim.adamw as real
    assert real.AdamW is torch.optim.AdamW


def test_deepcopy_of_a_non_leaf_raises_pytorchs_message():
    """torch_ema's ``state_dict`` deep-copies non-leaf tensors: the same RuntimeError as PyTorch's."""
    import copy
    msgs = []
    for m in (torch, tapelab):
        t = m.ones(2, requires_grad=True) * 2
        with pytest.raises(RuntimeError) as e:
            copy.deepcopy(t)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# ---------------------------------------------------------------- the order leaves' hooks fire in
def _hook_order(m) -> list:
    ps = [m.ones(3, requires_grad=True) for _ in range(5)]
    seen = []
    for i, p in enumerate(ps):
        p.register_hook(lambda g, i=i: seen.append(i))
    a, b, c, d, e = ps
    for loss in (lambda: (b * a).sum(), lambda: (a * b).sum(), lambda: m.addcmul(c, a, b).sum(),
                 lambda: m.stack([a, b, c, d, e]).sum(), lambda: m.cat([e, d, c, b, a]).sum(),
                 lambda: (a * b + c * d).sum(), lambda: (a + b + c + d).sum()):
        loss().backward()
        seen.append("|")
    return seen


def test_leaves_hooks_fire_in_pytorchs_order():
    """Gradient-logging programs record per-parameter hooks into an ordered dict and print it: leaves
    made ready by one node fire in PyTorch's ready-queue order (``(b * a)``: b first; five stacked:
    0 2 4 1 3), where tapelab's heap broke the tie by ``id()``, an order that could change run to run."""
    assert _hook_order(tapelab) == _hook_order(torch)


# ---------------------------------------------------------------- the parser's type names
_TYPE_NAME_CASES = {
    "stack_ndarray": lambda L: L.stack([np.ones(2)]),
    "cat_numpy_scalar": lambda L: L.cat([L.ones(1), np.float32(2)]),
    "stack_ordered_dict": lambda L: L.stack([__import__("collections").OrderedDict()]),
    "stack_python_class": lambda L: L.stack([type("Foo", (), {})()]),
    "fft_ndarray": lambda L: L.fft.fft(np.ones(2)),
    "rfft2_ndarray": lambda L: L.fft.rfft2(np.ones((2, 2))),
    "ifft2_ndarray": lambda L: L.fft.ifft2(np.ones((2, 2))),
    "hfft2_ndarray": lambda L: L.fft.hfft2(np.ones((2, 2))),
    "fftshift_ndarray": lambda L: L.fft.fftshift(np.ones(2)),
    "ifftshift_ndarray": lambda L: L.fft.ifftshift(np.ones(2)),
    "hfft_ndarray": lambda L: L.fft.hfft(np.ones(2)),
    "complex_imag": lambda L: L.complex(L.ones(1), np.ones(1)),
    "complex_real": lambda L: L.complex(np.ones(1), L.ones(1)),
    "out_list": lambda L: L.exp(L.ones(1), out=[1]),
    "zeros_ndarray": lambda L: L.zeros(np.ones(2)),
    "zeros_numpy_element": lambda L: L.zeros(2, np.float32(3)),
    "zeros_size_keyword": lambda L: L.zeros(size=np.ones(2)),
}


@pytest.mark.parametrize("case", sorted(_TYPE_NAME_CASES))
def test_argument_errors_name_types_as_pytorchs_parser(case):
    """pytorch-tabnet handed ``torch.stack`` numpy arrays by mistake: PyTorch's parser names the type by
    CPython's ``tp_name`` (``numpy.ndarray``, ``collections.OrderedDict``, but ``Foo``), tapelab by the
    bare ``__name__``; fft's and complex's messages also lacked the ``fft_`` name and the position."""
    fn = _TYPE_NAME_CASES[case]
    seen = []
    for L in (torch, tapelab):
        with pytest.raises(TypeError) as e:
            fn(L)
        seen.append(str(e.value))
    assert seen[1] == seen[0]

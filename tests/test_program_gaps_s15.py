"""Gaps that researchers' programs met in session 15, each against PyTorch itself."""
import sys

import numpy as np
import pytest
import torch

import tapelab


def _mlp(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(5, 7), m.nn.Tanh(), m.nn.Linear(7, 3))


@pytest.mark.parametrize("has_aux", [False, True])
def test_jacrev_of_a_parameter_dict_is_a_dict_of_jacobians(has_aux):
    """The neural-tangent-kernel recipe: ``vmap(jacrev(f), (None, 0))(params, x)`` with ``params`` a
    dict from ``named_parameters``; the Jacobian comes back as a dict shaped like it."""
    got = {}
    for m in (torch, tapelab):
        model = _mlp(m)
        params = {k: v.detach() for k, v in model.named_parameters()}
        x = m.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5))

        def f(p, xi):
            out = m.func.functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0)
            return (out, out.sum()) if has_aux else out
        jac = m.func.vmap(m.func.jacrev(f, has_aux=has_aux), (None, 0))(params, x)
        if has_aux:
            jac, aux = jac
            got[m.__name__ + "aux"] = aux.numpy()
        assert isinstance(jac, dict) and list(jac) == list(params)
        got[m.__name__] = {k: v.numpy() for k, v in jac.items()}
    for k, v in got["torch"].items():
        assert got["tapelab"][k].shape == v.shape == (3, 3) + tuple(dict(_mlp(torch).named_parameters())[k].shape)
        np.testing.assert_allclose(got["tapelab"][k], v, rtol=1e-5, atol=1e-7)
    if has_aux:
        np.testing.assert_allclose(got["tapelabaux"], got["torchaux"], rtol=1e-6)


def test_jacrev_of_a_pytree_output_and_tuple_argnums():
    got = []
    for m in (torch, tapelab):
        a = m.tensor([0.5, -1.0, 2.0])
        b = m.tensor([[1.0, 2.0], [3.0, -4.0]])

        def f(x, y):
            return {"s": (x.sin() * y.sum()), "t": (x.unsqueeze(1) * y[0]).exp()}
        jac = m.func.jacrev(f, argnums=(0, 1))(a, b)
        assert set(jac) == {"s", "t"} and isinstance(jac["t"], tuple) and len(jac["t"]) == 2
        got.append([t.numpy() for k in ("s", "t") for t in jac[k]])
    for ours, theirs in zip(got[1], got[0]):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_hessian_of_a_dict_argument():
    got = []
    for m in (torch, tapelab):
        p = {"w": m.tensor([1.0, -2.0]), "b": m.tensor(0.5)}
        h = m.func.hessian(lambda q: ((q["w"] ** 3).sum() * q["b"]))(p)
        got.append({(i, j): h[i][j].numpy() for i in h for j in h[i]})
    assert got[0].keys() == got[1].keys()
    for k in got[0]:
        np.testing.assert_allclose(got[1][k], got[0][k], rtol=1e-6)


def test_vjp_of_a_parameter_dict_returns_dicts():
    got = []
    for m in (torch, tapelab):
        p = {"w": m.tensor([[1.0, 2.0], [0.5, -1.0]]), "b": m.tensor([0.1, 0.2])}
        out, fn = m.func.vjp(lambda q, x: (x @ q["w"] + q["b"]).tanh(), p, m.tensor([1.0, -1.0]))
        gp, gx = fn(m.ones(2))
        assert isinstance(gp, dict) and list(gp) == ["w", "b"]
        got.append([out.numpy(), gp["w"].numpy(), gp["b"].numpy(), gx.numpy()])
    for ours, theirs in zip(got[1], got[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_tanh_and_sigmoid_backward_equal_torchs_bit_for_bit(name):
    """PyTorch's CPU kernels: ``g * (1 - y*y)`` with ``1 - y*y`` one fused multiply-add (tens of ulps
    apart from numpy's two roundings near |y| = 1), and ``g * (1 - y) * y`` in that order."""
    from tapelab.ops import elementwise
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(50_000) * 3).astype(np.float32)
    g = rng.standard_normal(50_000).astype(np.float32)
    y = getattr(torch, name)(torch.tensor(x))
    want = getattr(torch.ops.aten, f"{name}_backward")(torch.tensor(g), y).numpy()
    got = getattr(elementwise, f"_{name}_bw_fwd")(np, g, y.numpy())
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_checkpointed_segment_recomputes_under_the_forwards_autocast(use_reentrant):
    """``checkpoint`` inside ``autocast("cpu")`` recomputes in backward, outside the region: PyTorch
    re-enters the forward's autocast state there, so the segment's Linear gets bfloat16 inputs again
    (before: "expected m1 and m2 to have the same dtype" from the recomputed Linear)."""
    grads = {}
    for m in (torch, tapelab):
        for ckpt in (False, True):
            m.manual_seed(0)
            inner = m.nn.Sequential(m.nn.Linear(6, 8), m.nn.GELU(), m.nn.Linear(8, 4))
            first = m.nn.Linear(5, 6)
            x = m.linspace(-1, 1, 15).reshape(3, 5)
            with m.autocast("cpu", dtype=m.bfloat16):
                h = first(x)
                out = m.utils.checkpoint.checkpoint(inner, h, use_reentrant=use_reentrant) if ckpt else inner(h)
                assert out.dtype == m.bfloat16
            out.float().square().sum().backward()
            grads[m.__name__, ckpt] = [p.grad.float().numpy() for p in [*first.parameters(), *inner.parameters()]]
    for a, b in zip(grads["tapelab", True], grads["tapelab", False]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(grads["tapelab", True], grads["torch", True]):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=1e-2)   # bfloat16 products


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_a_post_accumulate_grad_hook_that_returns_a_value_is_refused(m):
    """The optimizer-in-backward pattern: ``p.register_post_accumulate_grad_hook(lambda p: p.data.add_(...))``
    returns the tensor, which PyTorch refuses."""
    p = m.nn.Parameter(m.ones(3))
    p.register_post_accumulate_grad_hook(lambda q: q.data.add_(q.grad, alpha=-0.1))
    with pytest.raises(RuntimeError, match="^Tensor post accumulate grad hooks should return None.$"):
        (p * 2).sum().backward()
    q = m.nn.Parameter(m.ones(3))
    q.register_post_accumulate_grad_hook(lambda t: None)
    (q * 2).sum().backward()
    assert q.grad.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_a_full_backward_hook_on_a_module_whose_inputs_need_no_grad_warns_at_the_backward_line(m):
    import warnings
    layer = m.nn.Linear(3, 2)
    seen = []
    layer.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, tuple(g.shape for g in go))))
    for requires_grad in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = layer(m.ones(4, 3, requires_grad=requires_grad)).sum()
            out.backward(); line = sys._getframe().f_lineno   # noqa: E702 (the warning's line)
        mine = [w for w in caught if "Full backward hook is firing" in str(w.message)]
        if requires_grad:
            assert mine == []
        else:
            assert len(mine) == 1 and mine[0].category is UserWarning
            assert mine[0].filename == __file__ and mine[0].lineno == line
            assert str(mine[0].message).endswith("#torch.nn.Module.register_full_backward_hook for more details.")
    assert seen[0] == ((None,), ((4, 2),)) and seen[1][0][0].shape == (4, 3)


def test_batchnorm_folding_is_reachable_from_nn_utils_as_in_torch():
    """Deployment scripts call ``torch.nn.utils.fuse_conv_bn_eval`` (not the ``fusion`` submodule)."""
    assert set(torch.nn.utils.__all__) >= {"fuse_conv_bn_eval", "fuse_linear_bn_eval"}
    outs = []
    for m in (torch, tapelab):
        m.manual_seed(0)
        conv, bn = m.nn.Conv2d(3, 4, 3).eval(), m.nn.BatchNorm2d(4).eval()
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2)
        fused = m.nn.utils.fuse_conv_bn_eval(conv, bn)
        x = m.linspace(-2, 2, 3 * 36).reshape(1, 3, 6, 6)
        outs.append((fused(x).detach().numpy(), bn(conv(x)).detach().numpy()))
        for name in ("fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"):
            assert getattr(m.nn.utils, name) is getattr(m.nn.utils.fusion, name)
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1][0], outs[1][1], rtol=1e-5, atol=1e-6)


def test_a_graph_built_by_hand_from_proxies_runs_ops_outside_a_trace():
    """pytorch/examples' fx/proxy_based_graph_creation: Proxies from a ``GraphAppendingTracer``
    reach ``cat``/``tanh``/``where`` with no symbolic trace running; the GraphModule computes what
    torch's does, and its code is torch's text but for the module the functions are named from."""
    results, codes = [], []
    for m in (torch, tapelab):
        graph = m.fx.Graph()
        tracer = m.fx.proxy.GraphAppendingTracer(graph)
        x = m.fx.Proxy(graph.placeholder("x"), tracer)
        y = m.fx.Proxy(graph.placeholder("y"), tracer)
        b = m.tanh(m.cat([x, y]))
        c = m.stack([b, m.neg(b) + 1], 1)
        graph.output(m.where(c > 0, c, c * 2).node)
        gm = m.fx.GraphModule(m.nn.Module(), graph)
        codes.append(gm.code.replace(m.__name__ + ".", "M."))
        results.append(gm(m.tensor([0.5, -1.0]), m.tensor([2.0])).numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    assert codes[1] == codes[0]
    del tracer, x, y, b, c
    import gc
    gc.collect()
    from tapelab.core import overrides
    assert tapelab.fx.Proxy not in overrides._likes     # the dispatcher's fast path is back


def test_generated_code_text_is_torchs():
    for m in (torch, tapelab):
        gm = m.fx.symbolic_trace(lambda x: x.relu() + 1)
        assert gm.code == "\n\n\ndef forward(self, x):\n    relu = x.relu();  x = None\n    add = relu + 1;  relu = None\n" \
                          "    return add\n    "


def test_an_alias_is_called_by_its_own_name_in_graphs():
    """``torch.arctan`` is a function named ``arctan`` (not ``atan``): fx names the node and prints
    the call after it (pytorch/examples fx/invert.py prints the code)."""
    for m in (torch, tapelab):
        graph = m.fx.Graph()
        x = graph.placeholder("x")
        graph.output(graph.call_function(m.arctan, (graph.call_function(m.arcsin, (x,)),)))
        code = m.fx.GraphModule(m.nn.Module(), graph).code
        assert f"arcsin = {m.__name__}.arcsin(x)" in code and f"arctan = {m.__name__}.arctan(arcsin)" in code
        assert m.arctan.__name__ == "arctan" and m.absolute.__name__ == "absolute"


_LOWP_MODULE = '''
def sigmoid_lowp(x):
    return x.float().sigmoid().half()

M.fx.wrap(sigmoid_lowp)          # a statement below the def, as pytorch/examples fx/primitive_library.py


class Foo(M.nn.Module):
    def forward(self, x, y):
        return sigmoid_lowp(x) + sigmoid_lowp(y)


def inline(traced):
    """Replace each call of sigmoid_lowp by its body, re-traced through Proxies of a GraphAppendingTracer."""
    for node in list(traced.graph.nodes):
        if node.op == "call_function" and node.target is sigmoid_lowp:
            tracer = M.fx.proxy.GraphAppendingTracer(node.graph)
            with node.graph.inserting_before(node):
                out = node.target(*M.fx.node.map_arg(node.args, lambda a: M.fx.Proxy(a, tracer)))
                node.replace_all_uses_with(out.node)
                node.graph.erase_node(node)
    traced.recompile()
    return traced
'''


def test_fx_wrap_called_as_a_statement_records_and_a_pass_can_inline_it():
    import types
    ops = {}
    for m in (torch, tapelab):
        mod = types.ModuleType(f"lowp_{m.__name__}")
        mod.M = m
        exec(compile(_LOWP_MODULE, mod.__name__, "exec"), mod.__dict__)
        traced = m.fx.symbolic_trace(mod.Foo())
        before = [(n.op, getattr(n.target, "__name__", n.target)) for n in traced.graph.nodes]
        assert f"lowp_{m.__name__}_sigmoid_lowp(x)" in traced.code
        inlined = mod.inline(traced)
        after = [(n.op, getattr(n.target, "__name__", n.target)) for n in inlined.graph.nodes]
        x = m.tensor([0.5, -2.0], dtype=m.float16)
        ops[m.__name__] = (before, after, inlined(x, x).float().numpy())
    assert ops["tapelab"][0] == ops["torch"][0] and ("call_function", "sigmoid_lowp") in ops["torch"][0]
    assert ops["tapelab"][1] == ops["torch"][1] and ("call_method", "sigmoid") in ops["torch"][1]
    np.testing.assert_array_equal(ops["tapelab"][2], ops["torch"][2])


def test_printing_the_autograd_profiler_shows_its_events_table_in_start_order():
    """``print(prof)`` of ``torch.autograd.profiler.profile`` (pytorch/examples fx/profiling_tracer.py):
    the events' table, an enclosing range listed before the op inside it."""
    tables = {}
    for m in (torch, tapelab):
        with m.autograd.profiler.profile() as prof:
            with m.profiler.record_function("foo"):
                m.relu(m.ones(3))
        tables[m.__name__] = str(prof).splitlines()
        names = [e.name for e in prof.function_events]
        assert names[0] == "foo" and any(n.endswith("relu") for n in names[1:])
    for lines in tables.values():
        assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total",
                                    "CPU", "time", "avg", "#", "of", "Calls"]
        assert lines[3].split()[0] == "foo" and lines[-1].startswith("Self CPU time total:")


def test_saving_the_same_dtype_twice():
    """A dtype written twice (an exported graph with two float64 casts, a config dict) is one GLOBAL and
    a memo reference, as torch writes it; before, the second one failed pickle's memo assertion."""
    import io
    state = {"a": tapelab.float64, "b": [tapelab.float64, tapelab.int8, tapelab.float64]}
    buf = io.BytesIO()
    tapelab.save(state, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=True) == {"a": torch.float64, "b": [torch.float64, torch.int8, torch.float64]}
    buf.seek(0)
    assert tapelab.load(buf) == state


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_soft_margin_loss_refuses_a_target_that_requires_grad(m):
    x, y = m.randn(3, 4, requires_grad=True), m.randn(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="^The function 'soft_margin_loss' is not differentiable with respect to "
                                           "argument 'target'. This input cannot have requires_grad True.$"):
        m.nn.functional.soft_margin_loss(x, m.sign(y))
    with m.no_grad():
        m.nn.functional.soft_margin_loss(x, m.sign(y))
    m.nn.functional.soft_margin_loss(x, m.sign(y.detach())).backward()
    assert x.grad is not None


def test_traced_factories_like_a_tensor_record_only_the_keywords_given():
    """``torch.zeros_like(x)`` is a builtin in PyTorch: its node holds what the caller passed. tapelab's
    Python function hands the protocol every keyword; the node now holds the same as torch's."""
    codes = []
    for m in (torch, tapelab):
        def f(x):
            return m.zeros_like(x) + m.ones_like(x, dtype=m.float64) + m.full_like(x, 2.0) + m.clamp(x, min=0.0)
        codes.append(m.fx.symbolic_trace(f).code.replace(m.__name__ + ".", "M."))
    assert codes[1] == codes[0]
    assert "M.zeros_like(x)\n" in codes[0] and "M.ones_like(x, dtype = M.float64)\n" in codes[0]

"""Gaps found by running pytorch/tutorials' intermediate and recipe scripts unchanged under
``install_aliases()`` and diffing what they print against real torch."""
import pytest
import torch

import tapelab


def test_grad_fn_saved_attributes_name_what_the_node_saved():
    """autograd_saved_tensors_hooks_tutorial prints ``y.grad_fn._saved_self`` / ``_saved_other`` /
    ``_saved_result``: PyTorch's nodes expose their saved values under ATen's argument names; an
    input the backward does not need reads None; after backward they raise the freed error."""
    for lib in (torch, tapelab):
        a = lib.randn(5, requires_grad=True)
        b = lib.ones(5, requires_grad=True)
        y = a * b
        assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
        assert (a * lib.ones(5)).grad_fn._saved_self is None
        assert a.pow(2).grad_fn._saved_exponent == 2
        assert a.softmax(0).grad_fn._saved_dim == 0
        assert a.sum(0).grad_fn._saved_self_sym_sizes == (5,)
        e = lib.exp(a)
        r = e.grad_fn._saved_result
        assert r is not e and r.equal(e) and r.grad_fn is e.grad_fn
        with pytest.raises(AttributeError):
            e.grad_fn._saved_self
        e.sum().backward()
        with pytest.raises(RuntimeError, match="already been freed"):
            e.grad_fn._saved_result


def test_saved_tensors_hooks_pack_order_output_and_unpack_at_each_access():
    """The tutorial's pack/unpack hooks print what they see: PyTorch's mul/div/mm save ``other``
    before ``self`` and unpack in that order; an op's saved output reaches the pack hook with its
    grad_fn; ``_saved_self`` calls the unpack hook at every access (so the tutorial's
    delete-on-unpack hook fails the second access)."""
    def run(lib):
        a = lib.randn(2, 2, requires_grad=True)
        b = lib.randn(2, 2, requires_grad=True)
        names = {id(a): "a", id(b): "b"}
        seen = []

        def pack(x):
            seen.append(("pack", names.get(id(x), x.grad_fn.name() if x.grad_fn is not None else "?")))
            return x

        def unpack(x):
            seen.append(("unpack", names.get(id(x), "res")))
            return x
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = a * b
            z = (a @ b).exp()
        y.sum().backward()
        z.sum().backward()
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            w = a.sin()
        w.grad_fn._saved_self
        w.grad_fn._saved_self
        return seen
    assert run(tapelab) == run(torch)


def test_grad_fn_type_is_named_as_torch_s_node_and_lists_its_saved_attributes():
    """custom_function_double_backward_tutorial draws graphs with torchviz, which labels a node by
    ``type(fn).__name__`` and finds saved tensors through ``dir(fn)``'s ``_saved_*`` names: PyTorch's
    node classes are named ``MulBackward0``, ``MmBackward0``..., and dir lists the saved values."""
    def run(lib):
        a = lib.randn(3, 3, requires_grad=True)
        y = (a * a.exp()) @ a
        z = lib.nn.functional.linear(a, a, a[0])
        fns = [y.grad_fn, y.grad_fn.next_functions[0][0], z.grad_fn]
        return ([type(f).__name__ for f in fns], [sorted(n for n in dir(f) if n in ("_saved_self", "_saved_other",
                                                                                  "_saved_result", "_saved_mat2"))
                                                  for f in fns[:2]], isinstance(y.grad_fn, lib.autograd.graph.Node))
    assert run(tapelab) == run(torch)


def _in_both(run):
    """``run(lib)`` under torch and under tapelab, the values compared by the caller."""
    return run(torch), run(tapelab)


def test_func_jvp_takes_pytree_primals_and_outputs():
    """neural_tangent_kernels and forward_ad_usage call ``jvp(f, (params,), (tangents,))`` with a dict or
    tuple of parameters as one primal: PyTorch's jvp flattens pytrees (and returns the output's pytree);
    mismatched structures raise RuntimeError."""
    def run(lib):
        lib.manual_seed(0)
        net = lib.nn.Linear(3, 2)
        x = lib.randn(4, 3)
        params = {k: v.detach() for k, v in net.named_parameters()}
        tangents = {k: lib.ones_like(v) for k, v in params.items()}
        out, prod = lib.func.jvp(lambda p: {"y": lib.func.functional_call(net, p, (x,))}, (params,), (tangents,))
        with pytest.raises(RuntimeError, match="same python structure"):
            lib.func.jvp(lambda p: p["weight"].sum(), (params,), (tuple(tangents.values()),))
        return out["y"].detach().numpy(), prod["y"].detach().numpy()
    (o1, p1), (o2, p2) = _in_both(run)
    assert abs(o1 - o2).max() < 1e-6 and abs(p1 - p2).max() < 1e-6


def test_functorch_make_functional_and_ensemble_state():
    """forward_ad_usage imports ``functorch`` (torch's own package: it imports ``torch._functorch.deprecated``,
    ``.make_functional`` and ``.python_key``): make_functional_with_buffers gives (fmodel, params, buffers) of a
    copy whose own tensors are meta; combine_state_for_ensemble stacks detached states; each call warns."""
    import functorch as real_ft
    import importlib
    import sys
    with tapelab.install_aliases():
        sys.modules.pop("functorch")
        try:
            tape_ft = importlib.import_module("functorch")   # the same package, now on tapelab
        finally:
            sys.modules["functorch"] = real_ft
    assert _functorch_values(torch, real_ft) == _functorch_values(tapelab, tape_ft)


def _functorch_values(lib, ft) -> tuple:
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.BatchNorm1d(3)).eval()
    x = lib.randn(5, 3)
    with pytest.warns(FutureWarning, match="functorch.make_functional_with_buffers` is deprecated"):
        func, params, buffers = ft.make_functional_with_buffers(model)
    y = func(params, buffers, x)
    stateless = [p.device.type for p in func.parameters()]
    with pytest.warns(FutureWarning):
        fm, ps, bs = ft.combine_state_for_ensemble([model, model])
    with pytest.raises(RuntimeError, match="has buffers"):
        with pytest.warns(FutureWarning):
            ft.make_functional(model)
    return (type(params).__name__, [type(p).__name__ for p in params], len(buffers), stateless,
            [round(v, 5) for v in y.sum(0).tolist()], y.requires_grad, [tuple(p.shape) for p in ps],
            [p.requires_grad for p in ps], len(bs))


def test_dual_tensor_prints_its_tangent_and_takes_the_primal_layout():
    """forward_ad_usage: ``make_dual(primal, tangent.T)`` copies the tangent into the primal's layout, and a
    dual tensor printed inside the level shows ``tangent=tensor(...)`` after its other suffixes."""
    def run(lib):
        fwAD = lib.autograd.forward_ad
        p = lib.arange(4.0).reshape(2, 2)
        t = lib.arange(4.0).reshape(2, 2) / 4
        with fwAD.dual_level():
            d = fwAD.make_dual(p, t.T)
            tan = fwAD.unpack_dual(d).tangent
            d2 = fwAD.make_dual(p, t)
            return tan.stride(), fwAD.unpack_dual(d2).tangent is t, repr(d * 2)
    assert _in_both(run)[0] == _in_both(run)[1]


def test_swap_tensors_exchanges_contents_keeping_identity():
    """swap_tensors recipe: ``torch.utils.swap_tensors(t1, t2)`` swaps class, dict and contents, so an
    optimizer holding the old Parameter object sees the new values; a weakly referenced tensor is refused;
    a leaf whose accumulator a graph reaches raises if that graph's backward runs after the swap."""
    import weakref

    def run(lib):
        t1, t2 = lib.arange(2), lib.arange(3)
        lib.utils.swap_tensors(t1, t2)
        p = lib.nn.Parameter(lib.ones(2))
        y = (p * 3).sum()
        opt = lib.optim.SGD([p], lr=1.0)
        q = lib.full((2,), 5.0, requires_grad=True)
        q.tag = "q"
        lib.utils.swap_tensors(p, q)
        with pytest.raises(RuntimeError, match="poisoned by swap_tensors"):
            y.backward()
        ref = weakref.ref(t1)
        with pytest.raises(RuntimeError, match="Cannot swap t1 because it has weakref"):
            lib.utils.swap_tensors(t1, t2)
        del ref
        return (t1.tolist(), t2.tolist(), type(p).__name__, type(q).__name__, p.tolist(), q.tolist(),
                getattr(p, "tag", None), opt.param_groups[0]["params"][0] is p, p.requires_grad, q.requires_grad)
    assert run(tapelab) == run(torch)


def test_calling_a_module_list_is_torch_s_missing_forward_error():
    """module_load_state_dict_tips' SomeModule calls a ModuleList: PyTorch's ModuleList has no forward, so
    the call raises the base Module's ``missing the required "forward" function`` NotImplementedError."""
    msgs = []
    for lib in (torch, tapelab):
        with pytest.raises(NotImplementedError) as e:
            lib.nn.ModuleList([lib.nn.Linear(1, 1)])(lib.ones(1))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_random_unstructured_prunes_torchs_positions():
    """pruning_tutorial: ``prune.random_unstructured`` zeroes the entries whose ``rand_like`` draw is
    largest (``topk`` of the draws), so after the same seed tapelab's mask is torch's."""
    import torch.nn.utils.prune as torch_prune

    import tapelab.nn.utils.prune as tapelab_prune
    masks = []
    for lib, prune in ((torch, torch_prune), (tapelab, tapelab_prune)):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(1, 6, 3)
        prune.random_unstructured(conv, name="weight", amount=0.3)
        prune.random_structured(conv, name="weight", amount=2, dim=0)
        masks.append(conv.weight_mask.numpy().copy())
    assert (masks[0] == masks[1]).all()


@pytest.mark.parametrize("expr", ["x[0, 1]", "x[0]", "x[:, 1]", "x[1:3]", "x[0, 1:3]", "x[..., 0]", "x[None, 0]",
                                  "x[None]", "x[...]", "x[:]", "x[:, None]", "x.select(2, 1)", "x.narrow(1, 0, 2)"])
def test_basic_indexing_node_is_named_by_its_last_effective_entry(expr):
    """parametrizations prints ``cnn.weight[0, 1]``: PyTorch applies an index's entries in order, so the
    node is SelectBackward0 after an int, SliceBackward0 after a partial slice, UnsqueezeBackward0 after
    None (``x[:]`` slices, ``x[...]`` aliases); the name stays after backward frees the node."""
    names = []
    for lib in (torch, tapelab):
        x = lib.randn(4, 5, 3, requires_grad=True)   # noqa: F841 -- read by eval
        y = eval(expr)
        name = type(y.grad_fn).__name__
        y.sum().backward()
        names.append((name, y.grad_fn.name()))
    assert names[0] == names[1]


def test_meta_tensor_repr_wraps_its_suffixes_as_torch():
    """reasoning_about_shapes prints a conv output on meta: past the line width PyTorch moves the
    suffixes (grad_fn) to an indented next line, as for any tensor."""
    reprs = []
    for lib in (torch, tapelab):
        conv = lib.nn.Conv2d(3, 5, 2, device="meta")
        reprs.append((repr(conv(lib.rand(2**10, 3, 2**16, 2**16, device="meta"))),
                      repr(lib.empty(2, 3, dtype=lib.float64, device="meta"))))
    assert reprs[0] == (reprs[1][0], reprs[1][1].replace("tapelab", "torch"))


def test_tensor_and_node_hook_handles_are_removable_handles():
    """optimizer_step_in_backward_tutorial registers post-accumulate-grad hooks: PyTorch's tensor and node
    hook registrations return ``torch.utils.hooks.RemovableHandle`` (which libraries type-check); remove()
    takes the hook out."""
    for lib in (torch, tapelab):
        p = lib.nn.Parameter(lib.ones(2))
        seen = []
        hs = [p.register_post_accumulate_grad_hook(lambda t: seen.append("post")),
              p.register_hook(lambda g: seen.append("hook"))]
        y = p * 2
        hs.append(y.grad_fn.register_hook(lambda gi, go: seen.append("node")))
        assert all(isinstance(h, lib.utils.hooks.RemovableHandle) for h in hs)
        y.sum().backward(retain_graph=True)
        for h in hs:
            h.remove()
        y.sum().backward()
        assert seen == ["node", "hook", "post"]


def test_assert_allclose_is_deprecated_with_its_own_tolerances():
    """fx_conv_bn_fuser checks with ``torch.testing.assert_allclose``: PyTorch warns FutureWarning and, without
    tolerances, uses float32's rtol 1e-4 / atol 1e-5 (looser than assert_close's); numbers become tensors."""
    for lib in (torch, tapelab):
        a = lib.tensor([1.0, 2.0])
        with pytest.warns(FutureWarning, match="assert_allclose\\(\\)` is deprecated since 1.12"):
            lib.testing.assert_allclose(a, a * (1 + 5e-5))
        with pytest.warns(FutureWarning), pytest.raises(AssertionError):
            lib.testing.assert_allclose(a, a * (1 + 5e-4))
        with pytest.warns(FutureWarning):
            lib.testing.assert_allclose(a.double(), [1.0, 2.0])


def test_graph_module_prints_its_code_with_torchs_quoting_and_reminder():
    """fx_conv_bn_fuser prints a GraphModule and its code: a submodule path that is not an identifier is
    written ``getattr(self.nested, "1")`` and ``str(gm)`` ends with PyTorch's print_readable reminder."""
    outs = []
    for lib in (torch, tapelab):
        m = lib.nn.Sequential(lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Tanh()))
        gm = lib.fx.symbolic_trace(m)
        outs.append((gm.code, str(gm).replace("tapelab", "torch")))
    assert outs[0] == outs[1]


def test_traced_flatten_records_its_arguments_as_called():
    """fx_profiling_tutorial traces ResNet's ``torch.flatten(x, 1)``: PyTorch's graph records ``(x, 1)``
    (passes read ``node.args[1]``); tapelab recorded ``(x,), {start_dim: 1}``."""
    def f_of(lib):
        return lambda x: lib.flatten(x, 1) + lib.flatten(x).sum() + lib.flatten(x, 0, 1).sum()
    got = []
    for lib in (torch, tapelab):
        g = lib.fx.symbolic_trace(f_of(lib)).graph
        got.append([(len(n.args), n.args[1:], dict(n.kwargs)) for n in g.nodes if n.name.startswith("flatten")])
    assert got[0] == got[1]


def test_sdpa_kernel_refuses_backends_cpu_lacks():
    """scaled_dot_product_attention_tutorial sweeps ``sdpa_kernel`` backends: on CPU PyTorch runs the math or
    the flash kernel; a block enabling neither raises "No viable backend", flash alone refuses dropout and
    3-d inputs ("No available kernel"); the enum prints its name."""
    def run(lib):
        attention = __import__(f"{lib.__name__}.nn.attention", fromlist=["x"])
        B = attention.SDPBackend
        q = lib.rand(2, 4, 6, 8)
        out = []
        for backends, kw, x in ((B.EFFICIENT_ATTENTION, {}, q), ([B.EFFICIENT_ATTENTION, B.MATH], {}, q),
                                (B.FLASH_ATTENTION, {}, q), (B.FLASH_ATTENTION, {"dropout_p": 0.5}, q),
                                (B.FLASH_ATTENTION, {}, q[0])):
            with attention.sdpa_kernel(backends):
                try:
                    lib.nn.functional.scaled_dot_product_attention(x, x, x, **kw)
                    out.append("ok")
                except RuntimeError as e:
                    out.append(str(e))
        return out, str(B.MATH)
    assert run(tapelab) == run(torch)


def test_sdpa_output_takes_the_transposed_querys_layout():
    """scaled_dot_product_attention_tutorial's CausalSelfAttention does ``y.transpose(1, 2).view(b, -1, h * d)``
    on the attention output: PyTorch's CPU flash kernel lays the output out as its (batch, length, heads)
    query, so the view works; tapelab's contiguous output made view raise."""
    def run(lib):
        lib.manual_seed(0)
        x = lib.rand(2, 5, 24, requires_grad=True)
        q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in x.chunk(3, -1))
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        flat = y.transpose(1, 2).view(2, -1, 8)
        flat.pow(2).sum().backward()
        plain = lib.nn.functional.scaled_dot_product_attention(lib.rand(2, 2, 5, 4), lib.rand(2, 2, 5, 4),
                                                                lib.rand(2, 2, 5, 4))
        return y.stride(), plain.stride(), flat.detach().numpy(), x.grad.numpy()
    a, b = run(torch), run(tapelab)
    assert a[:2] == b[:2] and abs(a[2] - b[2]).max() < 1e-6 and abs(a[3] - b[3]).max() < 1e-5


def test_higher_order_ops_modules_run_the_control_flow_operators():
    """torch_controlflow_tutorial imports cond/while_loop/scan/associative_scan/map from
    ``torch._higher_order_ops.*``: scan carries state and stacks per-step outputs (reverse keeps positions,
    pytrees in and out), associative_scan is the inclusive prefix (pointwise mode refuses CPU tensors), map
    stacks over the leading dim."""
    def run(lib):
        import importlib
        from types import SimpleNamespace
        hop = SimpleNamespace(**{m: importlib.import_module(f"{lib.__name__}._higher_order_ops.{m}")
                                 for m in ("scan", "associative_scan", "map", "cond", "while_loop")})
        xs = lib.arange(1, 5)

        def combine(carry, x):
            return carry + x, (carry + x) * 2.0
        out = [hop.scan.scan(combine, lib.tensor(0), xs, dim=0),
               hop.scan.scan(combine, lib.tensor(0), xs, dim=0, reverse=True),
               hop.scan.scan(lambda c, x: (c * x, {"a": c + x}), lib.ones(2), lib.arange(6.0).reshape(2, 3), dim=1),
               hop.associative_scan.associative_scan(lambda a, b: a * b, lib.arange(1.0, 6.0), dim=0, reverse=True,
                                                     combine_mode="generic"),
               hop.map.map(lambda x, y: x ** y, lib.arange(5), lib.tensor(2)),
               hop.while_loop.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i),
                                         (lib.tensor(0), lib.tensor(0))),
               hop.cond.cond(lib.tensor([True]), lambda t: (t.cos(),), lambda t: (t.sin(),), (lib.zeros(2),))]
        with pytest.raises(ValueError, match="pointwise"):
            hop.associative_scan.associative_scan(lambda a, b: a + b, xs, dim=0)
        return repr(out)
    assert run(tapelab) == run(torch)

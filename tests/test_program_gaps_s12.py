"""Gaps found by the lead in session 12 running researchers' programs unchanged (nanoGPT, timm, the
Megatron/DeepSpeed gradient-accumulation hook pattern), each checked against real torch."""
from __future__ import annotations

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


@BOTH
@pytest.mark.parametrize("make", [lambda x: x.expand_as(x), lambda x: x.expand(2, 3), lambda x: x.expand(-1, 3),
                                  lambda x: x.movedim(0, 0), lambda x: x.broadcast_to((2, 3))],
                         ids=["expand_as", "expand", "expand-1", "movedim", "broadcast_to"])
def test_a_same_shape_expand_is_a_new_view_with_its_own_node(m, make):
    x = m.ones(2, 3, requires_grad=True)
    y = make(x)
    assert y is not x and y.grad_fn is not None and y._base is x
    with m.no_grad():   # a writable alias of its base
        w = m.zeros(2, 3)
        make(w)[0, 0] = 5.0
    assert w[0, 0].item() == 5.0


@BOTH
def test_megatron_reaches_a_parameters_accumulate_grad_and_its_post_hook_runs(m):
    """``p.expand_as(p).grad_fn.next_functions[0][0]`` is the leaf's AccumulateGrad; a hook registered
    on it runs after the accumulation (after the tensor's post-accumulate hooks), with ``()`` and the
    incoming gradient, on every backward until removed."""
    p = m.nn.Parameter(m.ones(3))
    acc = p.expand_as(p).grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is p
    calls = []
    handle = acc.register_hook(lambda gi, go: calls.append(("post", gi, go[0].tolist(), p.grad.tolist())))
    acc.register_prehook(lambda go: calls.append(("pre", go[0].tolist())))
    p.register_post_accumulate_grad_hook(lambda t: calls.append(("pacc", t.grad.tolist())))
    (p * 2).sum().backward()
    (p * 3).sum().backward()
    assert calls == [("pre", [2.0] * 3), ("pacc", [2.0] * 3), ("post", (), [2.0] * 3, [2.0] * 3),
                     ("pre", [3.0] * 3), ("pacc", [5.0] * 3), ("post", (), [3.0] * 3, [5.0] * 3)]
    handle.remove()
    calls.clear()
    p.sum().backward()
    assert calls == [("pre", [1.0] * 3), ("pacc", [6.0] * 3)]


@BOTH
def test_a_gradient_through_a_same_shape_expand_reaches_the_leaf(m):
    x = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x.expand_as(x) * x).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0], [6.0, 8.0]]


@BOTH
def test_is_view_as_torchviz_reads_it(m):
    """torchviz's ``make_dot`` asks ``var._is_view()`` of every tensor it draws."""
    x = m.ones(2, 3, requires_grad=True)
    assert not x._is_view() and not (x * 2)._is_view()
    assert x[0]._is_view() and x.view(3, 2)._is_view() and x.t()._is_view() and x.expand_as(x)._is_view()
    assert not x.clone()._is_view() and not x.detach().clone()._is_view()


# ---------------------------------------------------------------- torch.compile's surface as programs use it
def _mlp(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(4, 16), m.nn.Dropout(0.5), m.nn.Linear(16, 2))


def test_module_compile_in_place_keeps_the_module_and_its_keys():
    """PyTorch 2.2's ``model.compile()``: the module is compiled in place (no ``_orig_mod.`` keys),
    calls and hooks go through it, and eval() is honoured (the compiled forward guards the flag)."""
    model, twin = _mlp(tapelab), _mlp(tapelab)
    keys = list(model.state_dict())
    assert model.compile() is None
    assert list(model.state_dict()) == keys and isinstance(model, tapelab.nn.Sequential)
    seen = []
    model.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    x = tapelab.ones(3, 4)
    model.eval(), twin.eval()
    out = model(x)
    torch.testing.assert_close(torch.from_numpy(out.detach().numpy()), torch.from_numpy(twin(x).detach().numpy()))
    out.sum().backward()
    twin(x).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(torch.from_numpy(p.grad.numpy()), torch.from_numpy(q.grad.numpy()))
    assert seen == [(3, 2)]


def test_compiling_a_modules_bound_forward_honours_eval():
    """``torch.compile(model.forward)``: after ``model.eval()`` dropout is off, as torch's guards make it."""
    model = _mlp(tapelab)
    f = tapelab.compile(model.forward)
    x = tapelab.ones(64, 4)
    train_out = f(x)
    model.eval()
    assert tapelab.equal(f(x), model(x)) and not tapelab.equal(train_out, model(x))


def test_explain_called_as_torch_dynamo_explain_f_args():
    def f(x):
        return (x * 2.0 + 1.0).tanh()
    x = tapelab.randn(4)
    by_call = tapelab.compiler.explain(f)(x)
    direct = tapelab.compiler.explain(f, x)
    assert by_call.graph_count == direct.graph_count == 1 and by_call.graph_break_count == 0


@BOTH
def test_inductor_options_are_accepted_and_unknown_ones_refused(m):
    model = _mlp(m)
    for options in ({"triton.cudagraphs": False}, {"max_autotune": True, "epilogue_fusion": True,
                                                   "shape_padding": True}, {"trace.enabled": False}):
        assert m.compile(model, options=options) is not None
    with pytest.raises(RuntimeError, match="Unexpected optimization option not_an_option"):
        m.compile(model, options={"not_an_option": 1})


def test_triton_cudagraphs_replays_as_reduce_overhead():
    model = _mlp(tapelab).eval()
    compiled = tapelab.compile(model, options={"triton.cudagraphs": True})
    assert compiled.__dict__["_compiled"].mode == "reduce-overhead"
    x = tapelab.ones(3, 4)
    for _ in range(3):
        assert tapelab.equal(compiled(x), model(x))

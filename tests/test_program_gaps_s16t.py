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

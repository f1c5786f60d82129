"""Gaps Keras 3 met on its torch backend (``KERAS_BACKEND=torch``) run under ``install_aliases()``:
its ``Variable`` is a tensor-like (not a Tensor; its class defines ``__torch_function__``) that layers
use directly in ``x * self.w``, and it takes a ``DataLoader`` by the class's module name. Each pattern is
written here directly and checked against PyTorch 2.13 (Keras itself is not imported)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tapelab


def _var_class(m, seen):
    class Var:
        """Keras's pattern: unwrap every Var argument and call ``func`` again."""
        def __init__(self, value):
            self.value = value

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            args = [a.value if isinstance(a, Var) else a for a in args]
            return func(*args, **(kwargs or {}))
    return Var


CALLS = {
    "x * v": lambda m, x, v: x * v, "v * x": lambda m, x, v: v * x, "x + v": lambda m, x, v: x + v,
    "x - v": lambda m, x, v: x - v, "v - x": lambda m, x, v: v - x, "x / v": lambda m, x, v: x / v,
    "v / x": lambda m, x, v: v / x, "x ** v": lambda m, x, v: x ** v, "x < v": lambda m, x, v: x < v,
    "x == v": lambda m, x, v: x == v, "x >= v": lambda m, x, v: x >= v, "x // v": lambda m, x, v: x // v,
    "x % v": lambda m, x, v: x % v, "exp(v)": lambda m, x, v: m.exp(v), "add(x, v)": lambda m, x, v: m.add(x, v),
    "maximum(x, v)": lambda m, x, v: m.maximum(x, v),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_tensor_like_operand_is_handed_the_call(call):
    results = []
    for m in (torch, tapelab):
        seen = []
        Var = _var_class(m, seen)
        x = m.tensor([1.0, 2.0, 3.0])
        v = Var(m.tensor([2.0, 0.5, 2.0]))
        out = CALLS[call](m, x, v)
        assert seen, "the tensor-like's __torch_function__ was not asked"
        results.append(out.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    assert results[1].dtype == results[0].dtype


def test_a_tensor_like_that_declines_leaves_torchs_type_error():
    for m in (torch, tapelab):
        class Declines:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented
        with pytest.raises(TypeError):
            m.tensor([1.0]) * Declines()
        with pytest.raises(TypeError):
            m.exp(Declines())


def test_served_as_torch_the_classes_name_torchs_modules():
    """Keras's ``is_torch_dataloader`` looks for ``"torch.utils.data"`` in a class's ``__module__``;
    fx still treats ``nn`` layers as leaves while they are named so."""
    code = textwrap.dedent("""
        import tapelab
        tapelab.install_aliases()
        import torch
        names = [torch.utils.data.DataLoader, torch.utils.data.Dataset, torch.nn.Linear, torch.nn.Module,
                 torch.optim.Adam, torch.nn.Parameter, torch.autograd.Function, torch.Tensor, torch.Size,
                 torch.dtype, torch.device, torch.Generator]
        print([c.__module__ for c in names])
        traced = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()))
        print([n.op for n in traced.graph.nodes])
        tapelab.uninstall_aliases()
        print(tapelab.nn.Linear.__module__, tapelab.utils.data.DataLoader.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    expected = [c.__module__ for c in (torch.utils.data.DataLoader, torch.utils.data.Dataset, torch.nn.Linear,
                                       torch.nn.Module, torch.optim.Adam, torch.nn.Parameter, torch.autograd.Function,
                                       torch.Tensor, torch.Size, torch.dtype, torch.device)] + ["torch"]
    assert out[0] == repr(expected)
    assert out[1] == repr(["placeholder", "call_module", "call_module", "output"])
    assert out[2] == "tapelab.nn.modules.linear tapelab.utils.data.dataloader"


@pytest.mark.parametrize("case", ["float", "bool", "longer keys", "float64", "3-D"])
def test_sdpa_with_a_mask_and_is_causal_as_torchs_cpu_kernels(case):
    """Keras passes its attention bias as ``attn_mask`` beside ``is_causal=True``: PyTorch's cpu flash kernel
    (4-D inputs) applies both; with 3-D inputs its math kernel refuses the pair."""
    rng = np.random.default_rng(1)
    q_shape, k_shape, m_shape = {"float": ((2, 3, 4, 8), (2, 3, 4, 8), (2, 3, 4, 4)), "bool": ((2, 3, 4, 8), (2, 3, 4, 8), (4, 4)),
                                 "longer keys": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 4, 6)),
                                 "float64": ((1, 2, 5, 4), (1, 2, 5, 4), (5, 5)), "3-D": ((3, 4, 8), (3, 4, 8), (3, 4, 4))}[case]
    q, k, v = rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(k_shape)
    mask = rng.random(m_shape) > 0.3 if case == "bool" else rng.standard_normal(m_shape)
    got = []
    for m in (torch, tapelab):
        dt = m.float64 if case == "float64" else m.float32
        Q, K, V = (m.tensor(a, dtype=dt, requires_grad=True) for a in (q, k, v))
        M = m.tensor(mask) if case == "bool" else m.tensor(mask, dtype=dt)
        if case == "3-D":
            with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
                m.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=M, is_causal=True)
            continue
        out = m.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=M, is_causal=True)
        out.sum().backward()
        got.append((out.detach().numpy(), Q.grad.numpy(), K.grad.numpy()))
    for a, b in zip(*got) if got else ():
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_matrix_rank_and_pinv_take_atol():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3)) @ rng.standard_normal((3, 5))
    for kw in (dict(atol=0.5), dict(atol=1e-3, rtol=1e-2), dict(rtol=0.3)):
        ranks = [m.linalg.matrix_rank(m.tensor(a), **kw).item() for m in (torch, tapelab)]
        assert ranks[0] == ranks[1]
        pinvs = [m.linalg.pinv(m.tensor(a), **kw).numpy() for m in (torch, tapelab)]
        np.testing.assert_allclose(pinvs[1], pinvs[0], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("ord", [None, "fro", 2, 1])
def test_linalg_norm_over_two_dims_without_ord_is_the_elements_2_norm(ndim, ord):
    x = np.random.default_rng(3).random((5, 6, 2)[:ndim]).astype(np.float32)
    out = []
    for m in (torch, tapelab):
        try:
            out.append(m.linalg.norm(m.tensor(x), ord=ord, dim=(0, 1)).numpy())
        except (IndexError, RuntimeError) as e:
            out.append((type(e), str(e).split(" (expected")[0]))
    if isinstance(out[0], tuple):
        assert out[1][0] is out[0][0] and out[1][1].startswith(out[0][1])
    else:
        np.testing.assert_allclose(out[1], out[0], rtol=1e-6)


def test_a_custom_function_saves_what_it_likes_where_no_backward_can_run():
    """Keras's ``custom_gradient`` calls ``Function.apply(forward_fn, *variables)``: no input is a Tensor that
    requires grad, so PyTorch never checks what ``save_for_backward`` got (its Variables); where an input
    needs a gradient the check stands."""
    class Boxed:
        def __init__(self, value):
            self.value = value

        def __mul__(self, other):
            return self.value * other

    for m in (torch, tapelab):
        class Saves(m.autograd.Function):
            @staticmethod
            def forward(ctx, fn, *args):
                ctx.save_for_backward(*args)
                return fn(*args)

            @staticmethod
            def backward(ctx, g):
                return None, g

        out = Saves.apply(lambda x: x * 2, Boxed(m.tensor([1.0, 3.0])))
        assert out.tolist() == [2.0, 6.0]
        leaf = m.tensor([1.0], requires_grad=True)
        with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type"):
            Saves.apply(lambda x, y: x * 2, leaf, Boxed(leaf))

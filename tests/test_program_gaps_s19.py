"""Gaps found in session 19 (helper D) running researchers' programs (GNN pooling, flows, diffusion,
RL, language models) unchanged under ``install_aliases()``; each checked against real torch."""
import warnings

import numpy as np
import pytest
import torch

import tapelab


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- segment_reduce (GNN pooling)
@pytest.mark.parametrize("reduce", ["max", "min", "sum", "mean", "prod"])
@pytest.mark.parametrize("initial", [None, 0.5])
def test_segment_reduce_values_and_gradients(reduce, initial):
    """``torch.segment_reduce`` (a graph library's per-graph pooling) was missing: AttributeError."""
    outs = []
    for m in (torch, tapelab):
        d = m.tensor([1., 2., 3., 4., 5.], requires_grad=True)
        y = m.segment_reduce(d, reduce, lengths=m.tensor([2, 0, 3]), initial=initial)
        g = m.segment_reduce(d, reduce, lengths=m.tensor([2, 3]), initial=initial)
        (g * m.tensor([1., 2.])).sum().backward()
        outs.append((_np(y), _np(d.grad)))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6)


def test_segment_reduce_offsets_axis_and_errors():
    res = []
    for m in (torch, tapelab):
        d2 = m.arange(12.).reshape(2, 6)
        a = m.segment_reduce(d2, "sum", lengths=m.tensor([[2, 4], [3, 3]]), axis=1)
        b = m.segment_reduce(d2, "sum", offsets=m.tensor([[0, 2, 6], [0, 3, 6]]), axis=1)
        c = m.segment_reduce(d2.t().contiguous(), "mean", lengths=m.tensor([4, 2]))
        errs = []
        d = m.tensor([1., 2., 3., 4., 5.])
        for args in [dict(reduce="sum", lengths=m.tensor([2, 2])), dict(reduce="sum"),
                     dict(reduce="foo", lengths=m.tensor([2, 3]))]:
            with pytest.raises(RuntimeError) as e:
                m.segment_reduce(d, **args)
            errs.append(str(e.value).split("\n")[0])
        with pytest.raises(NotImplementedError):
            m.segment_reduce(m.tensor([1, 2, 3]), "sum", lengths=m.tensor([1, 2]))
        res.append(([_np(a), _np(b), _np(c)], errs))
    for x, y in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(y, x)
    assert res[0][1] == res[1][1]
    assert res[0][0][0].tolist() == [[1., 14.], [21., 30.]]


def test_index_reduce_warns_beta_once_at_the_programs_line():
    """PyTorch warns once per process that index_reduce is in beta; tapelab said nothing."""
    from tapelab.ops import shaping
    shaping._index_reduce_warned = False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tapelab.zeros(3).index_reduce_(0, tapelab.tensor([0, 0]), tapelab.ones(2), "mean")
        tapelab.zeros(3).index_reduce(0, tapelab.tensor([0, 0]), tapelab.ones(2), "mean")
    msgs = [x for x in w if "index_reduce() is in beta" in str(x.message)]
    assert len(msgs) == 1 and msgs[0].filename == __file__


# ---------------------------------------------------------------- t[0] = v under autograd
def test_basic_key_write_records_copyslices_as_pytorch():
    """``x[0] = v`` / ``x[:, 1] = 2.`` on a tensor in the graph is a view's ``copy_``/``fill_`` in PyTorch
    (grad_fn CopySlices); tapelab recorded IndexPutBackward0, the node of an advanced-index write."""
    seen = []
    for m in (torch, tapelab):
        w = m.ones(4, requires_grad=True)
        x = m.zeros(3, 4, requires_grad=True).clone()
        names = []
        x[0] = w * 3
        names.append(x.grad_fn.name())
        names.append(type(x.grad_fn.next_functions[1][0]).__name__)
        x[:, 1] = 2.
        names.append(x.grad_fn.name())
        x[1:, ::2] = w[:2]
        names.append(x.grad_fn.name())
        x[m.tensor([0, 2])] = m.ones(4)
        names.append(x.grad_fn.name())
        x[x > 2.5] = 0.
        names.append(x.grad_fn.name())
        (x * m.arange(12.).reshape(3, 4)).sum().backward()
        seen.append((names, _np(w.grad), _np(x)))
    assert seen[0][0] == seen[1][0]
    assert seen[0][0][:3] == ["torch::autograd::CopySlices", "MulBackward0", "torch::autograd::CopySlices"]
    np.testing.assert_array_equal(seen[0][1], seen[1][1])
    np.testing.assert_array_equal(seen[0][2], seen[1][2])


def test_copyslices_repr_is_the_python_types_name():
    """``print(x.grad_fn.next_functions)`` shows ``<CopySlices object at ...>`` in PyTorch (the name()
    is the C++ qualified name); tapelab printed ``<torch::autograd::CopySlices object at ...>``."""
    for m in (torch, tapelab):
        x = m.zeros(3, requires_grad=True).clone()
        x[0] = 1.
        assert repr(x.grad_fn).startswith("<CopySlices object at 0x")
        assert x.grad_fn.name() == "torch::autograd::CopySlices"

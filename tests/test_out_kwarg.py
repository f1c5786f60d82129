"""out= on tapelab's public functions against torch: values written into out and out returned,
resizing (with PyTorch's warning), dtype and autograd errors, multi-output ops, factories taking
out's dtype, aliasing (out is an input), and Tensor methods still refusing out= as in PyTorch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab.ops.out import OUT_FUNCTIONS

_A = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
_B = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
_M = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)

# name -> call(m, a, b, w) returning (result computed with out=o, o) for a fresh empty out
CASES = {
    "add": lambda m, a, b, w, o: m.add(a, b, alpha=2, out=o),
    "sub": lambda m, a, b, w, o: m.sub(a, b, out=o),
    "mul": lambda m, a, b, w, o: m.mul(a, 3, out=o),
    "div": lambda m, a, b, w, o: m.div(a, b, out=o),
    "pow": lambda m, a, b, w, o: m.pow(a.abs(), 1.5, out=o),
    "mm": lambda m, a, b, w, o: m.mm(a, w, out=o),
    "matmul": lambda m, a, b, w, o: m.matmul(a, w, out=o),
    "bmm": lambda m, a, b, w, o: m.bmm(a[None], w[None], out=o),
    "addmm": lambda m, a, b, w, o: m.addmm(a[:, :2], a, w, beta=0.5, out=o),
    "cat": lambda m, a, b, w, o: m.cat([a, b], 1, out=o),
    "stack": lambda m, a, b, w, o: m.stack([a, b], out=o),
    "sum": lambda m, a, b, w, o: m.sum(a, 1, out=o),
    "mean": lambda m, a, b, w, o: m.mean(a, (0, 1), keepdim=True, out=o),
    "where": lambda m, a, b, w, o: m.where(a > 0, a, b, out=o),
    "clamp": lambda m, a, b, w, o: m.clamp(a, -0.5, 0.5, out=o),
    "exp": lambda m, a, b, w, o: m.exp(a, out=o),
    "log": lambda m, a, b, w, o: m.log(a.abs(), out=o),
    "tanh": lambda m, a, b, w, o: m.tanh(a, out=o),
    "sigmoid": lambda m, a, b, w, o: m.sigmoid(a, out=o),
    "sqrt": lambda m, a, b, w, o: m.sqrt(a.abs(), out=o),
    "neg": lambda m, a, b, w, o: m.neg(a, out=o),
    "cumsum": lambda m, a, b, w, o: m.cumsum(a, 1, out=o),
    "softmax": lambda m, a, b, w, o: m.softmax(a, 1, out=o),
    "logsumexp": lambda m, a, b, w, o: m.logsumexp(a, 1, out=o),
    "maximum": lambda m, a, b, w, o: m.maximum(a, b, out=o),
    "tril": lambda m, a, b, w, o: m.tril(a, out=o),
    "gather": lambda m, a, b, w, o: m.gather(a, 1, m.tensor([[0], [3], [1]]), out=o),
}


def _run(m, name, out_shape=(0,)):
    a, b, w = m.tensor(_A), m.tensor(_B), m.tensor(_M)
    o = m.empty(out_shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = CASES[name](m, a, b, w, o)
    return r, o, [str(x.message) for x in caught]


@pytest.mark.parametrize("name", list(CASES))
def test_out_gets_the_result_like_torch(name):
    got, out, _ = _run(tapelab, name)
    want, _, _ = _run(torch, name)
    assert got is out
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_resize_warns_only_when_out_had_elements():
    _, out, msgs = _run(tapelab, "mm", out_shape=(5,))
    _, tout, tmsgs = _run(torch, "mm", out_shape=(5,))
    assert tuple(out.shape) == tuple(tout.shape) == (3, 2)
    assert len(msgs) == 1 and msgs[0] == tmsgs[0].split(" (Triggered internally")[0]
    _, _, msgs = _run(tapelab, "mm", out_shape=(0,))
    assert msgs == []
    _, _, msgs = _run(tapelab, "mm", out_shape=(3, 2))
    assert msgs == []


def test_dtype_rules_like_torch():
    for m in (tapelab, torch):
        a = m.tensor(_A)
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            m.add(a, a, out=m.empty(0, dtype=m.int64))
        ints = m.tensor([1, 2, 3])
        assert m.add(ints, 1, out=m.empty(3)).tolist() == [2.0, 3.0, 4.0]      # int into float: fine
        assert m.sum(a, 1, out=m.empty(3, dtype=m.float64)).dtype == m.float64
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype long int"):
            m.max(a, 1, out=(m.empty(0), m.empty(0)))


def test_autograd_is_refused_like_torch():
    for m in (tapelab, torch):
        x = m.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"add\(\): functions with out=\.\.\. arguments don't support "
                                               r"automatic differentiation, but one of the arguments requires grad"):
            m.add(x, 1, out=m.empty(2))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            m.cat([x, x], out=m.empty(4))
        with m.no_grad():
            assert m.add(x, 1, out=m.empty(2)).tolist() == [2.0, 2.0]


@pytest.mark.parametrize("call", [
    lambda m, a, v, i: m.max(a, 1, out=(v, i)),
    lambda m, a, v, i: m.min(a, 0, keepdim=True, out=(v, i)),
    lambda m, a, v, i: m.sort(a, 1, descending=True, out=(v, i)),
    lambda m, a, v, i: m.topk(a, 2, out=(v, i)),
    lambda m, a, v, i: m.kthvalue(a, 2, 1, out=(v, i)),
])
def test_values_and_indices(call):
    results = []
    for m in (tapelab, torch):
        v, i = m.empty(0), m.empty(0, dtype=m.int64)
        r = call(m, m.tensor(_A), v, i)
        assert r[0] is v and r[1] is i and r.values is v and r.indices is i
        results.append((v.numpy(), i.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_factories_take_outs_dtype():
    for m in (tapelab, torch):
        assert m.zeros(2, 3, out=m.empty(0, dtype=m.int64)).dtype == m.int64
        assert m.arange(4, out=m.empty(0)).tolist() == [0.0, 1.0, 2.0, 3.0]
        assert m.full((2,), 7, out=m.empty(0, dtype=m.int32)).tolist() == [7, 7]


def test_out_may_alias_an_input():
    for m in (tapelab, torch):
        x = m.tensor(_A)
        base = x.clone()
        assert m.exp(x, out=x) is x
        np.testing.assert_allclose(x.numpy(), np.exp(base.numpy()), rtol=1e-6)
        y = m.tensor(_A)
        m.add(y[1], y[1], out=y[0])     # out is a view: written through
        np.testing.assert_allclose(y[0].numpy(), 2 * _A[1], rtol=1e-6)


def test_methods_refuse_out_like_torch():
    for m in (tapelab, torch):
        with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
            m.ones(2).add(m.ones(2), out=m.empty(2))


def test_every_out_function_is_public_and_takes_out():
    for name in sorted(OUT_FUNCTIONS):
        fn = getattr(tapelab, name)
        assert fn.__wrapped__ is not None, name
        assert hasattr(torch, name), name

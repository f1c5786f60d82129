"""Gaps that reinforcement-learning and normalizing-flow libraries (stable-baselines3, zuko) met in
session 15, each against PyTorch itself."""
import operator

import numpy as np
import pytest

import tapelab


class _Nested(tuple):
    """zuko's ``NestedTensor``: the adjoint state of its ODE solver, tensors of different shapes
    held in a tuple that adds, subtracts and is scaled by a 0-d tensor step (``dt * state``)."""

    def __add__(self, other):
        return _Nested(x + y for x, y in zip(self, other, strict=True))

    def __sub__(self, other):
        return _Nested(x - y for x, y in zip(self, other, strict=True))

    def __rmul__(self, other):
        return _Nested(other * x for x in self)


def test_a_tensor_times_a_tuple_subclass_runs_the_tuples_reflected_method():
    """zuko's CNF trains through ``AdaptiveCheckpointAdjoint.backward``, whose Dormand-Prince steps
    compute ``dt * NestedTensor((x, grad_x, *grad_phi))``: PyTorch's ``Tensor.__mul__`` takes a
    tuple as neither a Tensor nor a number and returns NotImplemented, so the tuple's ``__rmul__``
    scales each tensor; tapelab made the ragged tuple a tensor and failed."""
    import torch

    rng = np.random.default_rng(0)
    x, g, w = (rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (4, 3), (16, 3)))
    results = []
    for lib in (torch, tapelab):
        dt = lib.tensor(0.125)
        state = _Nested((lib.tensor(x), lib.tensor(g), lib.tensor(w, requires_grad=True)))
        k1 = dt * state
        step = state + 0.5 * k1 - dt * _Nested(t.sin() for t in state)
        assert type(k1) is _Nested and type(step) is _Nested and [t.shape for t in step] == [(4, 3), (4, 3), (16, 3)]
        step[2].sum().backward()
        results.append([t.detach().numpy() for t in step] + [state[2].grad.numpy()])
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("form", ["t + l", "t - l", "l - t", "t * l", "t / l", "t // l", "t % l", "t ** l",
                                  "t @ l", "i & l", "i | l", "i ^ l", "t += l", "t *= l", "t -= l", "i &= l"])
def test_a_tensor_operator_refuses_a_list_as_pytorchs(form):
    """A list (or tuple) operand: every Tensor operator returns NotImplemented, so Python raises its
    TypeError (or a sequence's repetition does, ``t * l``), as in PyTorch."""
    import torch

    for lib in (torch, tapelab):
        scope = {"t": lib.tensor([1.0, 2.0]), "i": lib.tensor([1, 2]), "l": [1, 2]}
        with pytest.raises(TypeError):
            exec(form, scope)
    assert tapelab.tensor([1.0, 2.0]).__add__([1, 2]) is NotImplemented
    assert tapelab.tensor([1.0, 2.0]).__imul__((1, 2)) is NotImplemented
    assert operator.eq(tapelab.tensor([1.0, 2.0]), [1.0, 2.0]) is False


def test_linear_refuses_mixed_dtypes_with_pytorchs_messages():
    """normflows' reverse KL on a float32 flow fed float64 samples: ``F.linear`` with a bias is
    PyTorch's ``addmm(b, x, w.T)``, which names the bias (``self``) then the input (``mat1``)
    against the weight; without one it is a matmul (``expected m1 and m2``)."""
    import torch

    d, f = "float64", "float32"
    for xd, wd, bd in ((d, f, d), (d, f, f), (f, d, f), (f, d, d), (f, f, d), (d, f, None)):
        for shape in ((2, 3), (3,), (1, 2, 3)):
            messages = []
            for lib in (torch, tapelab):
                dt = {d: lib.float64, f: lib.float32}
                bias = None if bd is None else lib.zeros(4, dtype=dt[bd])
                with pytest.raises(RuntimeError) as e:
                    lib.nn.functional.linear(lib.ones(shape, dtype=dt[xd]), lib.ones(4, 3, dtype=dt[wd]), bias)
                messages.append(str(e.value))
            assert messages[1] == messages[0]


def test_wishart_draws_pytorchs_stream_with_its_correction_loop():
    """``Wishart.sample`` as torch 2.13 draws it: Bartlett's ``Chi2(df - i)`` diagonal, then one normal
    per entry below it; its correction loop's first check flags the positive-definite draws, so it
    warns "Singular sample detected." and draws them once more. The samples, the warning and the
    generator's state after it agree with PyTorch's."""
    import warnings

    import torch

    def draws(lib, df, shape, batch):
        lib.manual_seed(0)
        L = lib.linalg.cholesky(lib.eye(3) + 0.3 * lib.ones(3, 3))
        w = lib.distributions.Wishart(lib.tensor(df), scale_tril=L.expand(batch + (3, 3)))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            s = w.sample(shape)
        return s.numpy(), w.log_prob(s).numpy(), [str(m.message) for m in seen], lib.randn(2).numpy()

    for df, shape, batch in ((3.5, (2,), ()), ([3.5, 4.0], (), (2,)), ([2.5, 6.0], (2,), (2,))):
        want, got = draws(torch, df, shape, batch), draws(tapelab, df, shape, batch)
        assert got[0].shape == want[0].shape and got[2] == want[2] == ["Singular sample detected."]
        np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=2e-6)
        np.testing.assert_array_equal(got[3], want[3])


def test_binomial_log_prob_of_large_counts_sums_pytorchs_terms_in_its_order():
    """``Binomial(n, p).log_prob`` for n in the thousands: lgamma(n + 1) ~ 5900 cancels against the
    other terms, so float32 shows the order of the sum; PyTorch's is
    ``k * logit - lgamma(k + 1) - lgamma(n - k + 1) - (n * max(logit, 0) + n * log1p(e^-|logit|) - lgamma(n + 1))``."""
    import torch

    n = np.array([100.0, 1000.0, 3.0, 5000.0], np.float32)
    p = np.array([0.3, 0.71, 0.5, 0.02], np.float32)
    k = np.array([[31.0, 702.0, 1.0, 96.0], [25.0, 733.0, 3.0, 110.0]], np.float32)
    results = []
    for lib in (torch, tapelab):
        probs = lib.tensor(p, requires_grad=True)
        lp = lib.distributions.Binomial(lib.tensor(n), probs=probs).log_prob(lib.tensor(k))
        lp.sum().backward()
        results.append((lp.detach().numpy(), probs.grad.numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-7, atol=0)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5)


def test_an_index_modified_in_place_after_indexing_refuses_backward_as_pytorch():
    """``x[idx]``'s backward reads the index tensors (PyTorch's IndexBackward0 saves them): written
    in place before backward (as Wishart's correction loop writes its boolean mask), PyTorch
    refuses; tapelab scattered the gradient by the new values (a silently wrong gradient)."""
    import torch

    for lib in (torch, tapelab):
        for index, write in ((lambda: lib.tensor([0, 2]), 1), (lambda: lib.tensor([True, False, True, False]), False)):
            x = lib.arange(4.0, requires_grad=True)
            i = index()
            y = x[i] * 2
            i[0] = write
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        x = lib.arange(8.0).reshape(4, 2).requires_grad_()
        i = lib.tensor([0, 2])
        (x[i, 1:] * 3).sum().backward()     # unmodified: the gradient lands where the index said
        assert x.grad.tolist() == [[0.0, 3.0], [0.0, 0.0], [0.0, 3.0], [0.0, 0.0]]

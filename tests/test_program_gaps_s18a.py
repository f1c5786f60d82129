"""Gaps programs met (session 18, helper A), each run through tapelab and PyTorch with the same code
and compared: a subclass's ``__torch_function__`` sees the public function a program called."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def both(fn):
    """``fn(m)`` run with m = tapelab and m = torch."""
    return fn(tapelab), fn(torch)


def _np(t):
    return np.asarray(t.detach().tolist())


# ---------------------------------------------------------------- 1. __torch_function__ gets the public function
def _handled_table(m):
    """The pattern of torch.overrides' docs: a dict keyed by the public functions a subclass handles."""
    F = m.nn.functional
    handled = {}

    def implements(fn):
        def deco(impl):
            handled[fn] = impl
            return impl
        return deco

    class Tagged(m.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in handled:
                return handled[func](*args, **kwargs)
            return super().__torch_function__(func, types, args, kwargs)

    for k, fn in enumerate((m.add, m.cat, m.stack, m.where, F.relu, m.relu, F.gelu, m.isnan, m.clone, m.lgamma,
                            m.copysign, m.special.erf, m.special.expit, m.special.softmax, m.fft.rfft, m.fft.fftshift,
                            m.linalg.vander, m.count_nonzero, m.embedding, m.gcd)):
        implements(fn)(lambda *a, _k=k, **kw: _k)
    x = m.tensor([[1.0, -2.0], [3.0, 0.5]]).as_subclass(Tagged)
    y = m.ones(2, 2)
    i = m.tensor([4, 6]).as_subclass(Tagged)
    return [m.add(x, y), m.cat([y, x]), m.stack([x, y], 1), m.where(y > 0, x, y), F.relu(x), m.relu(x),
            F.gelu(x), m.isnan(x), m.clone(x), m.lgamma(x), m.copysign(y, x), m.special.erf(x), m.special.expit(x),
            m.special.softmax(x, 0), m.fft.rfft(x), m.fft.fftshift(x), m.linalg.vander(x), m.count_nonzero(x), m.embedding(x, m.tensor([0])), m.gcd(i, i),
            type(m.mul(x, 2)).__name__, type(m.exp(x)).__name__]


def test_a_subclass_handler_receives_the_public_function_called():
    tl, th = both(_handled_table)
    assert tl[:-2] == th[:-2] == list(range(20))
    assert tl[-2:] == th[-2:] == ["Tagged", "Tagged"]


def test_handler_func_is_the_public_callable_and_rerunning_it_computes_the_result():
    def run(m):
        seen = []

        class Log(m.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                seen.append(func)
                return super().__torch_function__(func, types, args, kwargs)

        x = m.tensor([[1.0, -2.0], [3.0, 0.5]]).as_subclass(Log)
        out = [m.relu(x), m.isinf(x), m.special.i1(x), m.fft.ifftshift(x), m.digamma(x.abs())]
        want = [m.relu, m.isinf, m.special.i1, m.fft.ifftshift, m.Tensor.abs, m.digamma]
        return [f is w for f, w in zip(seen, want)], [type(o).__name__ for o in out], [_np(o.real) for o in out]
    (tl_is, tl_types, tl_vals), (th_is, th_types, th_vals) = both(run)
    assert tl_is == th_is == [True] * 6
    assert tl_types == th_types
    for a, b in zip(tl_vals, th_vals):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_overridable_functions_and_has_torch_function_agree_with_torch():
    def run(m):
        class Sub(m.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return super().__torch_function__(func, types, args, kwargs)
        ov = m.overrides.get_overridable_functions()
        x = m.ones(2).as_subclass(Sub)
        got = m.overrides.handle_torch_function(m.add, (x,), x, m.ones(2))
        return ([f in ov[m] for f in (m.add, m.cat, m.relu, m.where)], m.nn.functional.relu in ov[m.nn.functional],
                m.special.erf in ov[m.special], m.overrides.has_torch_function((x,)),
                m.overrides.has_torch_function((m.ones(1),)), type(got).__name__, _np(got).tolist())
    tl, th = both(run)
    assert tl == th


def test_torch_embedding_and_batch_norm_take_aten_argument_order():
    def run(m):
        w = m.arange(15.0).reshape(5, 3)
        x = m.tensor([[1.0, 2.0, 3.0], [0.0, -1.0, 4.0]])
        g, b, rm, rv = m.tensor([1.0, 2.0, 3.0]), m.tensor([0.0, 1.0, 0.0]), m.zeros(3), m.ones(3)
        return [_np(m.embedding(w, m.tensor([1, 4]))), _np(m.embedding(w, m.tensor([0, 2]), 0)),
                _np(m.batch_norm(x, g, b, rm, rv, False, 0.1, 1e-5, False)),
                _np(m.layer_norm(x, (3,), None, None, 1e-5, False)), _np(m.group_norm(x, 1, None, None, 1e-5, False))]
    for a, b in zip(*both(run)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_special_and_fft_functions_take_out():
    def run(m):
        x = m.tensor([0.5, 1.0, 2.0])
        o1, o2 = m.empty(3), m.empty(2, dtype=m.complex64)
        r1, r2 = m.special.erf(x, out=o1), m.fft.rfft(x, out=o2)
        return r1 is o1, r2 is o2, _np(o1), _np(o2.real), _np(m.digamma(x, out=m.empty(3)))
    (a1, a2, *av), (b1, b2, *bv) = both(run)
    assert (a1, a2) == (b1, b2) == (True, True)
    for a, b in zip(av, bv):
        np.testing.assert_allclose(a, b, rtol=1e-5)

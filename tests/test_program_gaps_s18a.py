"""Gaps programs met (session 18, helper A), each run through tapelab and PyTorch with the same code
and compared: a subclass's ``__torch_function__`` sees the public function a program called."""
from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import tapelab


@pytest.fixture(autouse=True)
def _subclasses_collected():
    """The Tensor subclasses a test defines are collected after it, so the dispatcher's hook is gone
    (later tests assert the eager path)."""
    yield
    gc.collect()
    assert tapelab.dispatch.STATE.functions is None


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


# ---------------------------------------------------------------- 2. views made in no_grad mode
def _nograd_views(m):
    out = []
    a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with m.no_grad():
        views = [a[1:], a.view(3), a.unsqueeze(0), a.expand(2, 3), a.detach()]
    out.append([(v.requires_grad, v.is_leaf, v.grad_fn is None, v._is_view()) for v in views])
    y = (views[0] * 2).sum()
    y.backward()
    out.append((y.requires_grad, a.grad is None, views[0].grad is None))
    f = views[0][1:]     # made in grad mode from a no_grad view
    out.append((f.requires_grad, f.is_leaf, f.grad_fn.name()))

    def refused(fn):
        try:
            fn()
        except RuntimeError as e:
            return str(e)
        return "no error"

    def fresh_view():
        b = m.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1   # a non-leaf base too
        with m.no_grad():
            return b[1:]
    out.append(refused(lambda: fresh_view().mul_(2)))
    out.append(refused(lambda: f.mul_(1)))
    for key in (0, slice(0, 1), None, Ellipsis, m.tensor([0])):
        out.append(refused(lambda: fresh_view().__setitem__(key, 5.0)))
    out.append(refused(lambda: fresh_view().detach_()))
    c = m.tensor([1.0, 2.0, 3.0])
    with m.no_grad():
        vc = c[1:]
    vc.mul_(2)                       # a base that needs no grad: allowed
    out.append(_np(c).tolist())
    w = m.nn.Parameter(m.ones(4, 3))
    with m.no_grad():
        p = m.nn.Parameter(w[:2])    # a Parameter made from such a view is a leaf of its own
    (p * 3).sum().backward()
    out.append(_np(p.grad).tolist())
    return out


def test_views_made_in_no_grad_mode_require_grad_and_refuse_inplace_as_torch():
    tl, th = both(_nograd_views)
    assert tl == th


# ---------------------------------------------------------------- 3. as_subclass is an alias
def test_as_subclass_records_alias_backward():
    def run(m):
        class S(m.Tensor):
            pass
        a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        s, s2 = (a * 1).as_subclass(S), a.as_subclass(S)
        (s2 * 2).sum().backward()
        return (s.grad_fn.name(), s2.grad_fn.name(), type(s).__name__, s._is_view(), s2.is_leaf,
                s.grad_fn.next_functions[0][0].name(), _np(a.grad).tolist())
    tl, th = both(run)
    assert tl == th


# ---------------------------------------------------------------- 4. expand is a stride-0 view
def test_expand_of_one_element_is_a_stride_zero_view_sharing_memory():
    def run(m):
        t1 = m.tensor([5.0])
        ex = t1.expand(4)
        t1.add_(1)
        t2 = m.ones(3, 1)
        e2 = t2.expand(3, 4)
        t2[0, 0] = 7
        res = [ex.stride(), ex._is_view(), _np(ex).tolist(), _np(e2[0]).tolist(), ex.is_contiguous(),
               t2.expand(-1, 4).stride(), t2.expand(2, 3, 4).stride(), m.broadcast_to(t2, (3, 5)).stride(),
               t2.expand_as(m.ones(3, 6)).stride(), m.tensor(3.0).expand(2, 2).stride(),
               m.ones(1, 1).expand(3, 2).stride(), [b.stride() for b in m.broadcast_tensors(m.ones(3, 1), m.ones(1, 4))]]
        for write in (lambda: ex.add_(1), lambda: e2.copy_(m.zeros(3, 4)), lambda: e2.__setitem__(0, 5.0),
                      lambda: e2.mul_(m.ones(4)), lambda: e2.exp_()):
            try:
                write()
                res.append("no error")
            except RuntimeError as e:
                res.append(str(e))
        g = m.tensor([2.0], requires_grad=True)
        ge = g.expand(3)
        (ge * m.tensor([1.0, 2.0, 3.0])).sum().backward()
        res += [ge.grad_fn.name(), _np(g.grad).tolist()]
        return res
    tl, th = both(run)
    assert tl == th


# ---------------------------------------------------------------- 5. max() and min() of the whole tensor
def test_whole_max_and_min_record_their_own_node_and_split_ties():
    def run(m):
        res = []
        for x in (m.tensor(3.0, requires_grad=True), m.tensor([[1.0, 5.0], [5.0, 2.0]], requires_grad=True)):
            for f in (m.amax, m.amin, m.max, m.min, lambda t: t.max(), lambda t: t.amax(keepdim=True),
                      lambda t: t.amax(dim=tuple(range(t.dim()))), lambda t: t.max(-1)[0]):
                x.grad = None
                r = f(x)
                r.sum().backward()
                res.append((r.grad_fn.name(), tuple(r.shape), _np(r).tolist(), _np(x.grad).tolist()))
        return res
    tl, th = both(run)
    assert tl == th


# ---------------------------------------------------------------- programs with Tensor subclasses
def test_resolve_name_gives_the_public_path():
    def run(m):
        r = m.overrides.resolve_name
        return [r(m.add), r(m.cat), r(m.nn.functional.relu), r(m.Tensor.add), r(m.special.erf)]
    tl, th = both(run)
    assert [s.replace("tapelab.", "torch.", 1) for s in tl] == th[:4] + ["torch.special.erf"]


def test_a_parameter_subclass_and_a_program_tensor_made_a_parameter():
    def run(m):
        nn = m.nn

        class Tagged(nn.Parameter):
            def __new__(cls, data=None, requires_grad=True, tag="w"):
                p = super().__new__(cls, data, requires_grad)
                p.tag = tag
                return p

        class Sub(m.Tensor):
            pass

        w = Tagged(m.zeros(2), tag="bias")        # a keyword only the subclass's __new__ takes
        s = m.ones(2).as_subclass(Sub)
        ps = nn.Parameter(s)                      # stays a Sub, marked a parameter
        mod = nn.Module()
        mod.w, mod.s = w, ps
        (mod.s * 3).sum().backward()
        return (repr(w), w.tag, type(ps).__name__, ps is s, isinstance(ps, nn.Parameter), repr(ps),
                [n for n, _ in mod.named_parameters()], _np(ps.grad).tolist(), repr(nn.Parameter()),
                isinstance(m.ones(1), nn.Parameter), repr(nn.Parameter(m.zeros(1), requires_grad=False)))
    tl, th = both(run)
    assert tl == th


def test_a_mode_does_not_see_where_wrapping_its_number_operand():
    def run(m):
        seen = []

        class Log(m.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(func.__name__)
                return func(*args, **(kwargs or {}))
        x = m.tensor([1.0, -2.0, 3.0])
        c, x64 = x > 0, x.to(m.float64)
        with Log():
            r = m.where(c, x, 0.0)
            r2 = m.where(c, 1, x64)
        return seen, _np(r).tolist(), str(r2.dtype).split(".")[-1]
    tl, th = both(run)
    assert tl == th


def test_fill_and_zero_of_an_expanded_view_write_its_memory():
    def run(m):
        b = m.tensor([0.5])
        e = b.expand(3)
        e.fill_(2)
        c = m.zeros(2, 1)
        f = c.expand(2, 3)
        f.zero_()
        f.fill_(7.0)
        res = [_np(b).tolist(), _np(e).tolist(), _np(c).tolist(), f.stride()]
        try:
            f.fill_(m.tensor(3.0))
            res.append("no error")
        except RuntimeError as ex:
            res.append(str(ex))
        h = m.ones(1, requires_grad=True).clone()
        h.expand(3).fill_(1)
        with m.no_grad():
            h.expand(3).fill_(4)
        res += [repr(h), _np(c).tolist()]
        return res
    tl, th = both(run)
    assert tl == th


def test_a_mode_sees_the_public_functions_called():
    def run(m):
        factories = {m.zeros, m.ones, m.randn, m.full, m.arange, m.tensor}

        class Float64(m.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                if func in factories and kwargs.get("dtype") is None:
                    kwargs["dtype"] = m.float64
                return func(*args, **kwargs)

        class Count(m.overrides.TorchFunctionMode):
            def __init__(self):
                super().__init__()
                self.n = {}

            def __torch_function__(self, func, types, args=(), kwargs=None):
                self.n[func.__name__] = self.n.get(func.__name__, 0) + 1
                return func(*args, **(kwargs or {}))
        with Float64():
            made = [m.zeros(2), m.ones(2, 2), m.randn(3), m.full((2,), 3.0), m.arange(3.0), m.zeros(2, dtype=m.float32),
                    m.tensor([1.0, 2.0]), m.tensor([1, 2]), m.tensor(3.0, dtype=m.float16)]
        x = m.randn(4, 3)
        t = m.tensor([0, 2, 1, 1])
        with Count() as outer, Count() as inner:
            y = m.nn.functional.linear(x, m.ones(2, 3))
            loss = m.nn.functional.cross_entropy(y, t % 2)
            s = m.sum(m.softmax(y, -1)) + m.relu(loss)
        return [str(a.dtype) for a in made], sorted(inner.n.items()), sorted(outer.n.items())
    tl, th = both(run)
    assert [d.split(".")[-1] for d in tl[0]] == [d.split(".")[-1] for d in th[0]]
    assert tl[1:] == th[1:]


def test_every_dtype_is_named_dtype():
    def run(m):
        return [type(d).__name__ for d in (m.float32, m.qint8, m.quint8, m.qint32, m.complex32, m.bool)]
    tl, th = both(run)
    assert tl == th

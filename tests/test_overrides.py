"""The ``__torch_function__`` protocol (``torch.overrides``): modes, subclasses, tensor-likes,
each run through tapelab and PyTorch with the same code and compared."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import torch

import tapelab
from tapelab._dispatch_state import STATE


def _np(t):
    return np.asarray(t.detach().tolist())


def both(fn):
    """``fn(m)`` run with m = tapelab and m = torch."""
    return fn(tapelab), fn(torch)


def test_mode_sees_each_call_once_and_is_off_the_stack_in_its_handler():
    def run(m):
        seen = []

        class Log(m.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(func.__name__)
                return func(*args, **(kwargs or {})) * 2   # the * 2 runs with the mode off: not seen, not doubled

        x = m.tensor([1.0, -2.0, 3.0])
        with Log():
            a = m.add(x, 1)
            b = x * x
            c = x.exp()
        return seen, [_np(a), _np(b), _np(c)], type(m.add(x, 1)) is m.Tensor

    (ts, tv, tplain), (rs, rv, rplain) = both(run)
    assert ts == rs == ["add", "mul", "exp"]
    for a, b in zip(tv, rv):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert tplain and rplain


def test_nested_modes_inner_handler_calls_reach_the_outer_mode():
    def run(m):
        log = []

        class Named(m.overrides.TorchFunctionMode):
            def __init__(self, name):
                super().__init__()
                self.name = name

            def __torch_function__(self, func, types, args=(), kwargs=None):
                log.append((self.name, func.__name__))
                return func(*args, **(kwargs or {}))

        x = m.tensor([1.0, 2.0])
        with Named("outer"), Named("inner"):
            y = m.sub(x, 3)
        assert m.overrides._get_current_function_mode() is None
        return log, _np(y)

    (tl, ty), (rl, ry) = both(run)
    assert tl == rl == [("inner", "sub"), ("outer", "sub")]
    np.testing.assert_allclose(ty, ry)


def test_mode_exits_on_error_and_the_eager_flag_comes_back():
    class Boom(tapelab.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            raise ValueError("refused")

    assert not STATE.slow
    with pytest.raises(ValueError, match="refused"):
        with Boom():
            tapelab.ones(2) + 1
    assert tapelab.overrides._len_torch_function_stack() == 0
    assert not STATE.slow and STATE.functions is None


def test_mode_is_per_thread():
    seen = []

    class Log(tapelab.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    x = tapelab.ones(2)
    with Log():
        t = threading.Thread(target=lambda: x.neg())
        t.start()
        t.join()
        x.exp()
    assert seen == ["exp"]


def test_subclass_results_keep_the_subclass_and_its_handler_sees_the_call():
    def run(m):
        seen = []

        class Tagged(m.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                seen.append((func.__name__, [t.__name__ for t in types]))
                return super().__torch_function__(func, types, args, kwargs)

        x = m.tensor([1.0, 2.0, 4.0]).as_subclass(Tagged)
        y = x * 3 + m.tensor([1.0, 1.0, 1.0])
        return list(seen), type(y) is Tagged, _np(y)

    (ts, ttype, ty), (rs, rtype, ry) = both(run)
    assert [s[1] for s in ts] == [s[1] for s in rs] == [["Tagged"], ["Tagged"]]
    assert [s[0] for s in ts] == [s[0] for s in rs] == ["mul", "add"]
    assert ttype and rtype
    np.testing.assert_allclose(ty, ry)


def test_plain_subclass_propagates_and_parameter_does_not():
    def run(m):
        class Plain(m.Tensor):
            pass

        x = m.tensor([1.0, 2.0])
        p = m.nn.Parameter(m.tensor([1.0, 2.0]))
        s = x.as_subclass(Plain)
        return [type(s + 1) is Plain, type(m.add(s, s)) is Plain, type(s.sum()) is Plain,
                type(p * 2) is m.Tensor, type(p) is m.nn.Parameter]

    t, r = both(run)
    assert t == r == [True, True, True, True, True]


def test_subclass_registration_ends_with_the_class():
    class Gone(tapelab.Tensor):
        pass

    assert STATE.slow
    del Gone
    gc.collect()
    assert not STATE.slow and STATE.functions is None


def test_as_subclass_aliases_and_keeps_the_graph():
    def run(m):
        class Sub(m.Tensor):
            pass

        x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        s = x.as_subclass(Sub)
        (s * s).sum().backward()
        return s.is_leaf, s.requires_grad, _np(x.grad), type(s).__name__

    t, r = both(run)
    assert t[0] == r[0] and t[1] == r[1] and t[3] == r[3] == "Sub"
    np.testing.assert_allclose(t[2], r[2])
    with pytest.raises(TypeError, match="subclass of Tensor"):
        tapelab.ones(1).as_subclass(int)


def test_disable_torch_function_subclass():
    def run(m):
        class Sub(m.Tensor):
            pass

        s = m.ones(2).as_subclass(Sub)
        with m._C.DisableTorchFunctionSubclass():
            inside = type(s + 1)
        return inside is m.Tensor, type(s + 1) is Sub

    assert both(run) == ((True, True), (True, True))


def test_tensor_like_and_handle_torch_function():
    def run(m):
        ov = m.overrides

        class Like:
            handled = []

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                cls.handled.append(func.__name__)
                return "from Like"

        def shift(x, k=1):
            if ov.has_torch_function_unary(x):
                return ov.handle_torch_function(shift, (x,), x, k=k)
            return x + k

        class Plain(m.Tensor):
            pass

        x = m.tensor([1.0])
        return (ov.is_tensor_like(x), ov.is_tensor_like(Like()), ov.is_tensor_like(3),
                ov.has_torch_function((x,)), ov.has_torch_function((Like(),)),
                ov.has_torch_function((x.as_subclass(Plain),)),
                shift(Like()), Like.handled, float(shift(x, k=2)))

    t, r = both(run)
    assert t == r
    assert t[-3:] == ("from Like", ["shift"], 3.0)


def test_handle_torch_function_refuses_when_all_decline():
    def run(m):
        class Declines:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        def f(x):
            return m.overrides.handle_torch_function(f, (x,), x)

        with pytest.raises(TypeError, match="no implementation found"):
            f(Declines())

    both(run)


def test_mode_can_skip_nn_init_as_lightnings_empty_init_does():
    def run(m):
        class SkipInit(m.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func.__name__ in ("uniform_", "normal_", "constant_", "kaiming_uniform_"):
                    return kwargs["tensor"] if kwargs and "tensor" in kwargs else args[0]
                return func(*args, **(kwargs or {}))

        w = m.zeros(3, 4)
        with SkipInit():
            m.nn.init.uniform_(w, -1, 1)
            m.nn.init.kaiming_uniform_(w, a=5 ** 0.5)
            m.nn.init.constant_(w, 7.0)
        untouched = _np(w)
        m.nn.init.constant_(w, 7.0)
        return untouched, _np(w)

    (tu, tw), (ru, rw) = both(run)
    np.testing.assert_array_equal(tu, ru)
    np.testing.assert_array_equal(tw, rw)
    assert not tu.any() and (tw == 7).all()


def test_mode_can_replace_factories():
    def run(m):
        class Ones(m.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                return out.fill_(1.5) if func.__name__ == "zeros" or func.__name__ == "full" else out

        with Ones():
            z = m.zeros(2, 2)
        return _np(z)

    t, r = both(run)
    np.testing.assert_array_equal(t, r)


def test_disabled_impl_names():
    assert tapelab._C._disabled_torch_function_impl is tapelab.nn.Parameter.__torch_function__
    assert tapelab.overrides.get_default_nowrap_functions() == set()
    assert isinstance(tapelab.Tensor, tapelab._C._TensorMeta)


def test_make_subclass_is_a_detached_leaf_sharing_memory():
    def run(m):
        class Param(m.Tensor):
            pass

        d = m.tensor([1.0, 2.0], requires_grad=True)
        s = m.Tensor._make_subclass(Param, d, True)
        plain = m.Tensor._make_subclass(Param, d)
        with m.no_grad():
            d.add_(1)
        return (type(s).__name__, s.requires_grad, s.is_leaf, s.grad_fn is None, plain.requires_grad,
                s.detach().tolist(), type(s * 2).__name__)

    t, r = both(run)
    assert t == r == ("Param", True, True, True, False, [2.0, 3.0], "Param")
    with pytest.raises(TypeError, match="subclass of Tensor"):
        tapelab.Tensor._make_subclass(dict, tapelab.ones(1))


def test_subclass_repr_names_the_class():
    def run(m):
        class Sub(m.Tensor):
            pass

        return repr(m.tensor([1.0, 2.0]).as_subclass(Sub))

    t, r = both(run)
    assert t.split("(")[0] == r.split("(")[0] == "Sub"


def _dispatch_mode_counts(m):
    import importlib
    from collections import Counter
    pd = importlib.import_module(m.__name__ + ".utils._python_dispatch")

    class Count(pd.TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.c = Counter()
            self.scale = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.c[func.overloadpacket.__name__] += 1
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ == "exp" and self.scale:
                return out * 10   # run with the mode off: not seen
            return out

    x = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with Count() as c:
        y = (m.add(x, 1) * x).exp().relu().sum()
        y.backward()
        c.scale = True
        with m.no_grad():
            scaled = x.exp()
    assert pd._get_current_dispatch_mode() is None
    np.testing.assert_allclose(_np(scaled), np.exp(_np(x)) * 10, rtol=1e-6)
    counts = {k: v for k, v in c.c.items() if k not in ("detach", "full", "ones_like")}
    return counts, float(y), _np(x.grad)


def test_torch_dispatch_mode_sees_the_ops_of_forward_and_backward():
    (tc, ty, tg), (rc, ry, rg) = both(_dispatch_mode_counts)
    assert tc == rc == {"add": 2, "mul": 4, "exp": 2, "relu": 1, "sum": 1, "expand": 1, "threshold_backward": 1}
    np.testing.assert_allclose(ty, ry, rtol=1e-6)
    np.testing.assert_allclose(tg, rg, rtol=1e-6)

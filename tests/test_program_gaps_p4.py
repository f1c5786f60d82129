"""Gaps found by running programs on diffusers, torchmetrics, accelerate, torchdiffeq, pyro/gpytorch,
kornia and transformers' Trainer unchanged under ``install_aliases()``: the torch API call sequence
each library uses, exercised directly and compared with real torch (none of those libraries is
imported here)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tapelab


def _same(ours, theirs) -> None:
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    if ours.dtype == tapelab.bfloat16:
        ours, theirs = ours.float(), theirs.float()
    np.testing.assert_array_equal(ours.detach().cpu().numpy(), theirs.detach().cpu().numpy())


# ---------------------------------------------------------------- diffusers' schedulers: CPU scans in double
def test_alphas_cumprod_and_euler_step_match_torch_bitwise():
    """diffusers builds ``alphas_cumprod = cumprod(1 - betas)`` in float32; PyTorch's CPU scan runs in
    double, so a float32 running product was ulps off, and Euler's v-prediction step (``sample +
    derivative * dt`` cancels all but 0.15% of ``sample``) amplified that to 5e-5 of the sample."""
    betas = [min(1 - math.cos((i + 1.008) / 1.008 * math.pi / 2) ** 2 / math.cos((i + 0.008) / 1.008 * math.pi / 2) ** 2,
                 0.999) for i in range(100)]
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    results = []
    for m in (tapelab, torch):
        alphas_cumprod = m.cumprod(1.0 - m.tensor(betas, dtype=m.float32), dim=0)
        sigmas = ((1 - alphas_cumprod) / alphas_cumprod) ** 0.5
        sigma, nxt = sigmas[-1], sigmas[50]
        sample = m.tensor(x) * (sigma ** 2 + 1) ** 0.5
        eps = m.tanh(sample / (sigma ** 2 + 1) ** 0.5 * 0.3)
        pred = eps * (-sigma / (sigma ** 2 + 1) ** 0.5) + sample / (sigma ** 2 + 1)
        results.append((alphas_cumprod, sample + (sample - pred) / sigma * (nxt - sigma)))
    for ours, theirs in zip(*results):
        _same(ours, theirs)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_round_a_double_accumulator_like_torch_cpu(dt, op):
    """Long scans and their gradients, bitwise against torch: float32 and complex64 accumulate in
    double, float16 and bfloat16 in float32 (tapelab has no complex cumprod gradient)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((400, 3))
    if dt == "complex64":
        a = a + 1j * rng.standard_normal((400, 3))
    a = 1 + 0.01 * a if op == "cumprod" else a
    g = rng.standard_normal((400, 3))
    results = []
    for m in (tapelab, torch):
        x = m.tensor(a).to(getattr(m, dt)).requires_grad_(op == "cumsum" or dt != "complex64")
        y = getattr(m, op)(x, 0)
        if x.requires_grad:
            y.backward(m.tensor(g).to(y.dtype))
        results.append((y, x.grad if x.requires_grad else y))
    for ours, theirs in zip(*results):
        _same(ours, theirs)


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "int32"])
def test_scan_dtype_argument_gives_that_dtype(dt):
    """``cumsum(x, dtype=float32)`` casts first and returns float32 (a bfloat16 input came back bfloat16)."""
    a = np.random.default_rng(2).standard_normal(300) * 4
    ours = tapelab.cumsum(tapelab.tensor(a).to(getattr(tapelab, dt)), 0, dtype=tapelab.float32)
    _same(ours, torch.cumsum(torch.tensor(a).to(getattr(torch, dt)), 0, dtype=torch.float32))


# ---------------------------------------------------------------- torchdiffeq: autograd.Function patterns

def _unchecked_assign(m):
    """torchdiffeq's Runge-Kutta scratch: ``scratch.data[index] = value`` to sneak past the version check."""
    class UncheckedAssign(m.autograd.Function):
        @staticmethod
        def forward(ctx, scratch, value, index):
            ctx.index = index
            scratch.data[index] = value
            return scratch

        @staticmethod
        def backward(ctx, grad_scratch):
            return grad_scratch, grad_scratch[ctx.index], None
    return UncheckedAssign


def test_writes_through_data_leave_the_version_counter_alone():
    """PyTorch's ``.data`` is an alias with its own version counter: writes through it do not bump
    the tensor's version, so graph nodes that saved the tensor still backward."""
    rng = np.random.default_rng(3)
    y0, w = rng.standard_normal((4, 2)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    results = []
    for m in (tapelab, torch):
        assign = _unchecked_assign(m)
        y, W = m.tensor(y0, requires_grad=True), m.tensor(w, requires_grad=True)
        k = assign.apply(m.empty(4, 2, 3), m.tanh(y @ W), (..., 0))
        for i in (1, 2):
            yi = y + m.sum(k[..., :i] * 0.5, dim=-1)
            k = assign.apply(k, m.tanh(yi @ W), (..., i))
        (k * m.tensor([1.0, 2.0, 3.0])).sum().backward()
        d = y.data
        d[0, 0] = 5.0
        results.append((k, y.grad, W.grad, m.tensor(y._version), m.tensor(d._version)))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_function_gradients_after_a_none_for_a_tensor_input():
    """torchdiffeq's ``OdeintAdjointMethod`` takes ``(..., y0, t, ..., *params)`` and returns None for
    ``t``: the first parameter after it lost its gradient (the edge check read ``t``'s edge)."""
    grads = []
    for m in (tapelab, torch):
        class Fn(m.autograd.Function):
            @staticmethod
            def forward(ctx, shapes, y0, t, flag, *params):
                ctx.save_for_backward(*params)
                return y0 * 2

            @staticmethod
            def backward(ctx, g):
                return (None, g * 2, None, None, *[p * 0 + g.sum() * (i + 1) for i, p in enumerate(ctx.saved_tensors)])
        y0 = m.ones(2, requires_grad=True)
        w1, w2 = m.ones(2, requires_grad=True), m.ones(3, requires_grad=True)
        Fn.apply(None, y0, m.linspace(0, 1, 3), False, w1, w2).sum().backward()
        grads.append([None if g is None else g.numpy() for g in (y0.grad, w1.grad, w2.grad)])
    for ours, theirs in zip(*grads):
        assert ours is not None
        np.testing.assert_array_equal(ours, theirs)


# ---------------------------------------------------------------- pyro (and gpytorch, which imports it)
def test_aliased_modules_answer_to_the_names_they_are_imported_as():
    """pyro's torch_patch asserts ``"torch.distributions....".split(".")[0] == torch.__name__`` before
    walking ``torch.distributions.transforms.Transform``; uninstalling gives tapelab its names back."""
    with tapelab.install_aliases():
        import torch as aliased
        import torchvision as aliased_vision
        names = aliased.__name__, aliased_vision.__name__
        target = "torch.distributions.transforms.Transform.__getstate__".split(".")
        module = aliased
        for part in target[1:-1]:
            module = getattr(module, part)
    assert aliased is tapelab and names == (torch.__name__, "torchvision") and target[0] == names[0]
    assert module is tapelab.distributions.transforms.Transform and callable(getattr(module, target[-1]))
    assert (tapelab.__name__, tapelab.vision.__name__) == ("tapelab", "tapelab.vision")


def test_register_kl_takes_any_class_as_torch_does():
    """pyro registers ``@register_kl(Delta, Distribution)`` with its own ``Distribution`` base (not a
    subclass of PyTorch's); its distributions inherit both, and the rule then dispatches."""
    values = []
    for m in (tapelab, torch):
        class Mixin:
            pass

        class Point(m.distributions.Distribution, Mixin):
            arg_constraints: dict = {}

            def __init__(self, v):
                self.v = v
                super().__init__(validate_args=False)

        @m.distributions.register_kl(Point, Mixin)
        def _kl(p, q):
            return (p.v - q.v) ** 2

        values.append(m.distributions.kl_divergence(Point(m.tensor(3.0)), Point(m.tensor(1.5))))
        with pytest.raises(TypeError):
            m.distributions.register_kl(Point, "Mixin")
    np.testing.assert_array_equal(*(v.numpy() for v in values))


def test_serialization_names_map_location_type():
    """pyro's param store imports ``from torch.serialization import MAP_LOCATION`` for its annotations."""
    import typing
    ours, theirs = typing.get_args(tapelab.serialization.MAP_LOCATION), typing.get_args(torch.serialization.MAP_LOCATION)
    assert [getattr(a, "__name__", a) for a in ours[1:]] == [getattr(a, "__name__", a) for a in theirs[1:]]
    assert typing.get_origin(ours[0]) is typing.get_origin(theirs[0])


# ---------------------------------------------------------------- gpytorch / linear_operator
@pytest.mark.parametrize("name, args, outs", [
    ("cholesky_ex", lambda m, A: (A,), lambda m: (m.empty(0), m.empty(0, dtype=m.int32))),
    ("inv", lambda m, A: (A,), lambda m: m.empty(3, 3)),
    ("solve", lambda m, A: (A, m.ones(3, 2)), lambda m: m.empty(0)),
    ("slogdet", lambda m, A: (A,), lambda m: (m.empty(()), m.empty(()))),
    ("vector_norm", lambda m, A: (A, 3.0), lambda m: m.empty(())),
])
def test_linalg_functions_take_out(name, args, outs):
    """linear_operator's psd_safe_cholesky calls ``torch.linalg.cholesky_ex(A, out=out)`` (out None);
    an out given is written and returned, as for the top-level functions."""
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
    results = []
    for m in (tapelab, torch):
        fn = getattr(m.linalg, name)
        plain = fn(*args(m, m.tensor(a)), out=None)
        out = outs(m)
        given = fn(*args(m, m.tensor(a)), out=out)
        same = all(g is o for g, o in zip(given, out)) if isinstance(out, tuple) else given is out
        results.append((same, plain if isinstance(plain, tuple) else (plain,), given if isinstance(given, tuple) else (given,)))
    (ours_same, *ours), (theirs_same, *theirs) = results
    assert ours_same and theirs_same
    for o, t in zip(ours, theirs):
        for x, y in zip(o, t):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6, atol=1e-6)


def test_size_slices_and_sums_stay_sizes():
    """linear_operator reads ``self.shape[-2:].numel()``: PyTorch's Size slices, concatenations and
    repeats are Sizes (the fix is Size.__getitem__/__add__/__radd__/__mul__ in engine/core/tensor.py)."""
    ours, theirs = tapelab.ones(2, 3, 4).shape, torch.ones(2, 3, 4).shape
    for f in (lambda s: s[-2:], lambda s: s[:0], lambda s: s + (5,), lambda s: (5,) + s, lambda s: s * 2):
        assert type(f(ours)) is tapelab.Size and type(f(theirs)) is torch.Size and f(ours) == f(theirs)
    assert ours[-2:].numel() == theirs[-2:].numel() and type(ours[1]) is int


# ---------------------------------------------------------------- kornia
def test_torch_torch_is_the_package():
    """kornia annotates ``List[torch.torch.Tensor]`` at import."""
    assert torch.torch is torch and tapelab.torch is tapelab
    with tapelab.install_aliases():
        import torch as aliased
        assert aliased.torch.Tensor is tapelab.Tensor


def test_nn_modules_utils_match_torch():
    """kornia imports ``_pair`` from ``torch.nn.modules.utils``; DDP checkpoints strip ``module.`` with
    ``consume_prefix_in_state_dict_if_present``."""
    from collections import OrderedDict

    import tapelab.nn.modules.utils as ours
    import torch.nn.modules.utils as theirs
    for name in ("_single", "_pair", "_triple", "_quadruple"):
        for v in (3, (1, 2), [4, 5, 6], 2.5):
            assert getattr(ours, name)(v) == getattr(theirs, name)(v)
    assert ours._reverse_repeat_tuple((1, 2, 3), 2) == theirs._reverse_repeat_tuple((1, 2, 3), 2)
    assert ours._list_with_default([None, 5], [1, 2, 3, 4]) == theirs._list_with_default([None, 5], [1, 2, 3, 4])
    assert ours._list_with_default(7, [1, 2]) == theirs._list_with_default(7, [1, 2])
    for m in (ours, theirs):
        with pytest.raises(ValueError, match="Input dimension should be at least 3"):
            m._list_with_default([None, 5], [1, 2])
    dicts = []
    for m in (ours, theirs):
        sd = OrderedDict([("module.a.weight", 1), ("module.b", 2), ("c", 3)])
        sd._metadata = OrderedDict([("", {}), ("module", {"v": 1}), ("module.a", {"v": 2})])
        m.consume_prefix_in_state_dict_if_present(sd, "module.")
        dicts.append((list(sd.items()), list(sd._metadata.items())))
    assert dicts[0] == dicts[1]


def test_autocast_state_of_other_backends_is_off():
    """kornia asks ``is_autocast_enabled(t)`` for cpu, cuda, mps and xpu."""
    for device_type in ("cpu", "cuda", "mps", "xpu", "hpu", "xla"):
        assert tapelab.is_autocast_enabled(device_type) is torch.is_autocast_enabled(device_type) is False
    with tapelab.autocast("cpu"):
        assert tapelab.is_autocast_enabled("cpu") and not tapelab.is_autocast_enabled("mps")


def test_functorch_probes_and_fake_tensors():
    """kornia's filters and losses ask ``torch._C._are_functorch_transforms_active()``,
    ``torch._C._functorch.is_legacy_batchedtensor(g)`` and ``torch._subclasses.fake_tensor.is_fake(x)``
    before taking a value-dependent path; outside transforms every answer is False in both."""
    from tapelab._subclasses.fake_tensor import is_fake as ours_fake
    from torch._subclasses.fake_tensor import is_fake as theirs_fake
    assert tapelab._C._are_functorch_transforms_active() is torch._C._are_functorch_transforms_active() is False
    t, u = tapelab.ones(2), torch.ones(2)
    for name in ("is_batchedtensor", "is_legacy_batchedtensor", "is_gradtrackingtensor", "is_functionaltensor"):
        assert getattr(tapelab._C._functorch, name)(t) is getattr(torch._C._functorch, name)(u) is False
    assert ours_fake(t) is theirs_fake(u) is False


@pytest.mark.parametrize("args", [(True,), (False,), (False, "kornia: factor must be positive"), (2,), (0.0,),
                                  ([1, 1],), ([],)])
def test_assert_async_as_torch_cpu(args):
    """kornia's adjust_contrast checks ``torch._assert_async(cond, msg)``; on the CPU it raises at once."""
    outcomes = []
    for m in (tapelab, torch):
        try:
            m._assert_async(m.tensor(args[0]), *args[1:])
            outcomes.append(None)
        except RuntimeError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]


def test_sym_types_exist_for_isinstance_checks():
    """kornia checks ``isinstance(n, (int, torch.SymInt))`` and ``(float, torch.SymFloat)``."""
    for value in (3, 2.5, True, tapelab.tensor(1)):
        for name, py in (("SymInt", int), ("SymFloat", float), ("SymBool", bool)):
            theirs = value if not isinstance(value, tapelab.Tensor) else torch.tensor(1)
            assert isinstance(value, (py, getattr(tapelab, name))) == isinstance(theirs, (py, getattr(torch, name)))
    with pytest.raises(TypeError, match="no symbolic sizes"):
        tapelab.SymInt(None)


def test_complex32_is_named_and_refused_as_storage():
    """kornia lists ``torch.complex32`` in a dtype membership test; tapelab has no complex32 arrays, so
    the dtype compares, prints, pickles and promotes as PyTorch's, and a tensor of it is refused."""
    import pickle
    c, tc = tapelab.complex32, torch.complex32
    assert c is tapelab.chalf and tc is torch.chalf and pickle.loads(pickle.dumps(c)) is c
    assert (c.itemsize, c.is_complex, c.is_floating_point, c.is_signed) == (tc.itemsize, tc.is_complex,
                                                                            tc.is_floating_point, tc.is_signed)
    assert repr(c.to_real()).split(".")[1] == repr(tc.to_real()).split(".")[1] == "float16"
    assert repr(tapelab.promote_types(c, tapelab.float32)) == repr(torch.promote_types(tc, torch.float32)).replace("torch", "tapelab")
    assert c in (tapelab.float16, tapelab.complex32) and tapelab.complex64 not in (c,)
    with pytest.raises((TypeError, RuntimeError), match="no complex32"):
        tapelab.zeros(2, dtype=c)
    with pytest.raises(TypeError, match="no complex32"):
        tapelab.ones(2).to(c)


def test_reprs_follow_the_name_the_package_answers_to():
    """Under ``install_aliases`` dtypes, layouts and tensors print as PyTorch's (kornia's DType.get
    parses ``str(dtype)[6:]``); tapelab prints its own name otherwise."""
    with tapelab.install_aliases():
        import torch as aliased
        ours = [str(aliased.float32), repr(aliased.strided), repr(aliased.ones(2, dtype=aliased.float16)),
                str(aliased.bfloat16)[6:]]
    theirs = [str(torch.float32), repr(torch.strided), repr(torch.ones(2, dtype=torch.float16)), "bfloat16"]
    assert ours == theirs
    assert (str(tapelab.float32), repr(tapelab.channels_last)) == ("tapelab.float32", "tapelab.channels_last")


def test_no_proxy_mode_outside_tracing():
    """kornia.contrib imports ``torch.fx.experimental.proxy_tensor.get_proxy_mode`` (kornia.augmentation
    imports kornia.contrib) and asks it before reading values; the fix is a new engine/fx/experimental."""
    from torch.fx.experimental.proxy_tensor import get_proxy_mode as theirs
    ours = __import__("tapelab.fx.experimental.proxy_tensor", fromlist=["get_proxy_mode"]).get_proxy_mode
    assert ours() is theirs() is None


def test_legacy_sparse_constructors_and_dsmm():
    """linear_operator's KISS-GP builds its interpolation with ``getattr(torch.sparse, t.type().split('.')[-1])
    (indices, values, size)`` and multiplies with ``torch.dsmm``; values and gradients against torch."""
    import warnings
    rng = np.random.default_rng(4)
    idx, val, dense = np.array([[0, 1, 2, 2], [1, 0, 2, 0]]), rng.standard_normal(4), rng.standard_normal((3, 2))
    results = []
    for m in (tapelab, torch):
        v = m.tensor(val, dtype=m.float32, requires_grad=True)
        d = m.tensor(dense, dtype=m.float32, requires_grad=True)
        cls = getattr(m.sparse, v.type().split(".")[-1])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = cls(m.tensor(idx), v, m.Size([3, 3]))
        out = m.dsmm(s, d)
        out.square().sum().backward()
        empty = m.sparse.DoubleTensor(2, 3)
        results.append((out, d.grad, v.grad, isinstance(s, m.sparse.FloatTensor), isinstance(s, m.sparse.DoubleTensor),
                        isinstance(s.to_dense(), m.sparse.FloatTensor), [str(w.message)[:40] for w in caught],
                        tuple(empty.shape), empty.is_sparse, str(empty.dtype).split(".")[1],
                        str(cls(m.tensor(idx), v.detach().double()).dtype).split(".")[1]))
    (*ours, o_rest), (*theirs, t_rest) = [(r[0], r[1], r[2], r[3:]) for r in results]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    assert o_rest == t_rest

"""Complex dtypes against PyTorch: promotion over every dtype pair, result_type with Python scalars,
dtype properties, creation, printing, the parts as views, and the ops that refuse complex gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
         "complex64", "complex128"]


def _name(d) -> str:
    return str(d).split(".")[-1]


def test_promote_types_every_pair_matches_torch():
    for a in NAMES:
        for b in NAMES:
            want = _name(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            got = _name(tapelab.promote_types(getattr(tapelab, a), getattr(tapelab, b)))
            assert got == want, f"promote_types({a}, {b}) = {got}, torch {want}"


def test_can_cast_every_pair_matches_torch():
    for a in NAMES:
        for b in NAMES:
            assert tapelab.can_cast(getattr(tapelab, a), getattr(tapelab, b)) == \
                torch.can_cast(getattr(torch, a), getattr(torch, b)), (a, b)


@pytest.mark.parametrize("default", ["float32", "float64"])
def test_result_type_with_scalars_and_zero_dim_matches_torch(default):
    operands = [lambda m: m.ones(2, dtype=m.float32), lambda m: m.ones(2, dtype=m.float64),
                lambda m: m.ones(2, dtype=m.int32), lambda m: m.ones(2, dtype=m.complex64),
                lambda m: m.tensor(1j, dtype=m.complex128), lambda m: m.tensor(1.0, dtype=m.float64),
                lambda m: 1j, lambda m: 2.5, lambda m: 3]
    for m in (torch, tapelab):
        m.set_default_dtype(getattr(m, default))
    try:
        for f in operands:
            for g in operands:
                if isinstance(f(torch), (int, float, complex)) and isinstance(g(torch), (int, float, complex)):
                    continue
                want = _name(torch.result_type(f(torch), g(torch)))
                assert _name(tapelab.result_type(f(tapelab), g(tapelab))) == want
        assert _name(tapelab.tensor([1 + 2j]).dtype) == _name(torch.tensor([1 + 2j]).dtype)
        assert _name((tapelab.ones(2, dtype=tapelab.float32) * 1j).dtype) == \
            _name((torch.ones(2, dtype=torch.float32) * 1j).dtype)
    finally:
        for m in (torch, tapelab):
            m.set_default_dtype(m.float32)


def test_dtype_properties():
    c64, c128 = tapelab.complex64, tapelab.complex128
    assert tapelab.cfloat is c64 and tapelab.cdouble is c128
    assert c64.is_complex and not c64.is_floating_point and c64.is_signed and c64.itemsize == 8
    assert c64.to_real() is tapelab.float32 and c128.to_real() is tapelab.float64
    assert tapelab.float64.to_complex() is c128 and tapelab.float32.to_real() is tapelab.float32
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Int"):
        tapelab.int32.to_complex()
    for c, t in ((c64, torch.complex64), (c128, torch.complex128)):
        info, want = tapelab.finfo(c), torch.finfo(t)
        assert (info.eps, info.max, info.tiny, info.bits, info.dtype) == \
            (want.eps, want.max, want.tiny, want.bits, want.dtype)
    z = tapelab.zeros(2, dtype=c128)
    assert z.is_complex() and tapelab.is_complex(z) and not z.is_floating_point() and not z.is_conj()
    assert z.type() == "torch.ComplexDoubleTensor"


CASES = [[1 + 2j, -3.5 - 0.25j, 0j], [[1e10 + 1j, 2]], 1 + 2j, [[1.5j, -2], [3, 4]], [-0.0 - 1j],
         [1e-5 + 3j, 100.0 - 2e4j], [float("nan") + 1j, complex(float("inf"), -1)], [1 + 2j] * 500]


@pytest.mark.parametrize("data", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("dtype", [None, "complex128"])
def test_repr_matches_torch(data, dtype):
    a = tapelab.tensor(data, dtype=getattr(tapelab, dtype) if dtype else None)
    b = torch.tensor(data, dtype=getattr(torch, dtype) if dtype else None)
    assert repr(a) == repr(b).replace("torch.", "tapelab.")


def test_creation_from_python_and_numpy_complex():
    for data in (np.array([1 + 1j, 2], dtype=np.complex64), np.array([1 + 1j]), [1, 2j], 3j):
        a, b = tapelab.tensor(data), torch.tensor(data)
        assert _name(a.dtype) == _name(b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert complex(tapelab.tensor(1 + 2j)) == 1 + 2j and tapelab.tensor([1j]).tolist() == [1j]
    z = tapelab.zeros(3, dtype=tapelab.complex64, requires_grad=True)
    assert z.requires_grad
    with pytest.raises(RuntimeError, match="floating point and complex"):
        tapelab.zeros(3, dtype=tapelab.int64).requires_grad_()


def test_real_imag_are_settable_views():
    z = tapelab.tensor([1 + 2j, 3 - 4j])
    r, i = z.real, z.imag
    r.mul_(10)
    assert z.tolist() == [10 + 2j, 30 - 4j]
    z.imag = tapelab.tensor([0.5, 0.5])
    z.real = tapelab.tensor([1.0, 2.0])
    assert z.tolist() == [1 + 0.5j, 2 + 0.5j] and i.tolist() == [0.5, 0.5]
    x = tapelab.tensor([1.0, -2.0])
    assert x.real is x and tapelab.conj(x) is x and tapelab.resolve_conj(x) is x
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag
    assert tapelab.isreal(tapelab.tensor([1 + 0j, 1j])).tolist() == torch.isreal(torch.tensor([1 + 0j, 1j])).tolist()


def test_view_as_real_and_complex_share_memory():
    x = tapelab.tensor([[1.0, 2.0], [3.0, 4.0]])
    z = tapelab.view_as_complex(x)
    z.mul_(1j)
    assert x.tolist() == [[-2.0, 1.0], [-4.0, 3.0]]
    assert tapelab.view_as_real(z).data_ptr() == x.data_ptr()
    with pytest.raises(RuntimeError, match="stride 1"):
        tapelab.view_as_complex(tapelab.zeros(2, 4)[:, ::2])
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        tapelab.view_as_real(x)


def test_complex_polar_and_errors_match_torch():
    r, th = np.array([1.0, 2.0]), np.array([0.3, -2.0])
    np.testing.assert_allclose(tapelab.polar(tapelab.tensor(r), tapelab.tensor(th)).numpy(),
                               torch.polar(torch.tensor(r), torch.tensor(th)).numpy())
    for bad in [(tapelab.ones(2), tapelab.ones(2, dtype=tapelab.float64)), (tapelab.ones(2, dtype=tapelab.int64),) * 2]:
        with pytest.raises(RuntimeError):
            tapelab.complex(*bad)


def test_complex_gradient_convention_matches_torch():
    """A real loss of complex leaves: z.grad = dL/dx + i dL/dy, through promotion with a real tensor."""
    rng = np.random.default_rng(0)
    zv, wv = rng.standard_normal(4) + 1j * rng.standard_normal(4), rng.standard_normal(4)
    grads = []
    for m in (torch, tapelab):
        z = m.tensor(zv, requires_grad=True)
        w = m.tensor(wv, requires_grad=True)
        y = (z * w / (z + 2)) ** 2 + z.real * z.imag + z.conj() * 3j
        loss = m.view_as_real(y).sum() + (z.exp() * w).abs().sum() + m.angle(z).sum()
        loss.backward()
        grads.append((np.asarray(z.grad.detach()), np.asarray(w.grad.detach())))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-10)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-10)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)),
                                    ((2, 3, 4), (2, 4, 5))])
def test_matmul_and_einsum_gradients_conjugate_as_torch(shapes):
    """Products take the conjugate of the other factor; a real operand cast into an einsum gets the real part."""
    rng = np.random.default_rng(1)
    av = rng.standard_normal(shapes[0]) + 1j * rng.standard_normal(shapes[0])
    bv = rng.standard_normal(shapes[1]) + 1j * rng.standard_normal(shapes[1])
    rv = rng.standard_normal(shapes[1])
    grads = []
    for m in (torch, tapelab):
        a, b = m.tensor(av, requires_grad=True), m.tensor(bv, requires_grad=True)
        r = m.tensor(rv, requires_grad=True)
        y = a @ b
        e = m.einsum("...j,j->...", a, r.to(a.dtype)) if r.ndim == 1 else None
        loss = (y * y.conj()).real.sum() + (y.real * y.imag).sum() + (0 if e is None else e.abs().sum())
        loss.backward()
        grads.append([np.asarray(t.grad) for t in (a, b) + ((r,) if e is not None else ())])
    for got, want in zip(grads[1], grads[0]):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    c = [tapelab.tensor(rng.standard_normal(s) + 1j * rng.standard_normal(s), requires_grad=True) for s in ((2, 3), (3, 2))]
    assert tapelab.autograd.gradgradcheck(lambda x, y: x @ y, c)
    assert tapelab.autograd.gradcheck(lambda x, y: tapelab.einsum("ij,jk->ik", x, y), c)
    u, v = av.ravel()[:3], bv.ravel()[:3]
    np.testing.assert_allclose(complex(tapelab.vdot(tapelab.tensor(u), tapelab.tensor(v))),
                               complex(torch.vdot(torch.tensor(u), torch.tensor(v))), rtol=1e-12)


def test_ops_without_complex_gradients_refuse():
    z = tapelab.randn(3, dtype=tapelab.float64).to(tapelab.complex128).requires_grad_()
    with pytest.raises(NotImplementedError, match=r"asin\(complex128\[3\]\): the derivative of asin is not "
                                                  r"implemented for complex"):
        tapelab.asin(z)
    with tapelab.no_grad():          # values alone are fine
        assert tapelab.asin(z).dtype is tapelab.complex128
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * 2).sum().backward()


def test_real_ops_stay_free_of_conj():
    """conj of a real tensor is the tensor itself: the real vjps pay a dtype test, no op."""
    x = tapelab.randn(3, requires_grad=True)
    with tapelab.tape() as tp:
        (x * x).exp().sum().backward()
    names = [r.op for r in tp.nodes]
    assert "mul" in names and "conj_physical" not in names


@pytest.mark.parametrize("name, kw", [("Adam", {}), ("AdamW", {"weight_decay": 0.1}), ("Adam", {"amsgrad": True}),
                                      ("RMSprop", {"momentum": 0.9}), ("Adagrad", {}), ("NAdam", {}), ("RAdam", {}),
                                      ("Adamax", {}), ("Adadelta", {}), ("SGD", {"momentum": 0.9}), ("ASGD", {})])
def test_optimizers_update_complex_parameters_as_torch(name, kw):
    """Complex parameters are updated as (real, imag) pairs; their state stays complex (state_dict as torch's)."""
    rng = np.random.default_rng(0)
    wv = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    xv = rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))
    out = []
    for m in (torch, tapelab):
        w, x = m.nn.Parameter(m.tensor(wv)), m.tensor(xv)
        opt = getattr(m.optim, name)([w], lr=0.05, **kw)
        for _ in range(3):
            opt.zero_grad()
            ((x @ w).abs() ** 2).sum().backward()
            opt.step()
        state = opt.state_dict()["state"][0]
        out.append((np.asarray(w.detach()), {k: (tuple(v.shape), str(v.dtype).split(".")[-1])
                                              for k, v in state.items() if k != "step" and hasattr(v, "shape")}))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12, atol=1e-14)
    assert out[1][1] == out[0][1]


def test_complex_random_draws_have_torchs_distribution():
    """Complex ``randn`` draws both parts (variance 1/2 each, |z|^2 of mean 1) and complex ``rand``
    is uniform in each part, as torch's; the moments are compared with torch's own draws."""
    n = 200_000
    for dtype, tdtype in ((tapelab.complex64, torch.complex64), (tapelab.complex128, torch.complex128)):
        z, ref = tapelab.randn(n, dtype=dtype), torch.randn(n, dtype=tdtype)
        assert z.dtype == dtype
        for part in ("real", "imag"):
            assert abs(float(getattr(z, part).std()) - float(getattr(ref, part).std())) < 0.01
        assert abs(float((z.abs() ** 2).mean()) - 1.0) < 0.02
        u = tapelab.rand(n, dtype=dtype)
        for part in ("real", "imag"):
            p = getattr(u, part)
            assert 0.0 <= float(p.min()) and float(p.max()) < 1.0 and abs(float(p.mean()) - 0.5) < 0.01

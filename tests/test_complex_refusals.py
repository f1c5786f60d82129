"""Ops PyTorch refuses on complex input refuse in tapelab too, with PyTorch's exception type (and, for
declared ops, PyTorch's message): an op's ``complex_error`` is read where the dispatcher runs it, so no
op falls back on numpy's lexicographic ordering of complex numbers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

Z = np.array([[1 + 2j, -3 + 0.5j, 2 - 1j], [0.5 + 0.5j, -1 - 1j, 4 + 0j]])
R = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]])

# name: (call on module m with a complex tensor z and a real tensor r, PyTorch's message is ours)
CASES = {
    "relu": (lambda m, z, r: m.relu(z), True),
    "relu_": (lambda m, z, r: m.relu_(z.clone()), True),
    "maximum": (lambda m, z, r: m.maximum(z, z), True),
    "minimum": (lambda m, z, r: m.minimum(z, z), True),
    "maximum_real_complex": (lambda m, z, r: m.maximum(r, z), True),
    "fmax": (lambda m, z, r: m.fmax(z, z), True),
    "fmin": (lambda m, z, r: m.fmin(z, z), True),
    "max": (lambda m, z, r: m.max(z), False),
    "min": (lambda m, z, r: m.min(z), False),
    "max_dim": (lambda m, z, r: m.max(z, 0), False),
    "min_dim": (lambda m, z, r: m.min(z, 1), False),
    "max_binary": (lambda m, z, r: m.max(z, z), True),
    "amax": (lambda m, z, r: m.amax(z, 0), True),
    "amin": (lambda m, z, r: m.amin(z), True),
    "argmax": (lambda m, z, r: m.argmax(z), True),
    "argmin": (lambda m, z, r: m.argmin(z, 1), True),
    "sort": (lambda m, z, r: m.sort(z), True),
    "sort_stable_desc": (lambda m, z, r: m.sort(z, dim=0, descending=True, stable=True), True),
    "argsort": (lambda m, z, r: m.argsort(z), True),
    "msort": (lambda m, z, r: m.msort(z), True),
    "topk": (lambda m, z, r: m.topk(z, 2), True),
    "kthvalue": (lambda m, z, r: m.kthvalue(z, 1), True),
    "median": (lambda m, z, r: m.median(z), True),
    "median_dim": (lambda m, z, r: m.median(z, 1), False),
    "mode": (lambda m, z, r: m.mode(z), True),
    "unique": (lambda m, z, r: m.unique(z), True),
    "searchsorted": (lambda m, z, r: m.searchsorted(z[0], z), True),
    "cummax": (lambda m, z, r: m.cummax(z, 0), True),
    "cummin": (lambda m, z, r: m.cummin(z, 0), False),
    "clamp": (lambda m, z, r: m.clamp(z, 0, 1), True),
    "clamp_tensors": (lambda m, z, r: m.clamp(z, z, z), True),
    "clamp_min": (lambda m, z, r: m.clamp_min(z, 0), True),
    "clamp_max": (lambda m, z, r: m.clamp_max(z, 0), True),
    "clip": (lambda m, z, r: m.clip(z, 0, 1), True),
    "lt": (lambda m, z, r: m.lt(z, z), True),
    "le": (lambda m, z, r: m.le(z, 1), True),
    "gt": (lambda m, z, r: z > r, True),
    "ge": (lambda m, z, r: m.ge(r, z), True),
    "lt_complex_scalar": (lambda m, z, r: r < 1j, True),
    "lt_": (lambda m, z, r: z.clone().lt_(z), True),
    "floor": (lambda m, z, r: m.floor(z), True),
    "floor_": (lambda m, z, r: z.clone().floor_(), True),
    "ceil": (lambda m, z, r: m.ceil(z), True),
    "trunc": (lambda m, z, r: m.trunc(z), True),
    "fix": (lambda m, z, r: m.fix(z), True),
    "round": (lambda m, z, r: m.round(z), True),
    "frac": (lambda m, z, r: m.frac(z), True),
    "remainder": (lambda m, z, r: m.remainder(z, z), True),
    "remainder_scalar": (lambda m, z, r: m.remainder(z, 2), True),
    "fmod": (lambda m, z, r: m.fmod(z, z), True),
    "floor_divide": (lambda m, z, r: m.floor_divide(z, z), True),
    "div_trunc": (lambda m, z, r: m.div(z, z, rounding_mode="trunc"), True),
    "sign": (lambda m, z, r: m.sign(z), True),
    "signbit": (lambda m, z, r: m.signbit(z), True),
    "heaviside": (lambda m, z, r: m.heaviside(z, z), True),
    "atan2": (lambda m, z, r: m.atan2(z, z), True),
    "hypot": (lambda m, z, r: m.hypot(z, z), True),
    "xlogy": (lambda m, z, r: m.xlogy(z, z), True),
    "erf": (lambda m, z, r: m.erf(z), True),
    "erfc": (lambda m, z, r: m.erfc(z), True),
    "erfinv": (lambda m, z, r: m.erfinv(z), True),
    "lgamma": (lambda m, z, r: m.lgamma(z), True),
    "digamma": (lambda m, z, r: m.digamma(z), True),
    "i0": (lambda m, z, r: m.i0(z), True),
    "igamma": (lambda m, z, r: m.igamma(z, z), True),
    "igammac": (lambda m, z, r: m.igammac(z, z), True),
    "copysign": (lambda m, z, r: m.copysign(z, z), True),
    "nextafter": (lambda m, z, r: m.nextafter(z, z), True),
    "deg2rad": (lambda m, z, r: m.deg2rad(z), True),
    "rad2deg": (lambda m, z, r: m.rad2deg(z), True),
    "logit": (lambda m, z, r: m.logit(z), True),
    "special.i1": (lambda m, z, r: m.special.i1(z), True),
    "special.i0e": (lambda m, z, r: m.special.i0e(z), True),
    "special.erfcx": (lambda m, z, r: m.special.erfcx(z), True),
    "special.ndtri": (lambda m, z, r: m.special.ndtri(z), True),
    "special.bessel_j0": (lambda m, z, r: m.special.bessel_j0(z), True),
    "special.modified_bessel_k1": (lambda m, z, r: m.special.modified_bessel_k1(z), True),
    "special.airy_ai": (lambda m, z, r: m.special.airy_ai(z), True),
    "special.zeta": (lambda m, z, r: m.special.zeta(z, z), True),
    "special.chebyshev_polynomial_t": (lambda m, z, r: m.special.chebyshev_polynomial_t(z, 2), True),
    "special.hermite_polynomial_h": (lambda m, z, r: m.special.hermite_polynomial_h(z, 2), True),
    "nn.functional.hardtanh": (lambda m, z, r: m.nn.functional.hardtanh(z), True),
    # composites of refused ops: PyTorch's exception type, the message of the op they are made of
    "nn.functional.leaky_relu": (lambda m, z, r: m.nn.functional.leaky_relu(z), False),
    "nanmedian": (lambda m, z, r: m.nanmedian(z), None),
}


def _raised(m, dtype, fn):
    np_dtype = {"complex64": np.complex64, "complex128": np.complex128}[dtype]
    z = m.tensor(Z.astype(np_dtype))
    r = m.tensor(R.astype(np_dtype().real.dtype))
    with pytest.raises(Exception) as info:
        fn(m, z, r)
    return info.value


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(CASES))
def test_refused_like_torch(name, dtype):
    fn, same_message = CASES[name]
    expected, got = _raised(torch, dtype, fn), _raised(tapelab, dtype, fn)
    if same_message is None:   # a composite whose PyTorch kernel and ours differ in kind: refused, that is all
        assert isinstance(got, (RuntimeError, NotImplementedError)), got
        return
    assert type(got) is type(expected), (got, expected)
    if same_message:
        assert str(got) == str(expected).splitlines()[0]


def test_a_complex_input_that_requires_grad_meets_the_refusal_not_the_recording_error():
    z = tapelab.tensor(Z, requires_grad=True)
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        tapelab.relu(z)
    with pytest.raises(RuntimeError, match="maximum not implemented for complex tensors"):
        tapelab.maximum(z, z)


def test_ops_that_torch_runs_on_complex_still_run():
    z = tapelab.tensor(Z)
    zt = torch.tensor(Z)
    for f in (lambda m, x: m.eq(x, x), lambda m, x: m.sgn(x), lambda m, x: m.isclose(x, x),
              lambda m, x: m.logcumsumexp(x, 1), lambda m, x: m.logsumexp(x, 1), lambda m, x: m.sinc(x)):
        np.testing.assert_allclose(f(tapelab, z).numpy(), f(torch, zt).numpy(), rtol=1e-10, atol=1e-12)

"""Non-Tensor arguments where PyTorch requires a Tensor: a numpy array, a list, None or a str as the first
(and, for binary functions, the second) argument of public functions raises PyTorch's exception type, with
its message's key words (``exp(): argument 'input' (position 1) must be Tensor, not numpy.ndarray``).

The table lists each function with a call that succeeds (the arguments after the tensor, and the tensor's
shape: m a 3x3 float64 matrix, b 2x3x4x4, v 4 values, i a 3x3 int64 matrix); every bad value is put in each
tensor position in turn and the outcome compared with torch's. ``core/arguments.py`` builds the message;
``scripts/nontensor_args_survey.py`` measures every function both libraries have (these are the ones that agree).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tapelab

# (arguments after the tensor, shape): functions. T is a tensor of that shape.
TABLE = {
    ("T", "m"): """
        abs abs_ absolute acos acos_ acosh acosh_ all amax amin angle any arccos arccos_ arccosh arccosh_
        arcsin arcsin_ arcsinh arcsinh_ arctan arctan_ arctanh arctanh_ argmax argmin argwhere asin asin_
        asinh asinh_ atan atan_ atanh atanh_ ceil ceil_ celu_ clone conj conj_physical conj_physical_ cos
        cos_ cosh cosh_ count_nonzero deg2rad_ det detach detach_ detach_copy diagonal_copy digamma erf erf_
        erfc erfc_ erfinv exp exp2 exp2_ exp_ expm1 expm1_ fft.fft fft.fft2 fft.fftn fft.fftshift fft.hfft
        fft.hfft2 fft.hfftn fft.ifft fft.ifft2 fft.ifftn fft.ifftshift fft.ihfft fft.ihfft2 fft.ihfftn
        fft.irfft fft.irfft2 fft.irfftn fft.rfft fft.rfft2 fft.rfftn fix fix_ floor floor_ frac frac_ geqrf
        i0 i0_ inverse isfinite isinf isnan isneginf isposinf lgamma linalg.cholesky_ex linalg.det
        linalg.eig linalg.eigh linalg.eigvals linalg.eigvalsh linalg.inv linalg.inv_ex linalg.ldl_factor
        linalg.ldl_factor_ex linalg.lu linalg.lu_factor linalg.lu_factor_ex linalg.matrix_exp
        linalg.matrix_rank linalg.norm linalg.pinv linalg.slogdet linalg.svd linalg.svdvals
        linalg.vector_norm log log10 log10_ log1p log1p_ log2 log2_ log_ logdet logical_not logit_ lu
        matrix_exp max min msort nan_to_num nan_to_num_ neg neg_ negative negative_ nn.functional.celu_
        nn.functional.dropout1d nn.functional.dropout2d nn.functional.dropout3d nn.functional.elu_
        nn.functional.gelu nn.functional.hardsigmoid nn.functional.hardswish nn.functional.hardtanh_
        nn.functional.leaky_relu_ nn.functional.logsigmoid nn.functional.normalize nn.functional.rrelu_
        nn.functional.selu_ nn.functional.sigmoid nn.functional.silu nn.functional.softsign
        nn.functional.tanh nn.functional.tanhshrink nonzero norm pinverse prod rad2deg_ reciprocal
        reciprocal_ relu relu_ round round_ rrelu_ rsqrt rsqrt_ selu_ sgn sigmoid sigmoid_ sign signbit sin
        sin_ sinc sinc_ sinh sinh_ slogdet sort special.airy_ai special.bessel_j0 special.bessel_j1
        special.bessel_y0 special.bessel_y1 special.digamma special.erf special.erfc special.erfcx
        special.erfinv special.exp2 special.expit special.expm1 special.gammaln special.i0 special.i0e
        special.i1 special.i1e special.log1p special.log_ndtr special.modified_bessel_i0
        special.modified_bessel_i1 special.modified_bessel_k0 special.modified_bessel_k1 special.ndtri
        special.psi special.round special.scaled_modified_bessel_k0 special.scaled_modified_bessel_k1
        special.sinc special.spherical_bessel_j0 sqrt sqrt_ square square_ squeeze_copy std std_mean svd
        sym_sum t_copy tan tan_ tanh tanh_ trunc trunc_ unbind_copy unique var var_mean zero_""",
    ("T,T", "m"): """
        add allclose arctan2 atan2 clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ clip clip_ complex
        copysign div divide dsmm eq floor_divide fmax fmin fmod ge greater greater_equal gt hypot igamma
        igammac isclose ldexp_ le less less_equal linalg.matmul linalg.solve linalg.solve_ex linalg.vecdot
        logaddexp logical_and logical_or logical_xor lt matmul maximum minimum mm mul multiply ne nextafter
        nn.functional.binary_cross_entropy_with_logits nn.functional.mse_loss not_equal pow remainder rsub
        special.chebyshev_polynomial_t special.chebyshev_polynomial_u special.chebyshev_polynomial_v
        special.chebyshev_polynomial_w special.gammainc special.gammaincc special.hermite_polynomial_h
        special.hermite_polynomial_he special.laguerre_polynomial_l special.legendre_polynomial_p
        special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u
        special.shifted_chebyshev_polynomial_v special.shifted_chebyshev_polynomial_w special.xlogy
        special.zeta spmm sub subtract true_divide xlogy xlogy_""",
    ("T,1", "b"): """
        max_pool2d max_pool3d nn.functional.avg_pool2d nn.functional.avg_pool3d nn.functional.interpolate
        nn.functional.local_response_norm nn.functional.max_pool2d nn.functional.max_pool2d_with_indices
        nn.functional.max_pool3d nn.functional.upsample nn.functional.upsample_bilinear
        nn.functional.upsample_nearest""",
    ("T,1", "m"): """
        avg_pool1d max_pool1d max_pool1d_with_indices mvlgamma nn.functional.adaptive_avg_pool2d
        nn.functional.avg_pool1d nn.functional.max_pool1d nn.functional.max_pool1d_with_indices
        special.multigammaln split_copy""",
    ("T,0", "m"): """
        bernoulli fill_ linalg.matrix_power log_softmax matrix_power softmax special.log_softmax
        special.softmax unsqueeze_copy""",
    ("T,0,0", "m"): """
        moveaxis movedim nn.functional.threshold_ select_copy swapaxes swapdims threshold_ transpose
        transpose_copy""",
    ("T,T", "i"): """
        bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor gcd gcd_ lcm lcm_""",
    ("T,0", "b"): """
        nn.functional.adaptive_avg_pool3d nn.functional.adaptive_max_pool3d
        nn.functional.adaptive_max_pool3d_with_indices""",
    ("T", "b"): """
        nn.functional.glu nn.functional.instance_norm""",
    ("T,0,0", "b"): """
        nn.functional.fractional_max_pool2d nn.functional.fractional_max_pool2d_with_indices""",
    ("T,1,2", "b"): """
        nn.functional.lp_pool2d nn.functional.lp_pool3d""",
    ("T", "i"): """
        bitwise_not""",
    ("T,0,1,2", "m"): """
        unfold_copy""",
    ("T,1,2", "m"): """
        nn.functional.lp_pool1d""",
    ("T,T,T", "m"): """
        addcmul""",
    ("T,[0]", "v"): """
        permute_copy""",
}

# torch's parser names these parameters otherwise than their documented signature (linalg's "input" for
# A, special's "x"): the message is compared but for the parameter's name
PARAMETER_NAMED_OTHERWISE = set("""
    det inverse linalg.cholesky_ex linalg.eig linalg.eigh linalg.eigvals linalg.eigvalsh
    linalg.ldl_factor linalg.ldl_factor_ex linalg.matrix_exp linalg.matrix_power linalg.norm
    linalg.vector_norm lu matrix_exp matrix_power slogdet special.airy_ai
    special.scaled_modified_bessel_k0 special.scaled_modified_bessel_k1 special.spherical_bessel_j0 svd""".split())

CASES = [(fn, pattern, shape) for (pattern, shape), fns in TABLE.items() for fn in fns.split()]
_KEY = re.compile(r"argument '(\w+)' \(position (\d+)\) must be (.+?), not ([\w.]+)")


def _tensor(m, shape: str):
    g = np.random.default_rng(0)
    data = {"m": g.random((3, 3)) + 0.5, "b": g.random((2, 3, 4, 4)) + 0.5, "v": g.random(4) + 0.5,
            "i": g.integers(0, 3, (3, 3))}[shape]
    return m.tensor(data)


def _function(m, dotted: str):
    obj = m
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _bad_values(shape: str) -> dict:
    data = _tensor(torch, shape)
    return {"ndarray": data.numpy().copy(), "list": data.tolist(), "None": None, "str": "abc"}


def _outcome(fn, args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the outcome compared
        return type(e), str(e)
    return None, None


@pytest.mark.parametrize("name,pattern,shape", CASES, ids=[c[0] for c in CASES])
def test_non_tensor_argument_as_torch(name, pattern, shape):
    tokens = pattern.split(",")
    positions = [i for i, tok in enumerate(tokens[:2]) if tok == "T"]
    for position in positions:
        for kind in ("ndarray", "list", "None", "str"):
            outcomes = []
            for m in (torch, tapelab):
                args = [_tensor(m, shape) if tok == "T" else eval(tok) for tok in tokens]
                args[position] = _bad_values(shape)[kind]
                outcomes.append(_outcome(_function(m, name), args))
            (t_type, t_msg), (l_type, l_msg) = outcomes
            assert l_type is t_type, (name, position, kind, t_msg, l_msg)
            expected = _KEY.search(t_msg or "")
            if expected is None:
                continue
            got = _KEY.search(l_msg)
            assert got is not None, (name, position, kind, t_msg, l_msg)
            first = 1 if name in PARAMETER_NAMED_OTHERWISE else 0
            assert got.groups()[first:] == expected.groups()[first:], (name, kind, t_msg, l_msg)


def test_message_names_the_function_parameter_and_type():
    with pytest.raises(TypeError, match=re.escape("add(): argument 'other' (position 2) must be Tensor, not numpy.ndarray")):
        tapelab.add(tapelab.ones(3), np.ones(3))
    with pytest.raises(TypeError, match=re.escape("exp(): argument 'input' (position 1) must be Tensor, not list")):
        tapelab.exp([1.0])
    with pytest.raises(TypeError, match=re.escape("maximum(): argument 'input' (position 1) must be Tensor, not NoneType")):
        tapelab.maximum(None, tapelab.ones(2))
    with pytest.raises(TypeError, match=re.escape("det(): argument 'A' (position 1) must be Tensor, not str")):
        tapelab.linalg.det("abc")


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_a_layer_names_the_functional_it_calls(m):
    """PyTorch's parser names ``linear``, not the Module's forward; tapelab's frames say the same."""
    layer = m.nn.Sequential(m.nn.Linear(3, 2), m.nn.ReLU())
    with pytest.raises(TypeError, match=re.escape("linear(): argument 'input' (position 1) must be Tensor, not numpy.ndarray")):
        layer(np.ones((2, 3), np.float32))


def test_numbers_and_numpy_scalars_stay_accepted():
    for expr in ("m.pow(2, m.ones(3))", "m.add(m.ones(3), 2)", "m.mul(m.ones(3), np.float64(2.5))",
                 "m.where(m.ones(3) > 0, m.ones(3), 2.0)", "m.clamp(m.ones(3), 0.5, 0.7)", "m.ones(3).add(np.int64(3))"):
        expected = eval(expr, {"m": torch, "np": np})
        got = eval(expr, {"m": tapelab, "np": np})
        assert got.tolist() == expected.tolist(), expr
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], expr


@pytest.mark.parametrize("stmt", ["t + a", "t - a", "t * a", "t / a", "a / t", "t ** a", "t // a", "t % a", "t @ a2",
                                  "t == a"])
def test_operators_take_a_numpy_array_as_torch(stmt):
    """PyTorch's operators hand a numpy array to numpy (its result comes back a tensor): they take it where
    ``torch.add(t, a)`` refuses it."""
    results = []
    for m in (torch, tapelab):
        env = {"t": m.tensor([2.0, 3.0, 4.0], dtype=m.float64), "a": np.arange(3.0) + 1, "a2": np.ones((3, 3))}
        out = eval(stmt, env)
        results.append((out.tolist(), str(out.dtype).split(".")[-1]))
    assert results[0] == results[1]


@pytest.mark.parametrize("stmt", ["t += a", "t -= a", "t *= a", "t /= a"])
def test_inplace_operators_take_a_numpy_array_as_torch(stmt):
    results = []
    for m in (torch, tapelab):
        env = {"t": m.tensor([2.0, 3.0, 4.0], dtype=m.float64), "a": np.arange(3.0) + 1}
        exec(stmt, env)
        results.append(env["t"].tolist())
    assert results[0] == results[1]


@pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
def test_operators_refuse_lists_and_methods_refuse_arrays(m):
    t = m.ones(3)
    with pytest.raises(TypeError, match="unsupported operand"):
        t + [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="must be Tensor, not numpy.ndarray"):
        t.add(np.ones(3))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        m.mul(t, [1.0, 2.0, 3.0])

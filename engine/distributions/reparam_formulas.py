"""ATen's reparameterised gradients of gamma and Dirichlet draws, as array code over any namespace ``xp``.

PyTorch does not differentiate a gamma draw's cdf exactly: ``_standard_gamma_grad`` is a Taylor series
for small draws, a Rice saddle-point expansion for large shapes and a fitted bivariate rational function
elsewhere, and ``_dirichlet_grad`` (Beta and Dirichlet draws) is a piecewise approximation of the Beta
cdf's shape derivative. Per sample these differ from the exact implicit gradient by up to 60% relative
(Beta), so a model trained through them follows PyTorch's steps only with the same formulas. They are
written here branch by branch from ``aten/src/ATen/native/Distributions.h``, in its precision: the
Gamma formula in double, the Dirichlet one partly in the input's dtype (its Taylor branches and its
digamma's argument), so float32 results round where PyTorch's do.
"""
from __future__ import annotations

import numpy as np

__all__ = ["standard_gamma_grad", "dirichlet_grad"]

_PSI_10 = 2.25175258906672110764
_DIGAMMA_TAIL = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                 -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                 8.33333333333333333333E-2)
# the Gamma gradient's rational fit: p's and q's coefficients in v = log(alpha), each quadratic in u = log(x / alpha)
_GAMMA_FIT = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
              (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
               -0.00058392623),
              (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
               0.00085092367, -1.5247877e-07))
# the Dirichlet gradient's rational correction: [p or q][power of u][power of a][power of b]
_BETA_FIT = (
    (((1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
      (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
      (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013)),
     ((0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
      (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
      (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05)),
     ((-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
      (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
      (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05))),
    (((1, -0.02924021934, -0.04438342661, 0.007285809825),
      (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
      (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149)),
     ((0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
      (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
      (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05)),
     ((0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
      (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
      (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06))),
)
_F32_0_8, _F32_0_9, _F32_1_1 = (float(np.float32(v)) for v in (0.8, 0.9, 1.1))   # ATen's float literals


def _log(xp, x):
    """``log`` in ``x``'s dtype as C's ``logf`` rounds it for float32: computed in double and rounded (numpy's
    own float32 log is a SIMD approximation an ulp off glibc's on 9% of inputs)."""
    return xp.log(x.astype(np.float64)).astype(x.dtype, copy=False)


def _pow(xp, x, y):
    """``pow`` in ``x``'s dtype as C's ``powf`` rounds it for float32 (as ``_log``)."""
    return (x.astype(np.float64) ** y.astype(np.float64)).astype(x.dtype, copy=False)


def _digamma(xp, x):
    """ATen's ``digamma_one`` for positive ``x``: the argument pushed to 10 in its own dtype, the sum in double,
    the result in ``x``'s dtype (``x``'s log and ``0.5 / x`` in its dtype too)."""
    one = x.dtype.type(1)
    acc = xp.zeros(x.shape, np.float64)
    for _ in range(10):
        low = x < 10
        acc = acc - xp.where(low, one / x, 0).astype(np.float64)
        x = xp.where(low, x + one, x)
    z = 1.0 / (x * x).astype(np.float64)
    tail = xp.full(x.shape, _DIGAMMA_TAIL[0])
    for c in _DIGAMMA_TAIL[1:]:
        tail = tail * z + c
    asym = acc + _log(xp, x).astype(np.float64) - (x.dtype.type(0.5) / x).astype(np.float64) - z * tail
    return xp.where(x == 10, acc + _PSI_10, asym).astype(x.dtype)


def _gamma_series(xp, alpha, x):
    """The Taylor series in ``x`` (draws below 0.8)."""
    numer, denom = xp.ones_like(x), alpha
    series1, series2 = numer / denom, numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / i)
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = x ** alpha
    pdf = x ** (alpha - 1) * xp.exp(-x)
    cdf_alpha = (xp.log(x) - _digamma(xp, alpha)) * (pow_x_alpha * series1) - pow_x_alpha * series2
    result = -cdf_alpha / pdf
    return xp.where(xp.isnan(result), 0.0, result)


def _gamma_saddle(xp, alpha, x):
    """The Rice saddle-point expansion (shapes above 8), its own polynomial near ``x = alpha``."""
    near = (_F32_0_9 * alpha <= x) & (x <= _F32_1_1 * alpha)
    numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
    numer_2 = 1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha + alpha * (107 + 3600 * x)
    at_mean = numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
    denom = xp.sqrt(8 * alpha)
    term2 = denom / (alpha - x)
    term3 = (x - alpha - alpha * xp.log(x / alpha)) ** -1.5
    term23 = xp.where(x < alpha, term2 - term3, term2 + term3)
    term1 = xp.log(x / alpha) * term23 - xp.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    return xp.where(near, at_mean, -stirling * (x * term1) / denom)


def _gamma_rational(xp, alpha, x):
    u, v = xp.log(x / alpha), xp.log(alpha)
    c = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_GAMMA_FIT)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    return xp.exp(p / q)


def _by_branch(xp, shape, dtype, branches, *args):
    """Each element through the first branch whose mask holds: ``branches`` is ((mask, fn), ...)."""
    out = xp.empty(shape, dtype)
    taken = xp.zeros(shape, bool)
    for mask, fn in branches:
        mask = mask & ~taken
        if bool(mask.any()):
            out[mask] = fn(xp, *(a[mask] for a in args))
        taken |= mask
    return out


def standard_gamma_grad(xp, alpha, x):
    """``dx/dalpha`` of a standard gamma draw ``x`` (ATen's ``standard_gamma_grad_one``, in double)."""
    alpha, x = (a.astype(np.float64) for a in xp.broadcast_arrays(alpha, x))
    with np.errstate(all="ignore"):
        return _by_branch(xp, x.shape, np.float64,
                          ((x < _F32_0_8, _gamma_series), (alpha > 8, _gamma_saddle),
                           (xp.ones(x.shape, bool), _gamma_rational)), alpha, x)


def _beta_alpha_small(xp, x, alpha, beta):
    """d/dalpha of a Beta draw near 0: a Taylor series, in the input's dtype."""
    one = x.dtype.type(1)
    factor = _digamma(xp, alpha) - _digamma(xp, alpha + beta) - _log(xp, x)
    numer = xp.ones_like(x)
    series = numer / alpha * (factor + one / alpha)
    for i in range(1, 11):
        k = x.dtype.type(i)
        numer = numer * ((k - beta) * x / k)
        denom = alpha + k
        series = series + numer / denom * (factor + one / denom)
    result = x * _pow(xp, one - x, -beta) * series
    return xp.where(xp.isnan(result), 0, result)


def _beta_beta_small(xp, x, alpha, beta):
    """d/dbeta of a Beta(alpha, beta) draw near 0: a Taylor series, in the input's dtype."""
    one = x.dtype.type(1)
    factor = _digamma(xp, alpha + beta) - _digamma(xp, beta)
    numer, betas, dbetas = xp.ones_like(x), xp.ones_like(x), xp.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        k = x.dtype.type(i)
        numer = numer * (-x / k)
        dbetas = dbetas * (beta - k) + betas
        betas = betas * (beta - k)
        series = series + numer / (alpha + k) * (dbetas + factor * betas)
    result = -_pow(xp, one - x, one - beta) * series
    return xp.where(xp.isnan(result), 0, result)


def _beta_alpha_mid(xp, x, alpha, total):
    """d/dalpha of a Beta draw for large alpha and beta: the Rice saddle point, in double."""
    dtype = x.dtype
    x, alpha, total = (a.astype(np.float64) for a in (x, alpha, total))
    beta = total - alpha
    total = alpha + beta
    mean = alpha / total
    std = xp.sqrt(alpha * beta / (total + 1)) / total
    near = (mean - 0.1 * std <= x) & (x <= mean + 0.1 * std)
    b2 = beta * beta
    poly = 47 * x * b2 * b2 + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * b2 * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * b2 + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    at_mean = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / xp.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha)) * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1 = term1_num / (xp.sqrt(2 * alpha / beta) * total ** 1.5 * axbx * axbx)
    term2 = 0.5 * xp.log(alpha / (total * x))
    term3 = xp.sqrt(8 * alpha * beta / total) / (beta * x + alpha * (x - 1))
    term4 = (beta * xp.log(beta / (total * (1 - x))) + alpha * xp.log(alpha / (total * x))) ** -1.5
    term1234 = term1 + term2 * (term3 + xp.where(x < mean, term4, -term4))
    return xp.where(near, at_mean, stirling * prefactor * term1234).astype(dtype)


def _beta_rational(xp, x, alpha, total):
    """A rational correction to ``x (digamma(total) - digamma(alpha)) / beta``, in double."""
    x_, alpha_, total_ = (a.astype(np.float64) for a in (x, alpha, total))
    u = xp.log(x_)
    a = xp.log(alpha_) - u
    b = xp.log(total_) - a
    pow_u, pow_a = (1, u, u * u), (1, a, a * a)
    p = q = 0.0
    for i in range(3):
        for j in range(3):
            ua = pow_u[i] * pow_a[j]
            (p0, p1, p2, p3), (q0, q1, q2, q3) = _BETA_FIT[0][i][j], _BETA_FIT[1][i][j]
            p = p + ua * (p0 + b * (p1 + b * (p2 + b * p3)))
            q = q + ua * (q0 + b * (q1 + b * (q2 + b * q3)))
    digammas = (_digamma(xp, total_.astype(x.dtype)) - _digamma(xp, alpha_.astype(x.dtype))).astype(np.float64)
    approx = x_ * digammas / (total_ - alpha_)
    return (p / q * approx).astype(x.dtype)


def dirichlet_grad(xp, x, alpha, total):
    """``-(d/dalpha cdf(x; alpha, total - alpha)) / pdf(x) / (1 - x)`` for a Beta draw ``x``: the piece of a
    Dirichlet draw's gradient ATen's ``dirichlet_grad_one`` gives."""
    x, alpha, total = xp.broadcast_arrays(x, alpha, total)
    one = x.dtype.type(1)
    beta = total - alpha
    boundary = total * x * (one - x)
    with np.errstate(all="ignore"):
        return _by_branch(
            xp, x.shape, x.dtype,
            (((x <= 0.5) & (boundary < 2.5), lambda xp, x, a, b, t: _beta_alpha_small(xp, x, a, b)),
             ((x >= 0.5) & (boundary < 0.75), lambda xp, x, a, b, t: -_beta_beta_small(xp, one - x, b, a)),
             ((alpha > 6) & (beta > 6), lambda xp, x, a, b, t: _beta_alpha_mid(xp, x, a, t)),
             (xp.ones(x.shape, bool), lambda xp, x, a, b, t: _beta_rational(xp, x, a, t))),
            x, alpha, beta, total)

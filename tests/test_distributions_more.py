"""tapelab.distributions against torch.distributions: log_prob/entropy/moments/cdf/icdf and their
gradients on the same float64 values, KL pairs, argument errors, shapes, sample statistics."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as special
import torch

import tapelab
from _against_torch import compare

R = np.random.default_rng(0)
POS = R.uniform(0.5, 2.0, size=(2, 3))
POS2 = R.uniform(0.6, 3.0, size=(2, 3))
LOC = R.standard_normal((2, 3))
X = R.standard_normal((4, 2, 3))
XPOS = R.uniform(0.1, 3.0, size=(4, 2, 3))
UNITX = R.uniform(0.05, 0.95, size=(4, 2, 3))
PROBS = R.uniform(0.1, 0.9, size=(2, 3))
COUNTS = R.integers(0, 6, size=(4, 2, 3)).astype(np.float64)


def _stats(d, value, *, cdf=True, icdf=True, entropy=True, mode=True):
    out = [d.log_prob(value), d.mean, d.variance, d.stddev]
    if entropy:
        out.append(d.entropy())
    if mode:
        out.append(d.mode)
    if cdf:
        out.append(d.cdf(value))
    if icdf:
        out.append(d.icdf(d.cdf(value)))
    return out


CONTINUOUS = {
    "Normal": (lambda D, a, b: D.Normal(a, b), LOC, POS, X, {}),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), LOC, POS, X, {}),
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), LOC, POS, X, {}),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), LOC, POS, X, {}),
    "LogNormal": (lambda D, a, b: D.LogNormal(a, b), LOC, POS, XPOS, {}),
    "Uniform": (lambda D, a, b: D.Uniform(a, a + b + 4), LOC, POS, UNITX, {"mode": False}),
    "Exponential": (lambda D, a, b: D.Exponential(b), LOC, POS, XPOS, {}),
    "HalfNormal": (lambda D, a, b: D.HalfNormal(b), LOC, POS, XPOS, {}),
    "HalfCauchy": (lambda D, a, b: D.HalfCauchy(b), LOC, POS, XPOS, {}),
    "Gamma": (lambda D, a, b: D.Gamma(b + 1, a.exp()), LOC, POS, XPOS, {"icdf": False, "cdf": False}),
    "Chi2": (lambda D, a, b: D.Chi2(b * 3), LOC, POS, XPOS, {"icdf": False, "cdf": False}),
    "Beta": (lambda D, a, b: D.Beta(b + 1, a.exp() + 1), LOC, POS, UNITX, {"cdf": False, "icdf": False}),
    "StudentT": (lambda D, a, b: D.StudentT(b * 3, a, b), LOC, POS, X, {"cdf": False, "icdf": False}),
    "Pareto": (lambda D, a, b: D.Pareto(b * 0.05, b + 2), LOC, POS, XPOS, {}),
    "Weibull": (lambda D, a, b: D.Weibull(a.exp(), b + 0.5), LOC, POS, XPOS, {}),
    # mode: PyTorch 2.13's formula takes log1p of numbers below -1 and gives nan everywhere
    "Kumaraswamy": (lambda D, a, b: D.Kumaraswamy(b + 1, a.exp() + 1), LOC, POS, UNITX, {"mode": False}),
    "InverseGamma": (lambda D, a, b: D.InverseGamma(b + 2, a.exp()), LOC, POS, XPOS, {"cdf": False, "icdf": False}),
    "FisherSnedecor": (lambda D, a, b: D.FisherSnedecor(b * 4, a.exp() + 5), LOC, POS, XPOS,
                       {"cdf": False, "icdf": False, "entropy": False}),
    "VonMises": (lambda D, a, b: D.VonMises(a, b), LOC, POS, X, {"cdf": False, "icdf": False, "entropy": False}),
    "ContinuousBernoulli": (lambda D, a, b: D.ContinuousBernoulli(b / 2.5), LOC, POS, UNITX, {"mode": False}),
    "ContinuousBernoulliLogits": (lambda D, a, b: D.ContinuousBernoulli(logits=a), LOC, POS, UNITX, {"mode": False}),
    "ContinuousBernoulliHalf": (lambda D, a, b: D.ContinuousBernoulli(b * 0 + 0.5004), LOC, POS, UNITX,
                                {"mode": False}),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_family_matches_torch(name):
    make, a, b, x, opts = CONTINUOUS[name]
    compare(lambda m, a, b, x: _stats(make(m.distributions, a, b), x, **opts), a, b, x, atol=1e-9, rtol=1e-7)


def test_gamma_cdf_matches_torch():
    """Values only: PyTorch has no gradient of igamma in the concentration."""
    compare(lambda m, a, b, x: m.distributions.Gamma(b + 1, a.exp()).cdf(x), LOC, POS, XPOS, grad=False,
            atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("sign", [1.0, 0.0, -1.0])
def test_generalized_pareto_matches_torch(sign):
    """float32: PyTorch 2.13's GeneralizedPareto.log_prob fails on float64 (isclose against a float32 zero)."""
    f = np.float32
    compare(lambda m, a, b, x: _stats(m.distributions.GeneralizedPareto(a * 0 - 1, b * 4, sign * b * 0.1), x - 1),
            LOC.astype(f), POS.astype(f), UNITX.astype(f), atol=1e-5, rtol=1e-5)


def test_kumaraswamy_mode_is_the_closed_form():
    a, b = np.array([2.0, 0.7, 1.5]), np.array([3.0, 2.0, 0.5])
    mode = tapelab.distributions.Kumaraswamy(tapelab.tensor(a), tapelab.tensor(b)).mode.numpy()
    np.testing.assert_allclose(mode[0], ((a[0] - 1) / (a[0] * b[0] - 1)) ** (1 / a[0]))
    assert np.isnan(mode[1:]).all()


def test_mode_of_uniform_and_the_infinite_moments():
    lo = tapelab.distributions.Uniform(tapelab.zeros(2), tapelab.ones(2))
    assert bool(lo.mode.isnan().all())
    c = tapelab.distributions.Cauchy(tapelab.zeros(2), tapelab.ones(2))
    assert bool(c.mean.isnan().all()) and bool(c.variance.isinf().all())


DISCRETE = {
    "Bernoulli": (lambda D, p: D.Bernoulli(probs=p), (R.random((4, 2, 3)) < 0.5).astype(np.float64)),
    "BernoulliLogits": (lambda D, p: D.Bernoulli(logits=p.log() - (1 - p).log()),
                        (R.random((4, 2, 3)) < 0.5).astype(np.float64)),
    "Geometric": (lambda D, p: D.Geometric(probs=p), COUNTS),
    "Poisson": (lambda D, p: D.Poisson(p * 4), COUNTS),
    "Binomial": (lambda D, p: D.Binomial(8, probs=p), COUNTS),
    "BinomialLogits": (lambda D, p: D.Binomial(8, logits=p.log()), COUNTS),
    "NegativeBinomial": (lambda D, p: D.NegativeBinomial(p * 5, probs=p), COUNTS),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_family_matches_torch(name):
    make, x = DISCRETE[name]
    entropy = name not in ("Poisson", "NegativeBinomial")

    def fn(m, p, x):
        d = make(m.distributions, p)
        return _stats(d, x, cdf=False, icdf=False, entropy=entropy, mode=name != "BinomialLogits")
    compare(fn, PROBS, x, atol=1e-9, rtol=1e-7)


def test_categorical_onehot_multinomial_match_torch():
    logits = R.standard_normal((2, 5))
    idx = np.array([[0, 4], [2, 1], [3, 3]])
    onehot = np.eye(5)[idx]
    counts = np.array([[[1, 0, 2, 0, 3], [0, 0, 0, 6, 0]], [[2, 2, 2, 0, 0], [1, 1, 1, 1, 2]]], dtype=np.float64)

    def fn(m, lg, oh, c):
        D = m.distributions
        oc = D.OneHotCategorical(logits=lg)
        op = D.OneHotCategorical(probs=lg.softmax(-1))
        mn = D.Multinomial(6, logits=lg)
        return [oc.log_prob(oh), oc.entropy(), oc.mean, oc.variance, oc.mode, op.log_prob(oh),
                mn.log_prob(c), mn.mean, mn.variance, D.Multinomial(6, probs=lg.softmax(-1)).log_prob(c),
                D.kl_divergence(oc, D.OneHotCategorical(logits=lg.flip(0)))]
    compare(fn, logits, onehot, counts, atol=1e-9, rtol=1e-7)


def test_dirichlet_matches_torch():
    conc = R.uniform(0.5, 3.0, size=(2, 4))
    x = R.dirichlet(np.ones(4), size=(3, 2))
    q = R.uniform(0.5, 3.0, size=(2, 4))

    def fn(m, c, x, q):
        d = m.distributions.Dirichlet(c)
        return [d.log_prob(x), d.entropy(), d.mean, d.variance, d.mode,
                m.distributions.kl_divergence(d, m.distributions.Dirichlet(q))]
    compare(fn, conc, x, q, atol=1e-9, rtol=1e-7)


def _spd(n, batch=()):
    a = R.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("param", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_multivariate_normal_matches_torch(param):
    loc = R.standard_normal((2, 3))
    cov = _spd(3, (2,))
    mat = np.linalg.cholesky(cov) if param == "scale_tril" else cov
    x = R.standard_normal((4, 2, 3))

    def fn(m, loc, mat, x):
        # tril: torch's cholesky_inverse gives the (unused) upper triangle a gradient, tapelab's does not
        d = m.distributions.MultivariateNormal(loc, **{param: mat.tril() if param == "scale_tril" else mat})
        return [d.log_prob(x), d.entropy(), d.mean, d.variance, d.covariance_matrix, d.precision_matrix,
                d.scale_tril]
    compare(fn, loc, mat, x, atol=1e-8, rtol=1e-6)


def test_multivariate_normal_broadcasts_an_unbatched_matrix_and_kl():
    loc, L = R.standard_normal((2, 3)), np.linalg.cholesky(_spd(3))
    loc2, cov2 = R.standard_normal(3), _spd(3, (2,))

    def fn(m, loc, L, loc2, cov2):
        D = m.distributions
        p = D.MultivariateNormal(loc, scale_tril=L)
        q = D.MultivariateNormal(loc2, covariance_matrix=cov2)
        return [p.log_prob(loc2), D.kl_divergence(p, q), D.kl_divergence(q, p), p.entropy()]
    compare(fn, loc, L, loc2, cov2, atol=1e-8, rtol=1e-6)


def test_multivariate_normal_expand_keeps_a_shared_factor():
    loc, L, x = R.standard_normal((3, 3)), np.linalg.cholesky(_spd(3)), R.standard_normal((2, 3, 3))
    compare(lambda m, loc, L, x: m.distributions.MultivariateNormal(loc, scale_tril=L.tril()).expand((2, 3))
            .log_prob(x), loc, L, x, atol=1e-8, rtol=1e-6)


def test_low_rank_kl_pairs_match_torch():
    loc, W, diag = R.standard_normal((2, 3)), R.standard_normal((2, 3, 2)), R.uniform(0.5, 2, size=(2, 3))
    cov = _spd(3, (2,))

    def fn(m, loc, W, diag, cov):
        D = m.distributions
        lr = D.LowRankMultivariateNormal(loc, W, diag)
        lr2 = D.LowRankMultivariateNormal(loc.flip(0), W.flip(0), diag.flip(0))
        mvn = D.MultivariateNormal(loc.flip(-1), cov)
        return [D.kl_divergence(lr, lr2), D.kl_divergence(lr, mvn), D.kl_divergence(mvn, lr)]
    compare(fn, loc, W, diag, cov, atol=1e-8, rtol=1e-6)


def test_low_rank_multivariate_normal_matches_torch():
    loc, W, diag = R.standard_normal((2, 4)), R.standard_normal((2, 4, 2)), R.uniform(0.5, 2, size=(2, 4))
    x = R.standard_normal((3, 2, 4))

    def fn(m, loc, W, diag, x):
        d = m.distributions.LowRankMultivariateNormal(loc, W, diag)
        return [d.log_prob(x), d.entropy(), d.variance, d.covariance_matrix]
    compare(fn, loc, W, diag, x, atol=1e-8, rtol=1e-6)


def test_independent_and_transformed_match_torch():
    loc, scale = R.standard_normal((2, 3)), R.uniform(0.5, 2, size=(2, 3))
    y = R.uniform(-0.95, 0.95, size=(4, 2, 3))

    def fn(m, loc, scale, y):
        D, T = m.distributions, m.distributions.transforms
        ind = D.Independent(D.Normal(loc, scale), 1)
        squashed = D.TransformedDistribution(D.Normal(loc, scale), [T.TanhTransform(cache_size=1)])
        affine = D.TransformedDistribution(D.Normal(loc, scale), [T.AffineTransform(1.0, 2.0),
                                                                    T.SigmoidTransform()])
        flow = D.TransformedDistribution(ind, [T.TanhTransform(), T.AffineTransform(0.5, scale, event_dim=1)])
        sp = D.TransformedDistribution(D.Normal(loc, scale), [T.SoftplusTransform(), T.PowerTransform(2.0)])
        y01 = (y + 1) / 2
        return [ind.log_prob(y), ind.entropy(), ind.mean, ind.variance, squashed.log_prob(y),
                affine.log_prob(y01), affine.cdf(y01), affine.icdf(y01), flow.log_prob(y * scale + 0.5),
                sp.log_prob(y01), D.kl_divergence(ind, D.Independent(D.Normal(y[0], scale), 1)),
                D.kl_divergence(D.LogNormal(loc, scale), D.LogNormal(y[0], scale))]
    compare(fn, loc, scale, y, atol=1e-8, rtol=1e-6)


def test_tanh_squashed_policy_rsample_log_prob_is_torchs_on_the_same_sample():
    """SAC's pattern: the cached tanh lets log_prob(rsample()) invert exactly."""
    loc, scale = tapelab.zeros(3, dtype=tapelab.float64), tapelab.full((3,), 3.0, dtype=tapelab.float64)
    T = tapelab.distributions.transforms
    d = tapelab.distributions.TransformedDistribution(tapelab.distributions.Normal(loc, scale),
                                                      [T.TanhTransform(cache_size=1)])
    a = d.rsample((500,))
    lp = d.log_prob(a)
    assert bool(lp.isfinite().all())
    td = torch.distributions
    ref = td.TransformedDistribution(td.Normal(torch.zeros(3, dtype=torch.float64), torch.full((3,), 3.0,
                                     dtype=torch.float64)), [td.transforms.TanhTransform()])
    finite = a.abs() < 1 - 1e-6
    got, want = lp.numpy(), ref.log_prob(torch.tensor(a.numpy())).numpy()
    np.testing.assert_allclose(got[finite.numpy()], want[finite.numpy()], rtol=1e-6, atol=1e-8)


def test_mixture_same_family_matches_torch():
    logits, loc, scale = R.standard_normal((2, 3)), R.standard_normal((2, 3, 4)), R.uniform(0.5, 2, (2, 3, 4))
    x = R.standard_normal((5, 2, 4))

    def fn(m, lg, loc, scale, x):
        D = m.distributions
        mix = D.MixtureSameFamily(D.Categorical(logits=lg), D.Independent(D.Normal(loc, scale), 1))
        mix1 = D.MixtureSameFamily(D.Categorical(logits=lg), D.Normal(loc[..., 0], scale[..., 0]))
        return [mix.log_prob(x), mix.mean, mix.variance, mix1.log_prob(x[..., 0]), mix1.cdf(x[..., 0])]
    compare(fn, logits, loc, scale, x, atol=1e-8, rtol=1e-6)
    d = tapelab.distributions
    mix = d.MixtureSameFamily(d.Categorical(logits=tapelab.tensor(logits)),
                              d.Independent(d.Normal(tapelab.tensor(loc), tapelab.tensor(scale)), 1))
    assert tuple(mix.sample((7,)).shape) == (7, 2, 4)
    assert tuple(mix.batch_shape) == (2,) and tuple(mix.event_shape) == (4,)


def test_relaxed_distributions_match_torch():
    logits = R.standard_normal((2, 3))
    y = R.uniform(0.05, 0.95, size=(4, 2, 3))
    s = R.dirichlet(np.ones(3), size=(4, 2))

    def fn(m, lg, y, s):
        D = m.distributions
        rb = D.RelaxedBernoulli(m.tensor(0.7, dtype=m.float64), logits=lg)
        ro = D.RelaxedOneHotCategorical(m.tensor(0.5, dtype=m.float64), logits=lg)
        return [rb.log_prob(y), ro.log_prob(s)]
    compare(fn, logits, y, s, atol=1e-8, rtol=1e-6)
    d = tapelab.distributions
    lg = tapelab.tensor(logits, requires_grad=True)
    z = d.RelaxedOneHotCategorical(tapelab.tensor(0.5), logits=lg).rsample((3,))
    assert tuple(z.shape) == (3, 2, 3) and np.allclose(z.sum(-1).detach().numpy(), 1.0)
    z.pow(2).sum().backward()
    assert lg.grad is not None and bool(lg.grad.abs().sum() > 0)


KL_PAIRS = {
    "Exponential": lambda D, a, b: (D.Exponential(a), D.Exponential(b)),
    "Gamma": lambda D, a, b: (D.Gamma(a, b), D.Gamma(b, a + 1)),
    "Beta": lambda D, a, b: (D.Beta(a, b), D.Beta(b, a + 1)),
    "Laplace": lambda D, a, b: (D.Laplace(a.log(), b), D.Laplace(b, a)),
    "Cauchy": lambda D, a, b: (D.Cauchy(a.log(), b), D.Cauchy(b, a)),
    "Gumbel": lambda D, a, b: (D.Gumbel(a.log(), b), D.Gumbel(b, a)),
    "Poisson": lambda D, a, b: (D.Poisson(a), D.Poisson(b)),
    "Geometric": lambda D, a, b: (D.Geometric(probs=a / 3), D.Geometric(probs=b / 4)),
    "HalfNormal": lambda D, a, b: (D.HalfNormal(a), D.HalfNormal(b)),
    "Binomial": lambda D, a, b: (D.Binomial(5, probs=a / 3), D.Binomial(5, probs=b / 4)),
    "Normal": lambda D, a, b: (D.Normal(a, b), D.Normal(b, a)),
    "Uniform": lambda D, a, b: (D.Uniform(a, a + 1), D.Uniform(a - b, a + 2)),
    "Pareto": lambda D, a, b: (D.Pareto(a, b + 1), D.Pareto(a * 0.5, b)),
    "ExponentialGamma": lambda D, a, b: (D.Exponential(a), D.Gamma(b, a + 1)),
    "GammaExponential": lambda D, a, b: (D.Gamma(b, a + 1), D.Exponential(a)),
    "UniformNormal": lambda D, a, b: (D.Uniform(a, a + b), D.Normal(b, a)),
    "ContinuousBernoulli": lambda D, a, b: (D.ContinuousBernoulli(a / 2.5), D.ContinuousBernoulli(b / 3.5)),
    "BetaUniform": lambda D, a, b: (D.Beta(a, b), D.Uniform(a * 0 - 0.5, a * 0 + 1.5)),
}


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_divergence_matches_torch(name):
    compare(lambda m, a, b: m.distributions.kl_divergence(*KL_PAIRS[name](m.distributions, a, b)), POS, POS2,
            atol=1e-9, rtol=1e-7)


def test_kl_registry_dispatch_and_missing_pair():
    D = tapelab.distributions

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return p.loc * 0 + 7.0
    assert D.kl_divergence(MyNormal(tapelab.zeros(1), tapelab.ones(1)), D.Normal(0.0, 1.0)).tolist() == [7.0]
    assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(tapelab.zeros(1), tapelab.ones(1))).tolist() == [0.0]
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))


ERRORS = [
    (lambda m: m.distributions.MultivariateNormal(m.zeros(2)), "Exactly one of covariance_matrix"),
    (lambda m: m.distributions.MultivariateNormal(m.zeros(()), m.eye(1)), "loc must be at least one-dimensional"),
    (lambda m: m.distributions.MultivariateNormal(m.zeros(2), m.tensor([[1.0, 2.0], [2.0, 1.0]])),
     "Expected parameter covariance_matrix"),
    (lambda m: m.distributions.MultivariateNormal(m.zeros(2), scale_tril=m.tensor([[1.0, 1.0], [0.0, 1.0]])),
     "Expected parameter scale_tril"),
    (lambda m: m.distributions.Gamma(m.tensor([1.0, -1.0]), 1.0), "Expected parameter concentration"),
    (lambda m: m.distributions.Beta(m.tensor([1.0]), m.tensor([0.0])), "Expected parameter concentration"),
    (lambda m: m.distributions.Exponential(m.tensor([-1.0])), "Expected parameter rate"),
    (lambda m: m.distributions.Dirichlet(m.tensor(1.0)), "must be at least one-dimensional"),
    (lambda m: m.distributions.Poisson(m.tensor([-1.0])), "Expected parameter rate"),
    (lambda m: m.distributions.Categorical(probs=m.tensor([0.5, -0.5, 1.0])), "Expected parameter probs"),
    (lambda m: m.distributions.Independent(m.distributions.Normal(m.zeros(2), m.ones(2)), 2),
     "Expected reinterpreted_batch_ndims <= len"),
    (lambda m: m.distributions.MixtureSameFamily(m.distributions.Normal(0.0, 1.0),
                                                 m.distributions.Normal(m.zeros(2), m.ones(2))),
     "needs to be an  instance of torch.distributions.Categorical"),
    (lambda m: m.distributions.Normal(0.0, 1.0, validate_args=True).log_prob(3),
     "The value argument to log_prob must be a Tensor"),
    (lambda m: m.distributions.Exponential(m.ones(2), validate_args=True).log_prob(m.tensor([1.0, -1.0])),
     "Expected value argument"),
]


@pytest.fixture
def torch_validates():
    """PyTorch's default argument validation on (torch._dynamo turns it off for the whole process
    once anything has been torch.compile'd, as other tests do), restored afterwards."""
    old = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(old)


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_argument_errors_are_torchs(k, torch_validates):
    make, message = ERRORS[k]
    for m in (torch, tapelab):
        with pytest.raises(ValueError, match=message):
            make(m)


def test_shapes_expand_and_sample_shapes_match_torch():
    cases = [
        lambda m: m.distributions.Normal(m.zeros(3), m.ones(3)),
        lambda m: m.distributions.Gamma(m.ones(2, 1), m.ones(3)),
        lambda m: m.distributions.Dirichlet(m.ones(2, 4)),
        lambda m: m.distributions.MultivariateNormal(m.zeros(3), m.eye(3)),
        lambda m: m.distributions.Independent(m.distributions.Normal(m.zeros(2, 3), m.ones(2, 3)), 1),
        lambda m: m.distributions.OneHotCategorical(logits=m.zeros(2, 4)),
        lambda m: m.distributions.Multinomial(3, logits=m.zeros(2, 4)),
        lambda m: m.distributions.LogNormal(m.zeros(3), m.ones(3)),
        lambda m: m.distributions.StudentT(m.full((3,), 4.0)),
        lambda m: m.distributions.Poisson(m.full((3,), 4.0)),
        lambda m: m.distributions.Binomial(4, m.full((3,), 0.3)),
    ]
    for make in cases:
        t, l = make(torch), make(tapelab)
        assert (tuple(l.batch_shape), tuple(l.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape))
        assert tuple(l.sample((5,)).shape) == tuple(t.sample((5,)).shape)
        target = (6,) + tuple(t.batch_shape) if len(t.batch_shape) else (6,)
        te, le = t.expand(target), l.expand(target)
        assert (tuple(le.batch_shape), tuple(le.event_shape)) == (tuple(te.batch_shape), tuple(te.event_shape))
        assert tuple(le.sample((2,)).shape) == tuple(te.sample((2,)).shape)
        assert le.has_rsample == te.has_rsample


SAMPLED = {
    "Gamma": lambda D: D.Gamma(tapelab.tensor([0.4, 3.0]), tapelab.tensor([1.0, 2.0])),
    "Beta": lambda D: D.Beta(tapelab.tensor([0.5, 3.0]), tapelab.tensor([2.0, 1.5])),
    "Poisson": lambda D: D.Poisson(tapelab.tensor([0.7, 4.0, 30.0])),
    "Binomial": lambda D: D.Binomial(tapelab.tensor([5.0, 20.0]), probs=tapelab.tensor([0.3, 0.8])),
    "Geometric": lambda D: D.Geometric(probs=tapelab.tensor([0.3, 0.7])),
    "Exponential": lambda D: D.Exponential(tapelab.tensor([0.5, 2.0])),
    "Laplace": lambda D: D.Laplace(tapelab.tensor([0.5, -1.0]), tapelab.tensor([1.0, 0.3])),
    "Gumbel": lambda D: D.Gumbel(tapelab.tensor([0.5, -1.0]), tapelab.tensor([1.0, 0.3])),
    "LogNormal": lambda D: D.LogNormal(tapelab.tensor([0.0, 0.5]), tapelab.tensor([0.3, 0.2])),
    "StudentT": lambda D: D.StudentT(tapelab.tensor([5.0, 9.0])),
    "HalfNormal": lambda D: D.HalfNormal(tapelab.tensor([1.0, 2.0])),
    "MultivariateNormal": lambda D: D.MultivariateNormal(tapelab.tensor([1.0, -1.0]),
                                                         tapelab.tensor([[2.0, 0.5], [0.5, 1.0]])),
    "LowRankMultivariateNormal": lambda D: D.LowRankMultivariateNormal(
        tapelab.tensor([1.0, -1.0]), tapelab.tensor([[1.0], [0.5]]), tapelab.tensor([1.0, 0.5])),
    "Dirichlet": lambda D: D.Dirichlet(tapelab.tensor([0.5, 2.0, 3.0])),
    "NegativeBinomial": lambda D: D.NegativeBinomial(tapelab.tensor([3.0, 10.0]), probs=tapelab.tensor([0.4, 0.2])),
    "Weibull": lambda D: D.Weibull(tapelab.tensor([1.0, 2.0]), tapelab.tensor([1.5, 3.0])),
    "Pareto": lambda D: D.Pareto(tapelab.tensor([1.0, 2.0]), tapelab.tensor([5.0, 6.0])),
    "Kumaraswamy": lambda D: D.Kumaraswamy(tapelab.tensor([2.0, 0.8]), tapelab.tensor([3.0, 1.2])),
    "InverseGamma": lambda D: D.InverseGamma(tapelab.tensor([5.0, 8.0]), tapelab.tensor([1.0, 3.0])),
    "FisherSnedecor": lambda D: D.FisherSnedecor(tapelab.tensor([5.0, 12.0]), tapelab.tensor([12.0, 15.0])),
    "VonMises": lambda D: D.VonMises(tapelab.tensor([0.5, -1.0]), tapelab.tensor([2.0, 8.0])),
    "ContinuousBernoulli": lambda D: D.ContinuousBernoulli(tapelab.tensor([0.2, 0.5, 0.9])),
    "Multinomial": lambda D: D.Multinomial(10, probs=tapelab.tensor([0.2, 0.3, 0.5])),
    "OneHotCategorical": lambda D: D.OneHotCategorical(probs=tapelab.tensor([0.2, 0.3, 0.5])),
}


@pytest.mark.parametrize("name", sorted(SAMPLED))
def test_sample_moments(name):
    tapelab.manual_seed(0)
    d = SAMPLED[name](tapelab.distributions)
    x = d.sample((20000,))
    assert tuple(x.shape) == (20000,) + tuple(d.batch_shape) + tuple(d.event_shape)
    mean, var = d.mean.numpy(), d.variance.numpy()
    if name == "VonMises":      # circular mean and variance
        c, s_ = x.cos().mean(0).numpy(), x.sin().mean(0).numpy()
        np.testing.assert_allclose(np.arctan2(s_, c), mean, atol=0.03)
        np.testing.assert_allclose(1 - np.hypot(c, s_), var, atol=0.02)
        return
    np.testing.assert_allclose(x.mean(0).numpy(), mean, rtol=0.05, atol=0.05 * np.sqrt(var).max())
    np.testing.assert_allclose(x.var(0).numpy(), var, rtol=0.12, atol=0.02)
    assert bool(d.support.check(x).all())


def test_gamma_rsample_gradient_is_torchs_approximation_of_the_implicit_one():
    """d sample / d concentration on tapelab's draws is torch._standard_gamma_grad at those draws (ATen's
    series / saddle point / rational approximation), within 2e-3 of -(dP/da) / p(x) (scipy, central differences)."""
    from tapelab.distributions.gamma import standard_gamma
    tapelab.manual_seed(1)
    alpha = tapelab.tensor([0.3, 1.0, 2.5, 7.0, 40.0], dtype=tapelab.float64).expand(200, 5).contiguous()
    alpha.requires_grad_()
    x = standard_gamma(alpha)
    (g,) = tapelab.autograd.grad(x.sum(), alpha)
    a, xs, h = alpha.detach().numpy(), x.detach().numpy(), 1e-6
    want = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(xs))
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-13, atol=0)
    dP = (special.gammainc(a + h, xs) - special.gammainc(a - h, xs)) / (2 * h)
    pdf = np.exp((a - 1) * np.log(xs) - xs - special.gammaln(a))
    np.testing.assert_allclose(g.numpy(), -dP / pdf, rtol=2e-3, atol=1e-6)


def test_rsample_gradients_flow_to_parameters():
    """The pathwise gradient of E[x] is d mean / d params (checked on 20k draws)."""
    tapelab.manual_seed(2)
    D = tapelab.distributions
    conc = tapelab.tensor([2.0, 0.7], requires_grad=True)
    rate = tapelab.tensor([1.5, 2.0], requires_grad=True)
    D.Gamma(conc, rate).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(conc.grad.numpy(), 1 / np.array([1.5, 2.0]), rtol=0.05)
    np.testing.assert_allclose(rate.grad.numpy(), -np.array([2.0, 0.7]) / np.array([1.5, 2.0]) ** 2, rtol=0.05)
    c1 = tapelab.tensor(2.0, requires_grad=True)
    D.Beta(c1, tapelab.tensor(3.0)).rsample((20000,)).mean().backward()
    np.testing.assert_allclose(c1.grad.item(), 3.0 / 25.0, rtol=0.08)
    loc = tapelab.zeros(2, requires_grad=True)
    L = tapelab.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)
    x = D.MultivariateNormal(loc, scale_tril=L).rsample((4,))
    x.sum().backward()
    assert loc.grad.tolist() == [4.0, 4.0] and L.grad is not None


def test_gradcheck_float64():
    D = tapelab.distributions
    x = tapelab.tensor(R.standard_normal((3, 2)))
    assert tapelab.autograd.gradcheck(
        lambda loc, A: D.MultivariateNormal(loc, scale_tril=A.tril() + 2 * tapelab.eye(2, dtype=tapelab.float64))
        .log_prob(x), (tapelab.tensor(R.standard_normal(2), requires_grad=True),
                       tapelab.tensor(R.uniform(0, 0.5, (2, 2)), requires_grad=True)))
    a, b = tapelab.tensor(POS, requires_grad=True), tapelab.tensor(POS2, requires_grad=True)
    assert tapelab.autograd.gradcheck(lambda a, b: D.Beta(a, b).entropy() + D.Gamma(a, b).log_prob(b), (a, b))
    assert tapelab.autograd.gradcheck(lambda c: D.Dirichlet(c).log_prob(tapelab.tensor([0.2, 0.3, 0.5],
                                                                                        dtype=tapelab.float64)),
                                      (tapelab.tensor([1.5, 2.0, 0.7], dtype=tapelab.float64,
                                                                     requires_grad=True),))


def test_constraints_and_transforms_under_the_torch_aliases():
    with tapelab.install_aliases():
        import torch as t
        import torch.distributions.transforms as T
        from torch.distributions import Independent, MultivariateNormal, Normal, kl_divergence
        from torch.distributions.constraints import positive
        assert t is tapelab and T is tapelab.distributions.transforms
        assert MultivariateNormal is tapelab.distributions.MultivariateNormal and kl_divergence and Independent
        assert positive.check(t.tensor([1.0, -1.0])).tolist() == [True, False]
        assert repr(positive) == "GreaterThan(lower_bound=0.0)"
        y = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)])(t.zeros(2))
        assert y.tolist() == [3.0, 3.0] and Normal(0.0, 1.0).support is not None
    for name in ("real", "positive", "simplex", "unit_interval", "lower_cholesky", "positive_definite"):
        assert repr(getattr(tapelab.distributions.constraints, name)) == repr(getattr(torch.distributions.constraints,
                                                                                      name))


def test_transform_inverses_and_jacobians_match_torch():
    x = R.uniform(0.2, 1.5, size=(3, 4))

    def fn(m, x):
        T = m.distributions.transforms
        out = []
        for t in (T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.SoftplusTransform(),
                  T.PowerTransform(3.0), T.AffineTransform(0.5, -2.0), T.AffineTransform(x[0], x[1], event_dim=1)):
            y = t(x)
            out += [y, t.inv(y), t.log_abs_det_jacobian(x, y)]
        c = T.ComposeTransform([T.AffineTransform(0.0, x[0], event_dim=1), T.ExpTransform()])
        out += [c(x), c.log_abs_det_jacobian(x, c(x)), T.AbsTransform()(x - 1), T.SoftmaxTransform()(x)]
        return out
    compare(fn, x, atol=1e-9, rtol=1e-7)


def test_logistic_normal_and_stick_breaking_match_torch():
    loc, scale = R.standard_normal((2, 3)), R.uniform(0.5, 2, size=(2, 3))
    s = R.dirichlet(np.ones(4), size=(5, 2))

    def fn(m, loc, scale, s):
        D = m.distributions
        sb = D.transforms.StickBreakingTransform()
        y = sb(loc)
        lc = D.transforms.LowerCholeskyTransform()
        sq = loc[..., :2].unsqueeze(-1) * loc[..., 1:].unsqueeze(-2)
        return [D.LogisticNormal(loc, scale).log_prob(s), y, sb.inv(y), sb.log_abs_det_jacobian(loc, y),
                lc(sq), lc.inv(lc(sq))]
    compare(fn, loc, scale, s, atol=1e-8, rtol=1e-6)


def test_biject_to_and_transform_to_match_torch():
    x = R.standard_normal((3, 4))

    def fn(m, x):
        C, D = m.distributions.constraints, m.distributions
        out = []
        for c in (C.real, C.positive, C.greater_than(2.0), C.less_than(-1.0), C.interval(-2.0, 3.0), C.unit_interval,
                  C.simplex, C.independent(C.positive, 1)):
            for registry in (D.biject_to, D.transform_to):
                t = registry(c)
                y = t(x)
                out += [y, t.log_abs_det_jacobian(x, y)] if c is not C.simplex or registry is D.biject_to else [y]
        return out
    compare(fn, x, atol=1e-9, rtol=1e-7)
    with pytest.raises(NotImplementedError):
        tapelab.distributions.biject_to(tapelab.distributions.constraints.boolean)


def test_more_transforms_and_tril_vectors_match_torch():
    x = R.uniform(0.2, 1.5, size=(3, 4))
    v = R.standard_normal((2, 6))

    def fn(m, x, v):
        D, T, U = m.distributions, m.distributions.transforms, m.distributions.utils
        cat_t = T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)], dim=1, lengths=[1, 3])
        stack_t = T.StackTransform([T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform()], dim=0)
        cdf_t = T.CumulativeDistributionTransform(D.Normal(x[0], x[1]))
        pd = T.PositiveDefiniteTransform()
        sq = x[:3, :3]
        out = [cat_t(x), cat_t.inv(cat_t(x)), cat_t.log_abs_det_jacobian(x, cat_t(x)), stack_t(x),
               stack_t.inv(stack_t(x)), stack_t.log_abs_det_jacobian(x, stack_t(x)), cdf_t(x),
               cdf_t.log_abs_det_jacobian(x, cdf_t(x)), pd(sq), pd.inv(pd(sq))]
        mat = U.vec_to_tril_matrix(v)
        return out + [mat, U.tril_matrix_to_vec(mat), U.tril_matrix_to_vec(x[:3, :3], -1)]
    compare(fn, x, v, atol=1e-9, rtol=1e-7)
    for m in (torch, tapelab):
        with pytest.raises(ValueError, match="cannot be expressed as the lower triangular"):
            m.distributions.utils.vec_to_tril_matrix(m.zeros(5))


def test_exponential_family_entropy_by_autograd_is_the_closed_form():
    D = tapelab.distributions

    class Carrier(D.Normal):
        _mean_carrier_measure = 0

    loc, scale = tapelab.tensor(LOC), tapelab.tensor(POS)
    assert isinstance(D.Gamma(1.0, 1.0), D.ExponentialFamily)
    np.testing.assert_allclose(D.ExponentialFamily.entropy(Carrier(loc, scale)).detach().numpy(),
                               D.Normal(loc, scale).entropy().numpy(), rtol=1e-10)


def test_lkj_cholesky_and_corr_cholesky_transform_match_torch():
    v = R.standard_normal((2, 6))
    conc = R.uniform(0.5, 3.0, size=(2,))

    def fn(m, v, c):
        T = m.distributions.transforms.CorrCholeskyTransform()
        L = T(v)
        d = m.distributions.LKJCholesky(4, c)
        return [L, T.inv(L), T.log_abs_det_jacobian(v, L), d.log_prob(L)]
    compare(fn, v, conc, atol=1e-8, rtol=1e-6)
    tapelab.manual_seed(0)
    d = tapelab.distributions.LKJCholesky(3, tapelab.tensor([0.5, 4.0], dtype=tapelab.float64))
    s = d.sample((4000,))
    assert tuple(s.shape) == (4000, 2, 3, 3) and bool(d.support.check(s).all())
    corr = (s @ s.mT)[..., 1, 0].numpy()
    # the off-diagonal correlation of LKJ(eta) in dimension 3 is Beta(eta + 1/2, eta + 1/2) on [-1, 1]
    var = 1 / (2 * np.array([0.5, 4.0]) + 2)
    np.testing.assert_allclose(corr.var(0), var, rtol=0.1)
    ref = torch.distributions.LKJCholesky(3, torch.tensor([0.5, 4.0], dtype=torch.float64))
    np.testing.assert_allclose(d.log_prob(s[:5]).numpy(), ref.log_prob(torch.tensor(s[:5].numpy())).numpy(),
                               rtol=1e-8)


@pytest.mark.parametrize("param", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_wishart_matches_torch(param):
    cov = _spd(3, (2,))
    mat = np.linalg.cholesky(cov) if param == "scale_tril" else cov
    df = np.array([4.5, 7.0])
    x = _spd(3, (2,))

    def fn(m, df, mat, x):
        d = m.distributions.Wishart(df, **{param: mat.tril() if param == "scale_tril" else mat})
        return [d.log_prob(x), d.entropy(), d.mean, d.variance, d.mode]
    compare(fn, df, mat, x, atol=1e-8, rtol=1e-6)


def test_wishart_samples_and_errors():
    tapelab.manual_seed(0)
    cov = tapelab.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=tapelab.float64)
    d = tapelab.distributions.Wishart(tapelab.tensor(5.0, dtype=tapelab.float64), covariance_matrix=cov)
    s = d.rsample((20000,))
    np.testing.assert_allclose(s.mean(0).numpy(), d.mean.numpy(), rtol=0.05)
    np.testing.assert_allclose(s.var(0).numpy(), d.variance.numpy(), rtol=0.12)
    for m in (torch, tapelab):
        with pytest.raises(ValueError, match="expected to be greater than ndim - 1"):
            m.distributions.Wishart(m.tensor(0.5), covariance_matrix=m.eye(2))


def test_pytorch_module_paths_import_under_the_aliases():
    """Every torch.distributions submodule PyTorch has serves the same public names."""
    import importlib
    import pkgutil
    names = {m.name: list(importlib.import_module("torch.distributions." + m.name).__all__)
             for m in pkgutil.iter_modules(torch.distributions.__path__)}
    with tapelab.install_aliases():
        for module, public in names.items():
            mod = importlib.import_module("torch.distributions." + module)
            assert mod.__name__.startswith("tapelab.distributions"), module
            missing = [n for n in public if not hasattr(mod, n)]
            assert not missing, (module, missing)


def test_mixture_support_checks_every_component():
    D = tapelab.distributions
    mix = D.MixtureSameFamily(D.Categorical(logits=tapelab.zeros(2, 3)), D.Exponential(tapelab.ones(2, 3)))
    assert mix.support.check(tapelab.tensor([1.0, -1.0])).tolist() == [True, False]
    with pytest.raises(ValueError, match="Expected value argument"):
        mix.log_prob(tapelab.tensor([1.0, -1.0]))


def _families(m):
    """One small float64 instance of every family, batch shape (3,)."""
    D=m.distributions; o=lambda *s: m.ones(*s, dtype=m.float64); p=lambda *s: m.full(s, 0.3, dtype=m.float64)
    return {
    "Normal": D.Normal(o(3), o(3)), "LogNormal": D.LogNormal(o(3), o(3)), "HalfNormal": D.HalfNormal(o(3)),
    "HalfCauchy": D.HalfCauchy(o(3)), "Uniform": D.Uniform(o(3)*0, o(3)), "Exponential": D.Exponential(o(3)),
    "Laplace": D.Laplace(o(3), o(3)), "Cauchy": D.Cauchy(o(3), o(3)), "Gumbel": D.Gumbel(o(3), o(3)),
    "Gamma": D.Gamma(o(3), o(3)), "Chi2": D.Chi2(o(3)), "Beta": D.Beta(o(3), o(3)), "Dirichlet": D.Dirichlet(o(3, 4)),
    "StudentT": D.StudentT(o(3)*3), "FisherSnedecor": D.FisherSnedecor(o(3)*5, o(3)*6),
    "Pareto": D.Pareto(o(3), o(3)*3), "Weibull": D.Weibull(o(3), o(3)*2), "Kumaraswamy": D.Kumaraswamy(o(3)*2, o(3)*2),
    "InverseGamma": D.InverseGamma(o(3)*3, o(3)), "LogisticNormal": D.LogisticNormal(o(3, 2)*0, o(3, 2)),
    "VonMises": D.VonMises(o(3), o(3)), "ContinuousBernoulli": D.ContinuousBernoulli(p(3)),
    "Bernoulli": D.Bernoulli(p(3)), "Geometric": D.Geometric(p(3)), "Poisson": D.Poisson(o(3)),
    "Binomial": D.Binomial(5, p(3)), "NegativeBinomial": D.NegativeBinomial(o(3)*3, p(3)),
    "Categorical": D.Categorical(p(3, 4)), "OneHotCategorical": D.OneHotCategorical(p(3, 4)),
    "Multinomial": D.Multinomial(4, p(3, 4)),
    "RelaxedBernoulli": D.RelaxedBernoulli(m.tensor(0.5, dtype=m.float64), p(3)),
    "RelaxedOneHotCategorical": D.RelaxedOneHotCategorical(m.tensor(0.5, dtype=m.float64), p(3, 4)),
    "MultivariateNormal": D.MultivariateNormal(o(3, 2), m.eye(2, dtype=m.float64)),
    "LowRankMultivariateNormal": D.LowRankMultivariateNormal(o(3, 2), o(3, 2, 1), o(3, 2)),
    "Independent": D.Independent(D.Normal(o(3, 2), o(3, 2)), 1),
    "MixtureSameFamily": D.MixtureSameFamily(D.Categorical(p(3, 4)), D.Normal(o(3, 4), o(3, 4))),
    "LKJCholesky": D.LKJCholesky(3, o(3)), "Wishart": D.Wishart(o(3)*4, m.eye(2, dtype=m.float64)),
    }


@pytest.mark.filterwarnings("ignore:Singular sample detected")    # torch's Wishart sampler
@pytest.mark.parametrize("name", sorted(_families(torch)))
def test_expanded_family_matches_torch(name):
    """expand((2, 3)): shapes, samples' shape, log_prob of torch's samples, mean, variance, entropy."""
    t, l = _families(torch)[name].expand((2, 3)), _families(tapelab)[name].expand((2, 3))
    assert (tuple(l.batch_shape), tuple(l.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape))
    ts = t.sample((4,))
    assert tuple(l.sample((4,)).shape) == tuple(ts.shape)
    np.testing.assert_allclose(l.log_prob(tapelab.tensor(ts.numpy())).numpy(), t.log_prob(ts).numpy(),
                               rtol=1e-6, atol=1e-8)
    for attr in ("mean", "variance", "entropy"):
        try:
            want = getattr(t, attr)() if attr == "entropy" else getattr(t, attr)
        except (NotImplementedError, AttributeError):   # torch's expanded Multinomial has no _binomial
            continue
        got = getattr(l, attr)() if attr == "entropy" else getattr(l, attr)
        assert tuple(got.shape) == tuple(want.shape), (attr, tuple(got.shape), tuple(want.shape))
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-6, atol=1e-8)


def test_a_user_defined_distribution_written_against_torchs_base_class():
    """The pattern of custom families (truncated normals in RL code): subclass, validate, expand."""
    def make(m):
        D = m.distributions

        class Shifted(D.Distribution):
            arg_constraints = {"loc": D.constraints.real}
            support = D.constraints.real
            has_rsample = True

            def __init__(self, loc, validate_args=None):
                (self.loc,) = D.utils.broadcast_all(loc)
                super().__init__(self.loc.shape, validate_args=validate_args)

            def expand(self, batch_shape, _instance=None):
                new = self._get_checked_instance(Shifted, _instance)
                new.loc = self.loc.expand(batch_shape)
                super(Shifted, new).__init__(batch_shape, validate_args=False)
                return new

            def rsample(self, sample_shape=()):
                shape = self._extended_shape(sample_shape)
                return self.loc + D.utils._standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)

            def log_prob(self, value):
                if self._validate_args:
                    self._validate_sample(value)
                return -0.5 * (value - self.loc) ** 2 - 0.5 * np.log(2 * np.pi)
        return Shifted
    for m in (torch, tapelab):
        d = make(m)(m.zeros(3)).expand((2, 3))
        assert tuple(d.batch_shape) == (2, 3) and tuple(d.rsample((4,)).shape) == (4, 2, 3)
        with pytest.raises(ValueError, match="Expected parameter loc"):
            make(m)(m.tensor([0.0, float("nan")]), validate_args=True)


def _constraint_checks(m):
    C = m.distributions.constraints
    A = m.tensor([[[2.0, 0.5], [0.5, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.0], [0.3, 1.0]]])
    v = m.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [1.0, 1.0, 0.0]])
    return [C.square.check(A), C.symmetric.check(A), C.positive_definite.check(A), C.positive_semidefinite.check(A),
            C.lower_triangular.check(A), C.lower_cholesky.check(A), C.corr_cholesky.check(A), C.one_hot.check(v),
            C.simplex.check(v), C.multinomial(1).check(v), C.integer_interval(0, 1).check(v), C.boolean.check(v),
            C.nonnegative_integer.check(v), C.half_open_interval(0.0, 1.0).check(v), C.real_vector.check(v),
            C.cat([C.positive, C.real], 1, [1, 2]).check(v), C.stack([C.positive, C.real, C.boolean], 1).check(v)]


def test_constraint_checks_match_torch():
    for want, got in zip(_constraint_checks(torch), _constraint_checks(tapelab)):
        assert got.tolist() == want.tolist()


def _cross_family(D, name, a, b):
    """One instance per family for the cross-family KL table (a, b positive (2, 3) arrays)."""
    return {"Normal": lambda: D.Normal(a - 1, b), "Laplace": lambda: D.Laplace(a - 1, b),
            "Gumbel": lambda: D.Gumbel(a - 1, b), "Exponential": lambda: D.Exponential(a),
            "Gamma": lambda: D.Gamma(a + 1, b), "Beta": lambda: D.Beta(a, b + 1),
            "Uniform": lambda: D.Uniform(a * 0.1, a + 1), "Pareto": lambda: D.Pareto(b, a + 2.5),
            "ContinuousBernoulli": lambda: D.ContinuousBernoulli(a / 3.5), "Bernoulli": lambda: D.Bernoulli(a / 3.5),
            "Poisson": lambda: D.Poisson(b), "Binomial": lambda: D.Binomial(3, probs=a / 3.5)}[name]()


CROSS_KL = [("Beta", "Normal"), ("ContinuousBernoulli", "Normal"), ("Exponential", "Normal"), ("Gamma", "Normal"),
            ("Gumbel", "Normal"), ("Laplace", "Normal"), ("Pareto", "Normal"), ("Beta", "Exponential"),
            ("ContinuousBernoulli", "Exponential"), ("Pareto", "Exponential"), ("Uniform", "Exponential"),
            ("Beta", "Gamma"), ("Pareto", "Gamma"), ("Uniform", "Gamma"), ("Exponential", "Gumbel"),
            ("Gamma", "Gumbel"), ("Normal", "Gumbel"), ("Uniform", "Gumbel"), ("Normal", "Laplace"),
            ("Bernoulli", "Poisson"), ("Normal", "Uniform"), ("Gumbel", "Exponential"), ("Gamma", "Pareto"),
            ("Poisson", "Binomial"), ("Pareto", "Beta")]


@pytest.mark.parametrize("pair", CROSS_KL, ids=["-".join(p) for p in CROSS_KL])
def test_cross_family_kl_matches_torch(pair):
    compare(lambda m, a, b: m.distributions.kl_divergence(_cross_family(m.distributions, pair[0], a, b),
                                                          _cross_family(m.distributions, pair[1], b, a)),
            POS, POS2, atol=1e-8, rtol=1e-6)

"""``kl_divergence(p, q)`` and ``register_kl``: closed forms by pair of types, the most specific
registered pair (by method resolution order) wins, as PyTorch's dispatch."""
from __future__ import annotations

import math

from ..core.tensor import Tensor
from ..nn import functional as F
from ..ops.elementwise import xlogy
from ..ops.movement import broadcast_shapes
from .. import linalg
from .composite import Independent, TransformedDistribution
from .continuous import Cauchy, ContinuousBernoulli, Exponential, Gumbel, Laplace, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from .normal import HalfNormal, Normal
from .transformed_families import Pareto
from .utils import euler_constant, _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p: type, type_q: type):
    """Decorator: ``@register_kl(Normal, Normal) def kl(p, q): ...`` adds a KL rule.

    Any class is taken, as PyTorch takes it: pyro registers rules on its own ``Distribution`` base,
    which its distributions inherit beside PyTorch's."""
    for name, cls in (("type_p", type_p), ("type_q", type_q)):
        if not isinstance(cls, type):
            raise TypeError(f"register_kl: Expected {name} to be a class but got {cls!r}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


def _dispatch_kl(type_p: type, type_q: type):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None
    rank = {pair: (type_p.__mro__.index(pair[0]), type_q.__mro__.index(pair[1])) for pair in matches}
    best = min(matches, key=lambda pair: rank[pair])
    return _KL_REGISTRY[best]


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)`` summed over event dimensions, of shape ``batch_shape``."""
    key = type(p), type(q)
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fun = _KL_MEMOIZE[key]
    if fun is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fun(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (var_ratio - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = t.where(q.probs != 0, math.inf)
    t = t.where(p.probs != 0, 0.0)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return result.where((q.low <= p.low) & (q.high >= p.high), math.inf)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), len(p.event_shape) - len(p.base_dist.event_shape))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    pL, qL = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = qL.diagonal(0, -2, -1).log().sum(-1) - pL.diagonal(0, -2, -1).log().sum(-1)
    n = p.event_shape[0]
    batch = tuple(broadcast_shapes(tuple(qL.shape[:-2]), tuple(pL.shape[:-2])))
    qL, pL = qL.expand(*(batch + (n, n))), pL.expand(*(batch + (n, n)))
    term2 = linalg.solve_triangular(qL, pL, upper=False).pow(2).sum((-2, -1))
    diff = q.loc - p.loc
    batch = tuple(broadcast_shapes(batch, tuple(diff.shape[:-1])))
    qL = qL.expand(*(batch + (n, n)))
    term3 = linalg.solve_triangular(qL, diff.expand(*(batch + (n,))).unsqueeze(-1), upper=False) \
        .squeeze(-1).pow(2).sum(-1)
    return half_term1 + 0.5 * (term2 + term3 - n)


def _dense(d):
    """A low-rank Gaussian as a dense one (the KL pairs with it go through ``_kl_mvn_mvn``)."""
    if isinstance(d, LowRankMultivariateNormal):
        return MultivariateNormal(d.loc, covariance_matrix=d.covariance_matrix, validate_args=False)
    return d


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    return _kl_mvn_mvn(_dense(p), _dense(q))


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_q - sum_p) * sum_p.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return kl.where(~(p.total_count > q.total_count), math.inf)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return result.where(~(p.scale < q.scale), math.inf)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + q.concentration.lgamma() + q.concentration * euler_constant - (1 + euler_constant)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / width).log()
    t2 = width.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return result.where(~((q.low > 0) | (q.high < 1)), math.inf)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


# Pairs where p's support reaches outside q's: the divergence is infinite everywhere.
_INFINITE = [(unbounded, bounded) for unbounded in (Normal, Laplace, Gumbel)
             for bounded in (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)]
_INFINITE += [(half, bounded) for half in (Exponential, Gamma)
              for bounded in (Beta, ContinuousBernoulli, Pareto, Uniform)]
_INFINITE += [(Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform), (Beta, Pareto),
              (ContinuousBernoulli, Pareto), (Poisson, Bernoulli), (Poisson, Binomial)]


def _infinite_like(p, q):
    return p.mean.detach() * 0 + math.inf if not isinstance(p, Uniform) else p.low.detach() * 0 + math.inf


for _pair in _INFINITE:
    register_kl(*_pair)(_infinite_like)


def _second_moment(p) -> Tensor:
    return p.variance + p.mean.pow(2)


@register_kl(Beta, Normal)
@register_kl(ContinuousBernoulli, Normal)
@register_kl(Exponential, Normal)
@register_kl(Gamma, Normal)
@register_kl(Gumbel, Normal)
@register_kl(Laplace, Normal)
@register_kl(Pareto, Normal)
def _kl_moments_normal(p, q):
    """``-H(p) - E_p[log q]``; a Gaussian's log-density needs only p's mean and variance."""
    log_norm = (q.scale * math.sqrt(2 * math.pi)).log()
    quad = (p.variance + (p.mean - q.loc).pow(2)) / (2 * q.scale.pow(2))
    return -p.entropy() + log_norm + quad


@register_kl(Beta, Exponential)
@register_kl(ContinuousBernoulli, Exponential)
@register_kl(Pareto, Exponential)
def _kl_positive_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = -p.entropy() - q.rate.log() + q.rate * p.mean
    return result.where(p.low >= 0, math.inf)


def _mean_log(p) -> Tensor:
    """``E_p[log X]`` for the positive families that pair with Gamma."""
    if isinstance(p, Beta):
        return p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    if isinstance(p, Pareto):
        return p.scale.log() + p.alpha.reciprocal()
    low, high = p.low.clamp(min=0), p.high
    return (xlogy(high, high) - xlogy(low, low)) / (high - low) - 1


@register_kl(Beta, Gamma)
@register_kl(Pareto, Gamma)
@register_kl(Uniform, Gamma)
def _kl_positive_gamma(p, q):
    a, r = q.concentration, q.rate
    result = -p.entropy() - a * r.log() + a.lgamma() - (a - 1) * _mean_log(p) + r * p.mean
    return result.where(p.low >= 0, math.inf) if isinstance(p, Uniform) else result


def _mean_exp_neg(p, s: Tensor) -> Tensor:
    """``E_p[exp(-X / s)]`` for the families that pair with Gumbel."""
    if isinstance(p, Exponential):
        return p.rate / (p.rate + s.reciprocal())
    if isinstance(p, Gamma):
        return (p.rate / (p.rate + s.reciprocal())).pow(p.concentration)
    if isinstance(p, Normal):
        return (-p.loc / s + p.scale.pow(2) / (2 * s.pow(2))).exp()
    return s * ((-p.low / s).exp() - (-p.high / s).exp()) / (p.high - p.low)


@register_kl(Exponential, Gumbel)
@register_kl(Gamma, Gumbel)
@register_kl(Normal, Gumbel)
@register_kl(Uniform, Gumbel)
def _kl_to_gumbel(p, q):
    s = q.scale
    return -p.entropy() + s.log() + (p.mean - q.loc) / s + (q.loc / s).exp() * _mean_exp_neg(p, s)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    d = p.loc - q.loc
    mean_abs = p.scale * math.sqrt(2 / math.pi) * (-d.pow(2) / (2 * p.scale.pow(2))).exp() + \
        d * (d / (p.scale * math.sqrt(2))).erf()
    return -p.entropy() + (2 * q.scale).log() + mean_abs / q.scale


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)

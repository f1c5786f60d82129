"""``torch.distributions``: probability distributions with PyTorch's parameter checks, shapes,
reparameterised ``rsample`` and ``log_prob``/``entropy``/``cdf`` formulas, written over tapelab ops
so gradients flow to the parameters; ``constraints``, ``transforms`` and ``kl`` as submodules.

Example:
    >>> import tapelab
    >>> from tapelab.distributions import Independent, Normal, kl_divergence
    >>> q = Independent(Normal(tapelab.zeros(2), tapelab.ones(2)), 1)
    >>> p = Independent(Normal(tapelab.ones(2), tapelab.ones(2)), 1)
    >>> kl_divergence(q, p)
    tensor(1.)
"""
from __future__ import annotations

# PyTorch's module paths, imported as torch.distributions imports them
from . import (bernoulli, beta, binomial, categorical, cauchy, chi2, continuous_bernoulli, dirichlet, exponential,
               fishersnedecor, generalized_pareto, geometric, gumbel, half_cauchy, half_normal, independent,
               inverse_gamma, kumaraswamy, laplace, log_normal, logistic_normal, lowrank_multivariate_normal,
               mixture_same_family, multinomial, negative_binomial, one_hot_categorical, pareto, poisson,
               relaxed_bernoulli, relaxed_categorical, studentT, transformed_distribution, uniform, weibull,
               constraint_registry, constraints, kl, transforms, utils)  # noqa: F401
from .constraint_registry import biject_to, transform_to
from .composite import Independent, MixtureSameFamily, TransformedDistribution
from .continuous import (Cauchy, ContinuousBernoulli, Exponential, GeneralizedPareto, Gumbel, HalfCauchy, Laplace,
                         Uniform)
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial, NegativeBinomial, OneHotCategorical,
                       OneHotCategoricalStraightThrough, Poisson)
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Beta, Chi2, Dirichlet, FisherSnedecor, Gamma, StudentT
from .kl import kl_divergence, register_kl
from .lkj_cholesky import LKJCholesky
from .multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from .normal import HalfNormal, LogNormal, Normal
from .relaxed import ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed_families import InverseGamma, Kumaraswamy, LogisticNormal, Pareto, Weibull
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform,
                         CumulativeDistributionTransform, ExpTransform, IndependentTransform, LowerCholeskyTransform,
                         PositiveDefiniteTransform, PowerTransform, ReshapeTransform, SigmoidTransform,
                         SoftmaxTransform, SoftplusTransform, StackTransform, StickBreakingTransform, TanhTransform,
                         Transform, identity_transform)
from .von_mises import VonMises
from .wishart import Wishart

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform", "Categorical",
           "Cauchy", "Chi2", "ComposeTransform", "ContinuousBernoulli", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical", "ExpTransform",
           "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel",
           "HalfCauchy", "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy",
           "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal", "LogitRelaxedBernoulli",
           "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily", "Multinomial",
           "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform", "PowerTransform",
           "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to", "constraint_registry",
           "constraints", "identity_transform", "kl", "kl_divergence", "register_kl", "transform_to", "transforms",
           "utils"]

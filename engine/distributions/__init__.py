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

from . import constraint_registry, constraints, kl, transforms, utils
from .constraint_registry import biject_to, transform_to
from .composite import Independent, MixtureSameFamily, TransformedDistribution
from .continuous import Cauchy, ContinuousBernoulli, Exponential, GeneralizedPareto, Gumbel, HalfCauchy, Laplace, Uniform
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial, OneHotCategorical,
                       NegativeBinomial, OneHotCategoricalStraightThrough, Poisson)
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
                         CumulativeDistributionTransform,
                         ExpTransform, IndependentTransform, LowerCholeskyTransform, PositiveDefiniteTransform,
                         PowerTransform, StackTransform, ReshapeTransform, SigmoidTransform, SoftmaxTransform,
                         SoftplusTransform, StickBreakingTransform, TanhTransform, Transform, identity_transform)
from .von_mises import VonMises
from .wishart import Wishart

__all__ = ["Wishart", "CorrCholeskyTransform", "LKJCholesky", "CatTransform", "CumulativeDistributionTransform", "PositiveDefiniteTransform", "StackTransform",
           "ContinuousBernoulli", "ExponentialFamily", "GeneralizedPareto", "FisherSnedecor", "InverseGamma", "Kumaraswamy", "LogisticNormal", "LowerCholeskyTransform",
           "NegativeBinomial", "Pareto", "StickBreakingTransform", "VonMises", "Weibull", "biject_to",
           "constraint_registry", "transform_to", "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ComposeTransform", "Dirichlet", "Distribution", "ExpRelaxedCategorical", "ExpTransform", "Exponential",
           "Geometric", "Gamma", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "IndependentTransform",
           "Laplace", "LogNormal", "LogitRelaxedBernoulli", "LowRankMultivariateNormal", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
           "Poisson", "PowerTransform", "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform",
           "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "StudentT", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "constraints", "identity_transform", "kl", "kl_divergence",
           "register_kl", "transforms", "utils"]

"""``biject_to`` and ``transform_to``: the transform from unconstrained reals onto a constraint's
region, found by the constraint's type (so ``interval(a, b)`` gets a sigmoid scaled to ``[a, b]``).
Optimisers work in the unconstrained space and map back through these."""
from __future__ import annotations

from . import constraints
from .transforms import (AffineTransform, CatTransform, ComposeTransform, CorrCholeskyTransform, ExpTransform,
                         IndependentTransform, LowerCholeskyTransform, PositiveDefiniteTransform, SigmoidTransform,
                         SoftmaxTransform, StackTransform, StickBreakingTransform, identity_transform)

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint type -> factory ``fn(constraint) -> Transform``."""

    def __init__(self) -> None:
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got "
                            f"{constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _real(constraint):
    return identity_transform


def _independent(registry):
    def factory(constraint):
        return IndependentTransform(registry(constraint.base_constraint), constraint.reinterpreted_batch_ndims)
    return factory


def _greater_than(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.lower_bound, 1)])


def _less_than(constraint):
    return ComposeTransform([ExpTransform(), AffineTransform(constraint.upper_bound, -1)])


def _interval(constraint):
    lower, upper = constraint.lower_bound, constraint.upper_bound
    if isinstance(lower, (int, float)) and isinstance(upper, (int, float)) and lower == 0 and upper == 1:
        return SigmoidTransform()
    return ComposeTransform([SigmoidTransform(), AffineTransform(lower, upper - lower)])


def _cat(registry):
    def factory(constraint):
        return CatTransform([registry(c) for c in constraint.cseq], constraint.dim, constraint.lengths)
    return factory


def _stack(registry):
    def factory(constraint):
        return StackTransform([registry(c) for c in constraint.cseq], constraint.dim)
    return factory


for _registry in (biject_to, transform_to):
    _registry.register(constraints.real, _real)
    _registry.register(constraints.independent, _independent(_registry))
    _registry.register(constraints.positive, _greater_than)      # _GreaterThan; nonnegative below
    _registry.register(constraints.nonnegative, _greater_than)
    _registry.register(constraints.less_than, _less_than)
    _registry.register(constraints.interval, _interval)
    _registry.register(constraints.half_open_interval, _interval)
    _registry.register(constraints.corr_cholesky, lambda c: CorrCholeskyTransform())
    _registry.register(constraints.cat, _cat(_registry))
    _registry.register(constraints.stack, _stack(_registry))
biject_to.register(constraints.simplex, lambda c: StickBreakingTransform())
transform_to.register(constraints.simplex, lambda c: SoftmaxTransform())
# onto, not bijections (the upper triangle is dropped; a matrix square): transform_to only, as PyTorch's
transform_to.register(constraints.lower_cholesky, lambda c: LowerCholeskyTransform())
transform_to.register(constraints.positive_definite, lambda c: PositiveDefiniteTransform())
transform_to.register(constraints.positive_semidefinite, lambda c: PositiveDefiniteTransform())

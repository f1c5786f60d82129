"""Graph passes: shape propagation, common-subexpression elimination, constant folding,
elementwise fusion grouping and DOT drawing. Dead-code elimination is
``Graph.eliminate_dead_code``."""
from __future__ import annotations

from . import constant_folding, cse, fusion, graph_drawer, shape_prop  # noqa: F401
from .constant_folding import fold_constants
from .cse import eliminate_common_subexpressions
from .fusion import elementwise_groups
from .graph_drawer import FxGraphDrawer
from .shape_prop import ShapeProp, TensorMetadata

__all__ = ["ShapeProp", "TensorMetadata", "eliminate_common_subexpressions", "fold_constants",
           "elementwise_groups", "FxGraphDrawer"]

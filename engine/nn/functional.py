"""``torch.nn.functional``: composites over Tensor ops, plus the nn primitives in ``_ops``.

This module is the public face; the functions live one floor down, each module importing
only what is below it:

- ``functional_core``: linear, convolution, pooling, normalization, dropout, embedding,
  resampling, the common activations and losses, and the shared argument helpers;
- ``functional_extra``: channel/alpha dropout, adaptive max pooling, instance/RMS norm, more
  activations and losses, pixel shuffling, distances (built on the core);
- ``functional_more``: 3-d and fractional pooling, unpooling, channel shuffle, embedding bags, sampling
  grids, CTC and the remaining margin losses (built on the core and the extras);
- ``functional_attention``: ``scaled_dot_product_attention`` and the
  ``multi_head_attention_forward`` behind ``nn.MultiheadAttention`` (built on the core).
"""
from . import functional_attention as _attention, functional_core as _core, functional_extra as _extra
from . import functional_more as _more, grad  # noqa: F401  (F.grad is torch.nn.grad, as in PyTorch)
from .functional_attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: F401
from .functional_core import *  # noqa: F401,F403
from .functional_core import _reduction  # noqa: F401  (nn.modules.loss maps size_average/reduce with it)
from .functional_extra import *  # noqa: F401,F403
from .functional_more import *  # noqa: F401,F403

__all__ = _core.__all__ + _attention.__all__ + _extra.__all__ + _more.__all__

"""``torch.masked``: reductions and normalizations that skip masked-out elements.

Each function takes a strided tensor and ``mask`` (bool, broadcastable to the input; None keeps every
element): the masked-out elements are replaced by the operation's identity (0 for ``sum``, 1 for
``prod``, -inf for ``amax``/``logsumexp``/``softmax``, +inf for ``amin``/``softmin``, NaN for
``median``) and the ordinary op runs, as PyTorch's ``torch.masked._ops`` does, so values,
dtypes and gradients (zero at masked-out elements) are PyTorch's. ``mean``/``var``/``std``
count only the kept elements (NaN where none is kept). ``MaskedTensor`` (PyTorch's prototype) is in
``maskedtensor.py``.
"""
from __future__ import annotations

from ._ops import (amax, amin, argmax, argmin, cumprod, cumsum, log_softmax, logaddexp, logsumexp, mean, median,
                   norm, normalize, prod, softmax, softmin, std, sum, var)
from .maskedtensor import MaskedTensor, as_masked_tensor, is_masked_tensor, masked_tensor

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp", "logsumexp", "mean",
           "median", "norm", "normalize", "prod", "softmax", "softmin", "std", "sum", "var", "MaskedTensor",
           "masked_tensor", "as_masked_tensor", "is_masked_tensor"]

"""``torch.signal.windows``: SciPy-style window functions (``sym=True`` by default, unlike
``torch.hann_window``'s ``periodic=True``)."""
from __future__ import annotations

from .windows import (bartlett, blackman, cosine, exponential, gaussian, general_cosine, general_hamming, hamming,
                      hann, kaiser, nuttall)

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]

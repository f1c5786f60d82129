"""How many float32 elements of two arrays differ in their stored bits: the measure of the bit-for-bit
tests against PyTorch (0 is the claim; a count says how far off a failure is)."""
from __future__ import annotations

import numpy as np


def differing_bits(a, b) -> int:
    return int((np.asarray(a).view(np.uint32) != np.asarray(b).view(np.uint32)).sum())

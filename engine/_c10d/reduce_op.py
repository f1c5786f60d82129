"""``torch.distributed.ReduceOp``: how a reduction combines the ranks' values."""
from __future__ import annotations

import enum

__all__ = ["ReduceOp"]

ReduceOp = enum.Enum("RedOpType", ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"])

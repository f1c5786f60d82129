"""``torch.distributed.ReduceOp``: how a reduction combines the ranks' values. PyTorch's members
are of type ``ReduceOp.RedOpType`` (libraries annotate with it); here the enum is that type."""
from __future__ import annotations

import enum

__all__ = ["ReduceOp"]

ReduceOp = enum.Enum("RedOpType", ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"])
ReduceOp.RedOpType = ReduceOp

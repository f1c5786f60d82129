"""``torch.utils.flop_counter``: ``FlopCounterMode`` counts the FLOPs of the matrix products,
convolutions and attention run while it is entered, in total and per module (Lightning's model
summary reads it). It is a dispatcher ``Mode``: each op's count is its declared ``Op.cost``,
taken for the ops PyTorch's counter has formulas for (the GEMM family), so elementwise work
counts 0 as there."""
from __future__ import annotations

import math
from collections import defaultdict

from ..base.dispatch_state import LOCAL
from ..core.dispatch import Mode, eager
from ..core.tensor import Tensor

__all__ = ["FlopCounterMode"]

# ops whose FLOPs PyTorch's counter reports (mm/addmm/bmm, convolution and its backward, attention)
_COUNTED = frozenset({"matmul", "linear", "convolution", "convolution_transpose", "convolution_weight", "convolution_backward",
                      "scaled_dot_product_attention", "lstm", "lstm_cell", "gru", "gru_cell"})


def _linear_backward(shapes, params) -> int:
    """One GEMM per gradient the fused linear backward computes (input's, weight's: PyTorch's two mm)."""
    g, _, w = shapes
    rows = math.prod(g[:-1])
    return 2 * rows * w[0] * w[1] * (bool(params["needs"][0]) + bool(params["needs"][1]))


# ops whose count depends on their params, not only on shapes (their Op.cost cannot say)
_BY_PARAMS = {"linear_backward": _linear_backward}


class FlopCounterMode(Mode):
    """FLOPs of the counted ops run inside ``with``, per module path (``"Global"`` holds them all,
    the outermost module called is named by its class, its children ``Class.child.sub``). A
    backward's FLOPs count in ``"Global"`` only (PyTorch's also go to the modules they belong to).

    ``mods`` is accepted for old callers and ignored, as in PyTorch 2.4+; ``display`` prints the
    table on exit; ``depth`` limits the table's module depth.
    """

    def __init__(self, mods=None, depth: int = 2, display: bool = True, custom_mapping: dict | None = None):
        self.depth, self.display = depth, display
        self.custom_mapping = dict(custom_mapping or {})
        self.flop_counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._root = ""

    def __enter__(self):
        self.flop_counts.clear()
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if self.display:
            print(self.get_table(self.depth))

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict[str, dict[str, int]]:
        """``{module name: {op name: FLOPs}}``."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth: int | None = None) -> str:
        depth = self.depth if depth is None else depth
        rows = [f"{'Module':<40} {'FLOP':>14}"]
        for name, counts in self.flop_counts.items():
            if name == "Global" or name.count(".") < depth:
                rows.append(f"{name:<40} {sum(counts.values()):>14,}")
        return "\n".join(rows)

    def call_module(self, module, forward, args: tuple, kwargs: dict):
        if not LOCAL.module_path:
            self._root = type(module).__name__
        return forward(*args, **kwargs)

    def dispatch(self, op, args: tuple, params: dict):
        out = eager(op, args, params)
        formula = self.custom_mapping.get(op.name)
        if op.name in _COUNTED or op.name in _BY_PARAMS or formula is not None:
            res = out[0] if isinstance(out, tuple) else out
            shapes = tuple(tuple(a.shape) if isinstance(a, Tensor) else () for a in args)
            flops = int(formula(shapes, tuple(res.shape)) if formula is not None
                        else _BY_PARAMS[op.name](shapes, params) if op.name in _BY_PARAMS
                        else op.cost(shapes, tuple(res.shape)) if op.cost is not None else 0)
            if flops:
                self.flop_counts["Global"][op.name] += flops
                for path in dict.fromkeys(LOCAL.module_path):
                    name = f"{self._root}.{path}" if path else self._root
                    self.flop_counts[name][op.name] += flops
        return out

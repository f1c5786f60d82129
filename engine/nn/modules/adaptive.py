"""AdaptiveLogSoftmaxWithLoss: the adaptive softmax of Grave et al. over frequency clusters."""
from __future__ import annotations

from collections import namedtuple

from ...core import creation
from ...core.tensor import Tensor
from ...ops.movement import cat
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]


_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax (Grave et al., 2016): frequent classes in the head, the rest in clusters whose
    projections shrink by ``div_value`` each; the head scores the shortlist plus one logit per cluster."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for proj in self.tail:
            for layer in proj:
                layer.reset_parameters()

    def forward(self, input: Tensor, target: Tensor) -> _ASMoutput:
        unbatched = input.ndim == 1
        if unbatched:
            input, target = input.unsqueeze(0), target.unsqueeze(0)
        if input.ndim != 2 or target.ndim != 1 or input.shape[0] != target.shape[0]:
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        t = target.tolist()
        if t and (min(t) < 0 or max(t) >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{min(t)}, {max(t)}] were found. ")
        head_lp = F.log_softmax(self.head(input), 1)
        # the head entry each sample reads: its class (shortlist) or its cluster's logit
        column = [c if c < self.shortlist_size else self.shortlist_size + self._cluster(c) for c in t]
        out = head_lp.gather(1, creation.tensor(column, device=input.device).unsqueeze(1)).squeeze(1)
        for i in range(self.n_clusters):
            rows = [r for r, c in enumerate(t) if self._cluster(c) == i]
            if not rows:
                continue
            idx = creation.tensor(rows, device=input.device)
            local = creation.tensor([t[r] - self.cutoffs[i] for r in rows], device=input.device)
            lp = F.log_softmax(self.tail[i](input.index_select(0, idx)), 1)
            out = out.index_add(0, idx, lp.gather(1, local.unsqueeze(1)).squeeze(1))
        loss = (-out).mean()
        return _ASMoutput(out.squeeze(0) if unbatched else out, loss)

    def _cluster(self, c: int) -> int:
        """The tail cluster of class ``c`` (-1 for the shortlist)."""
        for i in range(self.n_clusters):
            if c < self.cutoffs[i + 1]:
                return i if c >= self.cutoffs[0] else -1
        return -1

    def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_lp = F.log_softmax(head_output, 1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_lp = F.log_softmax(self.tail[i](input), 1)
            parts.append(cluster_lp + head_lp[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class, ``(N, n_classes)``."""
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        out = self._full_log_prob(x, self.head(x))
        return out.squeeze(0) if unbatched else out

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each sample."""
        return self.log_prob(input).argmax(-1)

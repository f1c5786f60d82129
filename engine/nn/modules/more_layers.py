"""The remaining torch.nn layers over ``functional_more``: 3-d pooling and padding, power-average,
fractional and unpooling layers, channel shuffle, response normalisation, RReLU, Softmax2d,
Fold/Unfold, EmbeddingBag, the margin/CTC losses, ConvTranspose3d, SyncBatchNorm and the
adaptive softmax."""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from ...core import creation
from ...base.grad_mode import no_grad
from ...autograd.function import Function
from ...core.tensor import Tensor
from ...ops.movement import cat
from .. import functional as F, init
from ..parameter import Parameter
from .container import ModuleList, Sequential
from .conv import _ConvTranspose
from .extra_layers import ConstantPad3d, _AdaptiveMaxPoolNd, _PadNd
from .linear import Linear
from .loss import _Loss, _WeightedLoss, NLLLoss
from .module import Module
from .normalization import _BatchNorm
from .pooling import _AdaptiveAvgPoolNd, _MaxPoolNd

__all__ = ["MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "FractionalMaxPool2d", "FractionalMaxPool3d",
           "ReflectionPad3d", "ReplicationPad3d", "ZeroPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "ChannelShuffle", "LocalResponseNorm", "CrossMapLRN2d", "RReLU", "Softmax2d", "Fold", "Unfold",
           "EmbeddingBag", "MultiMarginLoss", "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
           "NLLLoss2d", "ConvTranspose3d", "SyncBatchNorm", "Container", "AdaptiveLogSoftmaxWithLoss",
           "LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


# ---------------------------------------------------------------- pooling
class MaxPool3d(_MaxPoolNd):
    def forward(self, input: Tensor):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    def forward(self, input: Tensor):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    _fn = F.lp_pool1d


class LPPool2d(_LPPoolNd):
    _fn = F.lp_pool2d


class LPPool3d(_LPPoolNd):
    _fn = F.lp_pool3d


class _MaxUnpoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _fn = F.max_unpool1d


class MaxUnpool2d(_MaxUnpoolNd):
    _fn = F.max_unpool2d


class MaxUnpool3d(_MaxUnpoolNd):
    _fn = F.max_unpool3d


class _FractionalMaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None):
        super().__init__()
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        ratios = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,)
        if output_ratio is not None and not all(0 < r < 1 for r in ratios):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input: Tensor):
        return type(self)._fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                              _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _fn = F.fractional_max_pool2d


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _fn = F.fractional_max_pool3d


# ---------------------------------------------------------------- padding
class ReflectionPad3d(_PadNd):
    _mode, _n = "reflect", 6


class ReplicationPad3d(_PadNd):
    _mode, _n = "replicate", 6


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class CircularPad1d(_PadNd):
    _mode, _n = "circular", 2


class CircularPad2d(_PadNd):
    _mode, _n = "circular", 4


class CircularPad3d(_PadNd):
    _mode, _n = "circular", 6


# ---------------------------------------------------------------- channels, activations
class ChannelShuffle(Module):
    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class LocalResponseNorm(Module):
    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _channel_mix(window: np.ndarray, x: Tensor) -> Tensor:
    """``sum_c' window[c, c'] * x[:, c']`` for every channel ``c`` of an ``(N, C, H, W)`` tensor."""
    mix = creation.tensor(window, dtype=x.dtype, device=x.device)
    return mix.matmul(x.movedim(1, -1).unsqueeze(-1)).squeeze(-1).movedim(-1, 1)


class _CrossMapLRN(Function):
    """Lua Torch's cross-map LRN, kept as PyTorch keeps it: the forward's running window never drops
    channel 0 and reaches ``(size - 1) // 2`` channels ahead, and the hand-written backward sums a
    different window; both are reproduced so values and gradients match PyTorch's."""

    @staticmethod
    def forward(ctx, input, size, alpha, beta, k):
        c = input.shape[1]
        ahead = (size - 1) // 2 + 1
        window = np.zeros((c, c))
        for i in range(c):
            window[i, 0 if i <= ahead else i - ahead + 1:min(i + ahead, c)] = 1.0
            window[i, 0] = 1.0
        scale = _channel_mix(window, input * input) * (alpha / size) + k
        out = input * scale.pow(-beta)
        ctx.save_for_backward(input, out, scale)
        ctx.params = (size, alpha, beta)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        input, out, scale = ctx.saved_tensors
        size, alpha, beta = ctx.params
        c = input.shape[1]
        shift = size - (size - 1) // 2
        back = np.zeros((c, c))
        for i in range(c):
            back[i, max(0, i - shift):max(0, min(c, i + size - shift))] = 1.0
        ratio = _channel_mix(back, grad_output * out / scale)
        return grad_output * scale.pow(-beta) - input * ratio * (2 * alpha * beta / size), None, None, None, None


class CrossMapLRN2d(LocalResponseNorm):
    """Local response normalisation across channels of a 4-d input, in Lua Torch's form."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__(size, alpha, beta, k)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        return _CrossMapLRN.apply(input, self.size, self.alpha, self.beta, self.k)


class RReLU(Module):
    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channels of each spatial position of a 3-d or 4-d input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


# ---------------------------------------------------------------- embeddings
class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (``F.embedding_bag``); N(0, 1) init."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx, self.mode, self.sparse, self.include_last_offset = padding_idx, mode, sparse, \
            include_last_offset
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0

    def forward(self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'" + \
            (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, max_norm=None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None) -> "EmbeddingBag":
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag


# ---------------------------------------------------------------- losses
class MultiMarginLoss(_WeightedLoss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None, size_average=None,
                 reduce=None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D instead")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} "
                             "instead")
        self.distance_function = distance_function if distance_function is not None else F.pairwise_distance
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths, target_lengths) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)


class NLLLoss2d(NLLLoss):
    """The old name of ``NLLLoss`` for image targets (PyTorch keeps it; it is the same loss)."""


class LinearCrossEntropyOptions:
    """How PyTorch may chunk ``linear_cross_entropy`` to save memory; tapelab accepts the settings and
    computes the reference result, which chunking does not change."""

    def __init__(self, allow_retain_graph: bool = False, batch_chunk_size: int | None = None,
                 chunking_method: str | None = "auto", acc_policy: str = "auto", acc_dtype=None):
        self.allow_retain_graph, self.batch_chunk_size = allow_retain_graph, batch_chunk_size
        self.chunking_method, self.acc_policy, self.acc_dtype = chunking_method, acc_policy, acc_dtype

    def __repr__(self) -> str:
        return (f"LinearCrossEntropyOptions(allow_retain_graph={self.allow_retain_graph}, batch_chunk_size="
                f"{self.batch_chunk_size}, chunking_method={self.chunking_method!r}, acc_policy={self.acc_policy!r}, "
                f"acc_dtype={self.acc_dtype})")


class LinearCrossEntropyLoss(Module):
    """A bias-optional linear head and cross-entropy in one module (``F.linear_cross_entropy``)."""

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple = (), bias: bool = False,
                 device=None, dtype=None, reduction: str = "mean", weight: Tensor | None = None,
                 ignore_index: int | None = None, label_smoothing: float = 0.0, options=None):
        super().__init__()
        self.in_features, self.num_classes, self.out_features = in_features, num_classes, tuple(out_features)
        width = num_classes * int(np.prod(self.out_features, dtype=np.int64))
        self.linear = Linear(in_features, width, bias=bias, device=device, dtype=dtype)
        self.register_buffer("weight", weight)
        self.reduction, self.ignore_index, self.label_smoothing, self.options = reduction, ignore_index, \
            label_smoothing, options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        shape = (self.num_classes,) + self.out_features
        w = self.linear.weight.reshape(shape + (self.linear.in_features,))
        b = self.linear.bias.reshape(shape) if self.linear.bias is not None else None
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight, reduction=self.reduction,
                                      ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
                                      options=self.options)


# ---------------------------------------------------------------- convolution, normalisation, containers
class ConvTranspose3d(_ConvTranspose):
    _nd = 3

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics span every process of a group; with no process group (one process,
    as here) it is ``BatchNorm`` over inputs of any rank >= 2, as PyTorch falls back to."""

    _dims = tuple(range(2, 65))

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm layer replaced by a SyncBatchNorm sharing its tensors."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm) and \
                type(module).__name__.startswith("BatchNorm"):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                with no_grad():
                    out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class Container(Module):
    """The pre-0.1 way to group modules by keyword (deprecated in PyTorch, which still has it)."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


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

"""PyTorch's autocast op lists, keyed by the names ops are declared under in tapelab.

PyTorch registers a cast policy per ATen op and device (``aten/src/ATen/autocast_mode.h`` for
CUDA, ``autocast_mode.cpp`` for CPU). tapelab declares fewer, larger primitives: one ``matmul``
op is PyTorch's ``mm``, ``bmm``, ``mv``, ``dot``, ``addmm``'s product and ``linear``'s product,
and one ``convolution`` op is ``conv1d``/``conv2d``/``conv3d``. So each table below is PyTorch's
list written in tapelab's op names: an entry applies as soon as an op of that name is declared
(``linear``, ``softmax``, ``layer_norm``, ``cross_entropy`` ... are listed under PyTorch's names
for the ops that declare them). A front end that PyTorch runs as one kernel but tapelab composes
(``dot``, ``mv``, ``addbmm``, ``prelu``, ``upsample_*``) goes through ``dispatch.composite(name, ...)``:
autocast casts its tensors by the policy listed under ``name`` (none: as given) and leaves the ops
inside alone, so ``dot``'s matrix product is not lowered where PyTorch's CPU list has no ``dot``.

Policies:
    LOWER: floating inputs (not float64) run in the autocast dtype.
    FP32: floating inputs (not float64) run in float32.
    FP32_UNLESS_DTYPE: float32, unless the call names an output ``dtype`` (sum, softmax ...).
    PROMOTE: floating inputs run in the widest of their dtypes and the autocast dtype.
    LOWER_IF_GEMM: LOWER when the call runs a GEMM, else untouched (PyTorch's CPU list names bmm, not
        einsum: an einsum that contracts a label two operands share is a bmm, one that does not a mul).
    BANNED: refused with PyTorch's message (binary_cross_entropy on cuda).
"""
from __future__ import annotations

__all__ = ["LOWER", "FP32", "FP32_UNLESS_DTYPE", "PROMOTE", "BANNED", "LOWER_IF_GEMM", "POLICIES", "BANNED_MESSAGE"]

LOWER, FP32, FP32_UNLESS_DTYPE = "lower_precision_fp", "fp32", "fp32_set_opt_dtype"
LOWER_IF_GEMM = "lower_precision_fp_if_gemm"
PROMOTE, BANNED = "promote", "banned"


def _table(**policies: str) -> dict[str, str]:
    """``{op name: policy}`` from ``policy="name name ..."`` keyword arguments."""
    return {name: policy for policy, names in policies.items() for name in names.split()}


_CUDA = _table(
    # conv*, conv_tbc, conv_transpose*, mm, mv, bmm, addmm, addmv, addr, addbmm, baddbmm, linear,
    # matmul, chain_matmul, linalg_multi_dot, linalg_vecdot, einsum, prelu, the rnn cells, sdpa
    lower_precision_fp="convolution convolution_transpose matmul einsum linear prelu lstm_cell gru_cell "
                       "rnn_tanh_cell rnn_relu_cell scaled_dot_product_attention mv addmv addr addbmm linalg_vecdot",
    fp32="acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus "
         "layer_norm rms_norm group_norm cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss "
         "nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss "
         "multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss "
         "binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp grid_sampler cross_entropy",
    fp32_set_opt_dtype="prod softmax log_softmax cumprod cumsum sum norm",
    promote="addcdiv addcmul atan2 bilinear cross index_put scatter_add",
    banned="binary_cross_entropy",
)

_CPU = _table(
    lower_precision_fp="convolution convolution_transpose matmul linear prelu scaled_dot_product_attention addbmm "
                       "linalg_vecdot mkldnn_rnn_layer",
    lower_precision_fp_if_gemm="einsum",
    fp32="avg_pool3d binary_cross_entropy grid_sampler polar prod quantile nanquantile stft cdist trace "
         "cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d max_unpool2d "
         "max_unpool3d adaptive_avg_pool3d mse_loss cosine_embedding_loss nll_loss nll_loss2d "
         "hinge_embedding_loss poisson_nll_loss smooth_l1_loss cross_entropy l1_loss huber_loss "
         "margin_ranking_loss soft_margin_loss triplet_margin_loss multi_margin_loss ctc_loss ctc_loss_forward kl_div "
         "multilabel_margin_loss binary_cross_entropy_with_logits qr svd solve_triangular triangular_solve "
         "fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d",
    promote="cat stack index_copy",
)

POLICIES: dict[str, dict[str, str]] = {"cpu": _CPU, "cuda": _CUDA}

BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")

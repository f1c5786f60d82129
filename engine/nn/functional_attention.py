"""``scaled_dot_product_attention`` (its checks, grouped-query heads and dropout mask around
the one fused op of ``_fused_attention``) and the ``multi_head_attention_forward`` behind
``nn.MultiheadAttention``, a composite over Tensor ops.

Both follow PyTorch's math path, so values, gradients and masking rules (bool vs float
masks, fully masked rows, ``is_causal``) match it.
"""
from __future__ import annotations

import math
import warnings

from ..base.dispatch_state import STATE as _DISPATCH
from ..core.overrides import handle_torch_function, has_tensor_like, has_torch_function
from ..base import dtype as _dtype
from ..core import creation
from ..core.dispatch import composite
from ..ops.linalg import baddbmm, bmm
from ..ops.movement import broadcast_shapes, cat
from ..core.tensor import Tensor
from . import _fused_attention
from .functional_core import dropout, linear, softmax

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def causal_mask(L: int, S: int, device=None) -> Tensor:
    """Bool ``(L, S)`` mask, True where query ``i`` may attend key ``j`` (``j <= i``)."""
    return creation.arange(L, device=device).unsqueeze(-1) >= creation.arange(S, device=device)


def _check_sdpa(query: Tensor, key: Tensor, value: Tensor, attn_mask, dropout_p: float) -> None:
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, but got "
                           f"query.dim: {query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead.")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions but value has "
                           f"{value.shape[-2]} (key {list(key.shape)}, value {list(value.shape)})")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query and key must share the embedding size, got "
                           f"query {list(query.shape)} and key {list(key.shape)}")
    if attn_mask is not None and attn_mask.dtype not in (_dtype.bool, _dtype.float32, query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {attn_mask.dtype} and  query.dtype: {query.dtype} instead.")
    if not 0.0 <= dropout_p <= 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def _repeat_heads(x: Tensor, n_query_heads: int) -> Tensor:
    """Grouped-query attention: repeat each key/value head (dim -3) to match the query heads."""
    heads = x.shape[-3]
    if n_query_heads % heads:
        raise RuntimeError(f"scaled_dot_product_attention(enable_gqa=True): the number of query heads "
                           f"({n_query_heads}) must be a multiple of the key/value heads ({heads})")
    r = n_query_heads // heads
    shape = tuple(x.shape)
    grouped = x.unsqueeze(-3).expand(*shape[:-2], r, *shape[-2:])
    return grouped.reshape(*shape[:-3], n_query_heads, *shape[-2:])


# the backends the innermost ``sdpa_kernel`` block enables, as PyTorch's numbers (MATH 0, FLASH_ATTENTION 1); process-wide
# as PyTorch's backend flags; empty outside any block (all enabled)
ENABLED_BACKENDS: list = []


def _check_backend(query: Tensor, dropout_p: float) -> None:
    """PyTorch's CPU kernel choice under ``sdpa_kernel``: the math kernel, else the flash one (4-d inputs, no
    dropout); a block enabling neither has no viable backend."""
    if not ENABLED_BACKENDS or query.device.type != "cpu" or 0 in ENABLED_BACKENDS[-1]:
        return
    if 1 not in ENABLED_BACKENDS[-1]:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")
    if query.ndim != 4 or dropout_p > 0.0:
        raise RuntimeError("No available kernel.  Aborting execution.")


_PLAIN_MASKS = (type(None), Tensor)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q kᵀ · scale + mask) v``; a bool ``attn_mask`` is True where attention is allowed,
    a float one is added to the scores. Dropout always applies when ``dropout_p > 0``.

    An ``attn_mask`` of a Tensor subclass with its own ``__torch_function__`` is handed this call as
    one, as PyTorch's native function is (``nn.attention.bias.CausalBias`` answers so), even when the
    subclass takes no part in every op (``_asked_by_ops = False``)."""
    if (_DISPATCH.functions is not None and has_tensor_like((query, key, value, attn_mask))
            or type(attn_mask) not in _PLAIN_MASKS and has_torch_function((query, key, value, attn_mask))):
        return handle_torch_function(scaled_dot_product_attention, (query, key, value, attn_mask), query, key, value,
                                     attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                     enable_gqa=enable_gqa)
    # one op to autocast, as PyTorch's: q, k, v (and a float mask) are cast before the dtype checks (under
    # cpu autocast a bfloat16 v meets the float32 q and k that Llama's RoPE promoted)
    return composite("scaled_dot_product_attention",
                     lambda q, k, v, m: _sdpa(q, k, v, m, dropout_p, is_causal, scale, enable_gqa),
                     query, key, value, attn_mask)


def _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> Tensor:
    _check_sdpa(query, key, value, attn_mask, dropout_p)
    _check_backend(query, dropout_p)
    if enable_gqa:
        key = _repeat_heads(key, query.shape[-3])
        value = _repeat_heads(value, query.shape[-3])
    if attn_mask is not None and attn_mask.dtype not in (_dtype.bool, query.dtype):
        attn_mask = attn_mask.to(query.dtype)
    if is_causal and attn_mask is not None:
        attn_mask, is_causal = _causal_folded(query, key, attn_mask), False
    scale_factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    keep = None
    if dropout_p > 0.0:
        shape = tuple(query.shape[:-2]) + (query.shape[-2], key.shape[-2])
        shape = tuple(broadcast_shapes(shape, tuple(key.shape[:-2]) + shape[-2:]))
        keep = (creation.zeros(shape, dtype=query.dtype, device=query.device) if dropout_p == 1.0 else
                creation.bernoulli(creation.empty(shape, dtype=query.dtype, device=query.device), 1.0 - dropout_p)
                * (1.0 / (1.0 - dropout_p)))
    return _fused_attention.attention(query, key, value, attn_mask, keep, scale_factor, is_causal)


def _causal_folded(query, key, attn_mask) -> Tensor:
    """A mask and ``is_causal`` together: PyTorch's cpu flash kernel, which takes 4-D inputs, applies both (the
    mask, then the causal cut, top-left aligned), as Keras's torch backend relies on when it passes a bias
    as the mask; with 3-D inputs the math kernel refuses them."""
    if query.ndim != 4 or key.ndim != 4:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                           "is_causal=True")
    L, S = query.shape[-2], key.shape[-2]
    allowed = creation.arange(L, device=query.device).unsqueeze(-1) >= creation.arange(S, device=query.device)
    if attn_mask.dtype == _dtype.bool:
        return attn_mask.logical_and(allowed)
    return attn_mask.masked_fill(allowed.logical_not(), float("-inf"))


# ---------------------------------------------------------------- multi-head attention

def _none_or_dtype(input: Tensor | None):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or Tensor")


def _canonical_mask(mask: Tensor | None, mask_name: str, other_type, other_name: str, target_type,
                    check_other: bool = True) -> Tensor | None:
    """MHA's mask convention: a bool mask (True = masked out) becomes an additive float mask."""
    if mask is None:
        return None
    if mask.dtype != _dtype.bool and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=3)
    if mask.dtype == _dtype.bool:
        return creation.zeros(tuple(mask.shape), dtype=target_type, device=mask.device).masked_fill(mask, _NEG_INF)
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """Validate ranks as PyTorch does and say whether the input is batched."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    batched = query.ndim == 3
    kind, nd = ("batched (3-D)", 3) if batched else ("unbatched (2-D)", 2)
    if key.ndim != nd or value.ndim != nd:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {nd}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != nd - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or {nd - 1}-D "
                             f"but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return batched


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate_weights):
    """Project q, k, v; packed self-attention does it in one product against the packed weight."""
    if separate_weights is None:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        if query is key and key is value:
            return linear(query, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
        weights = in_proj_weight.chunk(3)
    else:
        for name, w in zip("qkv", separate_weights):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        weights = separate_weights
    biases = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def _append_zero_key(mask: Tensor | None) -> Tensor | None:
    """Extend an additive mask by one key column of zeros (for bias_k/bias_v and add_zero_attn)."""
    if mask is None:
        return None
    return cat([mask, creation.zeros((*mask.shape[:-1], 1), dtype=mask.dtype, device=mask.device)], -1)


def _split_heads(x: Tensor, length: int, bsz: int, num_heads: int, head_dim: int) -> Tensor:
    """(length, bsz, E) -> (bsz * num_heads, length, head_dim)."""
    return x.reshape(length, bsz * num_heads, head_dim).transpose(0, 1)


def _check_static(static: Tensor, name: str, bsz_heads: int, head_dim: int) -> Tensor:
    if static.shape[0] != bsz_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz_heads}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static


def _prepare_attn_mask(attn_mask: Tensor | None, tgt_len: int, src_len: int, bsz: int, num_heads: int):
    """Bring ``attn_mask`` to 3-D ``(1 or bsz*heads, L, S)``, checking its shape."""
    if attn_mask is None:
        return None
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.ndim == 3:
        if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                               f"{(bsz * num_heads, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True, key_padding_mask: Tensor | None = None,
        need_weights: bool = True, attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None, static_v: Tensor | None = None,
        average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """Sequence-first multi-head attention, as ``torch.nn.functional.multi_head_attention_forward``.

    Inputs are ``(L, N, E)`` (or unbatched ``(L, E)``); returns the output and, when
    ``need_weights``, the attention weights (averaged over heads unless told otherwise).
    """
    if _DISPATCH.functions is not None and has_tensor_like((query, key, value, in_proj_weight, in_proj_bias, bias_k, bias_v, out_proj_weight, out_proj_bias, key_padding_mask, attn_mask, q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v)):
        return handle_torch_function(multi_head_attention_forward, (query, key, value, in_proj_weight, in_proj_bias,
                                     bias_k, bias_v, out_proj_weight, out_proj_bias, key_padding_mask, attn_mask,
                                     q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v), query, key,
                                     value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k,
                                     bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                     training=training, key_padding_mask=key_padding_mask, need_weights=need_weights,
                                     attn_mask=attn_mask, use_separate_proj_weight=use_separate_proj_weight,
                                     q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight,
                                     v_proj_weight=v_proj_weight, static_k=static_k, static_v=static_v,
                                     average_attn_weights=average_attn_weights, is_causal=is_causal)
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask),
                                       "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                           "module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # SDPA applies the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer purely causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight and tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                             f"{value.shape[:2]}")
    if not use_separate_proj_weight and tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate)
    attn_mask = _prepare_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads)

    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _append_zero_key(attn_mask), _append_zero_key(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")

    q = _split_heads(q, tgt_len, bsz, num_heads, head_dim)
    k = (_split_heads(k, k.shape[0], bsz, num_heads, head_dim) if static_k is None
         else _check_static(static_k, "static_k", bsz * num_heads, head_dim))
    v = (_split_heads(v, v.shape[0], bsz, num_heads, head_dim) if static_v is None
         else _check_static(static_v, "static_v", bsz * num_heads, head_dim))
    if add_zero_attn:
        zeros = creation.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = cat([k, zeros], 1), cat([v, zeros], 1)
        attn_mask, key_padding_mask = _append_zero_key(attn_mask), _append_zero_key(key_padding_mask)
    src_len = k.shape[1]

    if key_padding_mask is not None:
        for dim, want in ((0, bsz), (1, src_len)):
            if key_padding_mask.shape[dim] != want:
                raise AssertionError(f"Expected key_padded_mask.shape[{dim}] to be {want}, but got "
                                     f"{key_padding_mask.shape[dim]}")
        key_padding_mask = (key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
                            .reshape(bsz * num_heads, 1, src_len))
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask
    if not training:
        dropout_p = 0.0

    if need_weights:
        out, attn_weights = _attend_with_weights(q, k, v, attn_mask, dropout_p)
        attn_weights = attn_weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            attn_weights = attn_weights.mean(dim=1)
        out = out.transpose(0, 1)
    else:
        if attn_mask is not None:
            attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                         else attn_mask.reshape(bsz, num_heads, -1, src_len))
        out = scaled_dot_product_attention(q.reshape(bsz, num_heads, tgt_len, head_dim),
                                           k.reshape(bsz, num_heads, src_len, head_dim),
                                           v.reshape(bsz, num_heads, src_len, head_dim),
                                           attn_mask, dropout_p, is_causal)
        # (bsz, heads, L, d) -> (L, bsz, heads, d), copied once by the reshape below as PyTorch's
        # ``permute(2, 0, 1, 3).contiguous()``: through (bsz * heads, L, d) it was two copies, the
        # output lying as (bsz, L, heads, d)
        out, attn_weights = out.permute(2, 0, 1, 3), None
    out = out.reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not batched:
        out = out.squeeze(1)
        if attn_weights is not None:
            attn_weights = attn_weights.squeeze(0)
    return out, attn_weights


def _attend_with_weights(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float):
    """The explicit path that materialises the weights (plain softmax: fully masked rows give NaN,
    as in PyTorch), with PyTorch's ops: the mask joins the scores through ``baddbmm``, so under
    autocast the mask is cast with them and the weights keep the lower precision."""
    q = q * math.sqrt(1.0 / q.shape[-1])
    scores = bmm(q, k.transpose(-2, -1)) if attn_mask is None else baddbmm(attn_mask, q, k.transpose(-2, -1))
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return bmm(weights, v), weights

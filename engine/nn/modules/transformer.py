"""Transformer layers: encoder/decoder layers, their stacks and the full ``Transformer``.

Submodule names and the order of operations follow PyTorch (post-norm by default,
``norm_first`` for pre-norm), so torch state dicts load and outputs agree. PyTorch's
nested-tensor fast path is not reproduced: padded positions are computed, not zeroed.
"""
from __future__ import annotations

import copy
import warnings
from typing import Callable

from ...core import creation
from .. import functional as F, init
from ..functional_attention import _canonical_mask, _none_or_dtype, causal_mask
from ...core.tensor import Tensor
from .activation import GELU, MultiheadAttention, ReLU
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    """Float ``(sz, sz)`` mask: ``-inf`` above the diagonal, 0 elsewhere."""
    allowed = causal_mask(sz, sz, device)
    return creation.zeros((sz, sz), dtype=dtype, device=device).masked_fill(allowed.logical_not(), float("-inf"))


def _detect_is_causal_mask(mask: Tensor | None, is_causal: bool | None = None, size: int | None = None) -> bool:
    """``is_causal`` when given; otherwise whether ``mask`` equals the causal mask of ``size``."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.size(-2)
    causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())


def _get_seq_len(src: Tensor, batch_first: bool) -> int:
    return src.shape[0] if src.ndim == 2 else src.shape[1 if batch_first else 0]


def _get_activation_fn(activation: str) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class _FeedForwardLayer(Module):
    """What encoder and decoder layers share: the feed-forward block, its activation and
    dropout, and the residual wiring (post-norm, or pre-norm with ``norm_first``)."""

    def _init_feedforward(self, d_model: int, dim_feedforward: int, dropout: float, activation, bias: bool,
                          factory: dict) -> None:
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def _ff_block(self, x: Tensor, dropout: Module) -> Tensor:
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _residual(self, x: Tensor, norm: Module, block: Callable[[Tensor], Tensor]) -> Tensor:
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))


class TransformerEncoderLayer(_FeedForwardLayer):
    """Self-attention then a feed-forward block, each with a residual connection and LayerNorm.

    ``TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=relu,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self._init_feedforward(d_model, dim_feedforward, dropout, activation, bias, factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False) -> Tensor:
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(src_mask), "src_mask", src.dtype)
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)

        def sa_block(x: Tensor) -> Tensor:
            return self.dropout1(self.self_attn(x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                                need_weights=False, is_causal=is_causal)[0])

        x = self._residual(src, self.norm1, sa_block)
        return self._residual(x, self.norm2, lambda y: self._ff_block(y, self.dropout2))


class TransformerDecoderLayer(_FeedForwardLayer):
    """Self-attention, cross-attention over ``memory``, then a feed-forward block.

    ``TransformerDecoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=relu,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True)``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            **factory)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, **factory)
        self._init_feedforward(d_model, dim_feedforward, dropout, activation, bias, factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        def sa_block(x: Tensor) -> Tensor:
            return self.dropout1(self.self_attn(x, x, x, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                                                is_causal=tgt_is_causal, need_weights=False)[0])

        def mha_block(x: Tensor) -> Tensor:
            return self.dropout2(self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                     key_padding_mask=memory_key_padding_mask,
                                                     is_causal=memory_is_causal, need_weights=False)[0])

        x = self._residual(tgt, self.norm1, sa_block)
        x = self._residual(x, self.norm2, mha_block)
        return self._residual(x, self.norm3, lambda y: self._ff_block(y, self.dropout3))


def _nested_tensor_refusal(layer: Module) -> str:
    """Why PyTorch's encoder would not use nested tensors with ``layer`` ('' when it would)."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    attn = layer.self_attn
    checks = ((layer.norm_first, "norm_first was True"),
              (not attn.batch_first,
               "self_attn.batch_first was not True(use batch_first for better inference performance)"),
              (not attn._qkv_same_embed_dim, "self_attn._qkv_same_embed_dim was not True"),
              (attn.in_proj_bias is None, "self_attn was passed bias=False"),
              (not (layer.activation in (F.relu, F.gelu) or isinstance(layer.activation, (ReLU, GELU))),
               "activation_relu_or_gelu was not True"),
              (layer.norm1.eps != layer.norm2.eps, "norm1.eps was not equal to encoder_layer.norm2.eps"),
              (attn.num_heads % 2 == 1, "self_attn.num_heads is odd"))
    return next((f"encoder_layer.{why}" for failed, why in checks if failed), "")


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn, then an optional ``norm``."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        # accepted for API compatibility; nested tensors are not supported, so they are never used
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False
        reason = _nested_tensor_refusal(encoder_layer)
        if enable_nested_tensor and reason:
            # PyTorch warns (programs see it on stderr or filter it) when the layer rules out its fast path
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {reason}",
                          stacklevel=2)
        self.mask_check = mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(mask), "mask", src.dtype)
        mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return self.norm(output) if self.norm is not None else output


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn, then an optional ``norm``."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batch_first = self.layers[0].self_attn.batch_first
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, _get_seq_len(tgt, batch_first))
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(output) if self.norm is not None else output


class Transformer(Module):
    """Encoder-decoder transformer ("Attention Is All You Need"); weight matrices start Xavier-uniform.

    ``Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
    dropout=0.1, activation=relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
    batch_first=False, norm_first=False, bias=True)``.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu, custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        layer_args = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                          layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
                          bias=bias, **factory)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **layer_args),
                                              num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **layer_args),
                                              num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        if src.ndim == 3 and src.size(0 if self.batch_first else 1) != tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The causal mask for a sequence of length ``sz``: ``-inf`` above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

"""``torch.nn.attention.bias``: causal masks that ``F.scaled_dot_product_attention`` takes as
``attn_mask`` without materialising them.

``causal_upper_left(L, S)`` keeps key ``j`` for query ``i`` where ``j <= i`` (``is_causal=True``);
``causal_lower_right(L, S)`` aligns the triangle to the bottom-right corner, ``j <= i + S - L``, the
mask of a query block that continues a longer key sequence (decoding with a cache). A ``CausalBias``
is a Tensor subclass taking part in ``__torch_function__``: attention given one computes with
``is_causal=True`` (upper left, or both variants when ``L == S``) or with the materialised boolean
mask (lower right), which is what PyTorch's CPU build does when no fused kernel can take it.
"""
from __future__ import annotations

import warnings
from enum import IntEnum, auto

from ...base import dtype as _dtype
from ...base.device import device as _device
from ...core import creation
from ...core.tensor import Tensor
from ...ops.movement import tril
from .. import functional_attention as _attention

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(IntEnum):
    """Which corner the causal triangle is aligned to: ``UPPER_LEFT`` (``tril(ones(L, S))``) or
    ``LOWER_RIGHT`` (``tril(ones(L, S), diagonal=S - L)``)."""
    UPPER_LEFT = auto()
    LOWER_RIGHT = auto()


class CausalBias(Tensor):
    """A causal attention mask of ``seq_len_q`` queries by ``seq_len_kv`` keys, kept as its variant and
    sizes (its own data is the uninitialised ``(variant, L, S)`` block PyTorch's legacy constructor
    leaves; read it with ``_materialize``).

    Only attention asks it (``_asked_by_ops``): a class that took part in every op would put all of
    a program's ops on the dispatcher's slow path once this module is imported."""
    _asked_by_ops = False

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"variant must be a CausalVariant, got {type(variant).__name__}")
        super().__init__(int(variant), seq_len_q, seq_len_kv)   # torch.Tensor(*args)'s shape, as PyTorch's
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            warnings.warn("Lower right causal bias will produce NaNs in the output when seq_len_q > seq_len_kv!",
                          stacklevel=2)

    def _upper_left(self, device) -> Tensor:
        return tril(creation.ones(self.seq_len_q, self.seq_len_kv, device=device, dtype=_dtype.bool))

    def _lower_right(self, device) -> Tensor:
        return tril(creation.ones(self.seq_len_q, self.seq_len_kv, device=device, dtype=_dtype.bool),
                    diagonal=self.seq_len_kv - self.seq_len_q)

    def _materialize(self, device=None) -> Tensor:
        """The boolean mask (True where a key is attended), on ``device`` (cpu by default)."""
        device = _device("cpu") if device is None else device
        if self.variant == CausalVariant.UPPER_LEFT:
            return self._upper_left(device)
        return self._lower_right(device)

    @staticmethod
    def _dispatch(query: Tensor, key: Tensor, value: Tensor, attn_mask: CausalBias, dropout_p: float = 0.0,
                  is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
        """Attention under this mask (see the module)."""
        if is_causal:
            raise ValueError("CausalBias should not be used with causal=True")
        sdpa = _attention.scaled_dot_product_attention
        if attn_mask.seq_len_q == attn_mask.seq_len_kv or attn_mask.variant == CausalVariant.UPPER_LEFT:
            return sdpa(query, key, value, attn_mask=None, dropout_p=dropout_p, is_causal=True, scale=scale,
                        enable_gqa=enable_gqa)
        if attn_mask.variant == CausalVariant.LOWER_RIGHT:
            return sdpa(query, key, value, attn_mask=attn_mask._materialize(query.device), dropout_p=dropout_p,
                        is_causal=False, scale=scale, enable_gqa=enable_gqa)
        raise ValueError(f"CausalBias.variant must be a CausalVariant type, but found: {attn_mask.variant}")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _attention.scaled_dot_product_attention:
            return cls._dispatch(*args, **kwargs)
        return super().__torch_function__(func, types, args, kwargs)

    def __repr__(self) -> str:
        return self._materialize().__repr__()


def causal_upper_left(*size) -> CausalBias:
    """The ``UPPER_LEFT`` bias of ``size == (seq_len_q, seq_len_kv)``: the mask ``is_causal=True`` applies."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    seq_len_q, seq_len_kv = size
    return CausalBias(CausalVariant.UPPER_LEFT, seq_len_q, seq_len_kv)


def causal_lower_right(*size) -> CausalBias:
    """The ``LOWER_RIGHT`` bias of ``size == (seq_len_q, seq_len_kv)``: the triangle aligned to the last key."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    seq_len_q, seq_len_kv = size
    return CausalBias(CausalVariant.LOWER_RIGHT, seq_len_q, seq_len_kv)

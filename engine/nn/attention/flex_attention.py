"""``torch.nn.attention.flex_attention``: attention whose scores pass a user ``score_mod`` and whose
positions a ``mask_mod`` keeps or drops, computed eagerly as the math it stands for.

PyTorch compiles these functions into a blocked kernel; here ``mask_mod`` and ``score_mod`` are called
once on broadcast index tensors (batch ``[B,1,1,1]``, head ``[1,H,1,1]``, query ``[1,1,L,1]``, key
``[1,1,1,S]``), so they must be written with tensor ops (as they must be for PyTorch's ``vmap`` too).
A ``BlockMask`` keeps the element mask it was made from; ``to_dense()`` gives PyTorch's block-level view.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

from ...base import dtype as _dtype
from ...core import creation
from ...core.tensor import Tensor

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "create_block_mask", "create_mask", "or_masks",
           "and_masks", "noop_mask"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


class AuxRequest(NamedTuple):
    """Which extra results ``flex_attention(..., return_aux=)`` returns."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The extra results asked for by an ``AuxRequest`` (None where not asked)."""
    lse: Tensor | None = None
    max_scores: Tensor | None = None

_score_mod_signature = Callable   # (score, b, h, q_idx, kv_idx) -> score
_mask_mod_signature = Callable    # (b, h, q_idx, kv_idx) -> bool


def noop_mask(batch, head, token_q, token_kv) -> Tensor:
    """Keeps every position."""
    return creation.ones((), dtype=_dtype.bool, device=batch.device)


def and_masks(*mask_mods: Callable) -> Callable:
    """A position is kept when every ``mask_mod`` keeps it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = creation.ones((), dtype=_dtype.bool, device=b.device)
        for mod in mask_mods:
            result = result & mod(b, h, q_idx, kv_idx)
        return result
    return and_mask


def or_masks(*mask_mods: Callable) -> Callable:
    """A position is kept when any ``mask_mod`` keeps it."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = creation.zeros((), dtype=_dtype.bool, device=b.device)
        for mod in mask_mods:
            result = result | mod(b, h, q_idx, kv_idx)
        return result
    return or_mask


def _indices(B: int, H: int, L: int, S: int, device) -> tuple:
    def ar(n, axis):
        shape = [1, 1, 1, 1]
        shape[axis] = n
        return creation.arange(n, device=device).reshape(shape)
    return ar(B, 0), ar(H, 1), ar(L, 2), ar(S, 3)


def create_mask(mod_fn: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int, device=None) -> Tensor:
    """The ``[B, H, Q_LEN, KV_LEN]`` bool mask of a ``mask_mod`` (or the scores a ``score_mod`` makes of
    zeros); ``B``/``H`` of None mean 1."""
    B, H = B or 1, H or 1
    b, h, q, kv = _indices(B, H, Q_LEN, KV_LEN, device or "cpu")
    if mod_fn.__code__.co_argcount == 5:
        out = mod_fn(creation.zeros((B, H, Q_LEN, KV_LEN), device=device or "cpu"), b, h, q, kv)
    else:
        out = mod_fn(b, h, q, kv)
    return out.expand(B, H, Q_LEN, KV_LEN)


class BlockMask:
    """Which query/key positions attention may use, made by ``create_block_mask`` from a ``mask_mod``.

    Holds the element mask (``mask``, ``[B, H, Q_LEN, KV_LEN]``); PyTorch's block tables are not kept,
    so it is built by ``create_block_mask`` rather than from ``kv_num_blocks``/``kv_indices``."""

    def __init__(self, mask: Tensor, mask_mod: Callable, BLOCK_SIZE: tuple[int, int]):
        self.mask, self.mask_mod, self.BLOCK_SIZE = mask, mask_mod, BLOCK_SIZE
        self.seq_lengths = tuple(mask.shape[-2:])

    @property
    def shape(self) -> tuple:
        return tuple(self.mask.shape)

    def to_dense(self) -> Tensor:
        """The block-level mask: 1 where a ``BLOCK_SIZE`` tile holds any kept position."""
        B, H, L, S = self.mask.shape
        (bq, bk), nq, nk = self.BLOCK_SIZE, -(-L // self.BLOCK_SIZE[0]), -(-S // self.BLOCK_SIZE[1])
        padded = creation.zeros((B, H, nq * bq, nk * bk), dtype=_dtype.bool, device=self.mask.device)
        padded[:, :, :L, :S] = self.mask
        return padded.reshape(B, H, nq, bq, nk, bk).any(dim=5).any(dim=3).to(_dtype.int32)

    def sparsity(self) -> float:
        """The percentage of blocks that are skipped entirely."""
        dense = self.to_dense()
        return 100.0 * (1.0 - dense.sum().item() / dense.numel())

    def __repr__(self) -> str:
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%)"


def create_block_mask(mask_mod: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int, device=None,
                      BLOCK_SIZE: int | tuple[int, int] = 128, _compile: bool = False, **kwargs) -> BlockMask:
    """The ``BlockMask`` of ``mask_mod`` over ``B x H x Q_LEN x KV_LEN`` (``B``/``H`` None: broadcast over them)."""
    size = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    return BlockMask(create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device), mask_mod, size)


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: Callable | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options=None, *, return_aux: AuxRequest | None = None):
    """``softmax(score_mod(q kᵀ · scale) masked by block_mask) v`` over ``[B, H, L, E]`` inputs; with
    ``return_lse`` also the log-sum-exp of each query's kept scores (``return_aux=AuxRequest(...)``: an
    ``AuxOutput`` of it and of each query's largest score). A query with no kept key gives zeros."""
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4:
        raise ValueError(f"flex_attention: expected 4-D query, key and value, got {tuple(query.shape)}, "
                         f"{tuple(key.shape)}, {tuple(value.shape)}")
    Hq, Hkv = query.shape[1], key.shape[1]
    if Hq != Hkv:
        if not enable_gqa or Hq % Hkv:
            raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={Hq} and "
                             f"Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
        key, value = key.repeat_interleave(Hq // Hkv, dim=1), value.repeat_interleave(Hq // Hkv, dim=1)
    B, H, L, E = query.shape
    S = key.shape[2]
    scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(E) if scale is None else scale)
    if score_mod is not None:
        scores = score_mod(scores, *_indices(B, H, L, S, query.device))
    if block_mask is not None:
        scores = scores.masked_fill(~block_mask.mask, float("-inf"))
    lse = scores.logsumexp(dim=-1, keepdim=True)
    kept = lse > float("-inf")
    probs = (scores - lse.where(kept, creation.zeros((), dtype=lse.dtype, device=lse.device))).exp()
    out = probs @ value
    if return_aux is not None:
        return out, AuxOutput(lse.squeeze(-1) if return_aux.lse else None,
                              scores.amax(dim=-1) if return_aux.max_scores else None)
    if return_lse:
        return out, lse.squeeze(-1)
    return out

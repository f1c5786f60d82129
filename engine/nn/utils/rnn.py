"""``torch.nn.utils.rnn``: padding and packing variable-length sequences.

A ``PackedSequence`` holds the time steps of a batch of sequences, sorted by decreasing
length, one after another: ``data`` is ``(sum(lengths), *)`` and ``batch_sizes[t]`` says how
many sequences are still running at step ``t``. Everything is written over Tensor ops
(split, cat, index_select), so gradients flow through packing and unpacking.
"""
from __future__ import annotations

from ...core import creation
from ...ops.movement import cat, stack
from ...ops.sort import sort
from ...base.dtype import int64
from ...core.tensor import Tensor
from .._packed_sequence import PackedSequence, _lengths_list, invert_permutation

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _batch_sizes(sorted_lengths: list[int]) -> list[int]:
    return [sum(1 for n in sorted_lengths if n > t) for t in range(sorted_lengths[0] if sorted_lengths else 0)]


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``(T, B, *)`` (or ``(B, T, *)``) batch of sequences of the given lengths."""
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.ndim}D "
                               f"{lengths.device.type} tensor")
    lens = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lens) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
                           f"(batch_size={input.shape[batch_dim]})")
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                               "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                               "pack_sequence to sidestep this requirement if you do not need ONNX "
                               "exportability.")
        sorted_indices = None
    else:
        # torch.sort(lengths, descending=True): libstdc++'s unstable std::sort past 16 sequences, whose order
        # of equal lengths decides sorted_indices (and the order of the packed rows)
        ordered, order = sort(creation.tensor(lens, dtype=int64), descending=True)
        lens = ordered.tolist()
        sorted_indices = order.to(input.device)
        input = input.index_select(batch_dim, sorted_indices)
    if lens and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if lens and lens[0] > input.shape[1 - batch_dim]:
        raise RuntimeError(f"Expected sequence length to be smaller than or equal to the padded length "
                           f"{input.shape[1 - batch_dim]}, but got {lens[0]}")
    sizes = _batch_sizes(lens)
    steps = input.unbind(1 - batch_dim)
    data = cat([steps[t][:b] for t, b in enumerate(sizes)], 0)
    return PackedSequence(data, creation.tensor(sizes), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)`` in the original batch order."""
    sizes = _lengths_list(sequence.batch_sizes)
    max_len = len(sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {max_len}")
        max_len = total_length
    data = sequence.data
    batch = sizes[0] if sizes else 0
    trailing = tuple(data.shape[1:])
    steps = []
    for chunk, b in zip(data.split(sizes, 0), sizes):
        if b < batch:
            fill = creation.full((batch - b,) + trailing, padding_value, dtype=data.dtype, device=data.device)
            chunk = cat([chunk, fill], 0)
        steps.append(chunk)
    for _ in range(max_len - len(sizes)):
        steps.append(creation.full((batch,) + trailing, padding_value, dtype=data.dtype, device=data.device))
    padded = stack(steps, 1 if batch_first else 0)
    lengths = [sum(1 for b in sizes if b > i) for i in range(batch)]
    lengths = creation.tensor(lengths, dtype=sequence.batch_sizes.dtype)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.to(device=lengths.device)]
    return padded, lengths


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack ``(L_i, *)`` tensors into ``(T, B, *)`` (or ``(B, T, *)``), padded to the longest."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    max_len = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        n = s.shape[0]
        if n < max_len:
            fill = creation.full((max_len - n,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                                 device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(x.unbind(0), _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """``pack_padded_sequence(pad_sequence(sequences), lengths)``."""
    lengths = creation.tensor([s.shape[0] for s in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)

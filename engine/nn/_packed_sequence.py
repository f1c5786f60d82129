"""``PackedSequence``, the batch of variable-length sequences that ``nn.utils.rnn`` packs and the
recurrent layers read; it lives below both so ``nn.modules`` never imports ``nn.utils``."""
from __future__ import annotations

from collections import namedtuple

from ..core import creation
from ..core.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation"]


def _lengths_list(t) -> list[int]:
    return [int(v) for v in (t.tolist() if isinstance(t, Tensor) else t)]


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    inverse = [0] * permutation.numel()
    for i, p in enumerate(_lengths_list(permutation)):
        inverse[p] = i
    return creation.tensor(inverse, dtype=permutation.dtype, device=permutation.device)


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Data and ``batch_sizes`` of a packed batch, with the permutation that sorted it by length."""

    __slots__ = ()

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None, sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never "
                                 "be created manually. They should be instantiated by functions like "
                                 "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                                 "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        # PackedSequence((data, batch_sizes)) from a tuple, as torch allows
        data, batch_sizes = data[0], data[1]
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor, indices_too=None) -> "PackedSequence":
        s, u = self.sorted_indices, self.unsorted_indices
        if indices_too is not None:
            s = None if s is None else indices_too(s)
            u = None if u is None else indices_too(u)
        return type(self)(data, self.batch_sizes, s, u)

    def to(self, *args, **kwargs) -> "PackedSequence":
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return self._with_data(data, lambda t: t.to(device=data.device))

    def cpu(self, *args, **kwargs) -> "PackedSequence":
        return self.to("cpu")

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        data = self.data.cuda(*args, **kwargs)
        return self._with_data(data, lambda t: t.to(device=data.device))

    def double(self) -> "PackedSequence":
        return self._with_data(self.data.double())

    def float(self) -> "PackedSequence":
        return self._with_data(self.data.float())

    def half(self) -> "PackedSequence":
        return self._with_data(self.data.half())

    def detach(self) -> "PackedSequence":
        return self._with_data(self.data.detach())

    @property
    def is_cuda(self) -> bool:
        return self.data.device.type == "cuda"

    def is_pinned(self) -> bool:
        return False

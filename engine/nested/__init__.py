"""``torch.nested``: a batch of tensors of different lengths, as one tensor-like value.

``nested_tensor([a, b])`` / ``as_nested_tensor`` hold the components (``a`` of 3x4 and ``b`` of
5x4 make a nested tensor of 2 x (irregular) x 4); ``to_padded_tensor(nt, padding)`` pads them into
one dense tensor, differentiably; ``unbind()`` hands them back. Elementwise ops (with Python
numbers, or another nested tensor of the same component shapes), ``F.linear``, ``matmul`` with a
nested right side, activations, ``softmax``/``log_softmax`` over a regular dim, ``dropout``,
``layer_norm`` (with weight and bias) and ``sum`` over the last dim with ``keepdim=True`` run on each
component and return a nested tensor, with PyTorch's errors for the rest (see ``_tensor.py``).
``layout=tapelab.jagged`` is accepted where the components differ in their first dim only;
``nested_tensor_from_jagged``, ``narrow`` and ``masked_select`` make jagged ones from dense tensors.
"""
from __future__ import annotations

from ._tensor import (NestedTensor, as_nested_tensor, masked_select, narrow, nested_tensor, nested_tensor_from_jagged,
                      to_padded_tensor)

__all__ = ["nested_tensor", "as_nested_tensor", "to_padded_tensor", "nested_tensor_from_jagged", "narrow",
           "masked_select", "NestedTensor"]

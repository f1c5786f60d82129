"""What a compiled call prints, replayed: ``print`` in a forward (of a shape, a tensor, a message)
runs each call under ``torch.compile``, where print is a graph break and the Python around it runs.
A tapelab graph does not run the call's Python again, so the trace keeps the text the call wrote to
``sys.stdout`` and its segments (``segments.py``) write it again, all of it once every host read has
passed its check (a call that diverges is traced again eagerly and prints itself). A tensor printed
whole (``print(t)``, ``f"{t}"`` of a 0-d tensor) is shown from this call's value: its traced
rendering in the text after its read is a slot filled each call; any other rendering
(``f"{t:.4f}"``) is found in no slot, and that read keeps its value guard.
"""
from __future__ import annotations

import io
import sys
from threading import get_ident

from ..base.repr import tensor_repr
from ..core.tensor import Tensor

__all__ = ["Tee", "Texts", "renderings"]


class Tee(io.TextIOBase):
    """``sys.stdout`` during a trace: writes go through, the tracing thread's each kept with the number
    of host reads made before it (``reads``: the break watcher's list, read at each write)."""

    def __init__(self, reads: list):
        self.reads, self.out, self.writes, self.thread = reads, sys.stdout, [], get_ident()

    def write(self, text: str) -> int:
        if get_ident() == self.thread:
            self.writes.append((len(self.reads), text))
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def fileno(self) -> int:
        return self.out.fileno()

    def __enter__(self):
        sys.stdout = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout = self.out


def renderings(tensor) -> list:
    """How a print can have shown a plain ``tensor`` whole: its repr, and a 0-d tensor's ``f"{t}"``
    (made as ``Tensor.__repr__``/``__format__`` make them, without telling the modes of a read)."""
    if type(tensor) is not Tensor:
        return []
    out = [tensor_repr(tensor, "tensor(")]
    if tensor.ndim == 0:
        out.append(format(tensor._scalar(), ""))
    return out


class Texts:
    """A trace's printed text by host-read count, with slots for the tensors printed whole.
    ``parts[k]``: the text written after ``k`` reads (a pair around the slot, where it has one);
    ``slots[k]``: which rendering of read ``k - 1``'s tensor fills it, or None."""
    __slots__ = ("parts", "slots")

    def __init__(self, tee: Tee, shown: list):
        """``shown``: per host read, a printed tensor's ``renderings`` as traced, else None."""
        texts = ["".join(t for k, t in tee.writes if k == j) for j in range(len(shown) + 1)]
        self.parts, self.slots = [], []
        for k, text in enumerate(texts):
            slot = None
            if k > 0 and shown[k - 1]:
                for i, rendered in enumerate(shown[k - 1]):
                    at = text.find(rendered)
                    if at >= 0:
                        slot = i
                        text = (text[:at], text[at + len(rendered):])
                        break
            self.parts.append(text)
            self.slots.append(slot)

    def filled(self, k: int) -> bool:
        """Whether the text after read ``k - 1`` shows that read's tensor from each call's value."""
        return self.slots[k] is not None

    def write(self, reads: list) -> None:
        """The trace's text again, each slot showing its read's tensor of this call (``reads``)."""
        out = []
        for k, text in enumerate(self.parts):
            slot = self.slots[k]
            out.append(text if slot is None else text[0] + renderings(reads[k - 1])[slot] + text[1])
        sys.stdout.write("".join(out))

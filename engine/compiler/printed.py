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

__all__ = ["Tee", "Texts"]


class Tee(io.TextIOBase):
    """``sys.stdout`` during a trace: writes go through, each kept with the number of host reads made
    before it (``reads``: the break watcher's list, read at each write)."""

    def __init__(self, reads: list):
        self.reads, self.out, self.writes = reads, sys.stdout, []

    def write(self, text: str) -> int:
        self.writes.append((len(self.reads), text))
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def __enter__(self):
        sys.stdout = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout = self.out


def _renderings(tensor) -> list:
    """How a print can have shown ``tensor`` whole: its repr, and a 0-d tensor's ``f"{t}"``."""
    out = [repr(tensor)]
    if tensor.ndim == 0:
        out.append(format(tensor._scalar(), ""))
    return out


class Texts:
    """A trace's printed text by host-read count, with slots for the tensors printed whole.
    ``slots[k]``: for read ``k``, which rendering of its tensor the text after it holds, or None."""
    __slots__ = ("parts", "slots")

    def __init__(self, tee: Tee, reads: list, count: int):
        """``reads``: ``(what, tensor)`` per host read, as traced."""
        texts = ["".join(t for k, t in tee.writes if k == j) for j in range(count + 1)]
        self.parts, self.slots = [], []
        for k in range(count + 1):
            text, slot = texts[k], None
            if k > 0 and reads[k - 1][0] == "print":
                for i, shown in enumerate(_renderings(reads[k - 1][1])):
                    at = text.find(shown)
                    if at >= 0:
                        slot = i
                        text = (text[:at], text[at + len(shown):])
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
            out.append(text if slot is None else text[0] + _renderings(reads[k - 1])[slot] + text[1])
        sys.stdout.write("".join(out))

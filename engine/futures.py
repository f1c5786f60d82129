"""``torch.futures``: ``Future`` (tapelab runs forked work at once, so each is finished, as
``torch.jit.fork`` hands back), ``collect_all`` and ``wait_all``. Libraries annotate with
``torch.futures.Future`` (torch_geometric's feature stores)."""
from __future__ import annotations

from ._torch_extra import Future

__all__ = ["Future", "collect_all", "wait_all"]


def collect_all(futures: list[Future]) -> Future:
    """A Future of the list of ``futures``, finished once they all are (they are)."""
    out = Future()
    out.set_result(list(futures))
    return out


def wait_all(futures: list[Future]) -> list:
    """Each Future's value, in order; the first error raises."""
    return [f.wait() for f in futures]

"""``torch.distributed.algorithms.Join``: training on uneven inputs.

A rank that runs out of batches leaves the ``with Join([model]):`` loop early; its ``__exit__``
then *shadows* the collectives the other ranks still make each iteration (a ``JoinHook``'s
``main_hook``), so nobody waits for ever, until every rank has joined; then each hook's
``post_hook(is_last_joiner)`` runs (DDP's copies the last joiner's model to all ranks).

The ranks count themselves each iteration, as PyTorch's do: a rank still training all-reduces a
1 when its joinable's forward calls ``Join.notify_join_context``, a joined rank a 0, so the sum
is the number still training, and 0 ends the shadowing. Here ``Join`` sits in the communication
core (below ``nn``) because ``nn.parallel.DistributedDataParallel`` is a ``Joinable``;
``tapelab.distributed.algorithms`` re-exports it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..base.dtype import int64
from ..core import creation
from .collectives import all_reduce
from .group import resolve
from .reduce_op import ReduceOp
from .work import Work

__all__ = ["Join", "Joinable", "JoinHook"]


class JoinHook:
    """What a joined rank runs for one ``Joinable``: ``main_hook`` once per iteration the others
    still train (the same collectives as one of their iterations), ``post_hook`` at the end."""

    def main_hook(self) -> None:
        """Shadow one training iteration's collectives."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Once every rank has joined; ``is_last_joiner`` is True on the ranks that joined last."""


@dataclass
class _JoinConfig:
    enable: bool = False
    throw_on_early_termination: bool = False
    is_first_joinable: bool = False


class Joinable(ABC):
    """Something whose per-iteration collectives a joined rank can shadow (PyTorch's ABC)."""

    def __init__(self) -> None:
        self._join_config = _JoinConfig()

    @abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        """The hook a joined rank runs for this joinable (``kwargs``: those given to ``Join``)."""

    @property
    @abstractmethod
    def join_device(self):
        """The device of the counting all-reduce."""

    @property
    @abstractmethod
    def join_process_group(self):
        """The group the ranks count themselves in."""


class Join:
    """``with Join([ddp_model]):`` around the training loop lets ranks run different numbers of
    iterations (``throw_on_early_termination=True``: every rank raises once one has joined)."""

    def __init__(self, joinables: list, enable: bool = True, throw_on_early_termination: bool = False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        for j in joinables:
            if not isinstance(j, Joinable):
                raise TypeError(f"Join: {type(j).__name__} is not a Joinable (DistributedDataParallel is)")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable, self._throw_on_early_termination = enable, throw_on_early_termination
        first = self._joinables[0]
        self._group, self._device = first.join_process_group, first.join_device
        self._set_configs(enable)

    def _set_configs(self, enable: bool) -> None:
        for i, j in enumerate(self._joinables):
            j._join_config = _JoinConfig(enable, self._throw_on_early_termination, i == 0)

    def __enter__(self) -> "Join":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if not self._enable or exc_type is not None:
                return
            last = True
            while True:
                still = self._count(0)
                if still == 0:
                    break
                if self._throw_on_early_termination:
                    self._count(1)        # meets the check in the others' notify_join_context
                    raise RuntimeError(f"Rank {resolve(self._group).rank()} exhausted all inputs.")
                last = False
                for hook in self._join_hooks:
                    hook.main_hook()
            for hook in self._join_hooks:
                hook.post_hook(last)
        finally:
            self._set_configs(False)

    def _count(self, mine: int) -> int:
        t = creation.full((1,), mine, dtype=int64, device=self._device)
        all_reduce(t, op=ReduceOp.SUM, group=self._group)
        return int(t.item())

    @staticmethod
    def notify_join_context(joinable: Joinable) -> Work | None:
        """Called by a joinable at the start of each iteration (DDP: its forward): count this rank
        as still training (an async all-reduce of 1, for the first joinable of a ``Join``), and
        with ``throw_on_early_termination`` raise if a rank has joined. None outside a ``Join``."""
        config = getattr(joinable, "_join_config", None)
        if config is None or not config.enable or not config.is_first_joinable:
            return None
        device, group = joinable.join_device, joinable.join_process_group
        work = all_reduce(creation.ones((1,), dtype=int64, device=device), group=group, async_op=True)
        if config.throw_on_early_termination:
            flag = creation.zeros((1,), dtype=int64, device=device)
            all_reduce(flag, group=group)
            if flag.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work

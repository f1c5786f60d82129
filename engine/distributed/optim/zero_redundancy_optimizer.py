"""``ZeroRedundancyOptimizer`` (ZeRO stage 1): each rank keeps the optimizer state of its shard
of the parameters only, steps that shard, and broadcasts the updated parameters to the others.

Parameters are assigned greedily, largest first, to the rank with the fewest elements so far
(per parameter group), so each rank holds about 1/world_size of the state.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import _c10d
from ..._c10d.group import resolve
from ...core.creation import from_numpy
from ...core.tensor import Tensor
from ...optim.optimizer import Optimizer

__all__ = ["ZeroRedundancyOptimizer"]


def _to_host(obj):
    """A local state dict with tensors as numpy arrays (what travels between ranks)."""
    if isinstance(obj, Tensor):
        return ("__tensor__", obj.detach().cpu().numpy().copy())
    if isinstance(obj, dict):
        return {k: _to_host(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_host(v) for v in obj]
    return obj


def _from_host(obj):
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__tensor__" and isinstance(obj[1], np.ndarray):
        return from_numpy(obj[1])
    if isinstance(obj, dict):
        return {k: _from_host(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_host(v) for v in obj]
    return obj


class ZeroRedundancyOptimizer(Optimizer):
    """``ZeroRedundancyOptimizer(params, optimizer_class, **defaults)``: ``optimizer_class`` over
    this rank's shard (``.optim``); ``step()`` updates every parameter on every rank.

    ``state_dict()`` is the whole optimizer's, in ``optimizer_class``'s format, on the rank that
    ``consolidate_state_dict(to)`` gathered it to (every rank calls that first).

    Example::

        >>> opt = ZeroRedundancyOptimizer(model.parameters(), optim.Adam, lr=1e-3)
        >>> loss.backward(); opt.step()
    """

    def __init__(self, params, optimizer_class: type, process_group=None, parameters_as_bucket_view: bool = False,
                 overlap_with_ddp: bool = False, **defaults: Any) -> None:
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported by tapelab")
        super().__init__(params, defaults)
        self.process_group = resolve(process_group)
        self.rank, self.world_size = self.process_group.rank(), self.process_group.size()
        self.optimizer_class = optimizer_class
        self._owner: dict[int, int] = {}
        for group in self.param_groups:
            load = [0] * self.world_size
            for p in sorted(group["params"], key=lambda t: -t.numel()):
                r = load.index(min(load))
                self._owner[id(p)] = r
                load[r] += p.numel()
        mine = [{**{k: v for k, v in g.items() if k != "params"},
                 "params": [p for p in g["params"] if self._owner[id(p)] == self.rank]} for g in self.param_groups]
        self.optim = optimizer_class(mine, **defaults)
        self._all_state: dict | None = None

    def _sync_options(self) -> None:
        """Options changed on ``param_groups`` (an LR scheduler) reach the local optimizer."""
        for mine, group in zip(self.optim.param_groups, self.param_groups):
            for k, v in group.items():
                if k != "params":
                    mine[k] = v

    def step(self, closure=None):
        """Step this rank's shard, then broadcast each parameter from the rank that owns it."""
        self._sync_options()
        loss = self.optim.step(closure) if closure is not None else self.optim.step()
        ranks = self.process_group.ranks
        works = [_c10d.broadcast(p, src=ranks[self._owner[id(p)]], group=self.process_group, async_op=True)
                 for g in self.param_groups for p in g["params"]]
        for w in works:
            w.wait()
        return loss

    def _local_to_global(self) -> list[int]:
        index = {}
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
        return [index[id(p)] for g in self.optim.param_groups for p in g["params"]]

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's shard of the state on rank ``to`` (a collective: all ranks call it)."""
        local = self.optim.state_dict()
        to_global = self._local_to_global()
        shard = {to_global[k]: _to_host(v) for k, v in local["state"].items()}
        root = self.process_group.ranks[to] if to < len(self.process_group.ranks) else to
        got = [None] * self.world_size if self.rank == to else None
        _c10d.gather_object(shard, got, dst=root, group=self.process_group)
        if self.rank == to:
            merged: dict = {}
            for part in got:
                merged.update({k: _from_host(v) for k, v in part.items()})
            self._all_state = merged
        else:
            self._all_state = None

    def state_dict(self) -> dict[str, Any]:
        """The consolidated state dict (``optimizer_class``'s format), on the rank it was gathered to."""
        if self._all_state is None:
            raise RuntimeError(f"Optimizer state has not been consolidated on this rank. Please call "
                               f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you meant to "
                               "save the global state.")
        whole = Optimizer.state_dict(self)
        whole["state"] = dict(sorted(self._all_state.items()))
        return whole

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a whole state dict; each rank keeps its shard's state."""
        to_global = self._local_to_global()
        mine = self.optim.state_dict()
        mine["state"] = {k: state_dict["state"][g] for k, g in enumerate(to_global) if g in state_dict["state"]}
        for local_group, saved in zip(mine["param_groups"], state_dict["param_groups"]):
            local_group.update({k: v for k, v in saved.items() if k != "params"})
        self.optim.load_state_dict(mine)
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            group.update({k: v for k, v in saved.items() if k != "params"})

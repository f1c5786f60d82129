"""``torch.optim.swap_in_optimizer_params_and_state``: run optimizer calls against other parameter
tensors and another ``state_dict()``-shaped state, then put the live ones back."""
from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any

__all__ = ["swap_in_optimizer_params_and_state"]

_NAME = "swap_in_optimizer_params_and_state"


def _groups(optimizer, swapin_optim_state) -> tuple[dict, list]:
    """Check the swap-in state against the live optimizer (PyTorch's checks and messages)."""
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    state, groups = swapin_optim_state.get("state"), swapin_optim_state.get("param_groups")
    if not isinstance(state, dict):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be a dict.")
    if not isinstance(groups, list) or len(groups) != len(optimizer.param_groups):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['param_groups'] to match the live optimizer.")
    for idx, (live, group) in enumerate(zip(optimizer.param_groups, groups)):
        if not isinstance(group, dict):
            raise RuntimeError(f"{_NAME} requires each optimizer param group to be a dictionary.")
        ids = group.get("params")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param_groups[*]['params'] entries "
                               "keyed by packed parameter ids.")
        if len(ids) != len(live["params"]):
            raise RuntimeError(f"swapin_optim_state param group {idx} has a different number of params than the "
                               "live optimizer param group.")
        only_new, only_live = [k for k in group if k not in live], [k for k in live if k not in group]
        if only_new or only_live:
            raise RuntimeError(f"{_NAME} requires optimizer.state_dict()-style param group keys to exactly match "
                               f"the live optimizer group keys for group {idx}. Keys only in swap-in: {only_new}. "
                               f"Keys only in live: {only_live}.")
    seen = {i for g in groups for i in g["params"]}
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be keyed only by packed parameter ids "
                           f"from param_groups[*]['params']; got extra keys {extra!r}.")
    return state, groups


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters: dict, swapin_optim_state: dict[str, Any]):
    """Inside the block ``optimizer`` steps ``swapin_parameters`` (in the order of its own parameters)
    with the per-parameter state and group settings of ``swapin_optim_state``; in-place updates of
    that state's tensors are kept, anything else is dropped when the live optimizer is restored."""
    state, groups = _groups(optimizer, swapin_optim_state)
    params = list(swapin_parameters.values())
    original_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        swapped: defaultdict = defaultdict(dict)
        offset = 0
        for live, group in zip(optimizer.param_groups, groups):
            mine = params[offset:offset + len(group["params"])]
            if len(mine) != len(group["params"]):
                raise RuntimeError(f"{_NAME} requires the explicit parameter state to match optimizer.param_groups "
                                   "ordering.")
            offset += len(mine)
            live.update({k: v for k, v in group.items() if k != "params"})
            live["params"] = mine
            for p, pid in zip(mine, group["params"]):
                swapped[p] = dict(state.get(pid, {}))   # a shallow copy: tensors shared, keys local
        optimizer.state = swapped
        yield
    finally:
        for live, snapshot in zip(optimizer.param_groups, snapshots):
            live.clear()
            live.update(snapshot)
        optimizer.state = original_state

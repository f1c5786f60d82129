"""Selective activation checkpointing (``torch.utils.checkpoint.create_selective_checkpoint_contexts``).

``checkpoint(fn, ..., context_fn=partial(create_selective_checkpoint_contexts, policy))`` runs the
forward under one dispatcher mode and the recompute under another. In the forward the policy sees
each op call (as ``TorchDispatchMode`` handlers do: the op as a callable, its arguments, ``ctx``
with its output), and the outputs it says to save are kept; the recompute records those calls with
the kept values instead of running their forwards again (their nodes are the usual ones, so gradients
are those of the plain computation). Views are always recomputed: a kept array would not alias its
base. trl's SFTTrainer imports these names to save attention outputs.
"""
from __future__ import annotations

import enum
from collections import defaultdict
from typing import Callable

from ..core.dispatch import Mode, eager
from ..core.overrides import function_of
from ..ops._aten import OpOverload

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext", "create_selective_checkpoint_contexts"]


class CheckpointPolicy(enum.Enum):
    """What the recompute does with an op's output: keep it from the forward, or run the op again."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


_SAVING = (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE,
           CheckpointPolicy.MUST_CPU_OFFLOAD, CheckpointPolicy.PREFER_CPU_OFFLOAD)


class SelectiveCheckpointContext:
    """The ``ctx`` a policy receives: whether the op runs in the recompute, and its output."""

    def __init__(self, *, is_recompute: bool, op_output=None) -> None:
        self.is_recompute, self.op_output = is_recompute, op_output


class _Selective(Mode):
    """The forward (``policy_fn`` given) asks the policy about each op call and keeps the chosen
    outputs; the recompute (``policy_fn`` None) takes the n-th call of an op's kept arrays."""

    def __init__(self, policy_fn: Callable | None, storage: dict) -> None:
        self.policy_fn, self.storage, self.calls = policy_fn, storage, defaultdict(int)

    def __enter__(self):
        self.calls.clear()
        return super().__enter__()

    def dispatch(self, op, args: tuple, params: dict):
        index = self.calls[op]
        self.calls[op] += 1
        if self.policy_fn is None:
            entries = self.storage.get(op)
            if entries is None or index not in entries:
                raise RuntimeError(f"{op.name} invocation index {index} encountered during backward but not found "
                                   "in storage: the recomputed function ran other ops than its forward did")
            kept = entries.pop(index)
            if kept is None:
                return self.below().dispatch(op, args, params)
            return eager(op, args, params, fwd=lambda xp, *arrays, **kw: kept)
        out = self.below().dispatch(op, args, params)
        with self.aside():
            policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out), function_of(op),
                                    *args, **params)
        if isinstance(policy, bool):
            policy = CheckpointPolicy.MUST_SAVE if policy else CheckpointPolicy.PREFER_RECOMPUTE
        kept = None
        if policy in _SAVING and not op.is_view:
            kept = tuple(o._data for o in out) if isinstance(out, tuple) else out._data
        self.storage[op][index] = kept
        return out


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation: bool = False):
    """The forward and recompute contexts for ``checkpoint(..., context_fn=...)``: a policy
    ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`` (or bool), or a list of
    ``torch.ops.aten`` overloads to save."""
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not isinstance(op, OpOverload):
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} of type {type(op)}. "
                                 "For example, if you have `torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`.")
        names = {op._name for op in policy_fn_or_list}

        def policy_fn(ctx, op, *args, **kwargs):
            return CheckpointPolicy.MUST_SAVE if op.__name__ in names else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    storage: dict = defaultdict(dict)
    return _Selective(policy_fn, storage), _Selective(None, storage)

"""Autocast around a compiled call, as ``torch.compile`` takes it: the autocast state is part of the
guard key, and the trace records the casts, so the graph is the autocast region's ops in their dtypes.

Autocast is a dispatch ``Mode`` that casts an op's inputs and hands the cast ops and the op to the
modes below it. The tracer must be below it to record them, but autocast entered around the call is
already on the stack when the tracer is pushed; so during the trace autocast is turned off around the
tracer and entered again inside it with the same settings (and an empty weight-cast cache, so each
weight's cast is a recorded op, shared within the call as eager autocast shares it). The graph holds
every cast, so it replays with autocast aside: its ops would otherwise pass through autocast's
policies again (no-ops, at the cost of every op's slow dispatch).
"""
from __future__ import annotations

import contextlib

from ..amp.autocast_mode import _STATE, DEVICE_TYPES, autocast

__all__ = ["key", "traced", "aside"]


def key() -> tuple | None:
    """``((device type, dtype), ...)`` for the device types autocast is on for in this thread, None
    while it is off: what decides which casts a traced call records (the guard key's part)."""
    state = _STATE
    if state.mode is None:
        return None
    return tuple((d, state.dtype[d]) for d in DEVICE_TYPES if state.enabled[d])


@contextlib.contextmanager
def traced():
    """``with traced() as again:`` autocast is off inside (push the tracer there); ``with again():``
    (entered inside the tracer) turns this thread's autocast settings on again above it."""
    state = _STATE
    on = key()
    regions = [(d, dtype, state.cache_enabled) for d, dtype in on]

    @contextlib.contextmanager
    def again():
        try:
            with contextlib.ExitStack() as stack:
                for device, dtype, cache_enabled in regions:
                    stack.enter_context(autocast(device, dtype, cache_enabled=cache_enabled))
                yield
        finally:
            state.cache.clear()     # the call's casts: held by its graph, not kept outside it
    cache, state.cache = state.cache, {}
    try:
        with contextlib.ExitStack() as stack:
            for device, _ in on:
                stack.enter_context(autocast(device, enabled=False))
            yield again
    finally:
        state.cache = cache


def aside():
    """A graph traced with its casts replays with autocast off the stack (a no-op context while autocast is off)."""
    mode = _STATE.mode
    return contextlib.nullcontext() if mode is None else mode.aside()

"""``torch.random``: generators live in ``tapelab.core.random`` (re-exported here; engine code imports
the defining modules), and ``thread_safe_generator``, which asks the data loader."""
from __future__ import annotations

from .core.random import *  # noqa: F401,F403
from .core.random import __all__, rng  # noqa: F401


def thread_safe_generator():
    """The calling DataLoader thread worker's own Generator, or None (the default generator) in the
    main process and in process workers, as ``torch.thread_safe_generator``."""
    from .utils.data import get_worker_info   # utils.data sits above the engine's random module
    info = get_worker_info()
    if info is not None and info.worker_method == "thread" and info.rng is not None:
        return info.rng.torch_generator
    return None


__all__ = [*__all__, "thread_safe_generator"]

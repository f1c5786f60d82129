"""Widget classes built on first use, so a module's view-model functions work without anywidget."""
from __future__ import annotations

import functools
from typing import Callable


def lazy_widget(name: str, build: Callable[[], type]) -> Callable[[str], type]:
    """A module ``__getattr__`` that returns ``build()`` (built once) for ``name``."""
    build = functools.cache(build)

    def __getattr__(attr: str) -> type:
        if attr == name:
            return build()
        raise AttributeError(attr)
    return __getattr__

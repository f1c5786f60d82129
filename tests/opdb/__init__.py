"""Collects every OpInfo from the family modules of the op database."""
from __future__ import annotations

import importlib
import pkgutil

from .core import OpInfo

OP_DB: list[OpInfo] = []
for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in ("core", "ondevice")):
    OP_DB.extend(importlib.import_module(f"{__name__}.{_mod}").OPS)

_names = [op.name for op in OP_DB]
assert len(_names) == len(set(_names)), f"duplicate OpInfo names: {sorted(n for n in _names if _names.count(n) > 1)}"

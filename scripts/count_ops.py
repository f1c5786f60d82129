#!/usr/bin/env python
"""Count tapelab's ops as the README states them: primitives, public op functions, tested ops.

    python scripts/count_ops.py            # a table
    python scripts/count_ops.py --readme   # the sentence the README carries (tests/test_docs.py checks it)

Primitives are the ``Op`` declarations in the registry (what the dispatcher runs); public op
functions are the names the op families export (``tapelab.ops.MODULES``' ``__all__`` and the
top-level nn ops of ``tapelab._nn_toplevel``, each a primitive's public function or a composite
over primitives); tested ops are the OpInfo entries
of ``tests/opdb`` that ``tests/test_ops.py`` compares against PyTorch.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def counts() -> dict[str, int]:
    import tapelab  # noqa: F401  (imports every op family)
    from tapelab import _nn_toplevel
    from tapelab.ops import MODULES
    from tapelab.ops.registry import REGISTRY
    sys.path.insert(0, ROOT)
    from tests.opdb import OP_DB
    public = set(_nn_toplevel.__all__)
    for mod in MODULES:
        public.update(mod.__all__)
    return {"primitives": len(REGISTRY), "public": len(public), "tested": len(OP_DB)}


def readme_sentence(c: dict[str, int]) -> str:
    return (f"{c['primitives']} primitive ops declared once each in an op registry "
            f"({c['public']} public op functions; {c['tested']} ops tested against PyTorch)")


if __name__ == "__main__":
    c = counts()
    if "--readme" in sys.argv:
        print(readme_sentence(c))
    else:
        for k, v in c.items():
            print(f"{k:11s} {v}")

"""The notebook packages (``tapelab.widgets``, ``tapelab.kernel``) use only the engine's public
names: no ``from tapelab.x import _private``, no import of a private engine module, and no
attribute with a leading underscore read from anything but the object's own class (``self``).
IPython's display protocol (``_repr_mimebundle_``, ``_ipython_display_``) is public by design."""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOK = ("widgets", "kernel")
OWN = ("tapelab.widgets", "tapelab.kernel")


def _protocol(name: str) -> bool:
    """``_repr_html_``-style names (one underscore each side) and dunders are protocols."""
    return name.endswith("_") and not name.endswith("__") or name.startswith("__") and name.endswith("__")


def _violations(source: str, label: str) -> list[str]:
    tree = ast.parse(source, label)
    found = []
    where = lambda n: f"{label}:{n.lineno}"  # noqa: E731
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0 and n.module.startswith("tapelab") \
                and not n.module.startswith(OWN):
            if any(part.startswith("_") for part in n.module.split(".")):
                found.append(f"{where(n)}: imports the private module {n.module}")
            found += [f"{where(n)}: imports {n.module}.{a.name}" for a in n.names if a.name.startswith("_")]
        elif isinstance(n, ast.Import):
            found += [f"{where(n)}: imports {a.name}" for a in n.names if a.name.startswith("tapelab")
                      and not a.name.startswith(OWN) and any(p.startswith("_") for p in a.name.split("."))]
        elif isinstance(n, ast.Attribute) and n.attr.startswith("_") and not _protocol(n.attr):
            if not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")):
                found.append(f"{where(n)}: reads .{n.attr} of {ast.unparse(n.value)}")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr",
                                                                                         "setattr") \
                and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str) \
                and n.args[1].value.startswith("_") and not _protocol(n.args[1].value):
            found.append(f"{where(n)}: {n.func.id}(..., {n.args[1].value!r})")
    return found


def test_notebook_packages_use_only_public_engine_names():
    files = [p for d in NOTEBOOK for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 10
    bad = [v for p in files for v in _violations(p.read_text(), str(p.relative_to(ROOT)))]
    assert not bad, "private engine names used by the notebook packages:\n" + "\n".join(bad)


@pytest.mark.parametrize("src, n", [
    ("from tapelab.fx.node import _qualified_name", 1),
    ("from tapelab._backend import device", 1),
    ("import tapelab._meta", 1),
    ("t._data.copy()", 1),
    ("getattr(node, '_variable', None)", 1),
    ("self._pending; x._repr_mimebundle_(); super().__init__()", 0),
    ("from tapelab.widgets.viewmodel import _shape", 0),
])
def test_the_scan_sees_each_kind_of_access(src, n):
    assert len(_violations(src, "probe.py")) == n

"""The docs in the repository stay true: code snippets are in the source as written, and the
README's op counts are what scripts/count_ops.py measures."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["CONTRIBUTING.md", "docs/architecture.md"]


def _read(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def _engine_source() -> str:
    parts = []
    for folder, _, files in os.walk(os.path.join(ROOT, "engine")):
        parts += [_read(os.path.relpath(os.path.join(folder, f), ROOT)) for f in sorted(files) if f.endswith(".py")]
    return "\n".join(parts)


def _snippets(rel: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", _read(rel), flags=re.S)


@pytest.mark.parametrize("rel", DOCS)
def test_every_python_snippet_is_in_the_source_as_written(rel):
    snippets = _snippets(rel)
    assert snippets, f"{rel} has no python snippet"
    source = _engine_source()
    for snippet in snippets:
        assert snippet.strip() in source, f"{rel}: this snippet is not in engine/ as written:\n{snippet}"


def test_the_snippets_declare_registered_ops():
    import tapelab  # noqa: F401
    from tapelab.ops.registry import REGISTRY
    names = set()
    for rel in DOCS:
        for snippet in _snippets(rel):
            names.update(re.findall(r'(?:Op|_unary)\("(\w+)"', snippet))
    assert names, "no op declaration among the snippets"
    missing = sorted(n for n in names if n not in REGISTRY)
    assert not missing, f"ops declared in the docs but not registered: {missing}"


def test_readme_states_the_measured_op_counts():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "count_ops.py"), "--readme"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    readme = " ".join(_read("README.md").split())
    head, rest = out.rstrip(")").split(" (")
    for part in (head, *rest.split("; ")):
        assert part in readme, f"README should say {out!r} (missing: {part!r})"


def test_contributing_points_inside_the_repository():
    text = _read("CONTRIBUTING.md")
    assert "../shared" not in text
    assert "docs/architecture.md" in text

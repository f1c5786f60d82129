"""The import structure of the package: import-linter's contracts and the import cycles.

Both are read from the code's imports by grimp (import-linter's graph builder), function-level
imports included: an import hidden in a function still ties two modules.

grimp finds a package by its folder. The editable install maps folders to the package with a
meta-path finder (engine/ -> tapelab, widgets/ -> tapelab.widgets, kernel/ -> tapelab.kernel)
that grimp cannot see through, so these checks lay the package out as the wheel does (links to
the repository's files, after ``[tool.hatch.build.targets.wheel.sources]``) and run in a fresh
interpreter that finds ``tapelab`` there. ``python tests/test_structure.py`` runs lint-imports
the same way, by hand.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")   # the venv's, beside its python



# ---------------------------------------------------------------- the package as the wheel lays it out
def lay_out_package(dest: Path) -> Path:
    """Links under ``dest`` that form the installed package's tree; returns the folder to put on sys.path."""
    sources = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"][
        "wheel"]["sources"]
    for folder, target in sorted(sources.items(), key=lambda kv: kv[1].count("/")):   # tapelab before tapelab/x
        where = dest / target
        if "/" not in target:     # the package itself: a real folder, so subpackages can be linked into it
            where.mkdir(parents=True)
            for entry in (ROOT / folder).iterdir():
                if entry.name != "__pycache__":
                    (where / entry.name).symlink_to(entry)
        else:
            where.symlink_to(ROOT / folder)
    return dest


# run first in every child: forget the editable install's finder, find tapelab in the laid-out tree
_BOOT = """
import sys
from importlib.machinery import PathFinder
sys.meta_path[:] = [f for f in sys.meta_path if f is PathFinder or not f.find_spec("tapelab", None)]
sys.path.insert(0, {tree!r})
"""

_LINT = """
import runpy
sys.argv = ["lint-imports", "--no-cache"]
runpy.run_path({script!r}, run_name="__main__")
"""

_GRAPH = """
import json, grimp
graph = grimp.build_graph("tapelab", cache_dir=None)
print(json.dumps({
    "children": sorted(graph.find_children("tapelab")),
    "imports": {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)},
}))
"""


def run_in_tree(tree: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BOOT.format(tree=str(tree)) + code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: import-linter is in the test extra (pip install -e '.[test]')")
    return run_in_tree(tree, _LINT.format(script=str(LINT_IMPORTS)))


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return lay_out_package(tmp_path_factory.mktemp("installed"))


@pytest.fixture(scope="module")
def graph(tree) -> dict:
    done = run_in_tree(tree, _GRAPH)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cycles(imports: dict[str, list[str]], within: set[str] | None = None) -> list[list[str]]:
    """The import cycles (strongly connected components of two modules or more), each sorted;
    ``within`` limits the graph to those modules."""
    nodes = sorted(imports if within is None else within & set(imports))
    keep = set(nodes)
    succ = {m: [n for n in imports[m] if n in keep] for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in nodes:           # Tarjan's algorithm, iterative
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            for nxt in todo:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found, key=len, reverse=True)


# ---------------------------------------------------------------- import-linter
def test_import_contracts_are_kept(tree):
    done = lint_imports(tree)
    assert done.returncode == 0, f"lint-imports (contracts in pyproject.toml):\n{done.stdout}\n{done.stderr}"
    assert "0 broken" in done.stdout, done.stdout


def test_engine_contract_names_every_engine_module(graph):
    """The engine contract lists tapelab's children one by one (import-linter has no 'all but'):
    a new top-level module or package of the engine joins the list, a removed one leaves it."""
    contract = next(c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"] if c["name"] == "the engine imports no notebook package")
    engine = set(graph["children"]) - {"tapelab.widgets", "tapelab.kernel"}
    listed = set(contract["source_modules"])
    assert listed == engine, (f"the engine contract's source_modules in pyproject.toml: add {sorted(engine - listed)}, "
                              f"remove {sorted(listed - engine)}")


def test_contracts_catch_a_violation(tmp_path):
    """The contracts are live: an engine module that imports a widget and matplotlib breaks them."""
    tree = lay_out_package(tmp_path)
    tape = tree / "tapelab" / "tape.py"
    source = tape.read_text()
    tape.unlink()
    tape.write_text(source + "\nfrom .widgets import views  # noqa\nimport matplotlib  # noqa\n")
    done = lint_imports(tree)
    assert done.returncode != 0, done.stdout
    assert "tapelab.tape -> tapelab.widgets.views" in done.stdout and "matplotlib" in done.stdout, done.stdout


# ---------------------------------------------------------------- import cycles
def test_no_import_cycles(graph):
    """No import cycle anywhere in the project's Python code: the engine (tapelab), the widgets and
    the kernel, function-level imports included (the layers and acyclic_siblings contracts say the
    same of packages; this says it of modules)."""
    assert {"tapelab.widgets", "tapelab.kernel", "tapelab.core.dispatch"} <= set(graph["imports"])
    found = cycles(graph["imports"])
    assert not found, f"import cycles: {found}"


def test_no_engine_module_imports_the_package_face(graph):
    """tapelab/__init__ imports everything: an engine module that imports it to reach a name
    defined lower down would close a cycle through it. Import the defining module instead."""
    outside = ("tapelab.widgets", "tapelab.kernel", "tapelab.warm")   # above the face: their imports of it close no cycle
    importers = {m for m, v in graph["imports"].items() if "tapelab" in v and not m.startswith(outside)}
    assert not importers, sorted(importers)


def test_cycles_finds_what_it_should():
    imports = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"], "f": ["a"]}
    assert cycles(imports) == [["a", "b", "c"], ["d", "e"]]
    assert cycles(imports, within={"a", "b", "d"}) == []


if __name__ == "__main__":   # lint-imports on the laid-out package, by hand
    with tempfile.TemporaryDirectory() as tmp:
        done = lint_imports(lay_out_package(Path(tmp)))
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)

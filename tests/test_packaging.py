"""Packaging: the wheel maps engine/, widgets/, kernel/ onto tapelab.*, and the editable install
points back into the source folders (hatch_build.py's meta-path finder).

The wheel is built once per session with pip (no build isolation when the build requirements are
already installed, so the test needs no network; otherwise pip fetches them as a user's build would).
"""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import sysconfig
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"tapelab": "engine", "tapelab.widgets": "widgets", "tapelab.kernel": "kernel"}


def _build_requirements_installed() -> bool:
    from packaging.requirements import Requirement

    reqs = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for spec in reqs:
        req = Requirement(spec)
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return False
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            return False
    return True


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(out)]
    try:
        if _build_requirements_installed():
            cmd.append("--no-build-isolation")
    except ImportError:                      # no `packaging` module: let pip isolate the build
        pass
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(out.glob("tapelab-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_the_three_packages(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in PACKAGES:
        assert pkg.replace(".", "/") + "/__init__.py" in names, sorted(names)
    # every engine source file is shipped under tapelab/, and the source folder names are not
    engine_files = {p.relative_to(ROOT / "engine").as_posix() for p in (ROOT / "engine").rglob("*.py")
                    if "__pycache__" not in p.parts}
    assert {"tapelab/" + f for f in engine_files} <= names
    tops = {n.split("/")[0] for n in names}
    stem = wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
    assert tops <= {"tapelab", stem + ".dist-info", stem + ".data"}, tops
    assert not any(n.endswith((".pyc", "_tapelab_editable_finder.py")) for n in names)
    # the prebuilt JupyterLab extension and the widgets' bundle of the same renderer
    lab = stem + ".data/data/share/jupyter/labextensions/tapelab/"
    assert lab + "package.json" in names and lab + "install.json" in names, sorted(names)
    assert any(n.startswith(lab + "static/") for n in names)
    assert "tapelab/widgets/static/tapelab.js" in names


def test_wheel_metadata_declares_runtime_deps_and_extras(wheel):
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = z.read(meta_name).decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    plain = [r for r in requires if "extra ==" not in r]
    for dep in ("numpy", "safetensors", "tqdm"):
        assert any(r.startswith(dep) for r in plain), plain
    assert any(r.startswith("torch==2.13.0") and "extra == 'test'" in r for r in requires), requires
    assert any(r.startswith("cupy-cuda12x") and "extra == 'gpu'" in r for r in requires), requires


def test_wheel_imports_on_its_own(wheel, tmp_path):
    """Install the wheel into a folder and import all three packages from there, with the editable
    finder switched off (``-S`` skips .pth files; site-packages still provides numpy)."""
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), sysconfig.get_paths()["purelib"],
                                                        sysconfig.get_paths()["platlib"]]))
    code = ("import sys, tapelab, tapelab.widgets, tapelab.kernel\n"
            "assert not any(type(f).__name__ == '_Finder' or getattr(f, '__name__', '') == '_Finder'"
            " for f in sys.meta_path)\n"
            "for m in (tapelab, tapelab.widgets, tapelab.kernel): print(m.__file__)\n"
            "x = tapelab.ones(3, requires_grad=True); (x * x).sum().backward(); print(x.grad.tolist())\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    files = proc.stdout.splitlines()[:3]
    assert all(pathlib.Path(f).is_relative_to(target) for f in files), files
    assert proc.stdout.splitlines()[3] == "[2.0, 2.0, 2.0]"


def _editable_checkout() -> pathlib.Path | None:
    """The source folder of an editable install of tapelab (pip's direct_url.json), else None."""
    import json

    try:
        text = importlib.metadata.distribution("tapelab").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    info = json.loads(text or "{}")
    if not info.get("dir_info", {}).get("editable"):
        return None
    return pathlib.Path(info["url"].removeprefix("file://")).resolve()


@pytest.mark.parametrize("name,folder", sorted(PACKAGES.items()))
def test_editable_install_points_into_the_source_tree(name, folder):
    import importlib

    if _editable_checkout() != ROOT:
        pytest.skip("tapelab is not installed editable from this checkout")
    mod = importlib.import_module(name)
    assert pathlib.Path(mod.__file__).resolve() == ROOT / folder / "__init__.py"
    assert pathlib.Path(mod.__path__[0]).resolve() == ROOT / folder

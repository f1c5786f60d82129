"""The renderer's JavaScript unit tests (labextension/test/*.test.ts), bundled by esbuild and run
with node's test runner. Skipped when node or the labextension's node_modules are absent."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

EXT = pathlib.Path(__file__).resolve().parent.parent / "labextension"
ESBUILD = EXT / "node_modules" / ".bin" / "esbuild"


def test_renderer_unit_tests_pass_in_node(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not ESBUILD.exists():
        pytest.skip("labextension/node_modules is missing (pip install -e . runs npm install)")
    out = tmp_path / "renderer.test.mjs"
    build = subprocess.run([str(ESBUILD), "test/renderer.test.ts", "--bundle", "--platform=node", "--format=esm",
                            "--target=node20", f"--outfile={out}"], cwd=EXT, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([node, "--test", "--test-reporter=spec", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "fail 0" in run.stdout or "✔" in run.stdout, run.stdout

"""The renderer's JavaScript unit tests (labextension/test/*.test.ts), bundled by esbuild and run
with node's test runner. Skipped when node or the labextension's node_modules are absent."""
from __future__ import annotations

import pathlib
import re
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
    tests = sorted(str(p.relative_to(EXT)) for p in (EXT / "test").glob("*.test.ts"))
    build = subprocess.run([str(ESBUILD), *tests, "--bundle", "--platform=node", "--format=esm", "--target=node20",
                            f"--outdir={tmp_path}", "--out-extension:.js=.mjs"], cwd=EXT, capture_output=True, text=True,
                           timeout=120)
    assert build.returncode == 0, build.stderr
    outs = sorted(str(p) for p in tmp_path.glob("*.test.mjs"))
    assert len(outs) == len(tests) >= 2, outs
    run = subprocess.run([node, "--test", "--test-reporter=spec", *outs], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    counts = dict(re.findall(r"^ℹ (tests|pass|fail) (\d+)$", run.stdout, re.M))   # the spec reporter's summary
    assert int(counts["tests"]) == int(counts["pass"]) >= 10 and counts["fail"] == "0", run.stdout

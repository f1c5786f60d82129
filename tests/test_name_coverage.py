"""scripts/name_coverage.py runs, docs/api-coverage.md carries today's numbers, and every deliberate
omission it lists is true of PyTorch."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "name_coverage.py"
DOC = ROOT / "docs" / "api-coverage.md"


@pytest.fixture(scope="module")
def nc():
    spec = importlib.util.spec_from_file_location("name_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def measured(nc):
    return nc.measure()


def test_script_prints_the_table_and_missing_names(nc, capsys, tmp_path):
    assert nc.main(["--missing", "--markdown", str(tmp_path / "cov.md")]) == 0
    out = capsys.readouterr().out
    for ns in nc.NAMESPACES:
        assert re.search(rf"^{re.escape(ns)}\s+\d+ / \d+", out, re.M), ns
        assert re.search(rf"^{re.escape(ns)}: \d+ missing$", out, re.M), ns
    assert nc.parse_table((tmp_path / "cov.md").read_text())


def test_counts_add_up(measured):
    _, rows = measured
    for r in rows:
        assert r["present_counted"] + len(r["missing"]) == r["counted"] == r["names"] - r["omitted"]
        assert 0 <= r["present"] <= r["names"]


def test_committed_doc_matches_today(nc, tmp_path):
    """Measured in a fresh interpreter, as the script runs: what a process has imported changes dir(torch)
    (torch.compile loads torch.onnx, for one)."""
    fresh = tmp_path / "api-coverage.md"
    subprocess.run([sys.executable, str(SCRIPT), "--markdown", str(fresh)], check=True, capture_output=True,
                   timeout=300)
    new, text = fresh.read_text(), DOC.read_text()
    version = re.search(r"Measured against PyTorch (\S+)\.", new).group(1)
    doc_version = re.search(r"Measured against PyTorch (\S+)\.", text).group(1)
    if doc_version != version:
        pytest.skip(f"docs/api-coverage.md was measured against PyTorch {doc_version}, this is {version}")
    assert nc.parse_table(text) == nc.parse_table(new), (
        "docs/api-coverage.md is out of date; regenerate it with `python scripts/name_coverage.py --markdown`")
    assert text == new, "docs/api-coverage.md differs from what the script writes"


def test_omissions_are_true_of_pytorch(nc):
    """Every omitted name is in PyTorch's namespace; the 'removed' ones raise there when called."""
    _, theirs, _ = nc._load()
    for reason, table in nc.OMISSIONS.items():
        for ns, names in table.items():
            for name in names:
                assert hasattr(theirs[ns], name), f"{ns}.{name} is no longer in PyTorch: drop the omission"
    t = torch.eye(2)
    calls = {"torch": lambda n: getattr(torch, n)(t, t) if n in ("lstsq", "solve") else getattr(torch, n)(t),
             "torch.Tensor": lambda n: getattr(t, n)(t) if n in ("lstsq", "solve", "reinforce") else getattr(t, n)()}
    for ns, names in nc.OMISSIONS[nc.REMOVED].items():
        for name in names:
            with pytest.raises(RuntimeError, match="removed"):
                calls[ns](name)

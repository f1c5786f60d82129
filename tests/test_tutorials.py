"""The tutorials run as notebooks (nbclient, a real kernel, no frontend)."""
from __future__ import annotations

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("anywidget")

TUTORIALS = sorted((pathlib.Path(__file__).resolve().parent.parent / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    if not path.name.startswith("01_"):
        return
    mimes = {k for o in outputs for k in o.get("data", {})}
    assert "application/vnd.tapelab.graph+json" in mimes        # grad_fn and %%tape graphs
    assert "application/vnd.jupyter.widget-view+json" in mimes  # TapeView, TensorView
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "loss" in text and "module groups" in text and "digraph tape" in text

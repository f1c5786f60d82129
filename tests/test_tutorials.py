"""The tutorials run as notebooks (nbclient, a real kernel, no frontend), and their saved form
reads without one: ``nbconvert --to html`` shows a picture (SVG) for every graph output, and
the raw JSON each output carries stays within the size budget, and so does the saved widget state."""
from __future__ import annotations

import json
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")
pytest.importorskip("anywidget")

from tapelab.widgets.fallback import BUDGET  # noqa: E402

TUTORIALS = sorted((pathlib.Path(__file__).resolve().parent.parent / "tutorials").glob("*.ipynb"))
GRAPH_MIMES = ("application/vnd.tapelab.graph+json", "application/vnd.tapelab.capture+json",
               "application/vnd.tapelab.profile+json")
NOTEBOOK_LIMIT = 1024 * 1024         # a tutorial saved with its outputs
ESM_LIMIT = 128 * 1024               # the anywidget bundle every saved widget repeats (no Graphviz in it)
WIDGET_STATE_LIMIT = 640 * 1024      # a tutorial's saved widget state, bundles and traits together
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _saved_form(nb, path) -> None:
    """Every graph output has an SVG in its HTML; nbconvert's page shows all of them; each
    output's JSON is within BUDGET and the notebook stays small."""
    graph_outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if any(m in o.get("data", {}) for m in GRAPH_MIMES)]
    for o in graph_outputs:
        assert "<svg" in o["data"].get("text/html", ""), f"{path.name}: a graph output without an SVG"
        for m in GRAPH_MIMES:
            if m in o["data"]:
                assert len(json.dumps(o["data"][m], separators=(",", ":"))) <= BUDGET
    # with its widget state (as nbclient and JupyterLab's "save widget state" keep it), where each
    # widget repeats its ``_esm``, the whole anywidget bundle
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert all(len(s.get("state", {}).get("_esm", "")) <= ESM_LIMIT for s in states.values())
    assert len(json.dumps(nb.metadata.get("widgets", {}))) <= WIDGET_STATE_LIMIT
    # as JupyterLab saves it (no widget state by default): nbconvert shows each output's text/html.
    saved = nbformat.from_dict({**nb, "metadata": {k: v for k, v in nb.metadata.items() if k != "widgets"}})
    assert len(nbformat.writes(saved).encode()) < NOTEBOOK_LIMIT
    page, _ = nbconvert.HTMLExporter().from_notebook_node(saved)
    assert page.count("tapelab-svg") >= len(graph_outputs)      # (nbconvert rewrites the quotes)


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    _saved_form(nb, path)
    if path.name.startswith("05_"):     # the debugger's saved output follows its steps
        shown = [o["data"]["text/html"] for o in outputs if "tapelab debugger" in o.get("data", {}).get("text/html", "")]
        assert shown and "paused before the first node" not in shown[0] and "LogBackward0" in shown[0]
    if not path.name.startswith("01_"):
        return
    mimes = {k for o in outputs for k in o.get("data", {})}
    assert "application/vnd.tapelab.graph+json" in mimes        # grad_fn and %%tape graphs
    assert "application/vnd.jupyter.widget-view+json" in mimes  # TapeView, TensorView
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "loss" in text and "module groups" in text and "digraph tape" in text

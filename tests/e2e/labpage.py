"""What every browser test does with the shared JupyterLab server: put its notebook there, open it
alone in a fresh workspace and run it, and leave nothing behind for the next test."""
from __future__ import annotations

import json
import urllib.request

KERNEL_IDLE = """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(w && w.sessionContext && w.sessionContext.isReady && w.sessionContext.session
            && w.sessionContext.session.kernel && w.sessionContext.session.kernel.status === 'idle'); }"""


def put_notebook(lab_url: str, name: str, cells: list[str]) -> None:
    """Write a notebook of code ``cells`` to the server (contents API)."""
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                    for c in cells],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    body = json.dumps({"type": "notebook", "format": "json", "content": nb}).encode()
    req = urllib.request.Request(f"{lab_url}/api/contents/{name}", data=body, method="PUT",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


def open_and_run_all(page, lab_url: str, name: str) -> None:
    """Open ``name`` as the current tab of a fresh workspace, wait for its kernel, run all cells
    (fire and forget: awaiting run-all can hang)."""
    page.goto(f"{lab_url}/lab/tree/{name}?reset")
    page.wait_for_function("() => !!window.jupyterapp && !!window.tapelabPanel", timeout=90_000)
    page.evaluate(f"() => jupyterapp.commands.execute('docmanager:open', {{ path: '{name}' }})")
    page.wait_for_function(f"() => {{ const w = jupyterapp.shell.currentWidget; "
                           f"return !!(w && w.context && w.context.path === '{name}'); }}", timeout=90_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.evaluate("() => { jupyterapp.commands.execute('notebook:run-all-cells'); }")


def clean_up(page, lab_url: str, name: str) -> None:
    """Close the page, shut this notebook's kernel down and forget the workspace (else the next
    test's JupyterLab reopens this notebook too)."""
    page.close()
    try:
        for s in json.load(urllib.request.urlopen(f"{lab_url}/api/sessions", timeout=10)):
            if s.get("path", "").endswith(name):
                urllib.request.urlopen(urllib.request.Request(f"{lab_url}/api/sessions/{s['id']}", method="DELETE"),
                                       timeout=30).read()
        urllib.request.urlopen(urllib.request.Request(f"{lab_url}/lab/api/workspaces/default", method="DELETE"),
                               timeout=10).read()
    except Exception:
        pass

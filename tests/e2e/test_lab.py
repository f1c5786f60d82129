"""End to end in a real JupyterLab: the tutorial's %%tape cell trains an MLP; the TapeView draws
its nodes while the side panel streams; module groups expand; hover cards show; a 5,000-node tape
shows (its layout time is printed, not asserted). Every wait is for a condition, never a fixed sleep.
Screenshots go to test-output/e2e/."""
from __future__ import annotations

from labpage import KERNEL_IDLE

NB = "01_tensors_autograd_tape.ipynb"

def open_notebook(page, lab_url):
    page.goto(f"{lab_url}/lab/tree/{NB}")
    page.wait_for_function("() => !!window.jupyterapp && !!window.tapelabPanel", timeout=90_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)


def test_tape_widget_and_panel_while_training(page, lab_url, out_dir):
    open_notebook(page, lab_url)
    assert page.evaluate("() => jupyterapp.commands.hasCommand('tapelab:toggle-recording')")
    # log every panel update with the kernel's status at that moment
    page.evaluate("""() => { window.__log = []; const p = window.tapelabPanel;
      p.onUpdate(() => window.__log.push({ status: jupyterapp.shell.currentWidget.sessionContext.session.kernel.status,
                                          nodes: p.store.nodes.length, updates: p.updates })); }""")
    # fire and forget: awaiting run-all in page.evaluate hangs
    page.evaluate("() => { jupyterapp.commands.execute('notebook:run-all-cells'); }")
    widget = page.locator(".jp-OutputArea-output .tapelab-graph.tapelab-fixed").first
    widget.wait_for(timeout=90_000)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                           ".some(o => o.textContent.includes('tape streaming off'))", timeout=120_000)
    page.wait_for_function(KERNEL_IDLE)
    page.wait_for_function("() => !!document.querySelector('.tapelab-graph.tapelab-fixed .tapelab-frame')")

    # the TapeView of the %%tape cell: forward ops by module, backward nodes, module frames
    page.locator(".tapelab-graph.tapelab-fixed").filter(has=page.locator(".tapelab-frame")).first.evaluate(
        "el => el.setAttribute('data-test', 'mlp-tape')")
    tape = page.locator("[data-test=mlp-tape]")
    n = int(tape.get_attribute("data-nodes"))
    assert n >= 24, n     # one step of the MLP: forward ops, backward nodes, SGD's fused add_s
    # the cell's 3 identical training steps fold into one: counted in the header, drawn once
    assert (tape.get_attribute("data-steps"), tape.get_attribute("data-folded")) == ("3", "2")
    assert "3 steps, 2 repeats folded" in tape.locator(".tapelab-meta").first.text_content()
    # (op names from the units' data: after fit a tall graph is an overview that draws no node text)
    ops = tape.locator(".tapelab-unit[data-kind=forward]").evaluate_all("els => els.map(e => e.dataset.op)")
    assert "linear" in ops and "relu" in ops, ops[:20]
    assert tape.locator(".tapelab-unit[data-kind=backward]").count() > 5
    assert tape.locator(".tapelab-frame[data-group='g:0']").count() == 1
    tape.scroll_into_view_if_needed()
    tape.screenshot(path=str(out_dir / "tapeview.png"))

    # the side panel got deltas while the kernel was busy running the cells
    log = page.evaluate("() => window.__log")
    busy = [e for e in log if e["status"] == "busy" and e["nodes"] > 0]
    assert len({e["nodes"] for e in busy}) >= 2, log[-10:]
    assert page.evaluate("() => window.tapelabPanel.store.nodes.length") > 0
    page.evaluate("() => jupyterapp.shell.activateById('tapelab-panel')")
    page.locator(".tapelab-status").first.wait_for(state="visible")
    page.screenshot(path=str(out_dir / "lab-panel.png"))
    assert "nodes" in page.locator(".tapelab-status").first.text_content()

    # TensorView: statistics, histogram and (2-D) heatmap
    tv = page.locator(".jp-OutputArea-output .tapelab-tensor").filter(has=page.locator("canvas.tapelab-heatmap")).first
    tv.wait_for()
    assert tv.locator(".tapelab-hist rect").count() > 5 and "model.0.weight" in tv.text_content()
    tv.scroll_into_view_if_needed()
    tv.screenshot(path=str(out_dir / "tensorview.png"))

    # the grad_fn output was drawn by the mime renderer
    assert page.locator(".tapelab-mime .tapelab-graph .tapelab-unit").count() >= 3

    # collapse everything, then expand one module group
    tape.locator(".tapelab-collapse-all").click()
    page.wait_for_function("el => el.querySelectorAll('.tapelab-unit[data-kind=group]').length >= 3", arg=tape.element_handle())
    assert tape.locator(".tapelab-frame").count() == 0
    tape.locator(".tapelab-unit[data-id='g:0']").click()
    tape.locator(".tapelab-frame[data-group='g:0']").wait_for()
    tape.screenshot(path=str(out_dir / "tapeview-expanded.png"))

    # hover a forward node: the card shows shape, dtype, device, time and statistics
    node = tape.locator(".tapelab-unit[data-kind=forward]").first
    node.hover()
    card = tape.locator(".tapelab-card")
    card.wait_for(state="visible")
    text = card.text_content()
    for word in ("shape", "dtype", "float32", "device", "cpu", "time", "value", "mean"):
        assert word in text, text
    tape.screenshot(path=str(out_dir / "tapeview-hover.png"))

    # search by module name
    tape.locator(".tapelab-search").fill("relu")
    tape.locator(".tapelab-unit.tapelab-match").first.wait_for()     # (times out if nothing matches)
    assert not page.errors, page.errors


def big_graph():
    import tapelab as torch
    from tapelab import nn
    from tapelab.widgets import graph_from_tape

    blocks = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(650)]
    model = nn.Sequential(*blocks)
    with torch.tape() as t:
        model(torch.randn(2, 4)).sum().backward()
    return graph_from_tape(t)


def test_a_5000_node_tape_shows(page, lab_url, out_dir):
    g = big_graph()
    assert len(g["nodes"]) >= 5000, len(g["nodes"])
    open_notebook(page, lab_url)
    page.evaluate("() => jupyterapp.shell.activateById('tapelab-panel')")
    ms = page.evaluate("""async (g) => {
      const p = window.tapelabPanel; const t0 = performance.now();
      p.store.setGraph(g);
      const want = String(p.store.version);
      while (p.view.node.dataset.version !== want) { await new Promise(r => setTimeout(r, 5)); }
      return { ms: performance.now() - t0, units: Number(p.view.node.dataset.units),
               laidOut: Number(p.view.node.dataset.laidOut), worker: p.view.layouts.inWorker }; }""", g)
    page.screenshot(path=str(out_dir / "panel-5000.png"))
    print(f"\n5,000-node tape ({len(g['nodes'])} nodes): shown in {ms['ms']:.0f} ms, "
          f"{ms['units']} units laid out, worker={ms['worker']}")
    assert ms["worker"], "layout did not run in a web worker"

    # user strings (module names, ops) are text, never markup
    evil = '<img src=x onerror="window.__pwned=1">'
    page.evaluate("""(evil) => { const n = (id, kind, group) => ({ id, kind, label: evil, op: evil, index: 0, seq: 0,
        forward_seq: null, group, module: evil, shape: [2], input_shapes: [], dtype: evil, device: 'cpu',
        requires_grad: true, start_ns: 0, time_ns: 5, value: null, grad: null, grad_ops: 0 });
      window.tapelabPanel.store.setGraph({ nodes: [n('a', 'forward', 'g:' + evil)], edges: [],
        groups: [{ id: 'g:' + evil, label: evil, path: evil, parent: null, signature: '', size: 1 }] }); }""", evil)
    page.wait_for_function("() => { const p = window.tapelabPanel; "
                           "return p.view.node.dataset.version === String(p.store.version); }")
    panel = page.locator("#tapelab-panel")
    panel.locator(".tapelab-unit[data-kind=forward]").hover()
    assert evil in panel.text_content()
    assert page.locator("#tapelab-panel img").count() == 0
    assert not page.evaluate("() => window.__pwned")
    assert ms["laidOut"] == ms["units"] < 100

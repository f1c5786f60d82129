"""End to end in a real JupyterLab: a captured training step shows its CaptureView (steps drawn
as a graph, pool size and replay vs eager timing visible, buffer table) and the capture reaches
the side panel's capture dock, whose replay count follows later replays. Screenshots go to
test-output/e2e/."""
from __future__ import annotations

from labpage import KERNEL_IDLE, clean_up, open_and_run_all, put_notebook

NB = "capture_e2e.ipynb"

CELLS = [
    "%load_ext tapelab.kernel",
    "import tapelab as torch\nfrom tapelab import nn\nfrom tapelab.graphs import Graph, graph\n"
    "from tapelab.widgets import CaptureView\ntorch.manual_seed(0)\n"
    "model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
    "sx, sy = torch.randn(32, 16), torch.randint(0, 4, (32,))\n"
    "def step():\n    loss = nn.functional.cross_entropy(model(sx), sy)\n    loss.backward()\n"
    "    opt.step()\n    return loss\n"
    "def eager():\n    opt.zero_grad(set_to_none=True)\n    return step()\n"
    "for _ in range(3):\n    eager()\n"
    "g = Graph()\nopt.zero_grad(set_to_none=True)\nwith graph(g):\n    loss = step()",
    "CaptureView(g, eager=eager, repeat=12, title='captured MLP step', names={'x': sx, 'y': sy, 'loss': loss},\n"
    "            module=model, optimizer=opt)",
    "for _ in range(5):\n    g.replay()\nprint('replayed', g.replays, 'steps', len(g.summary()['nodes']))",
]

def test_capture_view_in_lab(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _check(page, lab_url, out_dir):
    open_and_run_all(page, lab_url, NB)

    view = page.locator(".jp-OutputArea-output .tapelab-capture").first
    view.wait_for(timeout=60_000)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                           ".some(o => o.textContent.includes('replayed'))", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE)

    # the captured steps are drawn: op nodes with step numbers, static inputs and state as leaves
    view.locator(".tapelab-unit[data-step]").first.wait_for()
    steps = int(view.get_attribute("data-steps"))
    printed = page.locator(".jp-OutputArea-output", has_text="replayed").first.text_content()
    assert f"steps {steps}" in printed and steps >= 20, (steps, printed)   # all the program's steps (SGD: one fused add_ a parameter)
    drawn = view.locator(".tapelab-unit[data-step]").count()
    assert drawn >= 20, drawn
    assert view.locator(".tapelab-unit[data-role=input]").count() >= 1           # x or y, in view
    assert view.locator(".tapelab-unit[data-role=state]").count() >= 2           # parameters, momentum
    assert view.locator(".tapelab-unit.tapelab-cap-inplace").count() >= 2        # the optimizer's updates
    # the buffer table: every static buffer with its role
    assert view.locator(".tapelab-cap-buffers tr[data-role=input]").count() == 2            # x and y
    assert view.locator(".tapelab-cap-buffers tr[data-role=state]").count() == 8            # 4 params + momentum
    assert view.locator(".tapelab-cap-buffers tr[data-role=output]").count() >= 1           # the loss
    # pool size and replay timing next to the eager step
    assert int(view.get_attribute("data-pool-bytes")) > 0
    pool = view.locator(".tapelab-cap-stat[data-key=pool]").text_content()
    assert "KB" in pool or " B" in pool, pool
    assert float(view.get_attribute("data-replay-us")) > 0 and float(view.get_attribute("data-eager-us")) > 0
    timing = view.locator(".tapelab-cap-timing").text_content()
    assert "eager step" in timing and "replay" in timing and "faster" in timing, timing
    assert view.locator(".tapelab-cap-bar").count() == 2
    assert int(view.locator(".tapelab-cap-stat[data-key=replays] b").text_content()) >= 12
    # the buffer table names what was given
    names = view.locator(".tapelab-cap-buffers tbody tr").all_text_contents()
    assert any(n.startswith("x") for n in names) and any("momentum_buffer" in n for n in names), names
    # hover a step: its card shows the op and its shape
    view.locator(".tapelab-unit[data-step='0']").hover()
    card = view.locator(".tapelab-card")
    card.wait_for()
    assert "linear" in card.text_content()
    view.scroll_into_view_if_needed()
    view.screenshot(path=str(out_dir / "captureview.png"))

    # the capture reached the side panel; its replay count followed the later replays
    page.evaluate("() => jupyterapp.shell.activateById('tapelab-panel')")
    dock = page.locator("#tapelab-panel .tapelab-panel-capture")
    dock.locator(".tapelab-capture").wait_for()
    assert int(dock.get_attribute("data-captures")) >= 1
    page.wait_for_function("el => Number(el.dataset.replays) >= 17", arg=dock.element_handle(), timeout=20_000)
    assert dock.locator(".tapelab-unit[data-step]").count() > 0
    page.screenshot(path=str(out_dir / "lab-capture.png"))
    assert not page.errors, page.errors

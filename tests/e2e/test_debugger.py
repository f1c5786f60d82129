"""End to end: the backward Debugger in JupyterLab. ``%debug_backward loss`` on a model whose
softmax underflows; Step three times with the button (the highlight moves, the gradient panel
changes), a breakpoint by clicking a node, F10 and the palette command on the focused debugger,
then Run to NaN stops at the log. Screenshots go to test-output/e2e/."""
from __future__ import annotations

from labpage import KERNEL_IDLE, clean_up, put_notebook

# the current widget must be this test's notebook: a workspace restored from an earlier test
# can make another notebook current for a moment
NB = "debugger_e2e.ipynb"

CELLS = [
    "%load_ext tapelab.kernel",
    """import tapelab as tl
from tapelab import nn, debug
import tapelab.nn.functional as F

class Head(nn.Module):
    def forward(self, z):
        return F.softmax(z, -1).log()     # planted: the softmax underflows to 0, log(0) = -inf

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2).double()
        self.head = Head()

    def forward(self, x):
        return self.head(self.fc(x))

m = Net()
with tl.no_grad():
    m.fc.weight.copy_(tl.tensor([[1000.0, 0.0], [0.0, 0.0]], dtype=tl.float64))
    m.fc.bias.zero_()
x = tl.tensor([[1.0, 0.5], [2.0, -1.0]], dtype=tl.float64)
with debug.record():
    loss = -m(x)[:, 0].sum()""",
    "%debug_backward loss",
]


def _wait_seq(page, dbg, after: int) -> int:
    page.wait_for_function("([el, n]) => Number(el.dataset.seq || 0) > n", arg=[dbg.element_handle(), after],
                           timeout=20_000)
    return int(dbg.get_attribute("data-seq"))


def _until(page, dbg, predicate: str) -> None:
    """Wait (10 s at most) until a JS predicate over the debugger's element `el` holds."""
    page.wait_for_function(f"el => {predicate}", arg=dbg.element_handle(), timeout=10_000)


def test_debugger_steps_breakpoints_and_runs_to_a_planted_nan(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _check(page, lab_url, out_dir):
    page.goto(f"{lab_url}/lab/tree/{NB}")
    page.wait_for_function("() => !!window.jupyterapp && !!window.jupyterapp.shell.currentWidget", timeout=90_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.evaluate("() => { jupyterapp.commands.execute('notebook:run-all-cells'); }")
    dbg = page.locator(".jp-OutputArea-output .tapelab-debugger").first
    dbg.wait_for(timeout=90_000)
    page.wait_for_function("el => el.querySelectorAll('.tapelab-unit').length >= 8 && Number(el.dataset.seq) >= 1",
                           arg=dbg.element_handle(), timeout=30_000)
    page.wait_for_function(KERNEL_IDLE, timeout=30_000)   # the cell is over: the kernel idles between clicks
    seq = int(dbg.get_attribute("data-seq"))
    assert dbg.get_attribute("data-current") == "" and dbg.locator(".tapelab-dbg-current").count() == 0

    # Step x3: the highlight moves node to node, visited nodes stay marked, the panel changes
    currents, panels = [], []
    for k in range(3):
        dbg.locator("button.tapelab-dbg-step").click()
        seq = _wait_seq(page, dbg, seq)
        cur = dbg.get_attribute("data-current")
        assert cur and cur not in currents
        currents.append(cur)
        # a step may pan the view (a repaint of the units in view): wait for the marks to settle
        _until(page, dbg, "el.querySelectorAll('.tapelab-unit.tapelab-dbg-current').length === 1 && "
                          "el.querySelector('.tapelab-unit.tapelab-dbg-current').dataset.id === el.dataset.current && "
                          f"el.querySelectorAll('.tapelab-unit.tapelab-dbg-visited').length === {k + 1}")
        hl = dbg.locator(".tapelab-unit.tapelab-dbg-current")
        assert hl.count() == 1 and hl.get_attribute("data-id") == cur
        assert dbg.locator(".tapelab-unit.tapelab-dbg-visited").count() == k + 1
        side = dbg.locator(".tapelab-dbg-side")
        assert side.get_attribute("data-node") == cur
        assert side.locator(".tapelab-dbg-in .tapelab-tensor").count() >= 1
        panels.append(side.text_content())
    assert len(set(panels)) == 3
    assert dbg.get_attribute("data-current-name") != ""
    dbg.scroll_into_view_if_needed()
    dbg.screenshot(path=str(out_dir / "debugger-step3.png"))

    # a breakpoint by clicking a node not visited yet (one of those ready to run: in view)
    target = dbg.locator(".tapelab-unit.tapelab-dbg-next").first
    tid = target.get_attribute("data-id")
    target.click()
    seq = _wait_seq(page, dbg, seq)
    assert dbg.get_attribute("data-breakpoints") == tid
    # the click may also start a re-render of the view (selection); the dot is drawn on the
    # unit that is in the DOM once it settles
    dot = dbg.locator(f".tapelab-unit[data-id='{tid}'] .tapelab-dbg-dot")
    dot.wait_for(timeout=10_000)
    assert dot.count() == 1
    target.click()   # and off again
    seq = _wait_seq(page, dbg, seq)
    assert dbg.get_attribute("data-breakpoints") == ""

    # Run to NaN: stops at the log of the underflowed softmax, names its module and line
    dbg.locator("button.tapelab-dbg-run-to-nan").click()
    seq = _wait_seq(page, dbg, seq)
    assert dbg.get_attribute("data-current-name") == "LogBackward0"
    assert dbg.get_attribute("data-stop-reason") == "nan"
    # the stop may pan the view to the node (a repaint of the units in view): wait for its marks
    _until(page, dbg, "el.querySelectorAll('.tapelab-unit.tapelab-dbg-current.tapelab-dbg-nan').length === 1")
    assert dbg.locator(".tapelab-unit.tapelab-dbg-current.tapelab-dbg-nan").count() == 1
    explain = dbg.locator(".tapelab-dbg-explain").text_content()
    assert "LogBackward0 produced nan" in explain and "module 'head'" in explain
    assert "softmax(z, -1).log()" in dbg.locator(".tapelab-dbg-where").text_content()
    assert dbg.locator(".tapelab-dbg-out canvas.tapelab-heatmap").count() >= 1
    dbg.screenshot(path=str(out_dir / "debugger-nan.png"))

    # the shortcut on the focused debugger, then the palette command
    dbg.focus()
    page.keyboard.press("F10")
    seq = _wait_seq(page, dbg, seq)
    assert dbg.get_attribute("data-steps") == "5"
    page.evaluate("() => { jupyterapp.commands.execute('tapelab:debugger-step'); }")
    seq = _wait_seq(page, dbg, seq)
    assert dbg.get_attribute("data-steps") == "6"
    assert not page.errors, page.errors

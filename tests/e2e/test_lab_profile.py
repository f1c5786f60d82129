"""End to end in a real JupyterLab: ``%%profile`` on a training step shows the op table, the
timeline and the memory chart (sort, select, zoom work; the side panel gets the profile too),
and a Monitor draws its curves while the loop runs. Screenshots go to test-output/e2e/."""
from __future__ import annotations

from labpage import KERNEL_IDLE, clean_up, open_and_run_all, put_notebook

NB = "profile_e2e.ipynb"

CELLS = [
    "%load_ext tapelab.kernel",
    "import tapelab as torch\nfrom tapelab import nn\nfrom tapelab.profiler import record_function\n"
    "torch.manual_seed(0)\nmodel = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nx, y = torch.randn(256, 64), torch.randint(0, 10, (256,))\n"
    "def step():\n    opt.zero_grad()\n    with record_function('forward'):\n"
    "        loss = nn.functional.cross_entropy(model(x), y)\n    with record_function('backward'):\n"
    "        loss.backward()\n    opt.step()\n    return loss",
    "%%profile training step\nwith record_function('train_step'):\n    step()",
    "from tapelab.widgets import Monitor\nimport time\nmon = Monitor(title='training', rate=20)\ndisplay(mon)\n"
    "for i in range(30):\n    loss = step()\n    mon.log(i, loss=loss.item(), acc=1 - loss.item() / 3)\n    time.sleep(0.01)\n"
    "print('trained')",
    # a profile with device (CUDA event) times, as one measured on a GPU has: the CUDA columns appear
    "from tapelab.widgets import ProfileView\nfrom tapelab.profiler import profile\nwith profile() as p:\n"
    "    step()\nd = p.to_dict()\nfor r in d['averages']:\n"
    "    r['self_device_time_total_us'] = r['device_time_total_us'] = 5.0\nfor e in d['events']:\n"
    "    e['device'], e['device_us'] = 'cuda:0', 5.0\ndisplay(ProfileView(d, title='gpu'))",
]

def test_profile_magic_and_monitor_in_lab(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _check(page, lab_url, out_dir):
    open_and_run_all(page, lab_url, NB)

    prof = page.locator(".jp-OutputArea-output .tapelab-profile").first
    prof.wait_for(timeout=60_000)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                           ".some(o => o.textContent.includes('trained'))", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE)

    # the op table (from the averages), sorted by self time; click a header to sort by calls
    rows = prof.locator(".tapelab-prof-table tbody tr")
    names = [r.get_attribute("data-name") for r in rows.all()]
    assert "aten::linear" in names and "aten::relu" in names, names
    prof.locator(".tapelab-prof-table th[data-key=count]").click()
    counts = [int(c) for c in prof.locator(".tapelab-prof-table tbody tr td:nth-child(3)").all_text_contents()]
    assert counts == sorted(counts, reverse=True)

    # the timeline: forward, backward, ranges and module tracks; nested ranges one row apart
    lanes = prof.locator(".tapelab-prof-timeline .tapelab-lane-label").all_text_contents()
    assert lanes == ["ranges", "forward", "backward", "modules"], lanes
    assert prof.locator(".tapelab-ev[data-kind=op]").count() > 10
    assert prof.locator(".tapelab-ev[data-kind=backward]").count() > 3
    assert prof.locator(".tapelab-ev[data-kind=range]").count() == 5   # and Optimizer.step#SGD.step, .zero_grad
    assert prof.locator(".tapelab-ev[data-kind=module]").count() >= 3

    # the memory chart with its biggest allocations
    assert int(prof.locator(".tapelab-prof-memory").get_attribute("data-points")) > 3
    assert prof.locator(".tapelab-mem-alloc").count() >= 1
    assert prof.locator(".tapelab-prof-alloc li").count() >= 1
    assert prof.locator(".tapelab-mod-row").count() >= 4     # root expanded: 3 modules below it
    prof.scroll_into_view_if_needed()
    prof.screenshot(path=str(out_dir / "profileview.png"))

    # click an op in the table: it is selected on the timeline, its card shows
    prof.locator('.tapelab-prof-table tbody tr[data-name="aten::linear"]').click()
    prof.locator(".tapelab-ev.tapelab-sel").wait_for()
    assert "linear" in prof.locator(".tapelab-prof-card").text_content()
    # zoom in with the wheel, then reset
    tl = prof.locator(".tapelab-prof-timeline")
    t1 = float(tl.get_attribute("data-t1"))
    tl.hover()
    page.mouse.wheel(0, -400)
    page.wait_for_function("([el, t1]) => Number(el.dataset.t1) - Number(el.dataset.t0) < t1 * 0.8",
                           arg=[tl.element_handle(), t1])
    prof.screenshot(path=str(out_dir / "profileview-zoomed.png"))
    prof.locator(".tapelab-zoom-reset").click()

    # device times: CUDA columns only in the profile that has them, and in the selected op's card
    heads = prof.locator(".tapelab-prof-table th").all_text_contents()
    assert not any("CUDA" in h for h in heads), heads
    gpu = page.locator(".jp-OutputArea-output .tapelab-profile").nth(1)
    gpu.wait_for(timeout=30_000)
    heads = [h.rstrip(" ▾▴") for h in gpu.locator(".tapelab-prof-table th").all_text_contents()]
    assert "self CUDA" in heads and "CUDA total" in heads, heads
    gpu.locator('.tapelab-prof-table tbody tr[data-name="aten::addmm"]').click()   # linear's device time is its addmm's
    assert "cuda:0" in gpu.locator(".tapelab-prof-card").text_content()

    # the Monitor drew the loss, acc and step-time curves
    mon = page.locator(".jp-OutputArea-output .tapelab-monitor").first
    page.wait_for_function("el => Number(el.dataset.points) === 30", arg=mon.element_handle(), timeout=20_000)
    assert mon.locator(".tapelab-monitor-chart .tapelab-curve").count() == 3
    assert "ms/step" in mon.text_content()
    mon.scroll_into_view_if_needed()
    mon.screenshot(path=str(out_dir / "monitor.png"))

    # the profile reached the side panel as well
    page.evaluate("() => jupyterapp.shell.activateById('tapelab-panel')")
    dock = page.locator("#tapelab-panel .tapelab-panel-profile")
    dock.locator(".tapelab-profile").wait_for()
    assert int(dock.get_attribute("data-profiles")) >= 1
    page.screenshot(path=str(out_dir / "lab-profile.png"))
    assert not page.errors, page.errors

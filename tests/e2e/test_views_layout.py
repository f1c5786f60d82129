"""End to end (issue 15, the frontend): on a 2-layer Transformer classifier with AdamW, the FX
graph is laid out by Graphviz (dot, WebAssembly in a web worker) with no two boxes overlapping
and fewer edge crossings than the hand layout of the same graph (both counted here); selecting
an op in one view highlights it in the others and one card gathers what each knows; the side
panel opens at >= 450 px with collapsible sections and says it is connected, as ``%tape status``
does; a minimap appears once zoomed in. A second test draws synthetic 5,000- and 100,000-node
graphs and prints the timings (no timing assertions). Screenshots and numbers go to
test-output/e2e/."""
from __future__ import annotations

import json

from labpage import KERNEL_IDLE, clean_up, open_and_run_all, put_notebook

NB = "views_layout_e2e.ipynb"

CELLS = [
    """%load_ext tapelab.kernel
import tapelab as torch
from tapelab import nn, fx
import tapelab.nn.functional as F
from tapelab.widgets import GraphView
torch.manual_seed(0)

class Classifier(nn.Module):
    def __init__(self, vocab=50, d=32, heads=2, layers=2, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, batch_first=True)
                                     for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))

model = Classifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 50, (4, 10))
labels = torch.randint(0, 3, (4,))
gm = fx.trace_from_tape(model, tokens)   # every op the model ran, attention included
GraphView(gm)""",
    """%%tape train step
opt.zero_grad()
loss = F.cross_entropy(model(tokens), labels)
loss.backward()
opt.step()""",
    """%%profile train step
opt.zero_grad()
loss = F.cross_entropy(model(tokens), labels)
loss.backward()
opt.step()""",
    """from tapelab.graphs import Graph, graph
from tapelab.widgets import CaptureView
g = Graph()
with graph(g):
    out = model(tokens)
CaptureView(g, title='captured forward', module=model)""",
    "%tape status",
]

OVERLAPS = """el => { const c = el.querySelector('.tapelab-canvas').getBoundingClientRect();
  const r = [...el.querySelectorAll('.tapelab-unit rect.tapelab-box')].map(b => b.getBoundingClientRect())
    .filter(b => b.right > c.left && b.left < c.right && b.bottom > c.top && b.top < c.bottom);
  let n = 0;
  for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) {
    const a = r[i], b = r[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) n++;
  }
  return { boxes: r.length, overlaps: n }; }"""


def _settled(graph, page):
    """Wait until the picture shows the store's latest state (Graphviz's layout can take seconds)."""
    page.wait_for_function("""el => el.dataset.pending === 'false' && el.tapelabView
        && Number(el.dataset.version) === el.tapelabView.store.version""", arg=graph.element_handle(), timeout=60_000)


def test_graphviz_layout_selection_and_panel(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _check(page, lab_url, out_dir):
    numbers = {}
    open_and_run_all(page, lab_url, NB)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                           ".some(o => o.textContent.includes('tape streaming'))", timeout=240_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)

    # --- the FX graph: Graphviz's layout, no overlapping boxes, fewer crossings than the hand layout
    fx = page.locator(".jp-OutputArea-output .tapelab-fx").first
    graph = fx.locator(".tapelab-graph")
    page.wait_for_function("el => el.dataset.layout === 'dot'", arg=graph.element_handle(), timeout=60_000)
    stats = graph.evaluate("el => el.tapelabView.layoutStats()")
    numbers["fx layout"] = stats
    assert stats["dot"] is not None, stats
    assert stats["dot"]["overlaps"] == 0, stats
    assert stats["dot"]["crossings"] < stats["hand"]["crossings"], stats
    graph.locator(".tapelab-fit").click()
    page.wait_for_timeout(300)
    drawn = graph.evaluate(OVERLAPS)
    numbers["fx drawn boxes"] = drawn
    assert drawn["boxes"] >= 20 and drawn["overlaps"] == 0, drawn
    frames = graph.locator(".tapelab-frame").count()
    assert frames >= 2, frames   # module clusters
    fx.scroll_into_view_if_needed()
    fx.screenshot(path=str(out_dir / "views-fx-graphviz.png"))

    # --- the tape of the training step: Graphviz once the cell finished
    tape = page.locator(".jp-OutputArea-output .tapelab-graph.tapelab-fixed"
                        ":not(.tapelab-fx *):not(.tapelab-capture *)").first
    page.wait_for_function("el => Number(el.dataset.nodes) > 300 && el.dataset.layout === 'dot'",
                           arg=tape.element_handle(), timeout=60_000)
    numbers["tape layout ms"] = float(tape.get_attribute("data-layout-ms"))
    tape.scroll_into_view_if_needed()
    tape.screenshot(path=str(out_dir / "views-tape.png"))
    # the minimap shows once the picture does not fit (zoomed in), and hides again at "fit"
    box = tape.locator(".tapelab-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.keyboard.down("Control")
    for _ in range(4):
        page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_function("el => el.querySelector('.tapelab-minimap').dataset.shown === 'true'",
                           arg=tape.element_handle(), timeout=10_000)
    tape.screenshot(path=str(out_dir / "views-tape-minimap.png"))
    tape.locator(".tapelab-fit").click()
    page.wait_for_function("el => el.querySelector('.tapelab-minimap').dataset.shown === 'false'",
                           arg=tape.element_handle(), timeout=10_000)

    # --- one node, every view: click the op of layers.0.linear1 in the tape; the FX graph and the
    # profile highlight the same op, and the tape's card gathers what they know of it
    tid = tape.evaluate("""el => { const v = el.tapelabView;
        const n = v.store.nodes.find(n => n.module === 'layers.0.linear1' && n.kind === 'forward');
        v.store.reveal(n.id); return n.id; }""")
    _settled(tape, page)
    tape.evaluate("(el, id) => el.tapelabView.focusOn(id)", tid)
    tape.scroll_into_view_if_needed()
    tape.locator(f".tapelab-unit[data-id='{tid}']").click()
    page.wait_for_function("el => !!el.dataset.selected", arg=graph.element_handle(), timeout=15_000)
    sel = graph.get_attribute("data-selected")
    fx_module = graph.evaluate("(el, id) => el.tapelabView.store.node(id).module", sel)
    numbers["selected in fx"] = {"id": sel, "module": fx_module}
    assert fx_module == "layers.0.linear1", fx_module
    prof = page.locator(".jp-OutputArea-output .tapelab-profile").first
    page.wait_for_function("el => !!el.dataset.selected", arg=prof.element_handle(), timeout=15_000)
    card = tape.locator(".tapelab-card")
    text = card.text_content()
    numbers["tape card"] = text
    for want in ("module", "source", "in the other views", "fx node", "profile time"):
        assert want in text, (want, text)
    inside = tape.evaluate("""el => { const c = el.querySelector('.tapelab-canvas').getBoundingClientRect();
        const r = el.querySelector('.tapelab-card').getBoundingClientRect();
        return r.left >= c.left - 1 && r.top >= c.top - 1 && r.right <= c.right + 1 && r.bottom <= c.bottom + 1; }""")
    assert inside, "the card stays inside the canvas"
    tape.screenshot(path=str(out_dir / "views-tape-selected-card.png"))
    fx.scroll_into_view_if_needed()
    fx.screenshot(path=str(out_dir / "views-fx-selected.png"))
    prof.scroll_into_view_if_needed()
    prof.screenshot(path=str(out_dir / "views-profile-selected.png"))
    capture = page.locator(".jp-OutputArea-output .tapelab-capture").first
    capture.scroll_into_view_if_needed()
    capture.screenshot(path=str(out_dir / "views-capture.png"))

    # --- the side panel: >= 450 px, fitted when shown, collapsible sections, connected
    page.evaluate("() => jupyterapp.commands.execute('tapelab:show-panel')")
    panel = page.locator("#tapelab-panel")
    panel.wait_for(state="visible")
    page.wait_for_timeout(600)
    width = panel.bounding_box()["width"]
    header = panel.locator(".tapelab-panel-header").text_content()
    numbers["panel"] = {"width": width, "header": header}
    assert width >= 450, width
    assert "connected" in header and "not loaded" not in header, header
    head = panel.locator(".tapelab-panel-section[data-section=tape] > .tapelab-panel-section-head")
    head.click()
    assert "tapelab-collapsed" in panel.locator(".tapelab-panel-section[data-section=tape]").get_attribute("class")
    head.click()
    pg = panel.locator(".tapelab-panel-section[data-section=tape] .tapelab-graph")
    page.wait_for_function("el => Number(el.dataset.nodes) > 0", arg=pg.element_handle(), timeout=30_000)
    panel.screenshot(path=str(out_dir / "views-panel.png"))
    status = page.locator(".jp-OutputArea-output").filter(has_text="tape streaming").first.text_content()
    numbers["%tape status"] = status.strip()
    assert "panel connected" in status, status
    (out_dir / "views-numbers.json").write_text(json.dumps(numbers, indent=1))
    print("\n" + json.dumps(numbers, indent=1))
    assert not page.errors, page.errors


# a synthetic graph: `blocks` top groups of `subs` sub-blocks of `per` chained ops each
SYNTH = """([blocks, subs, per]) => {
  const nodes = [], edges = [], groups = [];
  let i = 0;
  for (let b = 0; b < blocks; b++) {
    groups.push({ id: `g:b${b}`, label: `b${b}`, path: `b${b}`, parent: null, signature: `B${b}`, size: subs * per });
    for (let s = 0; s < subs; s++) {
      const gid = `g:b${b}.${s}`;
      groups.push({ id: gid, label: String(s), path: `b${b}.${s}`, parent: `g:b${b}`, signature: `S${b}.${s}`, size: per });
      for (let k = 0; k < per; k++, i++) {
        nodes.push({ id: 'n' + i, kind: 'forward', label: 'op', op: k % 3 ? 'matmul' : 'relu', index: i, seq: i,
          forward_seq: null, group: gid, module: `b${b}.${s}`, shape: [8, 8], input_shapes: [[8, 8]], dtype: 'float32',
          device: 'cpu', requires_grad: true, start_ns: 0, time_ns: 1000, value: null, grad: null, grad_ops: 0 });
        if (i > 0) edges.push({ source: 'n' + (i - 1), target: 'n' + i, kind: 'data', shape: [8, 8] });
      }
    }
  }
  return { nodes, edges, groups, meta: { title: 'synthetic', forward: i, backward: 0, total: i, truncated: false } };
}"""

# mount a GraphView of the synthetic graph in a fixed box; resolve with the time to the first picture
MOUNT = """async ([spec, expand, worker]) => {
  const R = window.tapelabRenderer;
  const g = (""" + SYNTH + """)(spec);
  const host = document.createElement('div');
  host.id = 'tapelab-scale';
  host.style.cssText = 'position:fixed;left:20px;top:60px;width:1100px;height:760px;z-index:10000;background:#fff';
  document.querySelectorAll('#tapelab-scale').forEach(e => e.remove());
  document.body.appendChild(host);
  const t0 = performance.now();
  const store = new R.GraphStore();
  store.setGraph(g);
  if (expand) { store.fold = false; store.expandAll(true); }
  const view = new R.GraphView(store, { fixedHeight: true, useWorker: worker });
  view.node.style.height = '100%';
  host.appendChild(view.node);
  await new Promise(res => { const tick = () => view.drawn >= store.version ? res() : requestAnimationFrame(tick); tick(); });
  const ms = performance.now() - t0;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return { nodes: g.nodes.length, units: Number(view.node.dataset.units), drawn: Number(view.node.dataset.drawn),
           layout: view.node.dataset.layout, renderer: view.node.dataset.renderer, firstPictureMs: Math.round(ms),
           paintedMs: Math.round(performance.now() - t0), parts: JSON.parse(view.node.dataset.timings || '{}') };
}"""

# frame times while the page pans and zooms (driven by playwright): rAF gaps and long tasks
FRAMES_START = """() => { window.__frames = []; let last = performance.now(); window.__run = true;
  const tick = t => { window.__frames.push(t - last); last = t; if (window.__run) requestAnimationFrame(tick); };
  requestAnimationFrame(tick); }"""
FRAMES_STOP = """() => { window.__run = false; const f = window.__frames.slice(1).sort((a, b) => a - b);
  return { frames: f.length, medianMs: +f[Math.floor(f.length / 2)].toFixed(1),
           p95Ms: +f[Math.floor(f.length * 0.95)].toFixed(1), maxMs: +f[f.length - 1].toFixed(1) }; }"""


def _pan_zoom(page):
    page.evaluate(FRAMES_START)
    page.mouse.move(600, 400)
    page.keyboard.down("Control")
    for _ in range(10):
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(30)
    for _ in range(10):
        page.mouse.wheel(0, 120)
        page.wait_for_timeout(30)
    page.keyboard.up("Control")
    page.mouse.move(600, 600)
    page.mouse.down()
    page.mouse.move(300, 300, steps=20)
    page.mouse.move(700, 500, steps=20)
    page.mouse.up()
    page.wait_for_timeout(300)
    return page.evaluate(FRAMES_STOP)


def test_scale_timings(page, lab_url, out_dir):
    page.goto(f"{lab_url}/lab?reset")
    page.wait_for_function("() => !!window.tapelabRenderer", timeout=90_000)
    numbers = {}
    for name, spec, expand, worker in (("5k expanded", [50, 1, 100], True, True),
                                       ("5k expanded, layout on the main thread", [50, 1, 100], True, False),
                                       ("5k collapsed", [50, 1, 100], False, True),
                                       ("100k collapsed", [100, 10, 100], False, True)):
        first = page.evaluate(MOUNT, [spec, expand, worker])
        # a click on an empty spot of the canvas gives it the wheel
        page.mouse.click(30, 800)
        first["panZoom"] = _pan_zoom(page)
        numbers[name] = first
        page.locator("#tapelab-scale").screenshot(path=str(out_dir / f"views-scale-{name.split(',')[0].replace(' ', '-')}.png"))
    (out_dir / "views-scale-numbers.json").write_text(json.dumps(numbers, indent=1))
    print("\n" + json.dumps(numbers, indent=1))
    assert numbers["100k collapsed"]["nodes"] == 100_000
    assert numbers["5k expanded"]["units"] == 5000
    assert not page.errors, page.errors

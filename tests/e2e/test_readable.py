"""End to end (issue 15): a 2-layer Transformer classifier trained one step with AdamW under
``%%tape``, as a researcher would. After "fit" the whole picture is inside the canvas and every
group label is at least 11 px on screen (collapsed, and expanded, where the overview's level of
detail takes over); the output's height can be dragged; the wheel scrolls the notebook unless
Ctrl is held or the graph was clicked; the optimizer step is one group; Enter in the search box
goes to the next match, expanding and panning to it. Screenshots and numbers go to test-output/e2e/."""
from __future__ import annotations

import json

from labpage import KERNEL_IDLE, clean_up, open_and_run_all, put_notebook

NB = "readable_e2e.ipynb"

CELLS = [
    """%load_ext tapelab.kernel
import tapelab as torch
from tapelab import nn
import tapelab.nn.functional as F
torch.manual_seed(0)

class Classifier(nn.Module):
    def __init__(self, vocab=50, d=32, heads=2, layers=2, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(1))

model = Classifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 50, (4, 10))
labels = torch.randint(0, 3, (4,))""",
    """%%tape train step
opt.zero_grad()
loss = F.cross_entropy(model(tokens), labels)
loss.backward()
opt.step()""",
    """from IPython.display import HTML
HTML('<div style="height: 2400px; background: linear-gradient(#fff, #eef)">room to scroll</div>')""",
]

# the picture's box against the canvas, and every group label's size on screen
MEASURE = """el => {
  const c = el.querySelector('.tapelab-canvas').getBoundingClientRect();
  const vp = el.querySelector('.tapelab-viewport').getBoundingClientRect();
  const labels = [...el.querySelectorAll('text.tapelab-glabel')].map(t => {
    const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
    return { px, text: t.textContent };
  });
  const px = labels.map(l => l.px);
  return { inside: vp.left >= c.left - 1 && vp.top >= c.top - 1 && vp.right <= c.right + 1 && vp.bottom <= c.bottom + 1,
           canvas: [c.left, c.top, c.right, c.bottom], picture: [vp.left, vp.top, vp.right, vp.bottom],
           labels: labels.length, minLabelPx: px.length ? Math.min(...px) : null,
           scale: Number(el.dataset.scale), lod: el.dataset.lod === 'true',
           units: Number(el.dataset.units), height: el.getBoundingClientRect().height }; }"""

# the current search target (unit or frame) against the canvas
IN_VIEW = """el => { const id = el.dataset.current;
  const c = el.querySelector('.tapelab-canvas').getBoundingClientRect();
  const t = [...el.querySelectorAll('.tapelab-unit, .tapelab-frame')].find(e => (e.dataset.id || e.dataset.group) === id);
  if (!t) return null; const r = t.getBoundingClientRect();
  return { inside: r.left >= c.left && r.top >= c.top && r.right <= c.right && r.bottom <= c.bottom,
           op: t.dataset.op || t.dataset.group || '', info: el.querySelector('.tapelab-search-info').textContent }; }"""

SCROLLER = """el => { let p = el.parentElement;
  while (p && !(p.scrollHeight > p.clientHeight + 10 && /(auto|scroll)/.test(getComputedStyle(p).overflowY))) p = p.parentElement;
  return p ? p.scrollTop : null; }"""


def test_a_transformer_training_step_is_readable(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _settled(graph, page):
    """Wait until the picture shows the store's latest state (Graphviz's layout can take seconds)."""
    page.wait_for_function("""el => el.dataset.pending === 'false' && el.tapelabView
        && Number(el.dataset.version) === el.tapelabView.store.version""", arg=graph.element_handle(), timeout=60_000)


def _fit(graph, page):
    _settled(graph, page)
    graph.locator(".tapelab-fit").click()
    page.wait_for_timeout(300)
    return graph.evaluate(MEASURE)


def _check(page, lab_url, out_dir):
    numbers = {}
    open_and_run_all(page, lab_url, NB)
    graph = page.locator(".jp-OutputArea-output .tapelab-graph.tapelab-fixed").first
    graph.wait_for(timeout=120_000)
    page.wait_for_function(KERNEL_IDLE, timeout=120_000)
    # query the output afresh each time: the output area may re-create the graph's element while the
    # cell's stream is flushed, and a handle taken earlier would watch the detached one
    page.wait_for_function("""() => { const el = document.querySelector(
        '.jp-OutputArea-output .tapelab-graph.tapelab-fixed'); return el && Number(el.dataset.nodes) > 300; }""",
                           timeout=60_000)
    page.wait_for_timeout(500)
    graph.scroll_into_view_if_needed()

    # the optimizer step: one collapsed group, not a row of "no-grad ops" boxes
    opt = graph.locator(".tapelab-unit[data-id='g:optimizer.step (AdamW)']")
    opt.wait_for()
    assert opt.get_attribute("data-label") == "optimizer.step (AdamW)"
    assert opt.locator("text.tapelab-glabel").text_content().startswith("▸ optimizer.step")
    loose = graph.locator(".tapelab-unit[data-kind=group]").evaluate_all(
        "els => els.map(e => e.dataset.id).filter(id => id.startsWith('g:~'))")
    numbers["loose no-grad groups"] = len(loose)
    assert len(loose) <= 5, loose

    # fit, collapsed
    m = _fit(graph, page)
    numbers["fit collapsed"] = m
    assert m["inside"], m
    assert m["labels"] >= 3 and m["minLabelPx"] >= 11, m
    graph.screenshot(path=str(out_dir / "readable-fit-collapsed.png"))

    # expand everything, fit: the overview (level of detail) keeps group labels readable
    graph.locator(".tapelab-expand-all").click()
    m = _fit(graph, page)
    numbers["fit expanded"] = m
    assert m["inside"], m
    assert m["labels"] >= 10 and m["minLabelPx"] >= 11, m
    graph.screenshot(path=str(out_dir / "readable-fit-expanded.png"))

    # the output's height: drag the grip down 250 px; the picture is fitted to the new size
    h0 = graph.bounding_box()["height"]
    grip = graph.locator(".tapelab-resize").bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + 3)
    page.mouse.down()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + 130, steps=5)
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + 253, steps=5)
    page.mouse.up()
    page.wait_for_timeout(500)
    m = graph.evaluate(MEASURE)
    numbers["resized"] = {"before": h0, "after": m["height"], "scale": m["scale"]}
    assert m["height"] >= h0 + 240, (h0, m)
    assert m["inside"] and m["minLabelPx"] >= 11, m
    graph.screenshot(path=str(out_dir / "readable-resized.png"))

    # the wheel over the graph scrolls the notebook (the graph keeps its zoom) ...
    graph.locator(".tapelab-collapse-all").click()
    _fit(graph, page)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    graph.scroll_into_view_if_needed()
    box = graph.locator(".tapelab-canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    s0, top0 = float(graph.get_attribute("data-scale")), graph.evaluate(SCROLLER)
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, 300)
    page.wait_for_timeout(500)
    s1, top1 = float(graph.get_attribute("data-scale")), graph.evaluate(SCROLLER)
    numbers["wheel"] = {"scrollTop": [top0, top1], "scale": [s0, s1]}
    assert top1 > top0 + 100 and s1 == s0, numbers["wheel"]
    # ... Ctrl+wheel zooms the graph and leaves the notebook where it is
    graph.scroll_into_view_if_needed()
    box = graph.locator(".tapelab-canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    top2 = graph.evaluate(SCROLLER)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_timeout(400)
    s3, top3 = float(graph.get_attribute("data-scale")), graph.evaluate(SCROLLER)
    assert s3 > s0 * 1.1 and abs(top3 - top2) < 2, (s0, s3, top2, top3)
    # ... and so does the plain wheel once the graph was clicked
    page.mouse.click(box["x"] + 4, box["y"] + box["height"] - 4)   # an empty corner of the canvas
    page.mouse.wheel(0, 200)
    page.wait_for_timeout(400)
    s4, top4 = float(graph.get_attribute("data-scale")), graph.evaluate(SCROLLER)
    assert s4 < s3 * 0.9 and abs(top4 - top2) < 2, (s3, s4, top2, top4)

    # search: Enter goes to the next match, expands the groups around it and pans to it
    _fit(graph, page)
    search = graph.locator(".tapelab-search")
    search.fill("norm1")
    search.press("Enter")
    page.wait_for_function("el => el.dataset.current === 'g:encoder.layers.0.norm1'", arg=graph.element_handle())
    _settled(graph, page)
    where = graph.evaluate(IN_VIEW)
    numbers["search norm1"] = where
    assert where and where["inside"], where
    assert where["info"].startswith("1 of 2"), where
    graph.screenshot(path=str(out_dir / "readable-search-norm1.png"))
    search.press("Enter")
    page.wait_for_function("el => el.dataset.current === 'g:encoder.layers.1.norm1'", arg=graph.element_handle())
    # an op inside a collapsed module: its module expands and the op is drawn and in view
    search.fill("relu")
    search.press("Enter")
    page.wait_for_function("el => { const id = el.dataset.current; return !!id && "
                           "!!el.querySelector(`.tapelab-unit[data-id='${id}']`); }", arg=graph.element_handle())
    graph.screenshot(path=str(out_dir / "readable-search-relu.png"))
    # softmax is found (not amax/sub/exp/sum/div), and Enter reveals it
    search.fill("softmax")
    page.wait_for_function("el => el.tapelabView.store.query === 'softmax'", arg=graph.element_handle())
    _settled(graph, page)
    numbers["softmax matches"] = graph.evaluate("el => el.dataset.matches")
    (out_dir / "readable-numbers.json").write_text(json.dumps(numbers, indent=1))
    # softmax is an op of its own, or computed inside a fused op the search knows (attention)
    assert int(numbers["softmax matches"]) >= 1, numbers["softmax matches"]
    search.press("Enter")
    # the match is an op (a unit) or a named group (a frame once expanded)
    page.wait_for_function("el => { const id = el.dataset.current; return !!id && (!!el.querySelector("
                           "`.tapelab-unit[data-id='${id}']`) || !!el.querySelector(`.tapelab-frame[data-group='${id}']`)); }",
                           arg=graph.element_handle())
    _settled(graph, page)
    where = graph.evaluate(IN_VIEW)
    numbers["search softmax"] = where
    found = (where or {}).get("op", "") + graph.get_attribute("data-current")
    assert where and where["inside"] and ("softmax" in found.lower() or "attention" in found.lower()), where
    graph.screenshot(path=str(out_dir / "readable-search-softmax.png"))
    (out_dir / "readable-numbers.json").write_text(json.dumps(numbers, indent=1))
    print("\n" + json.dumps(numbers, indent=1))
    assert not page.errors, page.errors

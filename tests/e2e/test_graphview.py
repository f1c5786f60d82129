"""End to end: GraphView renders a traced Transformer encoder (tapelab.nn.TransformerEncoderLayer
blocks traced into) beside its generated code; hovering a node highlights its code line and
hovering a line highlights its node; a diff after a pass colours added/removed/changed nodes; a
compiled graph's fused kernel shows its generated source on a click.
Screenshots go to test-output/e2e/."""
from __future__ import annotations

from labpage import clean_up, open_and_run_all, put_notebook

NB = "graphview_e2e.ipynb"

CELLS = [
    """%load_ext tapelab.kernel
import tapelab as torch
from tapelab import nn, fx
from tapelab.fx.passes import ShapeProp
from tapelab.widgets import GraphView, graph_from_fx
torch.manual_seed(0)

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
                                     for _ in range(2)])
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(1))

class Into(fx.Tracer):   # trace into the encoder layers; attention, linear, norm and dropout stay leaves
    def is_leaf_module(self, m, qualname):
        return isinstance(m, (nn.Linear, nn.LayerNorm, nn.Dropout, nn.MultiheadAttention))

model = Encoder().eval()
gm = fx.GraphModule(model, Into().trace(model))
ShapeProp(gm).propagate(torch.randn(2, 5, 16))
GraphView(gm)""",
    """before = graph_from_fx(gm)
for n in list(gm.graph.nodes):
    if n.op == "call_function" and n.target is nn.functional.relu:   # the layers' F.relu, as torch.fx records it
        with gm.graph.inserting_before(n):
            g = gm.graph.call_function(nn.functional.gelu, n.args)
        n.replace_all_uses_with(g)
        gm.graph.erase_node(n)
gm.recompile()
GraphView.diff(before, gm)""",
    """class GeluMlp(nn.Module):   # the tanh GELU written out: one fused kernel after tapelab.compile
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 64)
    def forward(self, x):
        h = self.fc(x)
        return 0.5 * h * (1.0 + ((h + 0.044715 * h * h * h) * 0.7978845608).tanh())

fused = torch.compiler.explain(GeluMlp(), torch.randn(8, 16)).graphs[0]
GraphView(fused)""",
]


def zoom_in_at(page, view, selector):
    graph = view.locator(".tapelab-graph").first
    for _ in range(12):
        if graph.get_attribute("data-lod") != "true":
            return
        view.scroll_into_view_if_needed()
        box = view.locator(selector).bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.keyboard.down("Control")
        page.mouse.wheel(0, -150)
        page.keyboard.up("Control")
        page.wait_for_timeout(150)
    assert graph.get_attribute("data-lod") != "true"


def test_graph_view_of_a_traced_transformer_encoder(page, lab_url, out_dir):
    put_notebook(lab_url, NB, CELLS)
    try:
        _check_graph_view(page, lab_url, out_dir)
    finally:
        clean_up(page, lab_url, NB)


def _check_graph_view(page, lab_url, out_dir):
    open_and_run_all(page, lab_url, NB)
    fxv = page.locator(".jp-OutputArea-output .tapelab-fx").first
    fxv.wait_for(timeout=90_000)
    page.wait_for_function("el => el.querySelectorAll('.tapelab-unit[data-name]').length >= 8",
                           arg=fxv.element_handle(), timeout=30_000)

    # the graph (drawn where it is in view): attention, norms and linears, grouped by module, shapes shown
    graph = fxv.locator(".tapelab-graph")
    nodes = int(graph.get_attribute("data-nodes"))
    assert nodes >= 25, nodes
    names = fxv.locator(".tapelab-unit[data-name]").evaluate_all("els => els.map(e => e.dataset.name)")
    for name in ("x", "layers_0_self_attn", "layers_0_norm1", "layers_0_linear1"):
        assert name in names, names
    assert fxv.locator(".tapelab-frame[data-group='g:layers.0']").count() == 1
    # fitted, the encoder is an overview (boxes and module labels): Ctrl+wheel over a node zooms
    # in around it until the nodes' own text is drawn
    zoom_in_at(page, fxv, ".tapelab-unit[data-name=layers_0_self_attn]")
    assert "MultiheadAttention" in fxv.locator(".tapelab-unit[data-name=layers_0_self_attn]").text_content()
    assert "(2, 5, 32)" in fxv.locator(".tapelab-unit[data-name=layers_0_linear1]").text_content()
    # the code panel: the generated forward, one line per node
    code = fxv.locator(".tapelab-fx-code")
    assert "def forward(self, x):" in code.text_content()
    lines = code.locator(".tapelab-code-line[data-nodes]").evaluate_all("els => els.map(e => e.dataset.nodes)")
    assert len(lines) == nodes and lines[0] == "x" and lines[-1] == "output", lines
    for name in ("layers_1_norm2", "relu_1", "head"):
        assert name in lines, lines

    # hover a node: its defining line lights up (and only that one)
    fxv.locator(".tapelab-unit[data-name=layers_0_linear1]").hover()
    hl = code.locator(".tapelab-code-hl")
    hl.wait_for()
    assert hl.count() == 1 and hl.get_attribute("data-nodes") == "layers_0_linear1"
    assert "layers_0_linear1 = " in hl.text_content()
    assert fxv.locator(".tapelab-unit.tapelab-hl").get_attribute("data-name") == "layers_0_linear1"
    fxv.scroll_into_view_if_needed()
    fxv.screenshot(path=str(out_dir / "graphview-encoder-hover.png"))

    # hover a code line: its node lights up, the graph pans to it when it is out of view
    code.locator(".tapelab-code-line[data-nodes=layers_1_linear2]").hover()
    page.wait_for_function("el => { const u = el.querySelector('.tapelab-unit.tapelab-hl'); "
                           "return !!u && u.dataset.name === 'layers_1_linear2'; }", arg=fxv.element_handle())
    assert fxv.get_attribute("data-hover") == "layers_1_linear2"
    fxv.screenshot(path=str(out_dir / "graphview-encoder-code-hover.png"))

    # traced graphs also stream to the side panel (as tapes do): the last one traced is the GELU MLP
    # tapelab.compile traced from its tape (the encoder's linears are module leaves, named otherwise)
    page.wait_for_function("() => window.tapelabPanel && window.tapelabPanel.store.nodes.some(n => n.id === 'fx:linear')")

    # the diff after a pass (relu -> gelu): two panes, removed and added nodes coloured
    diff = page.locator(".jp-OutputArea-output .tapelab-fx.tapelab-fx-diff").first
    diff.wait_for(timeout=60_000)
    page.wait_for_function("el => el.querySelectorAll('.tapelab-unit.tapelab-diff-added').length >= 1",
                           arg=diff.element_handle(), timeout=30_000)
    assert diff.get_attribute("data-panes") == "2"
    panes = diff.locator(".tapelab-fx-pane")
    assert panes.nth(0).locator(".tapelab-unit.tapelab-diff-removed[data-name=relu]").count() == 1
    assert panes.nth(1).locator(".tapelab-unit.tapelab-diff-added[data-name=gelu]").count() == 1
    assert panes.nth(1).locator(".tapelab-code-line.tapelab-diff-added").count() == 2
    assert "added 2" in diff.locator(".tapelab-fx-summary").text_content()
    diff.scroll_into_view_if_needed()
    diff.screenshot(path=str(out_dir / "graphview-diff.png"))

    # a compiled graph: the fused kernel is marked; a click shows its generated source in place of
    # the graph's code, with its member ops on the card; "graph code" goes back
    comp = page.locator(".jp-OutputArea-output .tapelab-fx").nth(2)
    comp.wait_for(timeout=60_000)
    kernel = comp.locator(".tapelab-unit.tapelab-fused").first
    kernel.wait_for(timeout=30_000)
    assert kernel.get_attribute("data-name").startswith("fused")
    kernel.hover()
    card = comp.locator(".tapelab-card")
    card.wait_for()
    assert "tanh" in card.locator(".tapelab-row[data-key='fused ops']").text_content()
    kernel.click()
    panel = comp.locator(".tapelab-fx-kernel")
    page.wait_for_function("el => !!el.dataset.kernel", arg=panel.element_handle(), timeout=10_000)
    assert panel.get_attribute("data-kernel").startswith("fused(")
    source = panel.locator("pre").text_content()
    assert "tanh" in source and "def " in source, source[:400]
    assert comp.locator(".tapelab-fx-code").first.is_hidden()
    panel.locator("button", has_text="cuda").click()
    page.wait_for_function("el => el.dataset.source === 'cuda'", arg=panel.element_handle(), timeout=10_000)
    assert "tanhf(" in panel.locator("pre").text_content()
    comp.scroll_into_view_if_needed()
    comp.screenshot(path=str(out_dir / "graphview-fused-kernel.png"))
    panel.locator("button", has_text="graph code").click()
    page.wait_for_function("el => el.style.display === 'none'", arg=panel.element_handle(), timeout=10_000)
    assert "def forward" in comp.locator(".tapelab-fx-code").first.text_content()
    assert not page.errors, page.errors

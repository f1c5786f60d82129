"""FxGraphDrawer returns a pydot.Dot with PyTorch's structure: the same node names, edges,
parameter nodes and label fields as ``torch.fx.passes.graph_drawer`` on the same module."""
from __future__ import annotations

import pytest

pydot = pytest.importorskip("pydot")
torch = pytest.importorskip("torch")
from torch.fx.passes.graph_drawer import FxGraphDrawer as TorchDrawer  # noqa: E402

import tapelab  # noqa: E402
from tapelab import fx, nn  # noqa: E402
from tapelab.fx.passes import ShapeProp, elementwise_groups  # noqa: E402
from tapelab.fx.passes.graph_drawer import FxGraphDrawer  # noqa: E402


def _models():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 5)
            self.norm = nn.LayerNorm(5)

        def forward(self, x):
            return self.norm(self.linear(x)).clamp(min=0.0, max=1.0).sum()

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 5)
            self.norm = torch.nn.LayerNorm(5)

        def forward(self, x):
            return self.norm(self.linear(x)).clamp(min=0.0, max=1.0).sum()
    return Net(), TNet()


def _structure(dot):
    nodes = {n.get_name().strip('"') for n in dot.get_nodes() if n.get_name() not in ("node", "edge", "graph")}
    edges = {(e.get_source().strip('"'), e.get_destination().strip('"')) for e in dot.get_edges()}
    return nodes, edges


def _fields(label: str) -> list:
    return [f.split("=")[0].strip("{}\\n") for f in label.strip('"').split("|")]


def test_same_structure_as_torch():
    ours, theirs = _models()
    a = FxGraphDrawer(fx.symbolic_trace(ours), "net").get_dot_graph()
    b = TorchDrawer(torch.fx.symbolic_trace(theirs), "net").get_dot_graph()
    assert isinstance(a, pydot.Dot) and a.get_name() == b.get_name() == "net"
    assert a.get_rankdir() == b.get_rankdir() == "TB"
    assert _structure(a) == _structure(b)                      # incl. linear.weight -> linear edges
    for n in b.get_nodes():
        if n.get_name() in ("node", "edge", "graph"):
            continue
        m = a.get_node(n.get_name())[0]
        assert m.get_shape() == n.get_shape() == "record"
        assert m.get_fillcolor() == n.get_fillcolor() or n.get_attributes()["fillcolor"] not in ('"AliceBlue"', "LemonChiffon1", "PowderBlue", "Salmon")
        assert _fields(m.get_label())[:2] == _fields(n.get_label())[:2]   # name=%x|op_code=...


def test_options_submodules_and_shapes():
    ours, _ = _models()
    gm = fx.symbolic_trace(ours)
    ShapeProp(gm).propagate(tapelab.randn(2, 4))
    d = FxGraphDrawer(gm, "net", ignore_parameters_and_buffers=True, ignore_getattr=True)
    nodes, _ = _structure(d.get_dot_graph())
    assert "linear.weight" not in nodes and "linear" in nodes
    label = d.get_dot_graph().get_node("sum_1")[0].get_label()
    assert "shape=()" in label and "dtype=" in label and "num_users=1" in label
    assert set(d.get_all_dot_graphs()) == {"net"}


def test_fusion_groups_are_clusters_and_text_is_dot():
    gm = fx.symbolic_trace(lambda x: tapelab.relu(x * 2 + 1).sum())
    ShapeProp(gm).propagate(tapelab.randn(3))
    elementwise_groups(gm)
    dot = FxGraphDrawer(gm, 'my "graph"').get_dot_graph()
    assert [s.get_name() for s in dot.get_subgraphs()] == ["cluster_fusion_0"]
    text = dot.to_string()
    assert text.startswith('digraph "my \\"graph\\"" {') and text.rstrip().endswith("}")
    assert "x -> mul;" in text and "relu" in text and "shape=(3,)" in text and "float32" in text


def test_without_pydot(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_pydot(name, *a, **k):
        if name == "pydot":
            raise ModuleNotFoundError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_pydot)
    with pytest.raises(RuntimeError, match="pydot"):
        FxGraphDrawer(fx.symbolic_trace(lambda x: x + 1), "g")

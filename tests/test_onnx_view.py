"""The graph view opens an exported .onnx file: ``graph_from_onnx`` writes the FX view's schema."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")

import tapelab  # noqa: E402
from tapelab import nn  # noqa: E402
from tapelab.widgets import graph_from_onnx, to_dot  # noqa: E402
from tapelab.widgets.viewmodel import MIME, SCHEMA  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).relu().mean((2, 3)))


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    tapelab.manual_seed(0)
    p = tmp_path_factory.mktemp("onnx") / "net.onnx"
    tapelab.onnx.export(Net().eval(), (tapelab.randn(2, 3, 6, 6),), str(p), input_names=["x"],
                        dynamic_axes={"x": {0: "batch"}})
    return p


def test_nodes_initializers_and_shapes(path):
    model = onnx.load(str(path))
    g = graph_from_onnx(str(path))
    assert g["schema"] == SCHEMA and g["meta"]["title"] == "net.onnx"
    by_op = {}
    for n in g["nodes"]:
        by_op.setdefault(n["op"], []).append(n)
    assert len(by_op["input"]) == 1 and by_op["input"][0]["shape"] == ["batch", 3, 6, 6]
    assert {n["param"] for n in by_op["initializer"]} == {i.name for i in model.graph.initializer}
    assert sum(n["kind"] == "forward" for n in g["nodes"]) == len(model.graph.node) + len(model.graph.output)
    conv = by_op["Conv"][0]
    assert conv["shape"] == ["batch", 4, 6, 6] and conv["module"] == "conv" and conv["tapelab_op"] == "convolution"
    assert "test_onnx_view.py:" in conv["source"] and "self.conv(x)" in conv["source"]
    assert {e["source"] for e in g["edges"] if e["target"] == conv["id"]} == \
        {"onnx:in:x", "onnx:init:conv.weight", "onnx:init:conv.bias"}   # the bias inside Conv, as torch exports it
    assert {grp["path"] for grp in g["groups"]} >= {"conv", "bn", "fc"}
    assert by_op["output"][0]["shape"] == ["batch", 2]


def test_drawn_by_the_same_renderers(path):
    g = graph_from_onnx(onnx.load(str(path)), title="exported")
    assert g["meta"]["title"] == "exported" and g["meta"]["onnx"]["opset"] == {"ai.onnx": 17}
    assert "Conv" in to_dot(g)
    pytest.importorskip("anywidget")
    from tapelab.widgets import GraphView
    view = GraphView(g)
    bundle = view._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data[MIME]["nodes"]

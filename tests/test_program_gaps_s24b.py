"""Gaps found in session 24 (helper s24b) running spiking, scientific, RL and forecasting libraries
(snntorch, norse, spikingjelly, normflows, torchio, deepinv, ...) unchanged under
``install_aliases()``, each pattern written here directly and checked against PyTorch 2.13."""
import pytest
import torch

import tapelab


@pytest.mark.parametrize("name", ["Node", "Value", "Block", "Type"])
def test_torchscript_ir_types_import_and_refuse_construction(name):
    """snntorch's loss module runs ``from torch._C import Value`` at import; the IR types are the same
    objects at ``torch.<name>`` and have no constructor."""
    for m in (torch, tapelab):
        cls = getattr(m._C, name)
        assert getattr(m, name) is cls and cls.__name__ == name and cls.__module__ == "torch"
        with pytest.raises(TypeError, match=f"torch._C.{name}: No constructor defined"):
            cls()


def test_torchscript_graph_type_is_an_empty_graph():
    """``torch.Graph`` (ONNX symbolics annotate ``g: torch._C.Graph``) makes an empty graph."""
    for m in (torch, tapelab):
        g = m._C.Graph()
        assert m.Graph is m._C.Graph and type(g).__module__ == "torch"
        assert str(g) == "graph():\n  return ()\n"
        assert list(g.nodes()) == list(g.inputs()) == list(g.outputs()) == []

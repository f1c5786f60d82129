"""tapelab.fx passes: replace_pattern, dead code, CSE, constant folding, ShapeProp,
elementwise fusion grouping and DOT export."""
from __future__ import annotations

import operator

import numpy as np
import torch

import tapelab
import tapelab.fx as fx
from tapelab.fx.passes import (ShapeProp, elementwise_groups, eliminate_common_subexpressions,
                               fold_constants)


def _calls(gm):
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def test_replace_pattern_matches_torch_fx():
    def program(lib):
        def f(x, y):
            a = lib.relu(x + y)
            b = lib.relu(a + x)
            return b * 2
        return f

    def pattern(lib):
        return lambda a, b: lib.relu(a + b)

    def replacement(lib):
        return lambda a, b: lib.sigmoid(a * b)
    ours = fx.symbolic_trace(program(tapelab))
    theirs = torch.fx.symbolic_trace(program(torch))
    m_ours = fx.replace_pattern(ours, pattern(tapelab), replacement(tapelab))
    m_theirs = torch.fx.replace_pattern(theirs, pattern(torch), replacement(torch))
    assert len(m_ours) == len(m_theirs) == 2
    assert [n.op for n in ours.graph.nodes] == [n.op for n in theirs.graph.nodes]
    assert [getattr(t, "__name__", t) for t in _calls(ours)] == ["mul", "sigmoid", "mul", "sigmoid", "mul"]
    x, y = np.array([0.5, -1.0], np.float32), np.array([2.0, 3.0], np.float32)
    got = ours(tapelab.tensor(x), tapelab.tensor(y)).numpy()
    want = theirs(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_replace_pattern_skips_matches_whose_inside_is_used_elsewhere():
    def f(x, y):
        s = x + y
        return tapelab.relu(s) * s
    gm = fx.symbolic_trace(f)
    assert fx.replace_pattern(gm, lambda a, b: tapelab.relu(a + b), lambda a, b: a * b) == []


def test_dead_code_elimination_keeps_side_effects():
    def f(x):
        unused = x.exp()
        kept = x.clone()
        kept.add_(1)            # in place: impure, kept although its value is unused
        return kept
    gm = fx.symbolic_trace(f)
    assert gm.graph.eliminate_dead_code()
    assert _calls(gm) == ["clone", "add_"]
    gm.recompile()
    assert gm(tapelab.zeros(1)).item() == 1.0
    assert not gm.graph.eliminate_dead_code()


def test_common_subexpressions_are_merged():
    def f(x):
        a = tapelab.sin(x) + x.cos()
        b = tapelab.sin(x) + x.cos()
        return a * b + tapelab.nn.functional.dropout(x, 0.0) + tapelab.nn.functional.dropout(x, 0.0)
    gm = fx.symbolic_trace(f)
    before = len(gm.graph.nodes)
    assert eliminate_common_subexpressions(gm) == 3
    assert len(gm.graph.nodes) == before - 3
    assert [getattr(t, "__name__", t) for t in _calls(gm)].count("dropout") == 2   # random: never merged
    x = tapelab.randn(4)
    np.testing.assert_allclose(gm(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_constant_folding_folds_frozen_values_not_trainable_parameters():
    class M(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = tapelab.nn.Parameter(tapelab.arange(4.0), requires_grad=False)
            self.w = tapelab.nn.Parameter(tapelab.ones(4))

        def forward(self, x):
            c = (self.table * 2).exp().sum()
            return x * c + self.w * 3
    model = M()
    gm = fx.symbolic_trace(model)
    x = tapelab.randn(4)
    want = model(x).detach().numpy()
    assert fold_constants(gm) == 1
    assert [n.target for n in gm.graph.nodes if n.op == "get_attr"] == ["_folded_constant0", "w"]
    assert _calls(gm) == [operator.mul, operator.mul, operator.add]
    out = gm(x)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-6)
    out.sum().backward()
    assert model.w.grad is not None       # trainable parameters stay live


def test_shape_prop_fills_tensor_meta():
    class M(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tapelab.nn.Linear(4, 6)

        def forward(self, x):
            h = self.fc(x).relu()
            return h.double().sum(0), h.shape[0]
    gm = fx.symbolic_trace(M())
    ShapeProp(gm).propagate(tapelab.randn(3, 4))
    meta = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    assert tuple(meta["x"].shape) == (3, 4) and meta["x"].dtype == tapelab.float32
    assert tuple(meta["relu"].shape) == (3, 6) and meta["relu"].requires_grad
    assert meta["double"].dtype == tapelab.float64 and tuple(meta["sum_1"].shape) == (6,)
    assert meta["getitem"] is None and gm.graph.find_nodes(op="call_function", target=operator.getitem)[0] \
        .meta["type"] is int
    assert tuple(meta["output"][0].shape) == (6,) and meta["output"][1] == 3


def test_elementwise_groups_are_maximal_and_acyclic():
    class M(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tapelab.nn.Linear(4, 4)

        def forward(self, x):
            a = tapelab.relu(x * 2 + 1)           # mul, add, relu: one group
            b = self.fc(a)                         # not elementwise
            c = (a.exp() + b).sigmoid()            # exp joins a's group? no: b depends on it
            return c.sum() + c.shape[0]
    gm = fx.symbolic_trace(M())
    ShapeProp(gm).propagate(tapelab.randn(2, 4))
    groups = [[n.name for n in g] for g in elementwise_groups(gm)]
    assert groups == [["mul", "add", "relu", "exp"], ["add_1", "sigmoid"]]
    assert gm.graph.find_nodes(op="call_function", target=tapelab.relu)[0].meta["fusion_group"] == 0
    add_2 = [n for n in gm.graph.nodes if n.name == "add_2"][0]
    assert "fusion_group" not in add_2.meta     # scalar arithmetic after ShapeProp: not a tensor op

"""tapelab.fx: symbolic tracing, the Graph/Node IR, GraphModule codegen, Interpreter.

torch.fx is the oracle for graph structure (opcodes, node names, users); eager tapelab
is the oracle for values and gradients.
"""
from __future__ import annotations

import importlib
import operator
import sys

import numpy as np
import pytest
import torch

import tapelab
import tapelab.fx as fx
from tapelab.nn.functional import gelu

F = tapelab.nn.functional


def helper_with_control_flow(x):
    return x * 2 if x.ndim > 1 else x


fx.wrap("helper_with_control_flow")


def _grads(module):
    return {n: p.grad.numpy().copy() for n, p in module.named_parameters() if p.grad is not None}


def _check_same_as_eager(model, gm, *inputs):
    """Outputs and parameter gradients of ``gm`` equal those of ``model`` (which it shares)."""
    want = model(*inputs)
    want.sum().backward()
    want_grads = _grads(model)
    model.zero_grad()
    got = gm(*inputs)
    got.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    got_grads = _grads(model)
    assert got_grads.keys() == want_grads.keys() and want_grads
    for k in want_grads:
        np.testing.assert_allclose(got_grads[k], want_grads[k], rtol=1e-6, atol=1e-6, err_msg=k)


def _mlp(lib):
    class MLP(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = lib.nn.Linear(4, 8)
            self.fc2 = lib.nn.Linear(8, 3)
            self.scale = lib.nn.Parameter(lib.ones(3))

        def forward(self, x):
            h = lib.relu(self.fc1(x))
            h = lib.nn.functional.dropout(h, 0.0, self.training) + h.mean(-1, keepdim=True)
            return self.fc2(h).softmax(-1) * self.scale + x.shape[0]
    return MLP()


def test_mlp_graph_matches_torch_fx():
    ours, theirs = fx.symbolic_trace(_mlp(tapelab)), torch.fx.symbolic_trace(_mlp(torch))
    for attr in ("op", "name"):
        assert [getattr(n, attr) for n in ours.graph.nodes] == [getattr(n, attr) for n in theirs.graph.nodes]
    assert [len(n.users) for n in ours.graph.nodes] == [len(n.users) for n in theirs.graph.nodes]
    names = [getattr(n.target, "__name__", n.target) for n in ours.graph.nodes]
    assert names == [getattr(n.target, "__name__", n.target) for n in theirs.graph.nodes]


def test_mlp_outputs_and_gradients_match_eager():
    tapelab.manual_seed(0)
    model = _mlp(tapelab)
    gm = fx.symbolic_trace(model)
    assert isinstance(gm, tapelab.nn.Module) and type(gm).__name__ == "MLP"
    assert gm.fc1 is model.fc1 and gm.scale is model.scale
    assert "tapelab.relu(fc1)" in gm.code and "self.fc2(" in gm.code
    _check_same_as_eager(model, gm, tapelab.randn(5, 4))


class CNN(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = tapelab.nn.Sequential(
            tapelab.nn.Conv2d(1, 4, 3, padding=1), tapelab.nn.BatchNorm2d(4), tapelab.nn.ReLU(),
            tapelab.nn.MaxPool2d(2))
        self.head = tapelab.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.head(tapelab.flatten(self.features(x), 1))


@pytest.mark.parametrize("training", [True, False])
def test_cnn_with_batchnorm(training):
    tapelab.manual_seed(1)
    model = CNN().train(training)
    gm = fx.symbolic_trace(model)
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == \
        ["features.0", "features.1", "features.2", "features.3", "head"]
    x = tapelab.randn(2, 1, 8, 8)
    bn = model.features[1]
    _check_same_as_eager(model, gm, x)
    if training:   # the GraphModule runs the same BatchNorm, so its running stats moved twice
        assert bn.num_batches_tracked.item() == 2


class EncoderModel(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        layer = tapelab.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = tapelab.nn.TransformerEncoder(layer, 2)
        self.out = tapelab.nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.encoder(x).mean(1))


def test_transformer_encoder_is_a_leaf_and_matches_eager():
    tapelab.manual_seed(2)
    model = EncoderModel()
    gm = fx.symbolic_trace(model)
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["encoder", "out"]
    _check_same_as_eager(model, gm, tapelab.randn(3, 5, 8))


def test_tracing_into_a_transformer_layer_with_a_custom_tracer():
    tapelab.manual_seed(3)
    layer = tapelab.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    class Into(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, (tapelab.nn.Linear, tapelab.nn.LayerNorm, tapelab.nn.Dropout,
                                  tapelab.nn.MultiheadAttention))
    graph = Into().trace(layer, concrete_args={"src_mask": None, "src_key_padding_mask": None,
                                               "is_causal": False})
    gm = fx.GraphModule(layer, graph)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert targets[:3] == ["self_attn", "dropout1", "norm1"] and "linear2" in targets
    _check_same_as_eager(layer, gm, tapelab.randn(2, 5, 8))


# ---------------------------------------------------------------- functions, wrap, errors
def test_functions_are_recorded_under_every_name():
    def f(x):
        a = tapelab.nn.functional.relu(x)
        b = gelu(a)                        # imported by name into this module
        c = helper_with_control_flow(b)    # fx.wrap: one call_function node
        return tapelab.cat([a, c], 0).sum(dim=0)
    gm = fx.symbolic_trace(f)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == [F.relu, F.gelu, helper_with_control_flow, tapelab.cat]
    assert tapelab.relu is not None and F.gelu is gelu        # originals restored after tracing
    x = tapelab.randn(3, 2)
    np.testing.assert_allclose(gm(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_constants_made_while_tracing_become_attributes():
    def f(x):
        return x + tapelab.arange(3.0)
    gm = fx.symbolic_trace(f)
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "get_attr", "call_function", "output"]
    assert gm.graph.find_nodes(op="get_attr")[0].target == "_tensor_constant0"
    np.testing.assert_allclose(gm(tapelab.ones(3)).numpy(), [1, 2, 3])


def test_control_flow_iteration_and_len_raise_like_pytorch():
    def branch(x):
        if x.sum() > 0:
            return x
        return -x

    def loop(x):
        return [v for v in x]

    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(branch)
    with pytest.raises(fx.TraceError, match="Proxy object cannot be iterated"):
        fx.symbolic_trace(loop)
    with pytest.raises(RuntimeError, match="'len' is not supported in symbolic tracing"):
        fx.symbolic_trace(lambda x: len(x))


def test_unpacking_a_proxy_records_getitem():
    def f(pair):
        a, b = pair
        return a * b
    gm = fx.symbolic_trace(f)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == \
        [operator.getitem, operator.getitem, operator.mul]
    assert gm((tapelab.tensor(2.0), tapelab.tensor(3.0))).item() == 6.0


def test_concrete_args_specialise_flags():
    class M(tapelab.nn.Module):
        def forward(self, x, double=False):
            return x * 2 if double else x
    gm = fx.symbolic_trace(M(), concrete_args={"double": True})
    assert gm(tapelab.ones(2)).tolist() == [2.0, 2.0]
    assert "double = True" in gm.code


def test_a_primitive_reached_with_a_proxy_names_the_op():
    from tapelab.ops import elementwise

    def f(x):
        with tapelab.overrides.DisableTorchFunction():     # the op cannot hand the Proxy to the protocol
            return elementwise.exp(x)
    with pytest.raises(fx.TraceError, match="op 'exp' received a Proxy"):
        fx.symbolic_trace(f)
    assert not tapelab.dispatch.STATE.modes     # the tracer's mode is gone after the error
    assert tapelab.dispatch.STATE.functions is None      # and so is the protocol's hook
    gm = fx.symbolic_trace(lambda x: elementwise.exp(x))   # any name of an op records its public function
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [tapelab.exp]
    assert tapelab.nn.Module.__call__.__name__ == "__call__"


# ---------------------------------------------------------------- Graph and Node
def _hand_graph():
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(tapelab.relu, (x,))
    z = g.call_method("mul", (y, 2))
    g.output(z)
    return g, x, y, z


def test_building_a_graph_by_hand_and_generating_code():
    g, x, y, z = _hand_graph()
    g.lint()
    src = g.python_code("self").src
    assert "relu = tapelab.relu(x);  x = None" in src and "mul = relu.mul(2);  relu = None" in src
    assert str(g).splitlines()[1] == "    %x : [num_users=1] = placeholder[target=x]"
    assert y.format_node() == "%relu : [num_users=1] = call_function[target=tapelab.relu](args = (%x,), kwargs = {})"
    gm = fx.GraphModule(tapelab.nn.Module(), g)
    assert gm(tapelab.tensor([-1.0, 2.0])).tolist() == [0.0, 4.0]


def test_node_editing_verbs():
    g, x, y, z = _hand_graph()
    assert list(x.users) == [y] and z.all_input_nodes == [y]
    with g.inserting_after(y):
        s = g.call_function(tapelab.sigmoid, (y,))
    assert [n.name for n in g.nodes] == ["x", "relu", "sigmoid", "mul", "output"]
    z.replace_input_with(y, s)
    assert z.args == (s, 2) and s in y.users and z not in y.users
    assert y.replace_all_uses_with(x) == [s] and s.args == (x,)
    with pytest.raises(RuntimeError, match="still had 2 users"):
        g.erase_node(x)
    g.erase_node(y)
    z.prepend(s)       # already in place: no-op
    s.meta["note"] = 1
    copy = fx.Graph()
    out = copy.graph_copy(g, {})
    copy.output(out)
    assert [n.name for n in copy.nodes] == ["x", "sigmoid", "mul", "output"]
    assert [n.meta for n in copy.nodes][1] == {"note": 1}
    z.update_arg(1, 3)
    z.update_kwarg("alpha", None)
    assert z.args[1] == 3 and z.kwargs == {"alpha": None}


def test_lint_finds_use_before_definition():
    g, x, y, z = _hand_graph()
    z.append(y)     # move relu after its user
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        g.lint()


def test_print_tabular_lists_every_node(capsys):
    g, *_ = _hand_graph()
    g.print_tabular()
    out = capsys.readouterr().out
    assert "opcode" in out and "tapelab.relu" in out and "call_method" in out


# ---------------------------------------------------------------- GraphModule
def test_graphmodule_submodules_and_readable_code(tmp_path):
    tapelab.manual_seed(4)
    model = _mlp(tapelab).eval()
    gm = fx.symbolic_trace(model)
    text = gm.print_readable(print_output=False)
    assert text.startswith("class MLP(tapelab.nn.Module):\n    def forward(self, x):")
    assert gm.add_submodule("extra.act", tapelab.nn.Tanh())
    assert isinstance(gm.get_submodule("extra.act"), tapelab.nn.Tanh)
    out = gm.graph.output_node()
    with gm.graph.inserting_before(out):
        act = gm.graph.call_module("extra.act", (out.args[0],))
    out.args = (act,)
    gm.recompile()
    x = tapelab.randn(2, 4)
    np.testing.assert_allclose(gm(x).detach().numpy(), np.tanh(model(x).detach().numpy()), rtol=1e-6)
    gm.to_folder(tmp_path / "exported", "Exported")
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("exported")
        np.testing.assert_allclose(mod.Exported()(x).detach().numpy(), gm(x).detach().numpy(), rtol=1e-6)
    finally:
        sys.path.remove(str(tmp_path))
    assert not gm.delete_submodule("extra.missing")
    out.args = (act.args[0],)
    gm.graph.erase_node(act)
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "extra")


def test_graphmodules_do_not_share_forward():
    a = fx.symbolic_trace(lambda x: x + 1)
    b = fx.symbolic_trace(lambda x: x * 3)
    x = tapelab.ones(1)
    assert a(x).item() == 2.0 and b(x).item() == 3.0


# ---------------------------------------------------------------- Interpreter and Transformer
def test_interpreter_runs_and_steps_node_by_node():
    tapelab.manual_seed(5)
    model = _mlp(tapelab).eval()
    gm = fx.symbolic_trace(model)
    x = tapelab.randn(2, 4)
    np.testing.assert_allclose(fx.Interpreter(gm).run(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    steps = fx.Interpreter(gm).steps(x)
    node, value = next(steps)
    assert node.op == "placeholder" and value is x
    node, value = next(steps)
    assert node.name == "fc1" and tuple(value.shape) == (2, 8)
    rest = list(steps)
    assert rest[-1][0].op == "output"
    np.testing.assert_allclose(rest[-1][1].detach().numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_interpreter_errors_name_the_node():
    gm = fx.symbolic_trace(lambda x, w: x @ w)
    with pytest.raises(RuntimeError, match="While executing %matmul : .*call_function"):
        fx.Interpreter(gm).run(tapelab.ones(2, 3), tapelab.ones(4, 5))


def test_interpreter_override():
    class NegRelu(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            out = super().call_function(target, args, kwargs)
            return -out if target is tapelab.relu else out
    gm = fx.symbolic_trace(lambda x: tapelab.relu(x) + 1)
    assert NegRelu(gm).run(tapelab.tensor([2.0])).item() == -1.0


def test_transformer_rewrites_and_calls_functions_on_proxies():
    class ReluToSigmoidPlusOne(fx.Transformer):
        def call_function(self, target, args, kwargs):
            if target == tapelab.relu:
                return tapelab.sigmoid(*args) + 1
            return super().call_function(target, args, kwargs)
    gm = fx.symbolic_trace(lambda x: tapelab.relu(x) * 2)
    new = ReluToSigmoidPlusOne(gm).transform()
    assert [n.target for n in new.graph.nodes if n.op == "call_function"] == \
        [tapelab.sigmoid, operator.add, operator.mul]
    assert new(tapelab.zeros(1)).item() == 3.0

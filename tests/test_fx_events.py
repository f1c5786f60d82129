"""tapelab.fx talks through the engine's declared interfaces: it emits ``graph_traced`` itself
(no widget needed), sees module calls through ``Mode.call_module`` and parameter reads through
``reading_parameters``, and replaces no engine class attribute while tracing."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import tapelab
from tapelab import events, fx, nn
from tapelab.dispatch import STATE
from tapelab.nn.modules.module import Module

SCRIPT = textwrap.dedent("""
    import sys
    import tapelab
    from tapelab import events, fx, nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.scale = nn.Parameter(tapelab.ones(4))

        def forward(self, x):
            return tapelab.relu(self.fc(x)) * self.scale

    net = Net()
    seen = []
    with events.subscribe("graph_traced", seen.append):
        gm = fx.symbolic_trace(net)
        tgm = fx.trace_from_tape(net, tapelab.randn(2, 4))
    assert "tapelab.widgets" not in sys.modules, "tracing imported the widgets"
    assert [type(p) for p in seen] == [events.GraphTraced] * 2
    first, second = seen
    assert (first.how, first.name, first.root, first.module, first.graph) == (
        "symbolic_trace", "Net", net, gm, gm.graph)
    assert (second.how, second.root, second.module, second.graph) == ("trace_from_tape", net, tgm, tgm.graph)
    print("ok", [n.op for n in first.graph.nodes])
""")


def test_graph_traced_is_emitted_with_no_widget_imported():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ['placeholder', 'call_module', 'call_function', 'get_attr', 'call_function', "
                                  "'output']"), proc.stdout


def test_tracer_trace_emits_without_a_graph_module():
    seen = []
    with events.subscribe("graph_traced", seen.append):
        graph = fx.Tracer().trace(lambda x: x + 1)
    assert len(seen) == 1 and seen[0].graph is graph and seen[0].module is None and seen[0].how == "symbolic_trace"


class Spy(nn.Module):
    """Notes, from inside a traced forward, what the engine's classes hold at that moment."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.w = nn.Parameter(tapelab.ones(3))
        self.during = None

    def forward(self, x):
        self.__dict__["during"] = (Module.__call__, Module.__getattr__, tapelab.Tensor.__mul__, list(STATE.modes))
        return self.fc(x) * self.w


def test_tracing_patches_no_engine_class():
    before = (Module.__call__, Module.__getattr__, tapelab.Tensor.__mul__)
    tracer_attrs = dict(vars(fx.Tracer))
    spy = Spy()
    gm = fx.symbolic_trace(spy)
    call, getattr_, mul, modes = spy.during
    assert (call, getattr_, mul) == before and call is before[0] and getattr_ is before[1]
    assert len(modes) == 1 and isinstance(modes[0], tapelab.dispatch.Mode)   # tracing is a declared Mode
    assert (Module.__call__, Module.__getattr__, tapelab.Tensor.__mul__) == before and not STATE.modes
    assert dict(vars(fx.Tracer)) == tracer_attrs
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_module", "get_attr", "call_function", "output"]


def test_module_calls_reach_the_innermost_mode():
    calls = []

    class Watch(tapelab.dispatch.Mode):
        def call_module(self, module, forward, args, kwargs):
            calls.append(type(module).__name__)
            return forward(*args, **kwargs)

    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    x = tapelab.randn(1, 2)
    with Watch():
        out = model(x)
    assert calls == ["Sequential", "Linear", "ReLU"]
    assert tapelab.allclose(out, model(x))


def test_modules_traced_through_are_recorded_on_nodes():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return tapelab.relu(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x + 1

    gm = fx.symbolic_trace(Net())
    stack = {n.name: n.meta.get("nn_module_stack") for n in gm.graph.nodes}
    name = Block.__qualname__
    assert stack["relu"] == {"blocks.0": name} and stack["relu_1"] == {"blocks.1": name}
    assert stack["blocks_0_fc"] == {"blocks.0": name}
    assert stack["x"] is None and stack["add"] is None and stack["output"] is None


def test_parameter_reads_give_get_attr_nodes_only_while_tracing():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(tapelab.ones(2))

        def forward(self, x):
            return x + self.w.t() * 2

    m = M()
    gm = fx.symbolic_trace(m)
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "get_attr", "call_method", "call_function",
                                               "call_function", "output"]
    assert isinstance(m.w, nn.Parameter)
    with tapelab.no_grad():
        m.w.mul_(3)
    x = tapelab.randn(2)
    assert tapelab.allclose(gm(x), m(x))        # the graph reads the parameter, not a trace-time copy

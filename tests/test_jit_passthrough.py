"""``torch.jit`` in tapelab: programs written for TorchScript run as the Python they are, with
PyTorch's values (``script``/``trace`` hand back their argument; ``save``/``load`` round-trip a module)."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import tapelab as tl


def _gelu(lib):
    @lib.jit.script
    def fused_gelu(x):
        return x * 0.5 * (1.0 + lib.erf(x / 1.41421))
    return fused_gelu


def test_scripted_function_and_module_run_as_python_with_pytorchs_values():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_allclose(_gelu(tl)(tl.tensor(x)).numpy(), _gelu(torch)(torch.tensor(x)).numpy(), rtol=1e-6)
    m = tl.nn.Linear(3, 2)
    assert tl.jit.script(m) is m
    assert not tl.jit.is_scripting() and not tl.jit.is_tracing()


def test_decorators_and_annotations_leave_code_alone():
    class Net(tl.nn.Module):
        limit: tl.jit.Final[int] = 3

        @tl.jit.ignore
        def debug(self):
            return "python"

        @tl.jit.unused
        def old(self):
            return 1

        @tl.jit.export
        def extra(self, x):
            return x + self.limit

        def forward(self, x):
            y = tl.jit.annotate(list, [])
            y.append(x * 2)
            return y[0] if tl.jit.is_scripting() else y[0] + 1

    net = tl.jit.script(Net())
    assert net.debug() == "python" and net.old() == 1 and float(net.extra(tl.tensor(1.0))) == 4.0
    assert float(net(tl.tensor(2.0))) == 5.0
    assert tl.jit.ignore(drop=True)(len) is len
    assert tl.jit.isinstance([1, 2], list) and tl.jit.isinstance({"a": 1}, dict)


def test_trace_runs_the_example_once_and_fails_where_the_input_does():
    m = tl.nn.Linear(3, 2)
    traced = tl.jit.trace(m, tl.ones(4, 3))   # a TopLevelTracedModule over m's own tensors, as PyTorch's
    assert isinstance(traced, tl.jit.ScriptModule) and traced.weight is m.weight
    assert tl.jit.trace(abs, tl.ones(2)) is abs
    with pytest.raises(RuntimeError):
        tl.jit.trace(m, tl.ones(4, 5))
    assert tl.jit.trace_module(m, {"forward": tl.ones(1, 3)}) is m
    assert tl.jit.freeze(m) is m and tl.jit.optimize_for_inference(m) is m
    assert tl.jit.wait(tl.jit.fork(lambda a: a * 2, 3)) == 6


def test_save_and_load_round_trip_a_module():
    m = tl.nn.Sequential(tl.nn.Linear(3, 4), tl.nn.ReLU(), tl.nn.Linear(4, 1))
    buf = io.BytesIO()
    tl.jit.save(tl.jit.script(m), buf)
    buf.seek(0)
    back = tl.jit.load(buf)
    x = tl.randn(5, 3)
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())


def test_every_torch_jit_name_programs_call_is_present():
    wanted = ["script", "trace", "trace_module", "ignore", "unused", "export", "is_scripting", "is_tracing",
              "annotate", "Final", "freeze", "optimize_for_inference", "save", "load", "fork", "wait",
              "Future", "isinstance", "Error", "interface", "script_if_tracing"]
    assert [n for n in wanted if not hasattr(torch.jit, n)] == []
    assert [n for n in wanted if not hasattr(tl.jit, n)] == []

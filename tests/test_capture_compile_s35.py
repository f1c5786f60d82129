"""A compiled function inside a graph capture (session 35): its first call under a guard traces and compiles,
which a capture cannot record (it recorded the lowering's meta shape work: a replay under ``no_grad`` wrote
into read-only meta arrays). That call is refused with the capture's error, naming the warm-up; after a
warm-up the captured compiled call replays the new inputs' values, with and without grad."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.core.dispatch import STATE
from tapelab.graphs import Graph, graph
from tapelab.graphs._capture import CaptureError


def chain(x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _inputs(n=1 << 16):
    rng = np.random.default_rng(0)
    return [T.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True) for _ in range(2)]


def _torch_value(xs):
    with torch.no_grad():
        return float(chain(*(torch.tensor(t.detach().numpy()) for t in xs)))


@pytest.mark.parametrize("grad", [False, True])
def test_a_first_call_inside_a_capture_is_refused(grad):
    xs = _inputs()
    before = [t.detach().numpy().copy() for t in xs]
    c = T.compile(chain)
    g = Graph()
    with pytest.raises(CaptureError, match=r"compiles on this call .* warm-up"):
        with graph(g):
            with T.set_grad_enabled(grad):
                c(*xs)
    assert not STATE.modes
    for t, b in zip(xs, before):
        np.testing.assert_array_equal(t.detach().numpy(), b)
    assert not c.cache                      # nothing half-built is kept for the next call
    with T.set_grad_enabled(grad):
        assert float(c(*xs).detach()) == pytest.approx(_torch_value(xs), rel=1e-5)


def test_no_grad_replay_after_a_warm_up_reads_the_new_inputs():
    xs = _inputs()
    c = T.compile(chain)
    with T.no_grad():
        c(*xs)                              # the warm-up compiles
    g = Graph()
    with graph(g):
        with T.no_grad():
            out = c(*xs)
    for scale in (0.5, -2.0):
        with T.no_grad():
            xs[0].mul_(scale)
        g.replay()
        assert float(out) == pytest.approx(_torch_value(xs), rel=1e-5)

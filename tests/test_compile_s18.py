"""tapelab.compile (issue 18, session 18): torch.compile's surface (grad_fn names, ``torch._dynamo.explain``'s
ExplainOutput, ``reset``, ``disable``, the recompile limit), each against torch, and the compiled call's
fast path (the guard key, the backward node) against eager and torch values."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest
import torch
import torch._dynamo as tdynamo

import tapelab
import tapelab._dynamo as dynamo
import tapelab.compiler as tc
from tapelab import nn

RTOL, ATOL = 1e-5, 1e-6


def chain6(m):
    def f(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    return f


def _pair(*shape, seed=0, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tapelab.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


@pytest.fixture(autouse=True)
def _fresh():
    tc.reset()
    yield
    tc.reset()


# ---------------------------------------------------------------- grad_fn: CompiledFunctionBackward, as torch's
def test_compiled_outputs_grad_fn_is_named_as_torchs():
    (x, xt), (w, wt) = _pair(16), _pair(16, seed=1)
    f, ft = tapelab.compile(chain6(tapelab)), torch.compile(chain6(torch), backend="aot_eager")
    for _ in range(2):
        y, yt = f(x, w), ft(xt, wt)
    assert y.grad_fn.name() == yt.grad_fn.name() == "CompiledFunctionBackward"
    assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__
    y.backward()
    yt.backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=RTOL, atol=ATOL)

    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))      # the one-node step's node
    a = tapelab.ones(3, 4)
    cm = tapelab.compile(m)
    for _ in range(2):
        out = cm(a)
    assert out.grad_fn.name() == yt.grad_fn.name() and "linear" in out.grad_fn.op.members
    np.testing.assert_allclose(out.detach().numpy(), m(a).detach().numpy(), rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- explain: torch._dynamo.explain's ExplainOutput
def _branchy(m):
    def f(x):
        y = x.sin() * 2
        if y.sum() > 0:
            return y.cos()
        return y
    return f


def test_explain_output_has_torchs_fields_and_types():
    ours = [f.name for f in dataclasses.fields(dynamo.explain(chain6(tapelab))(*(_pair(4)[0], _pair(4)[0])))]
    theirs = [f.name for f in dataclasses.fields(tdynamo.explain(chain6(torch))(torch.ones(4), torch.ones(4)))]
    assert ours[:len(theirs)] == theirs
    x = tapelab.ones(3)
    e = dynamo.explain(_branchy(tapelab))(x)
    et = tdynamo.explain(_branchy(torch))(torch.ones(3))
    assert e.graph_break_count == et.graph_break_count == 1 and e.graph_count == et.graph_count == 2
    r, rt = e.break_reasons[0], et.break_reasons[0]
    assert type(r.reason) is type(rt.reason) is str and r.graph_break is rt.graph_break is True
    assert "Tensor.bool()" in r.reason and "if y.sum() > 0" in r           # the reason is its text too
    # the user's frame that broke the graph, as torch's FrameSummary list names it
    assert [(f.name, f.lineno) for f in r.user_stack][-1] == ("f", _branchy.__code__.co_firstlineno + 3)
    assert type(r.user_stack[-1]) is type(rt.user_stack[-1])
    assert type(e.compile_times) is type(et.compile_times) is str
    assert e.compile_times.split("\n")[:2] == et.compile_times.split("\n")[:2]
    assert "trace" in e.times and e.times["trace"] > 0
    text = str(e)
    for line in ("Graph Break Count: 1", "Break Reasons:", "  Break Reason 1:", "    User Stack:", "Out Guards:",
                 "Compile Times: TorchDynamo compilation metrics:"):
        assert line in text and line in str(et)
    e2 = tc.explain(chain6(tapelab), *(_pair(4)[0], _pair(4, seed=1)[0]))
    assert e2.graph_count == 1 and e2.graph_break_count == 0 and e2.break_reasons == []
    assert e2.op_count == sum(map(len, e2.ops_per_graph)) == 1


# ---------------------------------------------------------------- disable
def test_disable_runs_eagerly_and_breaks_the_graph_as_torchs():
    def g(m):
        def inner(x):
            return x.sin() + 1
        return inner
    d, dt = tc.disable(g(tapelab)), torch.compiler.disable(g(torch))
    assert d.__wrapped__.__name__ == dt.__wrapped__.__name__ == "inner"
    assert tc.disable(d) is d and dynamo.disable is tc.disable

    def h(m, dis):
        def outer(x):
            return dis(x.cos()) * 3
        return outer
    x, xt = _pair(5, grad=False)
    e, et = tc.explain(h(tapelab, d), x), tdynamo.explain(h(torch, dt))(xt)
    assert e.graph_break_count == et.graph_break_count == 1
    first = e.break_reasons[0].reason.split("\n")
    assert first[0] == et.break_reasons[0].reason.split("\n")[0] == "Skip calling `torch.compiler.disable()`d function"
    assert "(reason: None)" in first[1] and "(reason: None)" in et.break_reasons[0].reason
    c = tapelab.compile(h(tapelab, d))
    for _ in range(3):
        got = c(x)
    np.testing.assert_allclose(got.numpy(), torch.compile(h(torch, dt), backend="eager")(xt).numpy(), rtol=RTOL)
    assert next(iter(c.cache.values())).run is None          # that key runs eagerly
    with pytest.raises(tc.Unsupported, match="disable"):
        tapelab.compile(h(tapelab, d), fullgraph=True)(x)

    @tc.disable(reason="logging")
    def k(x):
        return x + 1
    assert k(tapelab.ones(1)).item() == 2.0
    assert "(reason: logging)" in tc.explain(lambda x: k(x) * 2, tapelab.ones(2)).break_reasons[0]
    assert tapelab.compile(d)(x).numpy().tolist() == g(tapelab)(x).numpy().tolist()
    e = tc.explain(d, x)                       # the disabled function itself: not compiled
    assert e.graph_count == 0 and e.break_reasons[0].reason.startswith("Skip calling")


# ---------------------------------------------------------------- recompile limit, reset
def _limit_log(m, limit, calls, caplog, logger):
    m._dynamo.reset()          # torch warns once per code object until a reset
    old = m._dynamo.config.cache_size_limit
    m._dynamo.config.cache_size_limit = limit
    try:
        assert m._dynamo.config.recompile_limit == limit
        f = m.compile(lambda x, n: x * n, backend="eager", dynamic=False)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=logger):
            outs = [f(*c) for c in calls]
        return outs, [r.getMessage() for r in caplog.records if "recompile_limit" in r.getMessage()]
    finally:
        m._dynamo.config.cache_size_limit = old


@pytest.mark.parametrize("calls", [
    [((3,), "float32", 2), ((3,), "float64", 2)],         # dtype
    [((3,), "float32", 2), ((3,), "float32", 3)],         # a Python value
    [((3,), "float32", 2), ((4,), "float32", 2)],         # a size
    [((3,), "float32", 2), ((3, 1), "float32", 2)],       # the rank
])
def test_recompile_limit_falls_back_to_eager_with_torchs_warning(calls, caplog):
    def args(m, shape, dt, n):
        return m.ones(*shape, dtype=getattr(m, dt)), n
    ours, ours_log = _limit_log(tapelab, 1, [args(tapelab, *c) for c in calls], caplog, "tapelab._dynamo")
    theirs, their_log = _limit_log(torch, 1, [args(torch, *c) for c in calls], caplog, "torch._dynamo")
    assert len(ours_log) == len(their_log) == 1
    mine, torch_lines = ours_log[0].split("\n"), their_log[0].split("\n")
    assert mine[0] == torch_lines[0] == "torch._dynamo hit config.recompile_limit (1)"
    assert mine[1].startswith("   function: '<lambda>' (") and torch_lines[1].startswith("   function: '<lambda>' (")
    # "last reason: 0/0: tensor 'x' dtype mismatch. expected Float, actual Double": the frame number differs
    assert mine[2].split(": ", 2)[2] == torch_lines[2].split(": ", 2)[2].split("  ")[0]
    assert mine[-2:] == torch_lines[-2:]
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.numpy(), t.numpy())
        assert o.dtype.name == str(t.dtype).split(".")[1]


def test_reset_forgets_entries_and_automatic_dynamic_shapes():
    f = tapelab.compile(lambda x: (x * 2.0).tanh())
    for n in (3, 5, 7):
        f(tapelab.ones(n, 2))
    assert len(f.cache) == 2 and f.dynamic         # the second size marked dim 0 dynamic
    torch.compiler.reset()                          # torch's own reset does not reach tapelab's caches
    assert len(f.cache) == 2
    dynamo.reset()
    assert len(f.cache) == 0 and not f.dynamic
    tapelab.compiler.reset()
    np.testing.assert_allclose(f(tapelab.ones(4, 2)).numpy(), np.tanh(np.full((4, 2), 2.0, np.float32)), rtol=RTOL)
    assert len(f.cache) == 1 and tc.reset is dynamo.reset


# ---------------------------------------------------------------- the one-op entry's direct call and backward
def test_one_op_entry_direct_call_equals_torch_and_falls_back_when_watched():
    (x, xt), (w, wt) = _pair(4, 16), _pair(16, seed=1)
    f = tapelab.compile(chain6(tapelab))
    f(x, w)
    e = next(iter(f.cache.values()))
    assert e.run.__code__.co_filename.startswith("<tapelab compiled call of fused(")   # the entry calls the loop directly
    for _ in range(2):
        x.grad = w.grad = xt.grad = wt.grad = None
        y, yt = f(x, w), chain6(torch)(xt, wt)
        y.backward()
        yt.backward()
        np.testing.assert_allclose(y.item(), yt.item(), rtol=RTOL)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=RTOL, atol=ATOL)
    with tapelab.tape() as t:             # someone watches: the graph's forward, through the dispatcher
        f(x, w).backward()
    assert [r.op for r in t.nodes][0] == "fused(mul, add, tanh, mul, sigmoid, sum)"
    # a view that needs no grad, of a base written in place since: the graph's path refreshes it
    base, base_t = _pair(2, 16, seed=3, grad=False)
    v, vt = base[1], base_t[1]
    base.mul_(2.0)
    base_t.mul_(2.0)
    x.grad = xt.grad = None
    y, yt = f(x, v), chain6(torch)(xt, vt)
    y.backward()
    yt.backward()
    np.testing.assert_allclose(y.item(), yt.item(), rtol=RTOL)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    # a Parameter (a Tensor subclass) goes through the general guard part, the same key
    p = nn.Parameter(tapelab.tensor(w.detach().numpy()))
    assert f._key((x, p), {}) == f._key((x, w), {})


# ---------------------------------------------------------------- in-place fused multiply-adds (SGD's update)
@pytest.mark.parametrize("shape", [(16,), (40, 25), (40000,)])     # under and over kernels.PARALLEL_MIN
def test_inplace_fma_updates_equal_torch_bit_for_bit(shape):
    rng = np.random.default_rng(shape[0])
    p, g, e, t1, t2 = (rng.standard_normal(shape).astype(np.float32) for _ in range(5))
    ours = [tapelab.tensor(a.copy()) for a in (p, g, e, t1, t2)]
    theirs = [torch.tensor(a.copy()) for a in (p, g, e, t1, t2)]
    for m, (a, b, c, d, f) in ((tapelab, ours), (torch, theirs)):
        a.add_(b, alpha=-0.01)              # the loop writes into its own input: the vector loop
        c.lerp_(b, 0.1)
        c.lerp_(a, 0.9)                     # from the end
        d.addcmul_(f, b, value=0.001)
        f.addcmul_(d, d)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.numpy(), t.numpy())
    # an optimizer's step is the same update (optim.SGD on arrays, in place)
    w, wt = tapelab.tensor(p.copy(), requires_grad=True), torch.tensor(p.copy(), requires_grad=True)
    opt, optt = tapelab.optim.SGD([w], lr=0.05), torch.optim.SGD([wt], lr=0.05)
    (w * w).sum().backward()
    (wt * wt).sum().backward()
    opt.step()
    optt.step()
    np.testing.assert_array_equal(w.detach().numpy(), wt.detach().numpy())


# ---------------------------------------------------------------- the fused loop's fixed-arity runner
def test_fused_runner_fixed_arity_equals_torch_with_broadcast():
    from tapelab.compiler.fused import FusedOp

    def f(m):
        def g(x, w, b):
            return ((x * w + b).tanh() * x).sigmoid()
        return g
    for threads, shape in ((1, (4, 16)), (2, (64, 512))):
        tapelab.set_num_threads(threads)
        (x, xt), (w, wt) = _pair(*shape), _pair(shape[-1], seed=1)     # w broadcasts along rows
        (b, bt) = _pair(*shape, seed=2, grad=False)
        c = tapelab.compile(f(tapelab))
        for _ in range(2):
            x.grad = w.grad = xt.grad = wt.grad = None
            y, yt = c(x, w, b), f(torch)(xt, wt, bt)
            y.sum().backward()
            yt.sum().backward()
            np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)
        ops = [n.target.op for n in next(iter(c.cache.values())).graph.graph.nodes
               if isinstance(getattr(n.target, "op", None), FusedOp)]
        runners = [r for o in ops for r in o._runners.values()] + [
            r for o in ops for bw in o._backwards.values() for n in bw.graph.nodes
            if isinstance(getattr(n.target, "op", None), FusedOp) for r in n.target.op._runners.values()]
        assert runners and any(hasattr(r, "source") for r in runners)     # the straight-line runner

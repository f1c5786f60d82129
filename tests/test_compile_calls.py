"""A compiled function's steady-state call: the fused op's own dispatch path (``FusedOp.fast``), the
backward applied as one kernel, what the forward saves; and ``mode="reduce-overhead"`` (the compiled
step captured after warm-up and replayed). Values and gradients against PyTorch."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import tapelab
from tapelab.compiler import fused

RTOL, ATOL = 1e-5, 1e-6


def _chain(m, x, w):
    return ((x * w + 1.0).tanh() * x).sigmoid().sum()


def _pair(shape=(16,), grads=(True, True), seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    ours = [tapelab.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    theirs = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    return ours, theirs


def _close(got, want, what=""):
    """rtol 1e-5 with an absolute floor of 1e-5 of the tensor's scale (a gradient summed over rows
    can cancel to far below its neighbours, whose rounding it then carries)."""
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=max(ATOL, RTOL * float(np.abs(want).max())), err_msg=what)


def _check(got, want, ours, theirs):
    _close(got.detach().numpy(), want.detach().numpy())
    for a, b in zip(ours, theirs):
        if b.grad is None:
            assert a.grad is None
        else:
            _close(a.grad.numpy(), b.grad.numpy())


def _fused_op(compiled):
    (entry,) = compiled.cache.values()
    (op,) = entry.graph.fused_ops
    return op


@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True)])
def test_a_steady_call_takes_the_fused_ops_own_path(monkeypatch, grads):
    """After the tracing call, the forward and the one-kernel backward go through ``FusedOp.fast``,
    never the dispatcher's general ``eager``; each input's gradient is its own kernel output (None
    where not wanted), equal to PyTorch's."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    ours, theirs = _pair(grads=grads)
    c(*ours)
    calls = []
    real = fused.eager
    monkeypatch.setattr(fused, "eager", lambda *a: calls.append(a[0]) or real(*a))
    for _ in range(3):
        for t in ours:
            t.grad = None
        got = c(*ours)
        got.backward()
    assert calls == []
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)


def test_a_fused_sum_saves_nothing_its_backward_does_not_read():
    """The fused ``sum`` kernel's backward recomputes the group from the inputs and reads the 0-d
    gradient, not the forward's result, so the forward keeps no output for it (the backward graph's
    input guard once counted as a reader of that output)."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    ours, theirs = _pair()
    c(*ours)
    got = c(*ours)
    op = _fused_op(c)
    assert op.save_output is False and got.grad_fn.out_data is None
    got.backward()
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)


def test_operands_the_fast_path_does_not_take_run_through_eager(monkeypatch):
    """A float64 operand (the kernel reads float32) reaches the kernel through ``eager``, which casts
    it; a strided view takes the fast path, whose loop reads a contiguous copy: both give the float32
    contiguous call's value."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    (x, w), _ = _pair()
    c(x, w)
    c(x, w)
    op = _fused_op(c)
    apply = tapelab.core.dispatch.apply
    want = apply(op, x, w).item()
    calls = []
    real = fused.eager
    monkeypatch.setattr(fused, "eager", lambda *a: calls.append(a[1][0].dtype) or real(*a))
    wide = tapelab.tensor(np.stack([x.detach().numpy(), np.zeros(16, np.float32)], 1)).reshape(-1)
    assert apply(op, wide[::2], w).item() == want and calls == []
    assert apply(op, x.double(), w).item() == pytest.approx(want, rel=RTOL) and calls == [tapelab.float64]


# ---------------------------------------------------------------- mode="reduce-overhead"

@pytest.fixture
def always(monkeypatch):
    """Every call after the capture replays (no trial against the compiled call)."""
    from tapelab.compiler import overhead
    monkeypatch.setattr(overhead, "TRIALS", 0)


def _mm_chain(m, x, w):
    """A GEMM and a fused group: more than one op each way, so reduce-overhead captures it."""
    return ((x @ w) * 2.0 + 1.0).tanh().sum()


def _mm_pair(rows=16, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((rows, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32)]
    return [tapelab.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays]


def _replays(compiled):
    c = compiled.__dict__.get("_compiled", compiled)
    (entry,) = c.cache.values()
    return entry.replays


def _nets(seed=0):
    """The same Linear-BatchNorm-ReLU-Linear net in tapelab and torch (training mode)."""
    def build(m):
        m.manual_seed(seed)
        return m.nn.Sequential(m.nn.Linear(8, 16), m.nn.BatchNorm1d(16), m.nn.ReLU(), m.nn.Linear(16, 4))
    ours, theirs = build(tapelab), build(torch)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def test_reduce_overhead_steps_equal_torch_with_the_optimizer_between(always):
    """Five SGD steps of a compiled net under reduce-overhead (the third call on is a replay):
    losses, gradients, updated weights and BatchNorm's running statistics (static state the replay
    writes) equal PyTorch's; a new batch each step is copied into the graph's input buffer."""
    ours, theirs = _nets()
    step = tapelab.compile(ours, mode="reduce-overhead")
    opt, topt = tapelab.optim.SGD(ours.parameters(), lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    for i in range(5):
        x = rng.standard_normal((32, 8)).astype(np.float32)
        opt.zero_grad()
        topt.zero_grad()
        loss = (step(tapelab.tensor(x)) ** 2).mean()
        want = (theirs(torch.tensor(x)) ** 2).mean()
        loss.backward()
        want.backward()
        np.testing.assert_allclose(loss.item(), want.item(), rtol=RTOL)
        for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=f"{n} step {i}")
        opt.step()
        topt.step()
    for (n, b), tb in zip(ours.named_buffers(), theirs.buffers()):
        np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    r = _replays(step)
    assert r.reason is None and len(r.ops) == 1


def test_reduce_overhead_captures_again_for_a_new_shape(always):
    """Each input shape gets its own graphs (a dynamic entry serves both sizes; a graph only one):
    values and gradients at both sizes equal PyTorch's, alternating after both were captured."""
    c = tapelab.compile(lambda x, w: _mm_chain(tapelab, x, w), mode="reduce-overhead")
    for _ in range(3):
        for n in (16, 40):
            ours, theirs = _mm_pair(n, seed=n)
            got = c(*ours)
            got.backward()
            want = _mm_chain(torch, *theirs)
            want.backward()
            _check(got, want, ours, theirs)
    replays = [e.replays for e in c.cache.values()]
    assert sum(len(r.ops) for r in replays) == 2


def test_reduce_overhead_never_overwrites_what_a_caller_still_holds(always):
    """A kept output keeps its value after later replays, and a second call before the first one's
    backward (``c(x1) + c(x2)``) runs without replaying, so both gradients are PyTorch's."""
    c = tapelab.compile(lambda x, w: _mm_chain(tapelab, x, w), mode="reduce-overhead")
    (x, w), (xt, wt) = _mm_pair()
    for _ in range(3):
        c(x, w).backward()
    assert len(_replays(c).ops) == 1
    with tapelab.no_grad():
        kept = c(x, w)
        value = kept.item()
        c(x * 2.0, w)
    assert kept.item() == value
    x.grad = w.grad = None
    (c(x, w) + c(x * 0.5, w)).backward()
    want = _mm_chain(torch, xt, wt) + _mm_chain(torch, xt * 0.5, wt)
    want.backward()
    _check(x.grad, xt.grad, [w], [wt])


def test_reduce_overhead_leaves_one_fused_kernel_to_its_direct_call():
    """A call that is one fused kernel forward and one backward has no dispatch for a replay to save,
    only the copies to add: it stays the compiled call, and says so."""
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w), mode="reduce-overhead")
    ours, theirs = _pair()
    for _ in range(3):
        for t in ours:
            t.grad = None
        got = c(*ours)
        got.backward()
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)
    r = _replays(c)
    assert r.ops == {} and "one fused kernel each way" in r.reason


def test_reduce_overhead_does_not_replay_a_write_into_an_argument():
    """A compiled call writing into its tensor argument is not captured (the replay would write the
    graph's copy of it): it runs the compiled graph each time, with eager's effect, and says why."""
    def f(x, s):
        s.add_(x)
        return (x * 2.0).tanh()
    c = tapelab.compile(f, mode="reduce-overhead")
    x, s = tapelab.ones(4), tapelab.zeros(4)
    for _ in range(4):
        c(x, s)
    np.testing.assert_array_equal(s.numpy(), np.full(4, 4.0, np.float32))
    r = _replays(c)
    assert r.ops == {} and "writes into its argument" in r.reason


def test_reduce_overhead_refuses_a_differentiable_gradient(always):
    c = tapelab.compile(lambda x, w: _mm_chain(tapelab, x, w), mode="reduce-overhead")
    (x, w), _ = _mm_pair()
    for _ in range(3):
        c(x, w).backward()
    with pytest.raises(RuntimeError, match="reduce-overhead"):
        tapelab.autograd.grad(c(x, w), [x], create_graph=True)


@pytest.mark.parametrize("clear", ["none", "zero", "accumulate"])
def test_reduce_overhead_gradients_accumulate_as_eager(always, clear):
    """The gradients leave the replayed backward uncopied where safe: with ``.grad`` set to None,
    zeroed in place, or accumulated over steps (a held ``.grad`` makes the next backward replay the
    other graph and copy), every step's ``.grad`` equals PyTorch's, and a view of an earlier ``.grad``
    keeps its values."""
    c = tapelab.compile(lambda x, w: _mm_chain(tapelab, x, w), mode="reduce-overhead")
    (x, w), (xt, wt) = _mm_pair()
    kept = []
    for i in range(6):                 # calls 0 and 1 trace and warm up; from call 2 on the backward replays
        if clear == "none" or i == 2:  # a replay's gradient becomes .grad itself
            x.grad = w.grad = xt.grad = wt.grad = None
        elif clear == "zero" and i:
            for t in (x, w, xt, wt):
                t.grad.zero_()
        c(x * (1.0 + i), w).backward()
        _mm_chain(torch, xt * (1.0 + i), wt).backward()
        _close(w.grad.numpy(), wt.grad.numpy(), f"step {i}")
        _close(x.grad.numpy(), xt.grad.numpy(), f"step {i}")
        kept.append((w.grad.view(-1), wt.grad.clone().view(-1)))
    for i, (ours, theirs) in enumerate(kept):
        if clear == "none":
            _close(ours.numpy(), theirs.numpy(), f"kept {i}")
    op = next(iter(_replays(c).ops.values()))
    assert any(any(h) for *_, h in op.backwards)       # some gradient did leave uncopied


@pytest.mark.parametrize("headers", [True, False])
def test_a_kernel_call_is_an_extension_function_where_python_headers_exist(tmp_path, monkeypatch, headers):
    """The kernel library exports a CPython ``METH_FASTCALL`` entry (a fraction of ctypes' per-call
    cost) when it can be built against Python's headers, else the ctypes entry: both compute PyTorch's
    values and gradients."""
    import sysconfig
    from tapelab.compiler import cpu
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    if not headers:
        monkeypatch.setattr(sysconfig, "get_paths", lambda: {})
    elif not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h here")
    c = tapelab.compile(lambda x, w: _chain(tapelab, x, w))
    ours, theirs = _pair((3, 50))
    c(*ours)
    got = c(*ours)
    got.backward()
    want = _chain(torch, *theirs)
    want.backward()
    _check(got, want, ours, theirs)
    entry = cpu._entry(_fused_op(c).kernel)
    assert (type(entry.objects).__name__ == "builtin_function_or_method") is headers


def test_a_compiled_module_reads_its_parameters_by_one_name_and_sees_their_updates():
    """The graph reads ``net.0.weight`` as one attribute of its own (no ``Module.__getattr__`` chain a
    step), the same tensor: an in-place update is seen, a reassigned parameter recompiles, and the
    values stay PyTorch's."""
    ours, theirs = _nets()
    ours.eval()
    theirs.eval()
    c = tapelab.compile(ours)
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    c(tapelab.tensor(x))
    (entry,) = c._compiled.cache.values()
    reads = [n for n in entry.graph.graph.nodes if n.op == "get_attr"]
    assert reads and all("." not in n.target and "." in n.meta["attr_path"] for n in reads)
    with tapelab.no_grad():
        ours[0].weight.mul_(2.0)
    with torch.no_grad():
        theirs[0].weight.mul_(2.0)
    _close(c(tapelab.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy())
    w = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    ours[3].weight = tapelab.nn.Parameter(tapelab.tensor(w))
    theirs[3].weight = torch.nn.Parameter(torch.tensor(w))
    _close(c(tapelab.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy())


def test_reduce_overhead_on_the_simulated_cuda_device(always):
    """On the (simulated) cuda device the compiled step is captured as cuda graphs and replayed;
    gradients equal the cpu module's over several steps."""
    from tapelab._backend import simulated_cuda
    with simulated_cuda(0) as dev:
        tapelab.manual_seed(0)
        lin, ref = tapelab.nn.Linear(4, 3).to(dev), tapelab.nn.Linear(4, 3)
        ref.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
        c = tapelab.compile(lin, mode="reduce-overhead")
        for i in range(4):
            x = tapelab.randn(2, 4)
            lin.zero_grad()
            ref.zero_grad()
            c(x.to(dev)).sum().backward()
            ref(x).sum().backward()
            _close(lin.weight.grad.cpu().numpy(), ref.weight.grad.numpy(), f"step {i}")
            _close(lin.bias.grad.cpu().numpy(), ref.bias.grad.numpy(), f"step {i}")
        r = _replays(c)
        assert r.reason is None and len(r.ops) == 1
        op = next(iter(r.ops.values()))
        assert op.fwd_graph.device == dev and op.fwd_graph.stream_captured


@pytest.mark.parametrize("replay_faster", [True, False])
def test_reduce_overhead_keeps_the_replay_only_where_it_measured_faster(monkeypatch, replay_faster):
    """After the capture, calls alternate between the replay and the compiled call, each timed to the
    next call; the replay is kept only when its median is lower (a fake clock decides here), and
    every step's gradients are PyTorch's either way."""
    from tapelab.compiler import overhead
    now = [0.0]

    def clock():
        return now[0]
    monkeypatch.setattr(overhead, "_clock", clock)
    c = tapelab.compile(lambda x, w: _mm_chain(tapelab, x, w), mode="reduce-overhead")
    (x, w), (xt, wt) = _mm_pair()
    r = None
    for i in range(3 + 2 * overhead.TRIALS + 2):
        x.grad = w.grad = xt.grad = wt.grad = None
        c(x, w).backward()
        r = r or next(iter(c.cache.values())).replays
        timing = r.timing
        now[0] += 1.0 if timing is None or timing[1] == replay_faster else 2.0
        _mm_chain(torch, xt, wt).backward()
        _check(x.grad, xt.grad, [w], [wt])
    (key,) = r.ops
    assert (r.ops[key] is not None) is replay_faster and r.trials == {}
    assert "replayed 1000000 us against compiled 2000000 us" in r.notes[key] if replay_faster else \
        "replayed 2000000 us against compiled 1000000 us" in r.notes[key]

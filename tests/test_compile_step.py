"""tapelab.compile's one-node step (engine/compiler/step.py): a compiled module whose graph is all
declared ops runs as ONE autograd node (a generated forward over arrays, one traced joint backward),
its values and gradients equal to eager's and PyTorch's; hooks fire; create_graph=True and graphs
with an undeclared op take the per-op path, and ``explain`` says why."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab
import tapelab.compiler as tc
from tapelab.graphs import Graph, graph

RTOL, ATOL = 1e-5, 1e-6


def _close(got, want, what=""):
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=max(ATOL, RTOL * float(np.abs(want).max())), err_msg=what)


def _tiny(m):
    """tiny_mlp's module (bench/compile_bench.py) for library ``m``: the loss inside the module."""
    nn = m.nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.LayerNorm(64), nn.SiLU(),
                                     nn.Linear(64, 10))

        def forward(self, x):
            y = self.net(x)
            return (y * y).mean()
    return Tiny()


def _classifier(m):
    """Linear, ReLU, Linear and cross-entropy on integer labels (the bench's MLP row, smaller)."""
    nn = m.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 5))

        def forward(self, x, y):
            return nn.functional.cross_entropy(self.net(x), y)
    return Classifier()


def _pair(make):
    """The same module in tapelab and torch (torch's parameters copied from tapelab's)."""
    tapelab.manual_seed(0)
    ours, theirs = make(tapelab), make(torch)
    with torch.no_grad():
        for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    return ours, theirs


def _inputs(name, rng):
    if name == "tiny":
        return (rng.standard_normal((8, 32)).astype(np.float32),)
    return rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 5, 16)


@pytest.mark.parametrize("name, make", [("tiny", _tiny), ("classifier", _classifier)])
def test_compiled_step_is_one_node_equal_to_eager_and_torch(name, make):
    model, tmodel = _pair(make)
    compiled = tapelab.compile(model)
    rng = np.random.default_rng(0)
    for call in range(3):                 # traced (eager), then the one-node step twice
        arrays = _inputs(name, rng)
        model.zero_grad()
        loss = compiled(*map(tapelab.tensor, arrays))
        loss.backward()
        got = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        model.zero_grad()
        want = model(*map(tapelab.tensor, arrays))
        want.backward()
        tmodel.zero_grad()
        tloss = tmodel(*map(torch.tensor, arrays))
        tloss.backward()
        _close(loss.detach().numpy(), want.detach().numpy(), "loss vs eager")
        _close(loss.detach().numpy(), tloss.detach().numpy(), "loss vs torch")
        for (n, p), (_, q) in zip(model.named_parameters(), tmodel.named_parameters()):
            _close(got[n], p.grad.numpy(), f"{n} vs eager")
            _close(got[n], q.grad.numpy(), f"{n} vs torch")
        if call:
            assert loss.grad_fn.name() == "CompiledFunctionBackward"
            assert [n for n, _ in loss.grad_fn.next_functions if n is not None] and all(
                type(n).__name__ == "AccumulateGrad" for n, _ in loss.grad_fn.next_functions if n is not None)
    (entry,) = compiled._compiled.cache.values()
    assert entry.step is not None and "linear" in entry.step.members


def test_one_node_in_the_tape_and_the_profiler_with_its_members():
    model = _pair(_tiny)[0]
    compiled = tapelab.compile(model)
    x = tapelab.randn(8, 32)
    compiled(x)
    with tapelab.tape() as t:
        compiled(x).backward()
    names = [r.op for r in t.nodes]
    assert "compiled(Tiny)" in names and "linear" not in names and "layer_norm" not in names, names
    node = compiled(x).grad_fn
    assert node.op.members[0] == "linear" and "layer_norm" in node.op.members
    with tapelab.profiler.profile() as prof:
        compiled(x).backward()
    keys = {e.key for e in prof.key_averages()}
    assert "compiled(Tiny)" in keys and "linear" not in keys, keys
    report = tc.explain(model, x)
    assert report.one_node and report.one_node[0].startswith("compiled(Tiny): one autograd node (linear, ")
    assert "layer_norm" in report.one_node[0] and "One Node:" in str(report)


def test_input_gradient_retain_graph_and_parameter_hooks():
    """An input that requires grad gets its gradient from the node; a second backward through the
    retained node reads the same saved arrays; a parameter hook fires and changes what accumulates."""
    model, tmodel = _pair(_tiny)
    compiled = tapelab.compile(model)
    xs = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    seen = []
    w = model.net[0].weight
    handle = w.register_hook(lambda g: seen.append(g.shape) or g * 2.0)
    tw = tmodel.net[0].weight
    thandle = tw.register_hook(lambda g: g * 2.0)
    compiled(tapelab.tensor(xs, requires_grad=True))     # traced (the key holds requires_grad): no hook runs
    assert seen == []
    model.zero_grad()
    x = tapelab.tensor(xs, requires_grad=True)
    loss = compiled(x)
    loss.backward(retain_graph=True)
    loss.backward()
    xt = torch.tensor(xs, requires_grad=True)
    tl = tmodel(xt)
    tl.backward(retain_graph=True)
    tl.backward()
    assert seen == [(64, 32), (64, 32)]
    _close(x.grad.numpy(), xt.grad.numpy(), "input grad")
    _close(w.grad.numpy(), tw.grad.numpy(), "hooked weight")
    _close(model.net[5].bias.grad.numpy(), tmodel.net[5].bias.grad.numpy(), "last bias")
    handle.remove()
    thandle.remove()


def test_create_graph_takes_the_graphs_own_ops():
    """A gradient penalty (double backward): the node's vjp runs the graph's own ops (one warning)."""
    model, tmodel = _pair(_tiny)
    compiled = tapelab.compile(model)
    xs = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    compiled(tapelab.tensor(xs, requires_grad=True))       # traced: the key holds requires_grad
    x = tapelab.tensor(xs, requires_grad=True)
    loss = compiled(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (gx,) = tapelab.autograd.grad(loss, [x], create_graph=True)
    assert any("create_graph=True through compiled(Tiny)" in str(w.message) for w in caught)
    (gx * gx).sum().backward()
    xt = torch.tensor(xs, requires_grad=True)
    (gt,) = torch.autograd.grad(tmodel(xt), [xt], create_graph=True)
    (gt * gt).sum().backward()
    _close(gx.detach().numpy(), gt.detach().numpy(), "gradient")
    for (n, p), (_, q) in zip(model.named_parameters(), tmodel.named_parameters()):
        _close(p.grad.numpy(), q.grad.numpy(), f"{n} after the penalty")


def test_a_state_write_keeps_the_per_op_path_and_explain_says_why():
    """A train-mode BatchNorm writes its running statistics (``write_state``, not a declared op)."""
    nn = tapelab.nn
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    x = tapelab.randn(5, 6)
    report = tc.explain(model, x)
    assert report.graph_count == 1 and "write_state, not a declared op" in report.one_node[0], report.one_node
    compiled = tapelab.compile(model)
    compiled(x)
    assert compiled(x).sum().grad_fn is not None
    (entry,) = compiled._compiled.cache.values()
    assert entry.step is None and "write_state" in entry.step_reason


def test_no_step_without_grad_or_with_a_replaying_mode():
    model = _pair(_tiny)[0]
    x = tapelab.randn(8, 32)
    with tapelab.no_grad():
        assert "grad mode is off" in tc.explain(model, x).one_node[0]
    compiled = tapelab.compile(model, mode="reduce-overhead")
    compiled(x)
    (entry,) = compiled._compiled.cache.values()
    assert entry.step is None and "reduce-overhead" in entry.step_reason


def test_a_capture_and_a_new_size_run_the_lowered_graph():
    """Under a mode (a capture sees each op) and for another size of a dynamic entry, the step
    hands the call to the lowered graph; both equal eager."""
    model = _pair(_tiny)[0]
    compiled = tapelab.compile(model)
    xs = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
    x = tapelab.tensor(xs)
    compiled(x)
    g = Graph()
    with graph(g):
        out = compiled(x)
    g.replay()
    _close(out.detach().numpy(), model(x).detach().numpy(), "captured")
    for rows in (12, 20):                 # the second new size marks the batch dynamic
        x2 = tapelab.randn(rows, 32)
        got = compiled(x2)
        _close(got.detach().numpy(), model(x2).detach().numpy(), f"{rows} rows")


def test_an_in_place_write_into_a_result_the_backward_reads_raises_as_eager():
    """tanh's vjp reads its output: when that is the call's result, the node checks its version."""
    nn = tapelab.nn

    class Act(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x).tanh()
    model = Act()
    compiled = tapelab.compile(model)
    x = tapelab.randn(5, 4)
    compiled(x)
    out = compiled(x)
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    g = tapelab.randn(5, 3)
    out.backward(g, retain_graph=True)
    got = model.lin.weight.grad.numpy().copy()
    model.zero_grad()
    model(x).backward(g)
    _close(got, model.lin.weight.grad.numpy(), "weight")
    with tapelab.no_grad():
        out.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(g)


def test_the_saved_activations_go_after_a_backward_that_does_not_retain():
    """As eager releases an op's saved inputs: the node's saved arrays are dropped by a plain
    backward (a training loop's previous loss must not hold a step's activations), kept by
    ``retain_graph=True``; a second backward then raises as eager's."""
    model = _pair(_tiny)[0]
    compiled = tapelab.compile(model)
    x = tapelab.randn(8, 32)
    compiled(x)
    loss = compiled(x)
    saved = loss.grad_fn.params["saved"]
    assert saved
    loss.backward(retain_graph=True)
    assert saved
    loss.backward()
    assert saved == []
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_a_training_loop_through_the_step_equals_eager():
    """Adam updates the parameters in place between steps: the step reads them live, each call."""
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((16, 20)).astype(np.float32), rng.integers(0, 5, 16)) for _ in range(4)]
    ours, theirs = _pair(_classifier)
    compiled = tapelab.compile(ours)
    opt = tapelab.optim.Adam(ours.parameters(), lr=1e-2)
    topt = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    for x, y in batches:
        opt.zero_grad()
        loss = compiled(tapelab.tensor(x), tapelab.tensor(y))
        loss.backward()
        opt.step()
        topt.zero_grad()
        tloss = theirs(torch.tensor(x), torch.tensor(y))
        tloss.backward()
        topt.step()
        _close(loss.detach().numpy(), tloss.detach().numpy(), "loss")
    assert loss.grad_fn.name() == "CompiledFunctionBackward"
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        _close(p.detach().numpy(), q.detach().numpy(), n)


def _gpt(m):
    """A GPT-style block returning ``(logits, loss)`` as karpathy's nanoGPT ``GPT.forward`` does:
    token and position embeddings (``arange`` positions), causal attention, a GELU MLP, the head."""
    nn, F = m.nn, m.nn.functional

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(17, 16), nn.Embedding(8, 16)
            self.ln1, self.ln2, self.lnf = nn.LayerNorm(16), nn.LayerNorm(16), nn.LayerNorm(16)
            self.attn, self.proj = nn.Linear(16, 48, bias=False), nn.Linear(16, 16, bias=False)
            self.fc, self.out = nn.Linear(16, 64), nn.Linear(64, 16)
            self.head = nn.Linear(16, 17, bias=False)

        def forward(self, idx, targets):
            b, t = idx.shape
            x = self.wte(idx) + self.wpe(m.arange(0, t, dtype=m.long))
            q, k, v = self.attn(self.ln1(x)).split(16, dim=2)
            q, k, v = (z.view(b, t, 2, 8).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, 16))
            x = x + self.out(F.gelu(self.fc(self.ln2(x))))
            logits = self.head(self.lnf(x))
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    return Gpt()


def _backward(logits, loss, how):
    if how == "loss":
        loss.backward()
    elif how == "logits.sum() + loss":
        (logits.sum() + loss).backward()
    else:
        loss.backward(retain_graph=True)
        loss.backward()


@pytest.mark.parametrize("how", ["loss", "logits.sum() + loss", "retain_graph twice"])
def test_a_call_returning_logits_and_loss_is_one_node_with_two_outputs(how):
    """nanoGPT's ``(logits, loss)``: one node, outputs 0 and 1; a backward from the loss alone (the
    logits get no gradient), from both, and twice through the retained node equal eager and torch."""
    model, tmodel = _pair(_gpt)
    compiled = tapelab.compile(model)
    rng = np.random.default_rng(5)
    for call in range(3):                 # traced (eager), then the one-node step twice
        idx, targets = rng.integers(0, 17, (4, 8)), rng.integers(0, 17, (4, 8))
        model.zero_grad()
        logits, loss = compiled(tapelab.tensor(idx), tapelab.tensor(targets))
        _backward(logits, loss, how)
        got = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        model.zero_grad()
        want, wloss = model(tapelab.tensor(idx), tapelab.tensor(targets))
        _backward(want, wloss, how)
        tmodel.zero_grad()
        tlogits, tloss = tmodel(torch.tensor(idx), torch.tensor(targets))
        _backward(tlogits, tloss, how)
        _close(logits.detach().numpy(), want.detach().numpy(), "logits vs eager")
        _close(logits.detach().numpy(), tlogits.detach().numpy(), "logits vs torch")
        _close(loss.detach().numpy(), wloss.detach().numpy(), "loss vs eager")
        _close(loss.detach().numpy(), tloss.detach().numpy(), "loss vs torch")
        for (n, p), (_, q) in zip(model.named_parameters(), tmodel.named_parameters()):
            _close(got[n], p.grad.numpy(), f"{n} vs eager")
            _close(got[n], q.grad.numpy(), f"{n} vs torch")
        if call:
            assert logits.grad_fn is loss.grad_fn and loss.grad_fn.name() == "CompiledFunctionBackward"
            assert (logits.output_nr, loss.output_nr) == (0, 1)
    report = tc.explain(model, tapelab.tensor(idx), tapelab.tensor(targets))
    assert report.one_node[0].startswith("compiled(Gpt): one autograd node (embedding, "), report.one_node


def test_an_in_place_write_into_an_output_the_backward_reads_raises_as_eager():
    """cross_entropy's backward reads the logits (through a view): writing into them raises, as
    eager's shared version counter makes it; a write into an output nobody reads does not."""
    model = _pair(_gpt)[0]
    compiled = tapelab.compile(model)
    idx, targets = tapelab.randint(0, 17, (4, 8)), tapelab.randint(0, 17, (4, 8))
    compiled(idx, targets)
    logits, loss = compiled(idx, targets)
    with tapelab.no_grad():
        logits.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    wlogits, wloss = model(idx, targets)
    with tapelab.no_grad():
        wlogits.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        wloss.backward()
    _, loss = compiled(idx, targets)
    _, wloss = model(idx, targets)
    with tapelab.no_grad():
        loss.add_(1.0)            # cross_entropy's backward does not read its result
        wloss.add_(1.0)
    loss.backward()
    wloss.backward()


@pytest.mark.parametrize("returns, why", [
    (lambda m, y: (y, None), "something else than a tensor"),
    (lambda m, y: (y, y.view(-1)), "two results share memory"),             # eager: one version counter
    (lambda m, y: (m.lin.weight.t(), y.sum()), "a view of one"),         # a parameter's view
])
def test_results_that_are_not_new_tensors_keep_the_per_op_path(returns, why):
    nn = tapelab.nn

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return returns(self, self.lin(x))
    model, x = Pair(), tapelab.randn(5, 4)
    report = tc.explain(model, x)
    assert why in report.one_node[0], report.one_node
    compiled = tapelab.compile(model)
    compiled(x)
    for got, want in zip(compiled(x), model(x)):
        if want is not None:
            _close(got.detach().numpy(), want.detach().numpy(), "per-op path")


@pytest.mark.parametrize("causal", [False, True])
def test_attention_keeps_its_weights_for_the_step_backward(causal):
    """The joint trace records attention as the one op whose backward recomputes ``q kᵀ`` and the
    softmax; the step's forward keeps the weights instead (``scaled_dot_product_attention_forward``)
    and its backward reads them (``saved=True``), as eager does: output and every gradient (the
    input's too) equal eager's bit for bit and PyTorch's within rtol 1e-5."""
    def make(m):
        class Block(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv, self.proj = m.nn.Linear(16, 48), m.nn.Linear(16, 16)

            def forward(self, x):
                b, t, _ = x.shape
                q, k, v = (z.reshape(b, t, 2, 8).transpose(1, 2) for z in self.qkv(x).split(16, dim=2))
                y = m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                return self.proj(y.transpose(1, 2).reshape(b, t, 16)).tanh()
        return Block()
    model, tmodel = _pair(make)
    compiled = tapelab.compile(model)
    x_np = np.random.default_rng(1).standard_normal((3, 8, 16)).astype(np.float32)
    for call in range(3):
        x = tapelab.tensor(x_np, requires_grad=True)
        model.zero_grad()
        y = compiled(x)
        (y * y).sum().backward()
        got = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
        ex = tapelab.tensor(x_np, requires_grad=True)
        model.zero_grad()
        want = model(ex)
        (want * want).sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), want.detach().numpy())
        for g, w in zip(got, [ex.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]):
            np.testing.assert_array_equal(g, w)
        tx = torch.tensor(x_np, requires_grad=True)
        tmodel.zero_grad()
        ty = tmodel(tx)
        (ty * ty).sum().backward()
        _close(y.detach().numpy(), ty.detach().numpy(), "output vs torch")
        for g, w in zip(got, [tx.grad.numpy()] + [p.grad.numpy() for p in tmodel.parameters()]):
            _close(g, w, "gradient vs torch")
    (entry,) = compiled._compiled.cache.values()
    assert y.grad_fn.name() == "CompiledFunctionBackward"
    assert "scaled_dot_product_attention_forward" in entry.step.members
    assert "scaled_dot_product_attention" not in entry.step.members and "saved=True" in entry.step.sources[1]


def test_two_forwards_then_two_backwards_give_eagers_gradients():
    """Each call's saved arrays are its own node's: two calls in flight (two forwards, then their
    backwards in either order) give eager's gradients (rtol 1e-5: the step's fused mean sums in
    lanes), so no later call writes into a buffer an earlier call's backward still reads (what a
    buffer arena would have to respect)."""
    model = _tiny(tapelab)
    compiled = tapelab.compile(model)
    rng = np.random.default_rng(3)
    xs = [tapelab.tensor(rng.standard_normal((8, 32)).astype(np.float32)) for _ in range(3)]
    compiled(xs[0]).backward()            # the traced call; the step runs from here
    for order in ((0, 1), (1, 0)):
        model.zero_grad()
        losses = [compiled(xs[1]), compiled(xs[2])]
        assert all(loss.grad_fn.name() == "CompiledFunctionBackward" for loss in losses)
        for i in order:
            losses[i].backward()
        got = [p.grad.numpy().copy() for p in model.parameters()]
        model.zero_grad()
        for i in order:
            model(xs[1 + i]).backward()
        for g, p in zip(got, model.parameters()):
            _close(g, p.grad.numpy(), "gradient vs eager")

"""``tapelab.compile`` as researchers' programs call ``torch.compile``: guards on the Python values a
graph bakes in (module attributes, globals, closures), autocast around a compiled call, ``is_compiling``
while tracing, torch's debugging backends and ``mode="lite"``, ``torch._dynamo.exc``, and a nanoGPT-style
training loop (compiled model, AdamW, clipping, eval under ``no_grad``, a checkpoint with ``_orig_mod.``
keys) against eager and against PyTorch."""
import logging

import numpy as np
import pytest

import tapelab

torch = pytest.importorskip("torch")


def _linear_pair(seed=0):
    tapelab.manual_seed(seed)
    m = tapelab.nn.Linear(4, 3)
    t = torch.nn.Linear(4, 3)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(m.weight.detach().numpy().copy()))
        t.bias.copy_(torch.from_numpy(m.bias.detach().numpy().copy()))
    return m, t


class Scaled(tapelab.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = tapelab.nn.Linear(4, 3)
        self.temperature = 1.0
        self.use_bias_shift = False

    def forward(self, x):
        y = self.lin(x) / self.temperature
        return y + 1.0 if self.use_bias_shift else y


def test_module_attribute_change_recompiles():
    tapelab.manual_seed(0)
    m = Scaled()
    c = tapelab.compile(m)
    x = tapelab.randn(2, 4)
    for temperature, shift in ((1.0, False), (1.0, False), (2.0, False), (2.0, True), (0.5, True), (1.0, False)):
        m.temperature, m.use_bias_shift = temperature, shift
        np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    m.lin.eval()                                  # a submodule's flag alone is a change too
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())


def test_attribute_changes_every_call_run_eagerly(caplog):
    class Counting(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    c = tapelab.compile(Counting())                # the call changes its own attribute: it runs eagerly
    x = tapelab.ones(3)
    assert [c(x)[0].item() for _ in range(4)] == [1.0, 2.0, 3.0, 4.0]

    tapelab.manual_seed(0)
    m = Scaled()
    c = tapelab.compile(m)
    calls = tapelab.compiler.config.recompile_limit + 3
    with caplog.at_level(logging.WARNING):
        for i in range(calls):                    # a schedule the program changes every call
            m.temperature = 1.0 + i
            np.testing.assert_array_equal(c(x[:1].expand(2, 3).repeat(1, 2)[:, :4]).detach().numpy(),
                                          m(x[:1].expand(2, 3).repeat(1, 2)[:, :4]).detach().numpy())
    assert "recompile_limit" in caplog.text


SCALE = 1.0
OFFSET = tapelab.zeros(2)
CFG = {"k": 1.0, "bias": tapelab.zeros(2)}


def _global_user(x):
    return x * SCALE + OFFSET + CFG["k"] * CFG["bias"]


def test_global_values_and_tensors_are_guarded():
    global SCALE, OFFSET
    f = tapelab.compile(_global_user)
    x = tapelab.ones(2)
    try:
        assert f(x).tolist() == [1.0, 1.0] and f(x).tolist() == [1.0, 1.0]
        SCALE = 3.0
        assert f(x).tolist() == [3.0, 3.0]
        OFFSET = tapelab.full((2,), 10.0)       # a global rebound to another tensor
        assert f(x).tolist() == [13.0, 13.0]
        CFG["bias"] = tapelab.ones(2)           # a dict's entry
        CFG["k"] = 2.0
        assert f(x).tolist() == [15.0, 15.0]
    finally:
        SCALE, OFFSET = 1.0, tapelab.zeros(2)
        CFG.update(k=1.0, bias=tapelab.zeros(2))


def test_closure_values_are_guarded():
    scale = 1.0
    w = [tapelab.ones(2)]

    @tapelab.compile
    def f(x):
        return x * scale * w[0]

    x = tapelab.ones(2)
    assert f(x).tolist() == [1.0, 1.0] and f(x).tolist() == [1.0, 1.0]
    w[0] = tapelab.full((2,), 5.0)
    assert f(x).tolist() == [5.0, 5.0]
    scale = 2.0
    assert f(x).tolist() == [10.0, 10.0]


def test_unchanged_values_keep_one_entry():
    tapelab.manual_seed(0)
    m = Scaled()
    c = tapelab.compile(m)
    x = tapelab.randn(2, 4)
    for _ in range(4):
        c(x)
    assert len(c._compiled.cache) == 1 and c._compiled.value_recompiles == 0


@pytest.mark.parametrize("first_autocast", [True, False])
def test_autocast_around_compiled_module_matches_eager(first_autocast):
    tapelab.manual_seed(0)
    m = tapelab.nn.Sequential(tapelab.nn.Linear(8, 16), tapelab.nn.GELU(), tapelab.nn.Linear(16, 4))
    x = tapelab.randn(3, 8)

    def run(f, on):
        with tapelab.autocast("cpu", dtype=tapelab.bfloat16, enabled=on):
            y = f(x)
            loss = y.float().pow(2).sum()
        g, = tapelab.autograd.grad(loss, m[0].weight)
        return y.dtype, loss.item(), g.numpy()

    c = tapelab.compile(m)
    for on in ((True, True, False, True) if first_autocast else (False, True, True, False)):
        dtype, loss, g = run(c, on)
        e_dtype, e_loss, e_g = run(m, on)
        assert dtype == e_dtype == (tapelab.bfloat16 if on else tapelab.float32)
        if on:              # the graph traced under autocast holds the casts and no fused kernel: the same floats
            assert loss == e_loss
            np.testing.assert_array_equal(g, e_g)
        else:               # the fused GELU's float32 arithmetic is not eager's to the last bit
            np.testing.assert_allclose(loss, e_loss, rtol=1e-6)
            np.testing.assert_allclose(g, e_g, rtol=1e-5, atol=1e-7)


def test_autocast_first_call_keeps_buffers_and_random_stream():
    tapelab.manual_seed(0)
    m = tapelab.nn.Sequential(tapelab.nn.Linear(4, 8), tapelab.nn.BatchNorm1d(8), tapelab.nn.Dropout(0.5))
    e = tapelab.nn.Sequential(tapelab.nn.Linear(4, 8), tapelab.nn.BatchNorm1d(8), tapelab.nn.Dropout(0.5))
    e.load_state_dict(m.state_dict())
    x = tapelab.randn(6, 4)
    c = tapelab.compile(m)
    with tapelab.autocast("cpu", dtype=tapelab.bfloat16):
        tapelab.manual_seed(1)
        y = c(x)
        tapelab.manual_seed(1)
        y_e = e(x)
    np.testing.assert_array_equal(y.float().detach().numpy(), y_e.float().detach().numpy())
    np.testing.assert_array_equal(m[1].running_mean.numpy(), e[1].running_mean.numpy())
    assert int(m[1].num_batches_tracked) == int(e[1].num_batches_tracked) == 1


def test_is_compiling_while_tracing():
    @tapelab.compile
    def f(x):
        if tapelab.compiler.is_compiling():
            return x + 1
        return x - 1

    assert f(tapelab.zeros(1)).item() == 1.0     # the tracing call takes the compiled branch
    assert f(tapelab.zeros(1)).item() == 1.0     # and so does the graph
    assert len(f.cache) == 1 and next(iter(f.cache.values())).run is not None
    assert tapelab.compiler.is_compiling() is False and tapelab._dynamo.is_compiling() is False


@pytest.mark.parametrize("backend", ["aot_eager", "aot_eager_decomp_partition", "eager"])
def test_debug_backends_run_the_graph_unfused(backend):
    f = tapelab.compile(lambda x: (x * 2.0).tanh(), backend=backend)
    x = tapelab.randn(5)
    for _ in range(2):
        np.testing.assert_array_equal(f(x).numpy(), (x * 2.0).tanh().numpy())
    with pytest.raises(RuntimeError, match="unknown backend"):
        tapelab.compile(lambda x: x, backend="no_such_backend")


def test_mode_lite_is_accepted():
    m, _ = _linear_pair()
    c = tapelab.compile(m, mode="lite")
    x = tapelab.randn(2, 4)
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    with pytest.raises(RuntimeError, match="lite"):
        tapelab.compile(m, mode="fastest")


def test_dynamo_exc_unsupported_on_fullgraph_branch():
    @tapelab.compile(fullgraph=True)
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    with pytest.raises(tapelab._dynamo.exc.Unsupported, match="data-dependent"):
        f(tapelab.ones(3))
    assert issubclass(tapelab._dynamo.exc.Unsupported, tapelab._dynamo.exc.TorchDynamoException)
    assert issubclass(tapelab._dynamo.exc.Unsupported, RuntimeError)


def _gpt(lib, vocab=17, T=8, d=16, heads=2, drop=0.0):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.drop = nn.Dropout(drop)

        def forward(self, x):
            B, S, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, S, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.c_proj(y.transpose(1, 2).contiguous().view(B, S, C)))
            return x + self.drop(self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
            self.h = nn.ModuleList([Block(), Block()])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets=None):
            b, t = idx.size()
            x = self.wte(idx) + self.wpe(lib.arange(0, t, dtype=lib.long, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    return GPT()


def _nanogpt_losses(lib, model, compiled, batches, tmp_path=None):
    """The loop nanoGPT's train.py runs: two micro-steps, clipping, AdamW with two groups, zero_grad(set_to_none),
    an eval under no_grad in eval mode, the last batch smaller."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                          lr=1e-2, betas=(0.9, 0.95))
    net = lib.compile(model) if compiled else model
    losses, norms = [], []
    for it, (x, y) in enumerate(batches):
        for g in opt.param_groups:
            g["lr"] = 1e-2 * (it + 1) / len(batches)
        for _ in range(2):
            _, loss = net(x, y)
            (loss / 2).backward()
        norms.append(float(lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if it == 1:
            net.eval()
            with lib.no_grad():
                losses.append(net(x, y)[1].item())
            net.train()
    return net, losses, norms


def _batches(lib, vocab=17, T=8):
    rng = np.random.default_rng(0)
    out = []
    for n in (4, 4, 4, 3):
        data = rng.integers(0, vocab, size=(n, T + 1))
        out.append((lib.from_numpy(data[:, :-1].copy()), lib.from_numpy(data[:, 1:].copy())))
    return out


def test_nanogpt_loop_compiled_matches_eager_and_torch(tmp_path):
    tapelab.manual_seed(0)
    eager_model = _gpt(tapelab)
    state = {k: v.detach().clone() for k, v in eager_model.state_dict().items()}
    _, eager_losses, eager_norms = _nanogpt_losses(tapelab, eager_model, False, _batches(tapelab))
    model = _gpt(tapelab)
    model.load_state_dict(state)
    net, losses, norms = _nanogpt_losses(tapelab, model, True, _batches(tapelab))
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    np.testing.assert_allclose(norms, eager_norms, rtol=1e-4)

    ref = _gpt(torch)
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in state.items()})
    _, torch_losses, torch_norms = _nanogpt_losses(torch, ref, False, _batches(torch))
    np.testing.assert_allclose(losses, torch_losses, rtol=1e-4)
    np.testing.assert_allclose(norms, torch_norms, rtol=1e-3)

    # checkpoint of the compiled module, loaded as nanoGPT does (the "_orig_mod." prefix stripped)
    sd = net.state_dict()
    assert all(k.startswith("_orig_mod.") for k in sd) and net._orig_mod is model
    path = tmp_path / "ckpt.pt"
    tapelab.save({"model": sd}, path)
    loaded = tapelab.load(path)["model"]
    fresh = _gpt(tapelab)
    fresh.load_state_dict({k[len("_orig_mod."):]: v for k, v in loaded.items()})
    x, y = _batches(tapelab)[0]
    with tapelab.no_grad():
        net.eval()
        fresh.eval()
        np.testing.assert_allclose(net(x, y)[1].item(), fresh(x, y)[1].item(), rtol=1e-6)

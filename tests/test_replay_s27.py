"""Session 27's captured replay of a training step: ``zero_grad(set_to_none=False)``'s fills write
into the gradients (or fold into the accumulation that reads them), and SGD's momentum update is one
fused pass, in eager SGD and in the replay alike. Every replay is checked bit for bit against the
same step run eagerly by tapelab, and against PyTorch's eager step."""
import numpy as np
import pytest
import torch

import tapelab as T
from tapelab.optim._foreach import momentum_update_from, momentum_update


def _mlp(m, seed=0, sizes=(24, 32, 32, 5)):
    rng = np.random.default_rng(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(m.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(m.nn.ReLU())
    model = m.nn.Sequential(*layers)
    with m.no_grad():
        for p in model.parameters():
            p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return model


def _batch(i, n=16, features=24, classes=5):
    rng = np.random.default_rng(1000 + i)
    return rng.standard_normal((n, features)).astype(np.float32), rng.integers(0, classes, n)


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _stepper(m, model, opt, x, y, set_to_none):
    def step():
        opt.zero_grad(set_to_none=set_to_none)
        loss = m.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


# torch's capturable=True is for accelerators only: its side runs the plain Adam (the same arithmetic)
OPTIMIZERS = {
    "sgd-momentum": lambda m, ps: m.optim.SGD(ps, lr=0.05, momentum=0.9),
    "sgd-momentum-wd": lambda m, ps: m.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-2),
    "sgd-nesterov": lambda m, ps: m.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "sgd-dampening": lambda m, ps: m.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1),
    "adam-capturable": lambda m, ps: m.optim.Adam(ps, lr=1e-2, capturable=m is T),
    "adamw-capturable": lambda m, ps: m.optim.AdamW(ps, lr=1e-2, weight_decay=0.05, capturable=m is T),
}


def _state_arrays(opt) -> list:
    return [v.detach().numpy() for p in opt.state for v in opt.state[p].values() if isinstance(v, T.Tensor)]


@pytest.mark.parametrize("set_to_none", [False, True], ids=["zero-fill", "to-none"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_replayed_step_equals_eager_tapelab_bit_for_bit_and_torch(name, set_to_none):
    make = OPTIMIZERS[name]
    eager_model, cap_model, ref = _mlp(T), _mlp(T), _mlp(torch)
    eager_opt, cap_opt = make(T, eager_model.parameters()), make(T, cap_model.parameters())
    ref_opt = make(torch, ref.parameters())
    ex, ey = T.zeros(16, 24), T.zeros(16, dtype=T.int64)
    cx, cy = T.zeros(16, 24), T.zeros(16, dtype=T.int64)
    eager = _stepper(T, eager_model, eager_opt, ex, ey, set_to_none)
    captured = _stepper(T, cap_model, cap_opt, cx, cy, set_to_none)

    def feed(i):
        xs, ys = _batch(i)
        for x, y in ((ex, ey), (cx, cy)):
            x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        rx, ry = torch.tensor(xs), torch.tensor(ys)
        ref_opt.zero_grad(set_to_none=set_to_none)
        loss = torch.nn.functional.cross_entropy(ref(rx), ry)
        loss.backward()
        ref_opt.step()
        return loss.item()

    for i in range(2):          # warm-up: the optimizer's state exists before capture, as PyTorch requires
        feed(i)
        np.testing.assert_array_equal(_bits(eager().detach().numpy()), _bits(captured().detach().numpy()))
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        static_loss = captured()
    for i in range(2, 6):
        ref_loss = feed(i)
        g.replay()
        loss = eager()
        np.testing.assert_array_equal(_bits(static_loss.detach().numpy()), _bits(loss.detach().numpy()))
        for p, q in zip(cap_model.parameters(), eager_model.parameters()):
            np.testing.assert_array_equal(_bits(p.detach().numpy()), _bits(q.detach().numpy()))
            np.testing.assert_array_equal(_bits(p.grad.numpy()), _bits(q.grad.numpy()))
        for a, b in zip(_state_arrays(cap_opt), _state_arrays(eager_opt), strict=True):
            np.testing.assert_array_equal(_bits(a), _bits(b))
        np.testing.assert_allclose(loss.item(), ref_loss, rtol=1e-5)
    for p, q in zip(cap_model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "full_like" not in g.source


@pytest.mark.parametrize("set_to_none", [False, True], ids=["zero-fill", "to-none"])
def test_captured_momentum_updates_make_their_gradients_in_one_pass(set_to_none):
    model = _mlp(T)
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = T.zeros(16, 24), T.zeros(16, dtype=T.int64)
    step = _stepper(T, model, opt, x, y, set_to_none)
    step(), step()
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        step()
    p, n = g._program, len(list(model.parameters()))
    fused = [k for k, v in p.ns.items() if v is momentum_update_from]
    lines = [ln.strip() for ln in g.source.splitlines()]
    assert len(fused) == 1 and sum(ln.startswith(fused[0] + "(") for ln in lines) == n
    plain = [k for k, v in p.ns.items() if v is momentum_update]     # the step functions' form only
    assert not any(ln.startswith(k + "(") for k in plain for ln in lines)
    # each update writes its .grad from the backward's result: zeroed and accumulated (the fill folded into
    # the add, the add moved into the update: neither has a line of its own), or copied (set_to_none)
    assert sum(", None, " in ln for ln in lines) == (n if set_to_none else 0)
    fills = [i for i, node in enumerate(g.nodes()) if node["op"] == "fill"]
    adds = [i for i, node in enumerate(g.nodes()) if node["op"] == "add"]
    assert len(fills) == (0 if set_to_none else n) and all(p.step_lines[i] == [] for i in fills + adds)
    assert "_copyto(" not in g.source        # nothing is copied (the loss is not held)


@pytest.mark.parametrize("set_to_none", [False, True], ids=["zero-fill", "to-none"])
def test_a_gradient_read_before_the_update_is_written_in_its_own_pass(set_to_none):
    model = _mlp(T)
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_model = _mlp(T)
    ref_opt = T.optim.SGD(ref_model.parameters(), lr=0.05, momentum=0.9)
    x, y = T.zeros(16, 24), T.zeros(16, dtype=T.int64)

    def stepper(mod, o):
        def step():
            o.zero_grad(set_to_none=set_to_none)
            T.nn.functional.cross_entropy(mod(x), y).backward()
            norm = mod[0].weight.grad.norm()       # reads a gradient between the backward and the update
            o.step()
            return norm
        return step
    step, ref_step = stepper(model, opt), stepper(ref_model, ref_opt)
    for _ in range(2):
        step(), ref_step()
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        norm = step()
    for i in range(3):
        xs, ys = _batch(i)
        x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        g.replay()
        np.testing.assert_array_equal(_bits(norm.numpy()), _bits(ref_step().numpy()))
        for a, b in zip(model.parameters(), ref_model.parameters()):
            np.testing.assert_array_equal(_bits(a.detach().numpy()), _bits(b.detach().numpy()))
            np.testing.assert_array_equal(_bits(a.grad.numpy()), _bits(b.grad.numpy()))
    p = g._program
    moved = [k for k, v in p.ns.items() if v is momentum_update_from]
    plain = [k for k, v in p.ns.items() if v is momentum_update]
    lines = g.source.splitlines()
    # the first layer's weight gradient is read by the norm: its update reads the .grad written before
    assert sum(ln.strip().startswith(plain[0] + "(") for ln in lines) == 1
    assert sum(ln.strip().startswith(moved[0] + "(") for ln in lines) == 5


def test_momentum_update_equals_torch_and_the_tensor_path_bit_for_bit():
    rng = np.random.default_rng(3)
    for n in (7, 1000, 1 << 17):      # under and over kernels.PARALLEL_MIN
        p0 = rng.standard_normal(n).astype(np.float32)
        grads = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
        fused, plain = T.tensor(p0.copy(), requires_grad=True), T.tensor(p0.copy(), requires_grad=True)
        ref = torch.tensor(p0.copy(), requires_grad=True)
        opts = (T.optim.SGD([fused], lr=0.05, momentum=0.9), T.optim.SGD([plain], lr=0.05, momentum=0.9, foreach=False),
                torch.optim.SGD([ref], lr=0.05, momentum=0.9))
        for gr in grads:
            fused.grad, plain.grad, ref.grad = T.tensor(gr.copy()), T.tensor(gr.copy()), torch.tensor(gr.copy())
            for o in opts:
                o.step()
        np.testing.assert_array_equal(_bits(fused.detach().numpy()), _bits(plain.detach().numpy()))
        np.testing.assert_array_equal(_bits(fused.detach().numpy()), _bits(ref.detach().numpy()))
        np.testing.assert_array_equal(_bits(opts[0].state[fused]["momentum_buffer"].numpy()),
                                      _bits(ref_buf := opts[2].state[ref]["momentum_buffer"].numpy()))
        assert ref_buf.shape == (n,)


def _replay_against_eager(region, make):
    """``region(*tensors)`` captured on one set of ``make()``'s tensors and run eagerly on another; the
    replays' results and the captured tensors equal the eager ones bit for bit, three times over."""
    cap, eag = make(), make()
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        out = region(*cap)
    for i in range(3):
        for a, b in zip(cap, eag):
            if a.dtype == T.float32 and not a.requires_grad:
                noise = np.random.default_rng(i).standard_normal(tuple(a.shape)).astype(np.float32)
                a.copy_(T.tensor(noise)), b.copy_(T.tensor(noise))
        g.replay()
        ref = region(*eag)
        np.testing.assert_array_equal(_bits(out.numpy()), _bits(ref.numpy()))
        for a, b in zip(cap, eag):
            np.testing.assert_array_equal(_bits(a.detach().numpy()), _bits(b.detach().numpy()))
    return g


def test_fill_then_accumulate_keeps_the_sign_of_zero_as_eager():
    def make():
        x = T.tensor(np.array([-0.0, 0.0, -1.5, 2.0], np.float32))
        return T.full((4,), 5.0), x

    def region(acc, x):
        acc.zero_()
        acc.add_(x * 0.0)       # -0.0 * 0 and 0 + -0.0: the zero's sign as eager gives it
        return acc * 1.0
    g = _replay_against_eager(region, make)
    assert any(n["op"] == "fill" for n in g.nodes())


def test_fill_read_by_another_op_and_a_fill_from_a_live_value():
    def make():
        return T.ones(6), T.tensor(np.float32(2.5)), T.zeros(6, dtype=T.int64)

    def region(buf, v, ints):
        buf.zero_()
        buf.mul_(3.0)            # not an accumulation: the fill stays a pass of its own
        buf.add_(1.0)
        ints.fill_(7)
        w = T.zeros(6)
        w.fill_(v)               # a 0-d tensor's value, read at every replay
        return buf + w + ints

    g = _replay_against_eager(region, make)     # the 0-d value is new at every replay
    assert [n["op"] for n in g.nodes()].count("fill") == 3


@pytest.mark.parametrize("threads", [1, 2])
def test_large_replayed_step_splits_as_eager_at_each_thread_count(threads):
    """Parameters above ``kernels.PARALLEL_MIN`` elements: the fused updates run split over the threads,
    and the replay still equals the eager step bit for bit."""
    T.set_num_threads(threads)
    sizes = (96, 512, 256, 10)
    models = [_mlp(T, 5, sizes), _mlp(T, 5, sizes)]
    opts = [T.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]
    x, y = T.zeros(32, 96), T.zeros(32, dtype=T.int64)
    eager, captured = (_stepper(T, m, o, x, y, False) for m, o in zip(models, opts))
    for _ in range(2):
        eager(), captured()
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        static_loss = captured()
    for i in range(3):
        xs, ys = _batch(i, 32, 96, 10)
        x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        g.replay()
        np.testing.assert_array_equal(_bits(static_loss.detach().numpy()), _bits(eager().detach().numpy()))
        for a, b in zip(*(m.parameters() for m in models)):
            np.testing.assert_array_equal(_bits(a.detach().numpy()), _bits(b.detach().numpy()))
            np.testing.assert_array_equal(_bits(a.grad.numpy()), _bits(b.grad.numpy()))
    assert any(v is momentum_update_from for v in g._program.ns.values())


@pytest.mark.parametrize("set_to_none", [False, True], ids=["zero-fill", "to-none"])
def test_step_functions_run_the_same_step_as_the_fused_replay(set_to_none):
    """``Program.step_functions()`` (one function a step, the stream capture's form) keeps each step's own
    lines, unfused; run in order they give the replay's floats."""
    models = [_mlp(T, 2), _mlp(T, 2)]
    opts = [T.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]
    x, y = T.zeros(16, 24), T.zeros(16, dtype=T.int64)
    steps = [_stepper(T, m, o, x, y, set_to_none) for m, o in zip(models, opts)]
    graphs = []
    for step in steps:
        step(), step()
        g = T.graphs.Graph()
        with T.graphs.graph(g):
            step()
        graphs.append(g)
    functions = graphs[1]._program.step_functions()
    for i in range(3):
        xs, ys = _batch(i)
        x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))
        graphs[0].replay()
        for f in functions:
            f()
        for a, b in zip(*(m.parameters() for m in models)):
            np.testing.assert_array_equal(_bits(a.detach().numpy()), _bits(b.detach().numpy()))
            np.testing.assert_array_equal(_bits(a.grad.numpy()), _bits(b.grad.numpy()))


class _Block(T.nn.Module):
    """A conv-BN-ReLU, a LayerNorm and causal attention: the three forwards that keep what their
    backward reads (batch and layer norm's statistics, attention's weights)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = T.nn.Conv2d(2, 4, 3, padding=1), T.nn.BatchNorm2d(4)
        self.ln, self.head = T.nn.LayerNorm(16), T.nn.Linear(16, 5)

    def forward(self, x):
        h = T.relu(self.bn(self.conv(x))).reshape(x.shape[0], 4, 16)
        q = self.ln(h)
        a = T.nn.functional.scaled_dot_product_attention(q[:, None], q[:, None], q[:, None], is_causal=True)
        return self.head(a[:, 0].mean(1))


def test_a_capture_keeps_the_forwards_statistics_and_replays_eagers_floats():
    """A capture declares ``Mode.kept_forwards``: inside it the norms and attention keep their saving op
    and pass-through (as eager, where a watching mode would see the one named op), and the replayed
    step equals the eager step bit for bit."""
    from tapelab.core import dispatch

    class Watching(dispatch.Mode):
        pass

    with Watching():
        assert not dispatch.keeps_forwards()
    models = []
    for _ in range(2):
        T.manual_seed(7)
        models.append(_Block())
    eager_model, cap_model = models
    eager_opt = T.optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9)
    cap_opt = T.optim.SGD(cap_model.parameters(), lr=0.05, momentum=0.9)
    ex, cx = T.zeros(6, 2, 4, 4), T.zeros(6, 2, 4, 4)
    ey, cy = T.zeros(6, dtype=T.int64), T.zeros(6, dtype=T.int64)
    eager = _stepper(T, eager_model, eager_opt, ex, ey, False)
    captured = _stepper(T, cap_model, cap_opt, cx, cy, False)

    def feed(i):
        rng = np.random.default_rng(i)
        xs, ys = rng.standard_normal((6, 2, 4, 4)).astype(np.float32), rng.integers(0, 5, 6)
        for x, y in ((ex, ey), (cx, cy)):
            x.copy_(T.tensor(xs)), y.copy_(T.tensor(ys))

    for i in range(2):
        feed(i)
        np.testing.assert_array_equal(_bits(eager().detach().numpy()), _bits(captured().detach().numpy()))
    g = T.graphs.Graph()
    with T.graphs.graph(g):
        static_loss = captured()
    names = {node["op"] for node in g.nodes()}
    # the saving forwards (their pass-throughs hand on the same arrays: no replay step), not the one-op forms
    assert {"batch_norm_normalize_forward", "layer_norm_forward", "scaled_dot_product_attention_forward"} <= names
    assert not {"batch_norm_normalize", "layer_norm", "scaled_dot_product_attention"} & names, names
    for i in range(2, 5):
        feed(i)
        g.replay()
        loss = eager()
        np.testing.assert_array_equal(_bits(static_loss.detach().numpy()), _bits(loss.detach().numpy()))
        for p, q in zip(cap_model.parameters(), eager_model.parameters()):
            np.testing.assert_array_equal(_bits(p.detach().numpy()), _bits(q.detach().numpy()))

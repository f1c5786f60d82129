"""``grad_fn`` names as PyTorch prints them (``tensor(..., grad_fn=<AddmmBackward0>)``, ``grad_fn.name()``,
the debugger's ``until=`` names): ops whose node PyTorch names after the kernel it lowers to declare that
name (``Op(backward_name=...)``)."""
import numpy as np
import pytest
import torch

import tapelab

CASES = {
    "linear matrix": lambda m, F, g: F.linear(g(2, 4), g(3, 4), g(3)),
    "linear matrix, no bias": lambda m, F, g: F.linear(g(2, 4), g(3, 4)),
    "linear batch": lambda m, F, g: F.linear(g(5, 2, 4), g(3, 4), g(3)),
    "linear batch, no bias": lambda m, F, g: F.linear(g(5, 2, 4), g(3, 4)),
    "linear vector": lambda m, F, g: F.linear(g(4), g(3, 4), g(3)),
    "linear vector, no bias": lambda m, F, g: F.linear(g(4), g(3, 4)),
    "nn.Linear": lambda m, F, g: m.nn.Linear(4, 3)(g(2, 4)),
    "dot": lambda m, F, g: g(3) @ g(3),
    "mv": lambda m, F, g: g(2, 3) @ g(3),
    "vector @ matrix": lambda m, F, g: g(3) @ g(3, 2),
    "mm": lambda m, F, g: g(2, 3) @ g(3, 4),
    "torch.mm": lambda m, F, g: m.mm(g(2, 3), g(3, 4)),
    "batched matmul": lambda m, F, g: g(5, 2, 3) @ g(5, 3, 4),
    "batch @ matrix": lambda m, F, g: g(5, 2, 3) @ g(3, 4),
    "matrix @ batch": lambda m, F, g: g(2, 3) @ g(5, 3, 4),
    "4-d attention scores": lambda m, F, g: g(2, 4, 5, 8) @ g(2, 4, 8, 5),
    "mse_loss": lambda m, F, g: F.mse_loss(g(2, 3), m.zeros(2, 3)),
    "mse_loss sum": lambda m, F, g: F.mse_loss(g(2, 3), g(2, 3), reduction="sum"),
    "binary_cross_entropy": lambda m, F, g: F.binary_cross_entropy(g(2, 3).sigmoid(), m.ones(2, 3) / 2),
    "binary_cross_entropy, weighted sum": lambda m, F, g: F.binary_cross_entropy(
        g(2, 3).sigmoid(), m.ones(2, 3) / 2, weight=m.ones(3) * 2, reduction="sum"),
    "binary_cross_entropy_with_logits": lambda m, F, g: F.binary_cross_entropy_with_logits(g(2, 3), m.ones(2, 3)),
    "BCEWithLogitsLoss(pos_weight)": lambda m, F, g: m.nn.BCEWithLogitsLoss(pos_weight=m.ones(3) * 3)(
        g(2, 3), m.zeros(2, 3)),
    "cross_entropy": lambda m, F, g: F.cross_entropy(g(4, 3), m.tensor([0, 2, 1, 0])),
    "nll_loss": lambda m, F, g: F.nll_loss(g(4, 3), m.tensor([0, 2, 1, 0])),
    "layer_norm": lambda m, F, g: F.layer_norm(g(2, 4), (4,)),
    "nn.LayerNorm": lambda m, F, g: m.nn.LayerNorm(4)(g(2, 3, 4)),
    "batch_norm (training)": lambda m, F, g: m.nn.BatchNorm1d(4)(g(3, 4)),
    "view": lambda m, F, g: g(2, 3).view(6),
    "reshape": lambda m, F, g: g(2, 3).reshape(3, 2),
    "flatten": lambda m, F, g: g(2, 3, 4).flatten(1),
    "softmax": lambda m, F, g: F.softmax(g(2, 3), -1),
    "log_softmax": lambda m, F, g: F.log_softmax(g(2, 3), -1),
    "relu": lambda m, F, g: m.relu(g(2, 3)),
    "gelu": lambda m, F, g: F.gelu(g(2, 3)),
    "sum": lambda m, F, g: g(2, 3).sum(),
    "mean": lambda m, F, g: g(2, 3).mean(),
    "cat": lambda m, F, g: m.cat([g(2, 3), g(2, 3)]),
    "embedding": lambda m, F, g: F.embedding(m.tensor([1, 0]), g(3, 2)),
}


def _name(lib, build) -> str:
    lib.manual_seed(0)

    def g(*shape):
        return lib.randn(*shape, requires_grad=True)
    return type(build(lib, lib.nn.functional, g).grad_fn).__name__ if lib is torch else \
        build(lib, lib.nn.functional, g).grad_fn.name()


@pytest.mark.parametrize("case", sorted(CASES))
def test_grad_fn_is_named_as_torch_names_it(case):
    assert _name(tapelab, CASES[case]) == _name(torch, CASES[case])


def test_a_printed_output_and_its_graph_read_as_torch_s():
    """A printed layer output carries its node's name, as in every tutorial's output."""
    for lib in (tapelab, torch):
        lib.manual_seed(0)
    outs = {}
    for lib in (tapelab, torch):
        net = lib.nn.Linear(4, 3)
        y = net(lib.ones(2, 4))
        outs[lib.__name__] = (repr(y).split("grad_fn=")[1], y.grad_fn.name())
    assert outs["tapelab"] == outs["torch"] == ("<AddmmBackward0>)", "AddmmBackward0")


def test_a_freed_node_keeps_its_name():
    x, w, b = (tapelab.randn(*s, requires_grad=True) for s in ((2, 4), (3, 4), (3,)))
    y = tapelab.nn.functional.linear(x, w, b)
    z = y @ tapelab.ones(3, 2)
    z.sum().backward()
    assert (y.grad_fn.name(), z.grad_fn.name()) == ("AddmmBackward0", "MmBackward0")
    assert np.isfinite(x.grad.numpy()).all()


def test_the_debugger_stops_at_torch_s_name():
    x = tapelab.randn(2, 4, requires_grad=True)
    loss = tapelab.nn.functional.cross_entropy(tapelab.nn.Linear(4, 3)(x), tapelab.tensor([0, 2]))
    s = tapelab.debug.step_backward(loss)
    s.run(until="AddmmBackward0")
    assert s.current.name == "AddmmBackward0" and s.current.forward_op == "linear"
    assert [r.name for r in s.history] == ["NllLossBackward0", "AddmmBackward0"]


@pytest.mark.parametrize("weights", [{"weight": "w"}, {"pos_weight": "w"}])
def test_a_loss_weight_that_requires_grad_is_refused_as_torch_refuses_it(weights):
    """PyTorch's binary cross entropies have no gradient for their weights."""
    msgs = []
    for lib in (tapelab, torch):
        w = lib.ones(3, requires_grad=True)
        kw = {k: w for k in weights}
        with pytest.raises(RuntimeError) as e:
            lib.nn.functional.binary_cross_entropy_with_logits(lib.zeros(2, 3), lib.ones(2, 3), **kw)
        msgs.append(str(e.value))
        with lib.no_grad():
            lib.nn.functional.binary_cross_entropy_with_logits(lib.zeros(2, 3), lib.ones(2, 3), **kw)
    assert msgs[0] == msgs[1]


def test_mse_loss_prints_torch_s_value_bit_for_bit():
    """The loss op reduces as the ``mean`` op does (ATen's summation order), so ``print(loss.item())``
    shows PyTorch's 17 digits."""
    rng = np.random.default_rng(0)
    for n in (1, 7, 100, 2999, 40000):
        x, t = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        for reduction in ("mean", "sum"):
            ours = tapelab.nn.functional.mse_loss(tapelab.tensor(x), tapelab.tensor(t), reduction=reduction).item()
            assert ours == torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t), reduction=reduction).item()

"""Each op's compiled eager path (``dispatch._compile``) runs its own copy of the code (session 29): Python 3.11+
specialises an attribute store or a call by the type it last saw at that place in that code object, and each op
makes nodes of its own class (``MulBackward0``, ``TanhBackward0``) and calls its own forward, so with one shared
copy a step of mixed ops missed at every node store (chain16 recording 12.2 -> 10.8 us)."""
import numpy as np
import torch

import tapelab


def _ops_of(t) -> list:
    ops, node = [], t.grad_fn
    while node is not None and hasattr(node, "op"):
        ops.append(node.op)
        node = next((e[0] for e in node.edges if e is not None and hasattr(e[0], "op")), None)
    return ops


def test_each_op_has_its_own_copy_of_the_compiled_path():
    x = tapelab.tensor(np.linspace(-2, 2, 16, dtype=np.float32), requires_grad=True)
    w = tapelab.tensor(np.linspace(1, -1, 16, dtype=np.float32), requires_grad=True)
    y = ((x * w + 1).tanh() * x).sigmoid().sum()
    ops = _ops_of(y)
    assert [op.name for op in ops] == ["sum", "sigmoid", "mul", "tanh", "add", "mul"]
    distinct = {op.name: op for op in ops}
    fast = [op.fast for op in distinct.values()]
    assert all(callable(f) for f in fast)
    assert len({id(f.__code__) for f in fast}) == len(fast)


def test_mixed_chain_nodes_values_and_gradients():
    """A mixed chain, repeated (the specialised copies warm), keeps PyTorch's node names, values and gradients."""
    xs = np.linspace(-2, 2, 16, dtype=np.float32)
    ws = np.linspace(1, -1, 16, dtype=np.float32)
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    ty = torch.sigmoid(torch.tanh(tx * tw + 1) * tx).sum()
    ty.backward()
    for _ in range(50):
        x, w = tapelab.tensor(xs, requires_grad=True), tapelab.tensor(ws, requires_grad=True)
        y = ((x * w + 1).tanh() * x).sigmoid().sum()
        names = []
        node = y.grad_fn
        while node is not None and hasattr(node, "op"):
            names.append(type(node).__name__)
            node = next((e[0] for e in node.edges if e is not None and hasattr(e[0], "op")), None)
        assert names == ["SumBackward0", "SigmoidBackward0", "MulBackward0", "TanhBackward0", "AddBackward0",
                         "MulBackward0"]
        y.backward()
        np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-7)

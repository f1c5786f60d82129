"""Session 30: ``_tell`` gives an operand never told before (a ``.grad``, a saved output) its uid
inline and writes out three operands; the ids a record names are still the tensors' own ids."""
import numpy as np
import torch

import tapelab
from tapelab.tape import tensor_id


def _mlp(lib):
    rng = np.random.default_rng(0)
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(6, 5), lib.nn.ReLU(), lib.nn.Linear(5, 3))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    x = lib.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    y = lib.tensor(np.array([0, 2, 1, 2]))
    return model, x, y


def test_untold_operands_get_their_own_ids_and_values_match_torch():
    model, x, y = _mlp(tapelab)
    opt = tapelab.optim.SGD(model.parameters(), lr=0.1)
    with tapelab.tape() as tp:
        loss = tapelab.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    params = list(model.parameters())
    writes = [n for n in tp.nodes if n.module == "optimizer.step (SGD)"]
    assert [n.op for n in writes] == ["add"] * len(params)
    # each write names its parameter and that parameter's .grad by the ids tensor_id gives them
    assert [n.inputs for n in writes] == [(tensor_id(p), tensor_id(p.grad)) for p in params]
    assert len({n.inputs[1] for n in writes}) == len(params)
    # a linear (three operands) names its input, weight and bias
    linears = [n for n in tp.nodes if n.op == "linear"]
    assert [n.inputs[1:] for n in linears] == [(tensor_id(model[0].weight), tensor_id(model[0].bias)),
                                               (tensor_id(model[2].weight), tensor_id(model[2].bias))]
    assert linears[1].inputs[0] == tp.nodes[[n.op for n in tp.nodes].index("relu")].output
    assert [n.input_shapes for n in linears] == [((4, 6), (5, 6), (5,)), ((4, 5), (3, 5), (3,))]

    ref, rx, ry = _mlp(torch)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    torch.nn.functional.cross_entropy(ref(rx), ry).backward()
    ropt.step()
    for p, q in zip(params, ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_a_tensors_id_is_the_same_before_and_after_it_is_first_told():
    a = tapelab.ones(3)
    b = tapelab.ones(3)
    c = tapelab.ones(3)
    before = tensor_id(b)                 # given lazily, as an untold operand's
    with tapelab.tape() as tp:
        tapelab.addcmul(a, b, c)          # three operands: a and c told first here
    assert tp.nodes[0].inputs == (tensor_id(a), before, tensor_id(c))
    assert len(set(tp.nodes[0].inputs)) == 3

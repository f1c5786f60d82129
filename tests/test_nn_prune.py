"""``nn.utils.prune`` against PyTorch: with the same weights, the deterministic methods (L1, Ln,
global, custom masks) give torch's masks, state_dict keys and values, forward outputs, gradients
of ``<name>_orig`` and removals; the random methods are checked by counts and structure (tapelab's
generator is not torch's); errors carry torch's types and messages."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as TP

import tapelab

LP = tapelab.nn.utils.prune


def npy(x) -> np.ndarray:
    return x.detach().numpy()


def tl(x: torch.Tensor) -> tapelab.Tensor:
    return tapelab.tensor(x.detach().numpy().copy())


def pair(make, seed: int = 0):
    """The same module built by torch and tapelab, tapelab's weights copied from torch's."""
    torch.manual_seed(seed)
    t_mod = make(torch.nn)
    l_mod = make(tapelab.nn)
    l_mod.load_state_dict({k: tl(v) for k, v in t_mod.state_dict().items()})
    return t_mod, l_mod


def same_state(t_mod, l_mod) -> None:
    t_sd, l_sd = t_mod.state_dict(), l_mod.state_dict()
    assert list(t_sd) == list(l_sd)
    for key in t_sd:
        np.testing.assert_allclose(npy(l_sd[key]), npy(t_sd[key]), rtol=1e-6, atol=1e-7)


def same_forward_and_grads(t_mod, l_mod, shape, seed: int = 1) -> None:
    torch.manual_seed(seed)
    x = torch.randn(*shape)
    t_out, l_out = t_mod(x), l_mod(tl(x))
    np.testing.assert_allclose(npy(l_out), npy(t_out), rtol=1e-5, atol=1e-6)
    (t_out ** 2).sum().backward()
    (l_out ** 2).sum().backward()
    for (tn, tp), (ln, lp) in zip(t_mod.named_parameters(), l_mod.named_parameters()):
        assert tn == ln
        np.testing.assert_allclose(npy(lp.grad), npy(tp.grad), rtol=1e-5, atol=1e-6)


LINEAR = (lambda nn: nn.Linear(6, 4), (3, 6))
CONV = (lambda nn: nn.Conv2d(3, 5, 3), (2, 3, 6, 6))

EVERY_THIRD_OFF = (np.arange(24).reshape(4, 6) % 3 != 0).astype(np.float32)
SCORES = np.arange(24, dtype=np.float32).reshape(4, 6)[::-1].copy()


def lib(P, array: np.ndarray):
    """``array`` as a tensor of the library that ``P`` (a prune module) belongs to."""
    return torch.from_numpy(array.copy()) if P is TP else tapelab.tensor(array.copy())


DETERMINISTIC = {
    "l1_float": (LINEAR, lambda P, m: P.l1_unstructured(m, "weight", amount=0.4)),
    "l1_int": (LINEAR, lambda P, m: P.l1_unstructured(m, "weight", amount=5)),
    "l1_bias": (LINEAR, lambda P, m: P.l1_unstructured(m, "bias", amount=2)),
    "l1_zero": (LINEAR, lambda P, m: P.l1_unstructured(m, "weight", amount=0)),
    "l2_dim0": (CONV, lambda P, m: P.ln_structured(m, "weight", amount=2, n=2, dim=0)),
    "l1_dim1": (CONV, lambda P, m: P.ln_structured(m, "weight", amount=0.34, n=1, dim=1)),
    "linf_dim_neg": (CONV, lambda P, m: P.ln_structured(m, "weight", amount=1, n=float("inf"), dim=-1)),
    "lfro_dim0": (LINEAR, lambda P, m: P.ln_structured(m, "weight", amount=0.5, n="fro", dim=0)),
    "lneg_inf": (LINEAR, lambda P, m: P.ln_structured(m, "weight", amount=2, n=float("-inf"), dim=1)),
    "l3_dim1": (CONV, lambda P, m: P.ln_structured(m, "weight", amount=2, n=3, dim=1)),
    "chain_structured": (CONV, lambda P, m: (P.ln_structured(m, "weight", amount=2, n=2, dim=0),
                                             P.ln_structured(m, "weight", amount=0.5, n=1, dim=0),
                                             P.ln_structured(m, "weight", amount=1, n=2, dim=-1))),
    "identity": (LINEAR, lambda P, m: P.identity(m, "weight")),
    "chain_l1_ln": (CONV, lambda P, m: (P.l1_unstructured(m, "weight", amount=0.3),
                                        P.ln_structured(m, "weight", amount=2, n=2, dim=0),
                                        P.l1_unstructured(m, "weight", amount=10))),
    "chain_custom": (LINEAR, lambda P, m: (P.l1_unstructured(m, "weight", amount=3),
                                           P.custom_from_mask(m, "weight", mask=lib(P, EVERY_THIRD_OFF)))),
    "importance": (LINEAR, lambda P, m: P.l1_unstructured(m, "weight", amount=8,
                                                          importance_scores=lib(P, SCORES))),
}


@pytest.mark.parametrize("case", sorted(DETERMINISTIC))
def test_deterministic_methods_equal_torch(case):
    (make, shape), fn = DETERMINISTIC[case]
    t_mod, l_mod = pair(make)
    fn(TP, t_mod)
    fn(LP, l_mod)
    same_state(t_mod, l_mod)
    name = "bias" if case == "l1_bias" else "weight"
    np.testing.assert_allclose(npy(getattr(l_mod, name)), npy(getattr(t_mod, name)), rtol=1e-6)
    assert [type(h).__name__ for h in l_mod._forward_pre_hooks.values()] == \
        [type(h).__name__ for h in t_mod._forward_pre_hooks.values()]
    same_forward_and_grads(t_mod, l_mod, shape)
    mask = getattr(l_mod, name + "_mask")
    grad = getattr(l_mod, name + "_orig").grad
    assert (npy(grad)[npy(mask) == 0] == 0).all()  # no gradient through pruned entries
    TP.remove(t_mod, name)
    LP.remove(l_mod, name)
    same_state(t_mod, l_mod)
    assert isinstance(getattr(l_mod, name), tapelab.nn.Parameter) and not LP.is_pruned(l_mod)
    assert list(dict(l_mod.named_parameters())) == list(dict(t_mod.named_parameters()))


def test_l1_ties_prune_the_right_count_among_the_tied():
    """torch.topk's choice among equal values is an implementation detail of its CPU kernel;
    tapelab prunes the same number, all from the smallest values."""
    w = torch.tensor([[1.0, -1.0, 1.0, 0.5], [1.0, 2.0, -1.0, 3.0]])
    t_mod, l_mod = torch.nn.Linear(4, 2), tapelab.nn.Linear(4, 2)
    with torch.no_grad():
        t_mod.weight.copy_(w)
    l_mod.weight.data = tl(w)
    TP.l1_unstructured(t_mod, "weight", amount=3)
    LP.l1_unstructured(l_mod, "weight", amount=3)
    l_mask, t_mask = npy(l_mod.weight_mask), npy(t_mod.weight_mask)
    assert (l_mask == 0).sum() == (t_mask == 0).sum() == 3
    assert l_mask[0, 3] == 0 and set(np.abs(npy(w))[l_mask == 0]) == {0.5, 1.0}


def test_global_unstructured_equals_torch():
    make = lambda nn: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    t_mod, l_mod = pair(make)
    TP.l1_unstructured(t_mod[2], "weight", amount=4)  # an earlier mask is kept
    LP.l1_unstructured(l_mod[2], "weight", amount=4)
    for P, m in ((TP, t_mod), (LP, l_mod)):
        P.global_unstructured([(m[0], "weight"), (m[0], "bias"), (m[2], "weight")],
                              pruning_method=P.L1Unstructured, amount=0.5)
    same_state(t_mod, l_mod)
    assert int((npy(l_mod[0].weight_mask) == 0).sum() + (npy(l_mod[0].bias_mask) == 0).sum()
               + (npy(l_mod[2].weight_mask) == 0).sum()) == 4 + round(0.5 * (50 - 4))  # half of what was left
    same_forward_and_grads(t_mod, l_mod, (4, 6))


def test_global_unstructured_importance_scores_equal_torch():
    make = lambda nn: nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    t_mod, l_mod = pair(make)
    scores = torch.rand(3, 4)
    TP.global_unstructured([(t_mod[0], "weight"), (t_mod[1], "weight")], TP.L1Unstructured,
                           importance_scores={(t_mod[0], "weight"): scores}, amount=7)
    LP.global_unstructured(((l_mod[0], "weight"), (l_mod[1], "weight")), LP.L1Unstructured,
                           importance_scores={(l_mod[0], "weight"): tl(scores)}, amount=7)
    same_state(t_mod, l_mod)


def test_random_unstructured_counts_and_chaining():
    m = tapelab.nn.Linear(10, 6)
    LP.random_unstructured(m, "weight", amount=0.25)
    first = npy(m.weight_mask).copy()
    assert (first == 0).sum() == 15
    LP.random_unstructured(m, "weight", amount=9)  # 9 more among the 45 left
    second = npy(m.weight_mask)
    assert (second == 0).sum() == 24 and (second[first == 0] == 0).all()
    assert isinstance(next(iter(m._forward_pre_hooks.values())), LP.PruningContainer)
    assert len(next(iter(m._forward_pre_hooks.values()))) == 2
    np.testing.assert_array_equal(npy(m.weight), npy(m.weight_orig) * second)


def test_chained_l1_then_random_structured_counts():
    m = tapelab.nn.Conv2d(4, 6, 3)
    LP.l1_unstructured(m, "weight", amount=0.5)
    first = npy(m.weight_mask).copy()
    LP.random_structured(m, "weight", amount=2, dim=0)
    mask = npy(m.weight_mask)
    dead = [c for c in range(6) if (mask[c] == 0).all()]
    assert len(dead) == 2 + sum((first[c] == 0).all() for c in range(6))
    alive = [c for c in range(6) if c not in dead]
    np.testing.assert_array_equal(mask[alive], first[alive])
    LP.random_structured(m, "weight", amount=0.5, dim=1)  # 2 of the 4 input channels
    mask3 = npy(m.weight_mask)
    assert sum((mask3[:, c] == 0).all() for c in range(4)) == 2
    assert LP.is_pruned(tapelab.nn.Sequential(m))
    LP.remove(m, "weight")
    np.testing.assert_array_equal(npy(m.weight) == 0, (mask3 == 0) | (npy(m.weight) == 0))


def test_pruning_container_and_methods_directly():
    t = torch.randn(3, 4)
    for P, x in ((TP, t), (LP, tl(t))):
        got = P.L1Unstructured(amount=5).prune(x)
        np.testing.assert_array_equal(npy(got), npy(TP.L1Unstructured(amount=5).prune(t)))
    c = LP.PruningContainer()
    c._tensor_name = "w"
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        c.add_pruning_method(3)
    other = LP.L1Unstructured(1)
    other._tensor_name = "v"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter named 'w'"):
        c.add_pruning_method(other)


def test_state_dict_loads_into_torch_and_back():
    t_mod, l_mod = pair(lambda nn: nn.Linear(5, 3))
    LP.ln_structured(l_mod, "weight", amount=1, n=1, dim=0)
    fresh = torch.nn.Linear(5, 3)
    TP.identity(fresh, "weight")
    fresh.load_state_dict({k: torch.from_numpy(npy(v).copy()) for k, v in l_mod.state_dict().items()})
    np.testing.assert_allclose(npy(fresh(torch.ones(2, 5))), npy(l_mod(tapelab.ones(2, 5))), rtol=1e-6)


@pytest.mark.parametrize("amount, exc, msg", [
    (-1, ValueError, "amount=-1 should either be a float in the range [0, 1] or a non-negative integer"),
    (1.5, ValueError, "amount=1.5 should either be a float in the range [0, 1] or a non-negative integer"),
    ("3", TypeError, "Invalid type for amount: 3. Must be int or float."),
    (None, TypeError, "Invalid type for amount: None. Must be int or float."),
    (25, ValueError, "amount=25 should be smaller than the number of parameters to prune=24"),
])
def test_amount_errors_equal_torch(amount, exc, msg):
    keys = []
    for P, nn in ((TP, torch.nn), (LP, tapelab.nn)):
        m = nn.Linear(6, 4)
        with pytest.raises(exc) as info:
            P.l1_unstructured(m, "weight", amount=amount)
        assert str(info.value) == msg
        assert not P.is_pruned(m)
        keys.append(list(m.state_dict()))
    assert keys[0] == keys[1] and set(keys[0]) == {"weight", "bias"}  # the weight put back


def test_other_errors_equal_torch():
    for P, nn in ((TP, torch.nn), (LP, tapelab.nn)):
        with pytest.raises(AttributeError):
            P.l1_unstructured(nn.Linear(2, 2), "missing", amount=1)
        with pytest.raises(ValueError, match="Structured pruning can only be applied to multidimensional"):
            P.random_structured(nn.Linear(3, 2), "bias", amount=1, dim=0)
        with pytest.raises(IndexError, match="Invalid index 2 for tensor of size"):
            P.ln_structured(nn.Linear(3, 2), "weight", amount=1, n=2, dim=2)
        with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
            P.remove(nn.Linear(3, 2), "weight")
        with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported'):
            m = nn.Linear(3, 2)
            P.global_unstructured([(m, "weight")], P.RandomStructured, amount=1)
        with pytest.raises(TypeError, match="importance_scores must be of type dict"):
            m = nn.Linear(3, 2)
            P.global_unstructured([(m, "weight")], P.L1Unstructured, importance_scores=[1], amount=1)
        with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
            m = nn.Linear(3, 2)
            P.l1_unstructured(m, "weight", 1, importance_scores=m.bias)


def test_import_paths_under_aliases():
    with tapelab.install_aliases():
        import torch.nn.utils.prune as prune
        from torch.nn.utils.prune import L1Unstructured
        from torch.nn.utils import prune as prune2
        assert prune is LP and prune2 is LP and L1Unstructured is LP.L1Unstructured


def _lottery_ticket(torch_like, prune, init: dict, data) -> list[float]:
    """Train, prune half of all weights globally by magnitude, rewind to the initial weights
    under the mask, train again: the losses of both phases."""
    nn = torch_like.nn
    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))
    net.load_state_dict(init)
    x, y = data
    losses = []

    def train(steps: int) -> None:
        opt = torch_like.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())

    train(5)
    prune.global_unstructured([(net[0], "weight"), (net[2], "weight")], prune.L1Unstructured, amount=0.5)
    with torch_like.no_grad():  # rewind the surviving weights to their initial values
        net[0].weight_orig.copy_(init["0.weight"])
        net[2].weight_orig.copy_(init["2.weight"])
        net[0].bias.copy_(init["0.bias"])
        net[2].bias.copy_(init["2.bias"])
    train(5)
    prune.remove(net[0], "weight")
    prune.remove(net[2], "weight")
    losses.append(nn.functional.cross_entropy(net(x), y).item())
    losses.append(float((net[0].weight == 0).sum().item() + (net[2].weight == 0).sum().item()))
    return losses


def test_lottery_ticket_program_gives_torch_losses():
    torch.manual_seed(0)
    init = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).state_dict()
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    want = _lottery_ticket(torch, TP, {k: v.clone() for k, v in init.items()}, (x, y))
    with tapelab.install_aliases():
        import torch as tt
        import torch.nn.utils.prune as prune
        got = _lottery_ticket(tt, prune, {k: tl(v) for k, v in init.items()}, (tl(x), tl(y)))
    assert want[-1] == got[-1] == 0.5 * (8 * 16 + 16 * 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

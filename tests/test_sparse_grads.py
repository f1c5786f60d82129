"""``nn.Embedding(sparse=True)``: its weight's gradient is a sparse COO tensor, as PyTorch's, and
the optimizers that take one (SGD, Adagrad, SparseAdam) give PyTorch's parameters; the others
refuse with PyTorch's words."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

W = np.random.default_rng(0).standard_normal((7, 3))
IDX = [np.array([[1, 2, 1], [4, 1, 0]]), np.array([[3, 3, 6], [0, 2, 2]]), np.array([[5, 1, 1], [1, 4, 0]])]
LIN = np.random.default_rng(1).standard_normal((2, 3))


def _model(lib, **emb):
    emb = lib.nn.Embedding.from_pretrained(lib.tensor(W), freeze=False, sparse=True, **emb)
    lin = lib.nn.Linear(3, 2, bias=False).double()
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(LIN))
    return emb, lin


@pytest.mark.parametrize("emb", [{}, {"padding_idx": 0}])
def test_gradient_is_sparse_as_pytorchs_and_accumulates(emb):
    grads = []
    for lib in (torch, tl):
        e, lin = _model(lib, **emb)
        lin(e(lib.tensor(IDX[0]))).pow(2).sum().backward()
        first = e.weight.grad
        assert first.is_sparse and not first.is_coalesced()
        entries = (first._indices().numpy().copy(), first._values().detach().numpy().copy())
        lin(e(lib.tensor(IDX[1]))).pow(2).sum().backward()   # accumulates (the entries' order is PyTorch's own)
        grads.append((*entries, e.weight.grad.to_dense().numpy(), lin.weight.grad.numpy()))
    for ours, theirs in zip(grads[1], grads[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


OPTIMIZERS = {"sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.1),
              "sgd momentum nesterov": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
              "sgd maximize": lambda lib, ps: lib.optim.SGD(ps, lr=0.1, maximize=True),
              "adagrad": lambda lib, ps: lib.optim.Adagrad(ps, lr=0.1),
              "sparse adam": lambda lib, ps: lib.optim.SparseAdam(ps, lr=0.05, betas=(0.8, 0.9)),
              "sparse adam maximize": lambda lib, ps: lib.optim.SparseAdam(ps, lr=0.05, maximize=True)}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_that_take_sparse_gradients_give_pytorchs_parameters(name):
    finals = []
    for lib in (torch, tl):
        e, lin = _model(lib, padding_idx=0)
        opt = OPTIMIZERS[name](lib, list(e.parameters()))
        dense = lib.optim.SGD(lin.parameters(), lr=0.1)
        for idx in IDX:
            opt.zero_grad()
            dense.zero_grad()
            lin(e(lib.tensor(idx))).tanh().sum().backward()
            opt.step()
            dense.step()
        finals.append((e.weight.detach().numpy(), lin.weight.detach().numpy()))
    for ours, theirs in zip(finals[1], finals[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [lambda lib, ps: lib.optim.Adam(ps), lambda lib, ps: lib.optim.AdamW(ps),
                                  lambda lib, ps: lib.optim.RMSprop(ps),
                                  lambda lib, ps: lib.optim.Adagrad(ps, weight_decay=0.1),
                                  lambda lib, ps: lib.optim.SGD(ps, lr=0.1, weight_decay=0.1)])
def test_the_others_refuse_a_sparse_gradient_with_pytorchs_words(make):
    messages = []
    for lib in (torch, tl):
        e, _ = _model(lib)
        e(lib.tensor(IDX[0])).sum().backward()
        with pytest.raises(RuntimeError) as err:
            make(lib, list(e.parameters())).step()
        messages.append(str(err.value))
    assert messages[1] == messages[0]


def test_sparse_adam_refuses_a_dense_gradient():
    lin = tl.nn.Linear(2, 2)
    lin(tl.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        tl.optim.SparseAdam(lin.parameters()).step()
    with pytest.raises(ValueError, match="Invalid learning rate"):
        tl.optim.SparseAdam(lin.parameters(), lr=0.0)


def test_scale_grad_by_freq_with_sparse_gradients_is_refused_at_backward_as_in_pytorch():
    messages = []
    for lib in (torch, tl):
        e, _ = _model(lib, scale_grad_by_freq=True)
        with pytest.raises(RuntimeError) as err:
            e(lib.tensor(IDX[0])).sum().backward()
        messages.append(str(err.value))
    assert messages[1] == messages[0]


def test_embedding_bag_sparse_gradient():
    grads = []
    for lib in (torch, tl):
        weight = lib.tensor(W, requires_grad=True)
        out = lib.nn.functional.embedding_bag(lib.tensor([1, 2, 1, 4, 1, 0]), weight, lib.tensor([0, 2, 4]), mode="mean",
                                              sparse=True, padding_idx=0)
        (out * 2).sum().backward()
        assert weight.grad.is_sparse
        grads.append(weight.grad.to_dense().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)

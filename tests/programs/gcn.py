"""A two-layer graph convolutional network in the style of the GCN reference implementations:
``GraphConvolution`` layers holding a ``Parameter(torch.FloatTensor(in, out))`` reset with
``uniform_``, the symmetrically normalised adjacency D^-1/2 (A + I) D^-1/2, row-normalised
features, ReLU, dropout through ``F.dropout(training=self.training)``, log_softmax + nll_loss
on the training nodes, Adam with weight decay, and validation accuracy in eval mode.

The adjacency is dense by default (``torch.mm``). With ``sparse=True`` it is a COO tensor built
with ``torch.sparse_coo_tensor`` and multiplied with ``torch.spmm``, as the reference code does.
``legacy=True`` writes it as the reference code: ``torch.FloatTensor``/``LongTensor`` constructors
and ``weight.data.uniform_``; ``legacy=False`` uses ``torch.empty``, ``nn.init.uniform_`` and
``torch.as_tensor``."""
from __future__ import annotations

import math

import numpy as np

from ._common import seed_weights

N, FEATS, HIDDEN, CLASSES = 40, 12, 16, 3


def make_graph(rng):
    """A planted partition: three communities, dense inside, sparse between; features hint at them."""
    labels = np.arange(N) % CLASSES
    same = labels[:, None] == labels[None, :]
    a = np.triu(rng.random((N, N)) < np.where(same, 0.3, 0.03), 1)
    a = (a | a.T).astype(np.float64)
    feats = (rng.random((N, FEATS)) < 0.2).astype(np.float64)
    feats[np.arange(N), labels * 4 + rng.integers(0, 4, N)] = 1.0
    return a, feats, labels


def normalize_adj(a: np.ndarray) -> np.ndarray:
    a = a + np.eye(len(a))
    d = 1.0 / np.sqrt(a.sum(1))
    return (a * d[:, None]) * d[None, :]


def normalize_rows(m: np.ndarray) -> np.ndarray:
    s = m.sum(1, keepdims=True)
    s[s == 0] = 1.0
    return m / s


def main(torch, steps: int = 10, sparse: bool = False, legacy: bool = True):
    nn = torch.nn
    F = torch.nn.functional

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features, bias=True):
            super().__init__()
            self.in_features, self.out_features = in_features, out_features
            new = torch.FloatTensor if legacy else torch.empty
            self.weight = nn.Parameter(new(in_features, out_features))
            if bias:
                self.bias = nn.Parameter(new(out_features))
            else:
                self.register_parameter("bias", None)
            self.reset_parameters()

        def reset_parameters(self):
            stdv = 1.0 / math.sqrt(self.weight.size(1))
            if legacy:
                self.weight.data.uniform_(-stdv, stdv)
                if self.bias is not None:
                    self.bias.data.uniform_(-stdv, stdv)
            else:
                nn.init.uniform_(self.weight, -stdv, stdv)
                if self.bias is not None:
                    nn.init.uniform_(self.bias, -stdv, stdv)

        def forward(self, input, adj):
            support = torch.mm(input, self.weight)
            output = torch.spmm(adj, support) if sparse else torch.mm(adj, support)
            return output + self.bias if self.bias is not None else output

        def __repr__(self):
            return f"{self.__class__.__name__} ({self.in_features} -> {self.out_features})"

    class GCN(nn.Module):
        def __init__(self, nfeat, nhid, nclass, dropout):
            super().__init__()
            self.gc1 = GraphConvolution(nfeat, nhid)
            self.gc2 = GraphConvolution(nhid, nclass)
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, self.dropout, training=self.training)
            x = self.gc2(x, adj)
            return F.log_softmax(x, dim=1)

    def accuracy(output, labels):
        preds = output.max(1)[1].type_as(labels)
        correct = preds.eq(labels).double()
        return correct.sum() / len(labels)

    rng = np.random.default_rng(17)
    a, feats, labels_np = make_graph(rng)
    adj_np = normalize_adj(a).astype(np.float32)
    float_tensor = torch.FloatTensor if legacy else (lambda a: torch.as_tensor(a, dtype=torch.float32))
    long_tensor = torch.LongTensor if legacy else (lambda a: torch.as_tensor(a, dtype=torch.long))
    features = float_tensor(normalize_rows(feats).astype(np.float32))
    labels = long_tensor(labels_np)
    if sparse:
        rows, cols = np.nonzero(adj_np)
        indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
        adj = torch.sparse_coo_tensor(indices, torch.from_numpy(adj_np[rows, cols]), (N, N))
    else:
        adj = float_tensor(adj_np)
    idx_train, idx_val = long_tensor(list(range(0, 24))), long_tensor(list(range(24, N)))

    model = GCN(nfeat=FEATS, nhid=HIDDEN, nclass=CLASSES, dropout=0.0)
    seed_weights(torch, model, seed=12)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)

    history = []
    for epoch in range(steps):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()

        model.eval()
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        history += [loss_train.item(), acc_train.item(), loss_val.item(), acc_val.item()]
    return history

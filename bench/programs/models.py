"""The training steps of the programs researchers run, written once for tapelab and torch.

Each builder takes the library ``m`` (``tapelab`` or ``torch``), a numpy ``rng`` and
``tensor(array)`` (a float32 tensor of ``m`` from numpy data), and returns ``step(batch)``:
one forward, loss, backward and optimizer update on ``batch`` (from ``batches(rng)``, numpy
arrays), returning the loss. Both libraries get identical initial weights (drawn from
``rng`` in parameter order), so their losses agree. ``bench/workloads.py`` times one step on
a fixed batch; the scripts beside this file run them as whole programs.
"""
from __future__ import annotations

import warnings

import numpy as np


def init_weights(m, rng, tensor, model) -> None:
    """Identical weights on both sides: gains near 1, biases near 0, matrices ~ N(0, 0.02)."""
    with m.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if len(shape) == 1 and name.endswith("weight"):
                value = 1 + 0.1 * rng.standard_normal(shape)
            elif len(shape) == 1:
                value = 0.02 * rng.standard_normal(shape)
            else:
                value = rng.standard_normal(shape) * (0.02 if len(shape) == 2 else 0.1)
            p.copy_(tensor(value))


def as_long(m, array):
    return m.tensor(np.asarray(array, dtype=np.int64))


# ------------------------------------------------------------------ GPT block (nanoGPT's)
GPT = {128: dict(heads=4, seq=64, batch=16, vocab=65), 384: dict(heads=6, seq=64, batch=8, vocab=65)}


def update(opt, loss):
    """The training step's tail the programs share: gradients cleared (set to None), the loss's
    backward, one optimizer step; returns the loss."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def gpt_batches(rng, d: int, n: int):
    """Character-level batches (vocab 65, as tiny-shakespeare) cut from one token stream."""
    cfg = GPT[d]
    data = rng.integers(0, cfg["vocab"], 20000)
    for _ in range(n):
        ix = rng.integers(0, len(data) - cfg["seq"] - 1, cfg["batch"])
        x = np.stack([data[i:i + cfg["seq"]] for i in ix])
        y = np.stack([data[i + 1:i + 1 + cfg["seq"]] for i in ix])
        yield x, y


def gpt_step(m, rng, tensor, d: int):
    """Embeddings, one pre-LN block (causal SDPA, GELU MLP), final LayerNorm, head;
    AdamW with two parameter groups (matrices decay, gains and biases do not)."""
    nn, F = m.nn, m.nn.functional
    cfg = GPT[d]
    heads, seq, vocab = cfg["heads"], cfg["seq"], cfg["vocab"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.block, self.ln_f = Block(), nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets):
            pos = m.arange(idx.shape[1])
            x = self.block(self.wte(idx) + self.wpe(pos))
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    model = TinyGPT()
    init_weights(m, rng, tensor, model)
    params = list(model.parameters())
    opt = m.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=1e-3, betas=(0.9, 0.95))

    def step(batch):
        x, y = batch
        return update(opt, model(as_long(m, x), as_long(m, y)))
    return step


# ------------------------------------------------------------------ 2-layer LSTM language model
LSTM = dict(vocab=256, emb=200, hidden=200, layers=2, bptt=35, batch=20, lr=20.0, clip=0.25)


def lstm_batches(rng, n: int):
    """Consecutive bptt windows of a token stream batched into 20 columns (PyTorch's
    word_language_model ``batchify``/``get_batch``)."""
    c = LSTM
    stream = rng.integers(0, c["vocab"], c["batch"] * (c["bptt"] * n + 1)).reshape(c["batch"], -1).T
    for i in range(n):
        s = i * c["bptt"]
        yield stream[s:s + c["bptt"]], stream[s + 1:s + 1 + c["bptt"]]


def lstm_step(m, rng, tensor):
    """Embedding, 2-layer LSTM (emb 200, hidden 200), decoder; truncated BPTT (the hidden state
    carried over, detached), gradient clipping at 0.25, SGD lr 20."""
    nn, F = m.nn, m.nn.functional
    c = LSTM

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(c["vocab"], c["emb"])
            self.rnn = nn.LSTM(c["emb"], c["hidden"], c["layers"])
            self.decoder = nn.Linear(c["hidden"], c["vocab"])

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(out).view(-1, c["vocab"]), hidden

    model = RNNModel()
    init_weights(m, rng, tensor, model)
    opt = m.optim.SGD(model.parameters(), lr=c["lr"])
    zeros = np.zeros((c["layers"], c["batch"], c["hidden"]), np.float32)
    state = {"hidden": (tensor(zeros), tensor(zeros))}

    def step(batch):
        x, y = batch
        hidden = tuple(h.detach() for h in state["hidden"])
        model.zero_grad()
        out, state["hidden"] = model(as_long(m, x), hidden)
        loss = F.cross_entropy(out, as_long(m, y).reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), c["clip"])
        opt.step()
        return loss
    return step


# ------------------------------------------------------------------ ResNet basic blocks
RESNET = dict(batch=16, channels=32, size=16, classes=10)


def resnet_batches(rng, n: int):
    c = RESNET
    for _ in range(n):
        yield (rng.standard_normal((c["batch"], 3, c["size"], c["size"])).astype(np.float32),
               rng.integers(0, c["classes"], c["batch"]))


def resnet_step(m, rng, tensor):
    """A stem conv-BN-ReLU, two basic blocks (conv3x3-BN-ReLU-conv3x3-BN, identity shortcut,
    ReLU), global average pool, linear; SGD with momentum and weight decay."""
    nn, F = m.nn, m.nn.functional
    c = RESNET
    ch = c["channels"]

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(ch)
            self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(ch)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(out)) + x)

    model = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(),
                          BasicBlock(), BasicBlock(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(ch, c["classes"]))
    init_weights(m, rng, tensor, model)
    opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    def step(batch):
        x, y = batch
        return update(opt, F.cross_entropy(model(tensor(x)), as_long(m, y)))
    return step


# ------------------------------------------------------------------ GCN on a sparse adjacency
GCN = dict(nodes=2000, degree=5, features=128, hidden=64, classes=8)


def gcn_graph(rng):
    """A random graph's normalised adjacency D^-1/2 (A + I) D^-1/2 as COO (indices, values),
    node features and labels."""
    c = GCN
    n = c["nodes"]
    src = rng.integers(0, n, n * c["degree"])
    dst = rng.integers(0, n, n * c["degree"])
    pairs = np.unique(np.concatenate([np.stack([src, dst], 1), np.stack([dst, src], 1),
                                      np.stack([np.arange(n)] * 2, 1)]), axis=0)
    deg = np.bincount(pairs[:, 0], minlength=n).astype(np.float64)
    values = (deg[pairs[:, 0]] * deg[pairs[:, 1]]) ** -0.5
    feats = rng.standard_normal((n, c["features"])).astype(np.float32)
    return pairs.T.copy(), values.astype(np.float32), feats, rng.integers(0, c["classes"], n)


def gcn_step(m, rng, tensor):
    """Kipf and Welling's 2-layer GCN: A relu(A X W1) W2 on every node, cross-entropy, Adam
    with weight decay 5e-4."""
    F = m.nn.functional
    c = GCN
    idx, values, feats, labels = gcn_graph(rng)
    with warnings.catch_warnings():   # torch: "Sparse invariant checks are implicitly disabled"
        warnings.simplefilter("ignore")
        adj = m.sparse_coo_tensor(as_long(m, idx), tensor(values), (c["nodes"], c["nodes"])).coalesce()
    x, y = tensor(feats), as_long(m, labels)
    w1 = tensor(rng.standard_normal((c["features"], c["hidden"])) * 0.1)
    w2 = tensor(rng.standard_normal((c["hidden"], c["classes"])) * 0.1)
    w1.requires_grad_(True)
    w2.requires_grad_(True)
    opt = m.optim.Adam([w1, w2], lr=0.01, weight_decay=5e-4)

    def step(batch=None):
        h = F.relu(m.sparse.mm(adj, x @ w1))
        return update(opt, F.cross_entropy(m.sparse.mm(adj, h @ w2), y))
    return step

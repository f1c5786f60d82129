"""The nn zoo tests/test_compile.py and bench/compile_bench.py compile: small, seeded models."""
from __future__ import annotations

import math

import tapelab
from tapelab import nn
from tapelab.nn import functional as F


class MLP(nn.Module):
    def __init__(self, d=32, h=64, act="gelu"):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(d, h), nn.Linear(h, d), act

    def forward(self, x):
        h = self.fc1(x)
        h = F.gelu(h) if self.act == "gelu" else F.silu(h) if self.act == "silu" else F.gelu(h, approximate="tanh")
        return self.fc2(h)


class Norm(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln, self.fc = nn.LayerNorm(d), nn.Linear(d, d)

    def forward(self, x):
        return self.ln(x) * 0.5 + self.fc(x).tanh()


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class GPTBlock(nn.Module):
    """Pre-norm causal block: x + attn(ln(x)), then x + mlp(ln(x)) with tanh-GELU, as in GPT-2."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        h = self.fc(self.ln2(x))
        h = 0.5 * h * (1.0 + ((h + 0.044715 * h * h * h) * math.sqrt(2.0 / math.pi)).tanh())
        return x + self.out(h)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        h = F.relu(self.c1(x) * 1.5 + 0.1)
        h = F.silu(self.c2(h)) + h
        return self.fc(h.flatten(1))


class LSTMLM(nn.Module):
    """bench/programs/models.py's LSTM language model, small: embedding, 2-layer nn.LSTM, decoder,
    cross-entropy; the hidden state an input."""

    def __init__(self, vocab=16, d=12):
        super().__init__()
        self.vocab = vocab
        self.encoder, self.rnn, self.decoder = nn.Embedding(vocab, d), nn.LSTM(d, d, 2), nn.Linear(d, vocab)

    def forward(self, x, y, h0, c0):
        out, _ = self.rnn(self.encoder(x), (h0, c0))
        return F.cross_entropy(self.decoder(out).reshape(-1, self.vocab), y.reshape(-1))


class GCN(nn.Module):
    """bench/programs/models.py's two GCN layers, small: A relu(A X W1) W2 on a sparse adjacency A."""

    def __init__(self, features=5, hidden=4, classes=3):
        super().__init__()
        self.w1 = nn.Parameter(tapelab.randn(features, hidden) * 0.5)
        self.w2 = nn.Parameter(tapelab.randn(hidden, classes) * 0.5)

    def forward(self, adj, x, y):
        h = F.relu(tapelab.sparse.mm(adj, x @ self.w1))
        return F.cross_entropy(tapelab.sparse.mm(adj, h @ self.w2), y)


def chain(x, y):
    """The bench's 6-op elementwise chain."""
    return ((x * y + 1.0).tanh() * 0.5 - y).exp() * x


ZOO = {  # name -> (model factory, input factory)
    "gelu_mlp": (lambda: MLP(act="gelu"), lambda: tapelab.randn(16, 32)),
    "silu_mlp": (lambda: MLP(act="silu"), lambda: tapelab.randn(16, 32)),
    "layernorm": (Norm, lambda: tapelab.randn(4, 8, 32)),
    "attention": (Attention, lambda: tapelab.randn(2, 8, 32)),
    "gpt_block": (GPTBlock, lambda: tapelab.randn(2, 8, 32)),
    "convnet": (ConvNet, lambda: tapelab.randn(2, 3, 8, 8)),
}


def bn_net(nn_, momentum, track: bool):
    """A conv, BatchNorm2d, linear, BatchNorm1d stack, in ``tapelab.nn`` or ``torch.nn`` (``nn_``)."""
    return nn_.Sequential(nn_.Conv2d(3, 4, 3, padding=1), nn_.BatchNorm2d(4, momentum=momentum, track_running_stats=track),
                          nn_.ReLU(), nn_.Flatten(), nn_.Linear(4 * 6 * 6, 8),
                          nn_.BatchNorm1d(8, momentum=momentum, track_running_stats=track), nn_.Tanh())

"""A Transformer language model in the style of the word_language_model example's Transformer
variant: ``nn.TransformerEncoder`` over ``nn.TransformerEncoderLayer`` (its
``nn.MultiheadAttention`` inside), sinusoidal positional encoding in a registered buffer, the
square subsequent mask from ``nn.Transformer.generate_square_subsequent_mask``, sequence-first
batches, CrossEntropyLoss, SGD with StepLR, ``clip_grad_norm_`` and a validation pass. A second
model attends with ``nn.MultiheadAttention`` directly (batch_first, key padding mask) and
returns its attention weights."""
from __future__ import annotations

import math

import numpy as np

from ._common import seed_weights

NTOKEN, EMB, NHEAD, NHID, NLAYERS, BPTT = 16, 16, 2, 32, 2, 6


def make_stream(n: int, rng) -> np.ndarray:
    out, k = [], 0
    while len(out) < n:
        k = int(rng.integers(NTOKEN)) if rng.random() < 0.25 else (3 * k + 1) % NTOKEN
        out.append(k)
    return np.asarray(out, dtype=np.int64)


def main(torch, steps: int = 2, norm_first: bool = False):
    nn = torch.nn

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.0, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Module):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout, norm_first=norm_first)
            self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.encoder(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.transformer_encoder(src, self.src_mask)
            return self.decoder(output)

    class Pooler(nn.Module):
        """Attention pooling with one learned query, as classification heads do."""
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(NTOKEN, EMB, padding_idx=0)
            self.query = nn.Parameter(torch.zeros(1, 1, EMB))
            self.attn = nn.MultiheadAttention(EMB, NHEAD, batch_first=True)
            self.out = nn.Linear(EMB, 2)

        def forward(self, tokens):
            x = self.embed(tokens)
            q = self.query.expand(tokens.size(0), -1, -1)
            pooled, weights = self.attn(q, x, x, key_padding_mask=tokens == 0)
            return self.out(pooled.squeeze(1)), weights

    rng = np.random.default_rng(13)
    bsz = 4
    train = torch.from_numpy(make_stream(bsz * BPTT * 3 + 1, rng))
    train = train[:(train.size(0) // bsz) * bsz].view(bsz, -1).t().contiguous()
    val = torch.from_numpy(make_stream(2 * BPTT * 2, rng)).view(2, -1).t().contiguous()

    model = TransformerModel(NTOKEN, EMB, NHEAD, NHID, NLAYERS)
    seed_weights(torch, model, seed=6)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.95)

    history = []
    for epoch in range(1, steps + 1):
        model.train()
        for i in range(0, train.size(0) - 1, BPTT):
            seq_len = min(BPTT, len(train) - 1 - i)
            data, targets = train[i:i + seq_len], train[i + 1:i + 1 + seq_len].reshape(-1)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output.view(-1, NTOKEN), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            history.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            out = model(val[:-1])
            history.append(criterion(out.view(-1, NTOKEN), val[1:].reshape(-1)).item())

    pooler = Pooler()
    seed_weights(torch, pooler, seed=9)
    opt = torch.optim.Adam(pooler.parameters(), lr=1e-2)
    tokens = torch.from_numpy(rng.integers(1, NTOKEN, size=(6, 5)))
    tokens[::2, 3:] = 0                                     # padded sequences
    labels = (tokens.sum(1) % 2).long()
    for _ in range(steps * 2):
        opt.zero_grad()
        logits, weights = pooler(tokens)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        history += [loss.item(), weights[1, 0, 4].item(), weights[0, 0, 2].item()]
    return history

"""Train a small causal Transformer language model (token Embedding + learned positions ->
2-layer TransformerEncoder with a causal mask -> Linear) on next-token prediction with AdamW,
OneCycleLR and a DataLoader.

An ordinary PyTorch program: tests/test_pytorch_scripts.py runs it unchanged with the real torch
and with ``torch`` bound to tapelab, and compares every printed number. The data and the weights
come from numpy (weights copied in by parameter name), so both runs start from the same state.
"""
import zlib

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ, D_MODEL = 16, 12, 32


def values_for(name, shape):
    """Deterministic starting values for the parameter called ``name`` (same in every library)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if len(shape) == 1:
        base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
        return (base + 0.05 * rng.uniform(-1, 1, size=shape)).astype(np.float32)
    return (rng.uniform(-1, 1, size=shape) / np.sqrt(shape[1])).astype(np.float32)


def make_sequences(n, rng):
    """Arithmetic progressions mod VOCAB with a random start and step in 1..3: the next token
    follows from the two before it, so a causal model can learn it."""
    start = rng.integers(0, VOCAB, size=(n, 1))
    step = rng.integers(1, 4, size=(n, 1))
    seq = (start + step * np.arange(SEQ + 1)) % VOCAB
    return torch.from_numpy(seq[:, :-1].astype(np.int64)), torch.from_numpy(seq[:, 1:].astype(np.int64))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.zeros(SEQ, D_MODEL))
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        t = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.tok(tokens) + self.pos[:t]
        return self.head(self.encoder(h, mask=mask, is_causal=True))


rng = np.random.default_rng(2)
x_train, y_train = make_sequences(96, rng)
x_test, y_test = make_sequences(32, rng)
# shuffle=False: a shuffled order comes from each library's own RNG and cannot match across libraries
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=24, shuffle=False)

model = TinyLM()
for name, p in model.named_parameters():
    p.data.copy_(torch.from_numpy(values_for(name, tuple(p.shape))))
for name, p in model.named_parameters():
    print("param", name, list(p.shape))

mask = nn.Transformer.generate_square_subsequent_mask(4)
print("causal_mask", mask.tolist())

epochs = 8
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-2, epochs=epochs, steps_per_epoch=len(loader))

for epoch in range(epochs):
    model.train()
    for b, (xb, yb) in enumerate(loader):
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits.reshape(-1, VOCAB), yb.reshape(-1))
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"loss_e{epoch}_b{b}", round(loss.item(), 6))
    group = optimizer.param_groups[0]
    print(f"lr_beta1_e{epoch}", [round(group["lr"], 8), round(group["betas"][0], 6)])

model.eval()
with torch.no_grad():
    logits = model(x_test)
    print("test_loss", round(criterion(logits.reshape(-1, VOCAB), y_test.reshape(-1)).item(), 6))
    # positions 2.. can be predicted exactly from the two tokens before them
    pred = logits.argmax(dim=-1)
    print("test_accuracy_from_pos2", round((pred[:, 2:] == y_test[:, 2:]).float().mean().item(), 6))
    # causality: changing a later token leaves the earlier positions' outputs unchanged
    changed = x_test[:1].clone()
    changed[0, -1] = (changed[0, -1] + 5) % VOCAB
    diff = (model(changed)[0, :-1] - model(x_test[:1])[0, :-1]).abs().max().item()
    print("causal_max_diff", round(diff, 6))

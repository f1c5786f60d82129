"""Train a sequence tagger (Embedding with padding_idx -> bidirectional LSTM -> GRU -> Linear per token)
on padded sequences with CrossEntropyLoss(ignore_index=-100), Adam, CosineAnnealingLR, gradient
clipping and a DataLoader.

An ordinary PyTorch program: tests/test_pytorch_scripts.py runs it unchanged with the real torch
and with ``torch`` bound to tapelab, and compares every printed number. The data and the weights
come from numpy (weights copied in by parameter name), so both runs start from the same state.
"""
import zlib

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, TAGS, MAX_LEN, PAD, IGNORE = 20, 5, 10, 0, -100


def values_for(name, shape):
    """Deterministic starting values for the parameter called ``name`` (same in every library)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if len(shape) == 1:
        return (0.1 * rng.uniform(-1, 1, size=shape)).astype(np.float32)
    return (rng.uniform(-1, 1, size=shape) / np.sqrt(shape[1])).astype(np.float32)


def make_sequences(n, rng):
    """Token ids 1..VOCAB-1, padded with PAD; a token's tag is its id mod 4, plus one after a token >= 10."""
    tokens = np.full((n, MAX_LEN), PAD, dtype=np.int64)
    tags = np.full((n, MAX_LEN), IGNORE, dtype=np.int64)
    for i in range(n):
        length = rng.integers(4, MAX_LEN + 1)
        seq = rng.integers(1, VOCAB, size=length)
        prev = np.concatenate([[0], seq[:-1]])
        tokens[i, :length] = seq
        tags[i, :length] = seq % 4 + (prev >= 10)
    return torch.from_numpy(tokens), torch.from_numpy(tags)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 12, padding_idx=PAD)
        self.lstm = nn.LSTM(12, 16, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(32, 16, batch_first=True)
        self.fc = nn.Linear(16, TAGS)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        h, _ = self.gru(h)
        return self.fc(h)


rng = np.random.default_rng(1)
x_train, y_train = make_sequences(128, rng)
x_test, y_test = make_sequences(32, rng)
# shuffle=False: a shuffled order comes from each library's own RNG and cannot match across libraries
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=False)

model = Tagger()
for name, p in model.named_parameters():
    p.data.copy_(torch.from_numpy(values_for(name, tuple(p.shape))))
print("param_names", " ".join(name for name, _ in model.named_parameters()))
pad_row = model.emb.weight[PAD].detach().clone()

epochs = 6
criterion = nn.CrossEntropyLoss(ignore_index=IGNORE)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader), eta_min=0.002)

for epoch in range(epochs):
    model.train()
    for b, (xb, yb) in enumerate(loader):
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits.reshape(-1, TAGS), yb.reshape(-1))
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.2)
        optimizer.step()
        scheduler.step()
        print(f"loss_e{epoch}_b{b}", round(loss.item(), 6))
        print(f"gnorm_e{epoch}_b{b}", round(norm.item(), 5))
    print(f"lr_e{epoch}", [round(lr, 8) for lr in scheduler.get_last_lr()])

# padding_idx: the padding row gets no gradient, so Adam never moves it
print("pad_row_unchanged", bool(torch.equal(model.emb.weight[PAD].detach(), pad_row)))

model.eval()
with torch.no_grad():
    logits = model(x_test)
    print("test_loss", round(criterion(logits.reshape(-1, TAGS), y_test.reshape(-1)).item(), 6))
    real = y_test != IGNORE
    correct = (logits.argmax(dim=-1) == y_test) & real
    print("test_token_accuracy", round(correct.sum().item() / real.sum().item(), 6))
    print("n_test_tokens", real.sum().item())

"""Train a small CNN (Conv2d, BatchNorm2d, MaxPool2d, AdaptiveAvgPool2d, Dropout) on 8x8 images
with SGD + momentum, StepLR and a DataLoader.

An ordinary PyTorch program: tests/test_pytorch_scripts.py runs it unchanged with the real torch
and with ``torch`` bound to tapelab, and compares every printed number. The data and the weights
come from numpy (weights copied in by parameter name), so both runs start from the same state.
"""
import zlib

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def values_for(name, shape):
    """Deterministic starting values for the parameter called ``name`` (same in every library)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if len(shape) == 1:
        base = 1.0 if name.startswith("bn") and name.endswith("weight") else 0.0
        return (base + 0.1 * rng.uniform(-1, 1, size=shape)).astype(np.float32)
    fan_in = int(np.prod(shape[1:]))
    return (rng.uniform(-1, 1, size=shape) / np.sqrt(fan_in)).astype(np.float32)


def make_images(n, rng):
    """Three classes of noisy 8x8 images: a horizontal bar, a vertical bar, a diagonal."""
    y = np.arange(n) % 3
    x = 0.3 * rng.standard_normal((n, 1, 8, 8))
    for i, c in enumerate(y):
        k = rng.integers(1, 7)
        if c == 0:
            x[i, 0, k, :] += 1.0
        elif c == 1:
            x[i, 0, :, k] += 1.0
        else:
            x[i, 0] += np.eye(8, k=int(k) - 3)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))


class Net(nn.Module):
    def __init__(self, p_drop):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(6)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 8, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.drop = nn.Dropout(p_drop)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(self.drop(self.flatten(self.gap(x))))


rng = np.random.default_rng(0)
x_train, y_train = make_images(96, rng)
x_test, y_test = make_images(48, rng)
# shuffle=False: a shuffled order comes from each library's own RNG and cannot match across libraries
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=16, shuffle=False)

# Random dropout masks cannot match across libraries either: the compared run uses p=0.0,
# and train-mode dropout itself is checked statistically below.
model = Net(p_drop=0.0)
for name, p in model.named_parameters():
    p.data.copy_(torch.from_numpy(values_for(name, tuple(p.shape))))
print("n_params", sum(p.numel() for p in model.parameters()))

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

for epoch in range(4):
    model.train()
    for b, (xb, yb) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        print(f"loss_e{epoch}_b{b}", round(loss.item(), 6))
    scheduler.step()
    print(f"lr_e{epoch}", scheduler.get_last_lr())

print("bn1_running_mean", [round(v, 6) for v in model.bn1.running_mean.tolist()])
print("bn1_running_var", [round(v, 6) for v in model.bn1.running_var.tolist()])
print("bn1_batches_tracked", model.bn1.num_batches_tracked.item())

model.eval()
with torch.no_grad():
    logits = model(x_test)
    print("test_loss", round(criterion(logits, y_test).item(), 6))
    print("test_accuracy", round((logits.argmax(dim=1) == y_test).float().mean().item(), 6))

# Train-mode dropout zeroes about half the entries and scales the rest by 1/(1-p); eval mode is the identity.
drop = nn.Dropout(p=0.5)
torch.manual_seed(0)
out = drop(torch.ones(20000))
print("dropout_zero_frac", round((out == 0).float().mean().item(), 1))
print("dropout_kept_value", sorted(set(out.tolist())))
drop.eval()
print("dropout_eval_identity", bool((drop(torch.ones(5)) == 1).all()))

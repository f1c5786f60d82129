"""An MNIST classifier in the style of the PyTorch MNIST example, on a tiny MNIST written to disk:
``torchvision.datasets.MNIST`` reads the idx files, ``transforms.Compose([ToTensor(), Normalize(...)])``
prepares the batches, a two-convolution CNN trains with SGD and momentum, and the test pass reports
the accuracy. Runs unchanged on torch+torchvision and on tapelab (``tapelab.install_aliases()``)."""
from __future__ import annotations

import os
import struct
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

from .._common import seed_weights

STEPS = 4


def write_mnist(root: str, n: int = 32) -> None:
    """Digits-like blobs: label k puts a bright square in the k-th cell of a 4x3 grid."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
    for i, k in enumerate(labels):
        y, x = divmod(int(k), 3)
        images[i, 2 + 6 * y:7 + 6 * y, 4 + 8 * x:11 + 8 * x] = 230
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw)
    for split in ("train", "t10k"):
        for kind, arr in (("images-idx3", images), ("labels-idx1", labels)):
            header = bytes([0, 0, 8, arr.ndim]) + b"".join(struct.pack(">i", d) for d in arr.shape)
            with open(os.path.join(raw, f"{split}-{kind}-ubyte"), "wb") as f:   # as torchvision leaves them
                f.write(header + arr.tobytes())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout = nn.Dropout(0.0)
        self.fc1 = nn.Linear(8 * 12 * 12, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def main(steps: int = STEPS) -> list[float]:
    out = []
    with tempfile.TemporaryDirectory() as root:
        write_mnist(root)
        transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
        train = torchvision.datasets.MNIST(root, train=True, download=False, transform=transform)
        test = torchvision.datasets.MNIST(root, train=False, transform=transform)
        model = Net()
        seed_weights(torch, model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loader = DataLoader(train, batch_size=8, shuffle=False)
        model.train()
        for step, (data, target) in zip(range(steps), loader):
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        model.eval()
        correct, total_loss = 0, 0.0
        with torch.no_grad():
            for data, target in DataLoader(test, batch_size=16):
                output = model(data)
                total_loss += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(dim=1, keepdim=True).eq(target.view_as(output.argmax(1, True))).sum().item()
        out += [total_loss / len(test), correct / len(test)]
    return out

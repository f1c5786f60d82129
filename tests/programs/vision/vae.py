"""A variational autoencoder in the style of the PyTorch VAE example: ``torchvision.datasets.FakeData``-like
images from numpy through ``transforms.ToTensor``, the reparameterisation with numpy noise, BCE + KL loss,
Adam, and ``torchvision.utils.save_image`` of the reconstructions (read back to check the file)."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torch import nn, optim
from torchvision.utils import save_image

from .._common import seed_weights

STEPS = 4


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 24)
        self.fc21 = nn.Linear(24, 4)
        self.fc22 = nn.Linear(24, 4)
        self.fc3 = nn.Linear(4, 24)
        self.fc4 = nn.Linear(24, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, 64))
        z = mu + eps * torch.exp(0.5 * logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main(steps: int = STEPS) -> list[float]:
    rng = np.random.default_rng(3)
    pictures = [Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)) for _ in range(16)]
    data = torch.stack([T.ToTensor()(p) for p in pictures])          # (16, 1, 8, 8) in [0, 1]
    model = VAE()
    seed_weights(torch, model)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    out = []
    for _ in range(steps):
        eps = torch.from_numpy(rng.standard_normal((16, 4)).astype(np.float32))
        optimizer.zero_grad()
        recon, mu, logvar = model(data, eps)
        loss = loss_function(recon, data, mu, logvar)
        loss.backward()
        optimizer.step()
        out.append(loss.item() / len(data))
    with torch.no_grad():
        comparison = torch.cat([data[:4], recon.view(16, 1, 8, 8)[:4]])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "reconstruction.png")
        save_image(comparison.cpu(), path, nrow=4)
        saved = np.asarray(Image.open(path), dtype=np.float64)
    out += [saved.shape[0], saved.shape[1], saved.mean()]
    return out

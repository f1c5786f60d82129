"""A DCGAN step loop in the style of the PyTorch DCGAN example, with the torchvision parts it uses:
real images from ``torchvision.datasets.ImageFolder`` (PNG files written to a folder) through
``Resize``/``CenterCrop``/``ToTensor``/``Normalize``, and ``vutils.make_grid(fake, normalize=True)``
of the generated samples (the example saves it every few hundred steps)."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torchvision.utils as vutils
from PIL import Image

from .._common import seed_weights

STEPS = 3
NZ, NGF, NDF = 8, 8, 8


def write_folder(root: str, n: int = 8) -> None:
    rng = np.random.default_rng(5)
    os.makedirs(os.path.join(root, "faces"))
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (20, 18, 3), dtype=np.uint8)).save(os.path.join(root, "faces", f"{i}.png"))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
            nn.ConvTranspose2d(NGF, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main(steps: int = STEPS) -> list[float]:
    out = []
    with tempfile.TemporaryDirectory() as root:
        write_folder(root)
        dataset = dset.ImageFolder(root=root, transform=transforms.Compose([
            transforms.Resize(16), transforms.CenterCrop(16), transforms.ToTensor(),
            transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))]))
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=False)
        netG, netD = Generator(), Discriminator()
        seed_weights(torch, netG, seed=1, std=0.02)
        seed_weights(torch, netD, seed=2, std=0.02)
        criterion = nn.BCELoss()
        optD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        optG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        rng = np.random.default_rng(9)
        for step in range(steps):
            real = next(iter(loader))[0] if step % 2 == 0 else list(loader)[1][0]
            b = real.size(0)
            netD.zero_grad()
            label = torch.full((b,), 1.0)
            errD_real = criterion(netD(real), label)
            errD_real.backward()
            noise = torch.from_numpy(rng.standard_normal((b, NZ, 1, 1)).astype(np.float32))
            fake = netG(noise)
            label.fill_(0.0)
            errD_fake = criterion(netD(fake.detach()), label)
            errD_fake.backward()
            optD.step()
            netG.zero_grad()
            label.fill_(1.0)
            errG = criterion(netD(fake), label)
            errG.backward()
            optG.step()
            out += [(errD_real + errD_fake).item(), errG.item()]
        grid = vutils.make_grid(fake.detach(), padding=2, normalize=True)
        out += [float(grid.shape[1]), float(grid.shape[2]), grid.sum().item()]
    return out

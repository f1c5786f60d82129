"""Super-resolution in the style of the PyTorch example (ESPCN with PixelShuffle): high-resolution crops
and their low-resolution inputs come from PIL images through ``CenterCrop``, ``Resize`` (bicubic) and
``ToTensor`` on the Y channel, an MSE loss and Adam train the network, and PSNR is reported."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Resize, ToTensor

from .._common import seed_weights

STEPS = 4
UPSCALE = 2


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 8, 5, 1, 2)
        self.conv2 = nn.Conv2d(8, 8, 3, 1, 1)
        self.conv3 = nn.Conv2d(8, upscale_factor ** 2, 3, 1, 1)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        return self.pixel_shuffle(self.conv3(x))


def pairs(n: int = 6):
    rng = np.random.default_rng(8)
    yy, xx = np.mgrid[0:30, 0:28]
    crop = 24
    input_transform = Compose([CenterCrop(crop), Resize(crop // UPSCALE, InterpolationMode.BICUBIC), ToTensor()])
    target_transform = Compose([CenterCrop(crop), ToTensor()])
    inputs, targets = [], []
    for _ in range(n):
        f = rng.uniform(0.1, 0.5, 3)
        rgb = np.stack([np.sin(f[0] * yy + f[1] * xx), np.cos(f[2] * xx), np.sin(f[1] * yy)], -1)
        img = Image.fromarray(((rgb + 1) * 127.5).astype(np.uint8)).convert("YCbCr")
        y, _, _ = img.split()
        inputs.append(input_transform(y))
        targets.append(target_transform(y.copy()))
    return torch.stack(inputs), torch.stack(targets)


def main(steps: int = STEPS) -> list[float]:
    lr_imgs, hr_imgs = pairs()
    model = Net(UPSCALE)
    seed_weights(torch, model)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    out = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(lr_imgs), hr_imgs)
        loss.backward()
        optimizer.step()
        out.append(loss.item())
    with torch.no_grad():
        mse = criterion(model(lr_imgs), hr_imgs).item()
    out += [10 * math.log10(1 / mse), float(lr_imgs.shape[-1]), float(hr_imgs.shape[-1])]
    return out

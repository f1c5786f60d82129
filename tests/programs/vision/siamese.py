"""A siamese network in the style of the PyTorch example: ``torchvision.models.resnet18(weights=None)``
with its first convolution swapped for one input channel and its ``fc`` replaced by an identity, two
images through the shared tower, their features concatenated into a small head, BCELoss on
same-or-different pairs, Adadelta. Images are grayscale PNGs in an ``ImageFolder``."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torchvision
from PIL import Image
from torchvision import transforms

from .._common import seed_weights

STEPS = 2


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.resnet = torchvision.models.resnet18(weights=None)
        self.resnet.conv1 = nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.fc_in_features = self.resnet.fc.in_features
        self.resnet = nn.Sequential(*(list(self.resnet.children())[:-1]))
        self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
        self.sigmoid = nn.Sigmoid()

    def forward_once(self, x):
        return self.resnet(x).view(x.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


def write_folder(root: str) -> None:
    rng = np.random.default_rng(4)
    for digit in ("a", "b"):
        os.makedirs(os.path.join(root, digit))
        for i in range(3):   # independent images: batch norm over near-copies would amplify rounding
            img = rng.integers(0, 256, (32, 32)).astype(np.uint8)
            Image.fromarray(img).convert("RGB").save(os.path.join(root, digit, f"{i}.png"))


def main(steps: int = STEPS) -> list[float]:
    out = []
    with tempfile.TemporaryDirectory() as root:
        write_folder(root)
        ds = torchvision.datasets.ImageFolder(root, transform=transforms.Compose([
            transforms.Grayscale(), transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))]))
        images = torch.stack([ds[i][0] for i in range(len(ds))])
        labels = torch.tensor(ds.targets)
        first, second = images[[0, 1, 3, 4]], images[[2, 5, 5, 0]]
        target = (labels[[0, 1, 3, 4]] == labels[[2, 5, 5, 0]]).float().view(-1, 1)
        model = SiameseNetwork()
        seed_weights(torch, model)
        optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
        criterion = nn.BCELoss()
        model.train()
        for _ in range(steps):
            optimizer.zero_grad()
            loss = criterion(model(first, second), target)
            loss.backward()
            optimizer.step()
            out.append(loss.item())
        model.eval()
        with torch.no_grad():
            out += model(first, second).view(-1).tolist()
    return out

"""A variational autoencoder in the style of the VAE example: an MLP encoder to (mu, logvar),
the reparameterisation trick, an MLP decoder with a sigmoid, binary cross-entropy summed over
pixels plus the KL term, Adam, a test pass, and decoding of fixed latent samples.

The reparameterisation noise (``randn_like``) and the latent samples come from numpy, so both
libraries draw the same values."""
from __future__ import annotations

import numpy as np

from ._common import numpy_noise, seed_weights

D, H, Z = 36, 24, 4


def make_blobs(n: int, rng) -> np.ndarray:
    """6x6 images in [0, 1]: a bright blob at one of four corners, blurred by noise."""
    yy, xx = np.mgrid[0:6, 0:6]
    out = np.empty((n, 1, 6, 6))
    for i in range(n):
        cy, cx = [(1, 1), (1, 4), (4, 1), (4, 4)][i % 4]
        img = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 2.0) + 0.1 * rng.random((6, 6))
        out[i, 0] = img / img.max()
    return out.astype(np.float32)


def main(torch, steps: int = 2):
    nn = torch.nn
    F = torch.nn.functional
    rng = np.random.default_rng(11)

    class VAE(nn.Module):
        def __init__(self, randn_like=torch.randn_like):
            super().__init__()
            self.fc1 = nn.Linear(D, H)
            self.fc21 = nn.Linear(H, Z)
            self.fc22 = nn.Linear(H, Z)
            self.fc3 = nn.Linear(Z, H)
            self.fc4 = nn.Linear(H, D)
            self.randn_like = randn_like

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = self.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, D))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        bce = F.binary_cross_entropy(recon_x, x.view(-1, D), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld

    train = torch.utils.data.DataLoader(torch.from_numpy(make_blobs(48, rng)), batch_size=12)
    test = torch.utils.data.DataLoader(torch.from_numpy(make_blobs(24, rng)), batch_size=12)
    model = VAE(randn_like=numpy_noise(torch, rng))
    seed_weights(torch, model, seed=5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    history = []
    for epoch in range(1, steps + 1):
        model.train()
        train_loss = 0.0
        for data in train:
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            history.append(loss.item() / len(data))
        history.append(train_loss / len(train.dataset))

        model.eval()
        test_loss = 0.0
        with torch.no_grad():
            for data in test:
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
            sample = torch.from_numpy(rng.standard_normal((4, Z)).astype(np.float32))
            sample = model.decode(sample).view(4, 1, 6, 6)
        history += [test_loss / len(test.dataset), sample.mean().item(), sample.std().item()]
    return history

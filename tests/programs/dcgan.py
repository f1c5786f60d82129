"""A DCGAN in the style of the DCGAN example, shrunk to 16x16 images: a transposed-convolution
generator with BatchNorm and ReLU(True), a convolutional discriminator with
LeakyReLU(0.2, inplace=True) and a sigmoid, the custom ``weights_init`` applied with
``Module.apply``, BCELoss, two Adam optimizers with betas=(0.5, 0.999), and the usual
alternating step (real batch, fake batch through ``fake.detach()``, then the generator).

Latent vectors come from numpy; ``weights_init``'s draws are replaced by numpy-seeded weights
(the libraries' random streams differ) before training."""
from __future__ import annotations

import numpy as np

from ._common import seed_weights

NZ, NGF, NDF, NC = 8, 8, 8, 1


def make_rings(n: int, rng) -> np.ndarray:
    """16x16 images in [-1, 1]: rings of random radius and centre."""
    yy, xx = np.mgrid[0:16, 0:16]
    out = np.empty((n, NC, 16, 16))
    for i in range(n):
        cy, cx = rng.uniform(6, 10, size=2)
        r = rng.uniform(3, 6)
        out[i, 0] = np.tanh(3.0 * (1.5 - np.abs(np.hypot(yy - cy, xx - cx) - r)))
    return out.astype(np.float32)


def main(torch, steps: int = 6):
    nn = torch.nn
    optim = torch.optim

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
                nn.BatchNorm2d(NGF * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NGF),
                nn.ReLU(True),
                nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False),
                nn.Tanh(),
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NDF * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    rng = np.random.default_rng(21)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(make_rings(8 * steps, rng)))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=False, drop_last=True)

    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    seed_weights(torch, netG, seed=2, std=0.02)
    seed_weights(torch, netD, seed=3, std=0.02)

    criterion = nn.BCELoss()
    fixed_noise = torch.from_numpy(rng.standard_normal((4, NZ, 1, 1)).astype(np.float32))
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))

    history = []
    for i, (real_cpu,) in enumerate(dataloader):
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.from_numpy(rng.standard_normal((batch_size, NZ, 1, 1)).astype(np.float32))
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        # (2) update G: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        history += [errD.item(), errG.item(), D_x, D_G_z1, D_G_z2]

    with torch.no_grad():
        fake = netG(fixed_noise).detach()
    history.append(fake.abs().mean().item())
    return history

"""A ResNet-style backbone adapted and fine-tuned the way researchers adapt torchvision models:
BasicBlocks with a downsampling shortcut, the stem convolution replaced for 1-channel input
(``model.conv1 = nn.Conv2d(1, ...)``), the classifier cut off with
``nn.Sequential(*list(model.children())[:-1])``, the early layers frozen
(``requires_grad = False`` and an optimizer over ``filter(lambda p: p.requires_grad, ...)``),
and a siamese head trained with BCEWithLogitsLoss on pairs (same class or not), SGD with
momentum and weight decay, MultiStepLR, BatchNorm in train mode and evaluation in eval mode."""
from __future__ import annotations

import numpy as np

from ._common import seed_weights


def make_pairs(n: int, rng):
    """Pairs of 12x12 one-channel images of three textures; target 1 when the textures agree."""
    yy, xx = np.mgrid[0:12, 0:12]
    textures = [np.sin(xx * 1.2), np.sin(yy * 1.2), np.sin((xx + yy) * 0.9)]
    cls = rng.integers(0, 3, size=(n, 2))
    cls[::2, 1] = cls[::2, 0]
    imgs = np.stack([[textures[c] + 0.3 * rng.standard_normal((12, 12)) for c in pair] for pair in cls])
    return (imgs[:, 0, None].astype(np.float32), imgs[:, 1, None].astype(np.float32),
            (cls[:, 0] == cls[:, 1]).astype(np.float32))


def main(torch, steps: int = 2):
    nn = torch.nn

    def conv3x3(in_planes, out_planes, stride=1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes=10, width=8):
            super().__init__()
            self.inplanes = width
            self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, width, layers[0])
            self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(width * 2 * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, block, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion))
            layers = [block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * block.expansion
            layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer2(self.layer1(x))
            x = torch.flatten(self.avgpool(x), 1)
            return self.fc(x)

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.resnet = ResNet(BasicBlock, [1, 1])
            self.resnet.conv1 = nn.Conv2d(1, 8, kernel_size=3, stride=1, padding=1, bias=False)
            self.fc_in_features = self.resnet.fc.in_features
            self.resnet = nn.Sequential(*list(self.resnet.children())[:-1])   # drop the classifier
            self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 16), nn.ReLU(inplace=True),
                                    nn.Linear(16, 1))

        def forward_once(self, x):
            return self.resnet(x).view(x.size(0), -1)

        def forward(self, input1, input2):
            output1, output2 = self.forward_once(input1), self.forward_once(input2)
            return self.fc(torch.cat((output1, output2), 1))

    rng = np.random.default_rng(23)
    a, b, t = make_pairs(32, rng)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(t)),
        batch_size=8)
    va, vb, vt = (torch.from_numpy(v) for v in make_pairs(16, rng))

    model = SiameseNetwork()
    seed_weights(torch, model, seed=31)
    for p in model.resnet[:2].parameters():                  # freeze the new stem and its norm
        p.requires_grad = False
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05,
                                momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.5)

    history = [len(model.resnet), sum(p.numel() for p in model.parameters() if p.requires_grad)]
    for epoch in range(steps):
        model.train()
        for x1, x2, target in loader:
            optimizer.zero_grad()
            output = model(x1, x2).squeeze(1)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        scheduler.step()
        model.eval()
        with torch.no_grad():
            out = model(va, vb).squeeze(1)
            history += [criterion(out, vt).item(), ((out > 0).float() == vt).float().mean().item()]
    history.append(model.resnet[1].running_mean.sum().item())
    return history

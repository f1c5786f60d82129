"""An image classifier in the style of the MNIST examples: two convolutions, max pooling,
dropout, two linear layers, CrossEntropyLoss with label smoothing, SGD with Nesterov momentum and
weight decay, StepLR, a DataLoader over a TensorDataset, and a test pass in eval mode.

The images are synthetic 14x14 strokes (four classes). Dropout is built with p=0 for training
(the libraries' dropout masks differ) and the test pass runs in eval mode."""
from __future__ import annotations

import numpy as np

from ._common import seed_weights


def make_strokes(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Class 0: a row, 1: a column, 2: the diagonal, 3: a square outline; plus noise."""
    y = np.arange(n) % 4
    x = 0.25 * rng.standard_normal((n, 1, 14, 14))
    for i, c in enumerate(y):
        k = int(rng.integers(2, 12))
        if c == 0:
            x[i, 0, k, 1:13] += 1.0
        elif c == 1:
            x[i, 0, 1:13, k] += 1.0
        elif c == 2:
            x[i, 0] += np.eye(14, k=k - 7)
        else:
            x[i, 0, 3, 3:11] += 1.0
            x[i, 0, 10, 3:11] += 1.0
            x[i, 0, 3:11, 3] += 1.0
            x[i, 0, 3:11, 10] += 1.0
    return x.astype(np.float32), y.astype(np.int64)


def main(torch, steps: int = 2, p_drop: float = 0.0):
    nn = torch.nn
    F = torch.nn.functional
    from_numpy = torch.from_numpy

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, 1)
            self.conv2 = nn.Conv2d(8, 16, 3, 1)
            self.dropout1 = nn.Dropout(p_drop)
            self.dropout2 = nn.Dropout(p_drop)
            self.fc1 = nn.Linear(16 * 5 * 5, 32)
            self.fc2 = nn.Linear(32, 4)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return self.fc2(x)

    rng = np.random.default_rng(0)
    train_x, train_y = make_strokes(64, rng)
    test_x, test_y = make_strokes(32, rng)
    train_set = torch.utils.data.TensorDataset(from_numpy(train_x), from_numpy(train_y))
    test_set = torch.utils.data.TensorDataset(from_numpy(test_x), from_numpy(test_y))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=16, shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=16)

    device = torch.device("cpu")
    model = Net().to(device)
    seed_weights(torch, model, seed=1)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    history = []
    for epoch in range(1, steps + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        scheduler.step()

        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                test_loss += F.cross_entropy(output, target, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        history += [test_loss / len(test_loader.dataset), correct / len(test_loader.dataset),
                    scheduler.get_last_lr()[0]]
    return history

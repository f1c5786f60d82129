"""The production road of PyTorch 1.0: train, ``torch.onnx.export``, serve with onnxruntime.

A small CNN (conv, batch norm, pooling, linear) trains for ``steps`` SGD steps on numpy data,
is exported with a dynamic batch axis exactly as the PyTorch docs show, and onnxruntime serves a
batch of another size. Returns the losses, whether onnxruntime matched the eager model, and the
served logits, so the same numbers come out of torch and of tapelab.
"""
from __future__ import annotations

import numpy as np

from ._common import seed_weights


def main(torch, steps: int, path: str) -> list[float]:
    import onnxruntime as ort
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    seed_weights(torch, model)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    torch.onnx.export(model, (torch.from_numpy(x[:4]),), path, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17, dynamo=False)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    batch = x[:7]
    logits = session.run(None, {"image": batch})[0]
    with torch.no_grad():
        eager = model(torch.from_numpy(batch)).numpy()
    return losses + [float(np.abs(logits - eager).max() < 1e-4)] + logits.ravel()[:20].tolist()

"""The bench's chain16 (``((x*w + 1).tanh() * x).sigmoid().sum()``) on the same float32 values in tapelab and
torch: the per-op-overhead tests walk its backward."""
import numpy as np
import torch

import tapelab


def pair(values, requires_grad=True):
    """The same float32 values as a tapelab tensor and a torch tensor."""
    a = np.asarray(values, np.float32)
    return tapelab.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def chain(x, w):
    return ((x * w + 1).tanh() * x).sigmoid().sum()


def pairs(seed: int):
    """``(x, torch x), (w, torch w)``: 16 standard normal values each."""
    rng = np.random.default_rng(seed)
    return pair(rng.standard_normal(16)), pair(rng.standard_normal(16))

"""Whole training steps of a MobileNetV2-style block (1x1 expand, 3x3 depthwise, 1x1 project; stride 1 and 2)
and a RegNetX-style block (1x1, 3x3 grouped at group width 8, 1x1, residual) at batch 16, 32x32 inputs:
torch against tapelab, median ms a step (forward, loss, backward, SGD step) and torch/tapelab.

    python bench/conv_group_blocks.py [--threads N] [--steps 20]
"""
import argparse
import time

import numpy as np
import torch

import tapelab


def mobilenet_block(lib, c, expand, stride):
    nn = lib.nn
    h = c * expand
    return nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
                         nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
                         nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))


class RegNetBlock:
    """conv1x1 - BN - ReLU - grouped conv3x3 - BN - ReLU - conv1x1 - BN, plus the input, ReLU."""

    def __new__(cls, lib, c, group_width):
        nn = lib.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                                          nn.Conv2d(c, c, 3, 1, 1, groups=c // group_width, bias=False),
                                          nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 1, bias=False),
                                          nn.BatchNorm2d(c))

            def forward(self, x):
                return (self.body(x) + x).relu()
        return Block()


BLOCKS = {  # name: (builder(lib), batch, channels, size)
    "mbv2 c24 x6 s1 32x32": (lambda lib: mobilenet_block(lib, 24, 6, 1), 16, 24, 32),
    "mbv2 c32 x6 s2 32x32": (lambda lib: mobilenet_block(lib, 32, 6, 2), 16, 32, 32),
    "mbv2 c64 x6 s1 8x8": (lambda lib: mobilenet_block(lib, 64, 6, 1), 16, 64, 8),
    "regnet c56 gw8 32x32": (lambda lib: RegNetBlock(lib, 56, 8), 16, 56, 32),
    "regnet c152 gw8 16x16": (lambda lib: RegNetBlock(lib, 152, 8), 16, 152, 16),
    "resnext c128 gw16 16x16": (lambda lib: RegNetBlock(lib, 128, 16), 16, 128, 16),
}


def step_ms(lib, build, x, steps):
    lib.manual_seed(0)
    model = build(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xt = lib.from_numpy(x)
    times = []
    for i in range(steps + 3):
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(xt)
        loss = (out * out).mean()
        loss.backward()
        opt.step()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("-k", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tapelab.set_num_threads(args.threads)
    for name, (build, n, c, size) in BLOCKS.items():
        if args.k not in name:
            continue
        x = np.random.default_rng(0).standard_normal((n, c, size, size)).astype(np.float32)
        ours, theirs = step_ms(tapelab, build, x, args.steps), step_ms(torch, build, x, args.steps)
        print(f"{name:24s} t{args.threads} tapelab {ours:7.2f} torch {theirs:7.2f} ({theirs / ours:4.2f})", flush=True)


if __name__ == "__main__":
    main()

"""Depthwise and grouped 2-D convolutions shape by shape, tapelab against torch: forward, input gradient and
weight gradient (``nn/_ops`` ``_conv_fwd`` / ``_conv_t_fwd`` / ``_conv_w_fwd`` against ``aten.convolution`` /
``convolution_backward`` with one output mask), median ms and torch/tapelab (above 1 tapelab is faster).

    python bench/conv_groups.py [--threads N] [-k substring]
Shapes: cifar MobileNetV2's and EfficientNet's depthwise layers and RegNetX/ResNeXt grouped 3x3s at batch 16.
"""
import argparse
import time

import numpy as np
import torch

import tapelab
from tapelab.nn import _ops

# name: batch, channels, size, kernel, stride, groups (None: depthwise), dilation
SHAPES = {
    "dw3 s1 16x32x32": (16, 32, 32, 3, 1, None, 1),
    "dw3 s1 16x144x32": (16, 144, 32, 3, 1, None, 1),
    "dw3 s2 16x144x32": (16, 144, 32, 3, 2, None, 1),
    "dw3 s1 16x192x16": (16, 192, 16, 3, 1, None, 1),
    "dw3 s2 16x192x16": (16, 192, 16, 3, 2, None, 1),
    "dw3 s1 16x576x8": (16, 576, 8, 3, 1, None, 1),
    "dw3 s2 16x576x8": (16, 576, 8, 3, 2, None, 1),
    "dw3 s1 16x960x4": (16, 960, 4, 3, 1, None, 1),
    "dw3 d2 16x144x32": (16, 144, 32, 3, 1, None, 2),
    "dw5 s1 16x240x16": (16, 240, 16, 5, 1, None, 1),
    "dw5 s2 16x240x16": (16, 240, 16, 5, 2, None, 1),
    "g3 s1 16x24x32": (16, 24, 32, 3, 1, 3, 1),
    "g7 s1 16x56x32": (16, 56, 32, 3, 1, 7, 1),
    "g19 s2 16x152x32": (16, 152, 32, 3, 2, 19, 1),
    "g19 s1 16x152x16": (16, 152, 16, 3, 1, 19, 1),
    "g46 s2 16x368x16": (16, 368, 16, 3, 2, 46, 1),
    "g46 s1 16x368x8": (16, 368, 8, 3, 1, 46, 1),
    "g32 s1 16x128x16": (16, 128, 16, 3, 1, 32, 1),
    "g8 s2 16x256x16": (16, 256, 16, 3, 2, 8, 1),
    "g2 s1 16x128x16": (16, 128, 16, 3, 1, 2, 1),
    "g4 s2 16x256x16": (16, 256, 16, 3, 2, 4, 1),
}


def clock(f, budget: float) -> float:
    f()
    times, end = [], time.perf_counter() + budget
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("-k", default="")
    ap.add_argument("--budget", type=float, default=0.3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tapelab.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    for name, (n, c, size, k, s, g, d) in SHAPES.items():
        if args.k not in name:
            continue
        g = g or c
        p = d * (k - 1) // 2
        x = rng.standard_normal((n, c, size, size)).astype(np.float32)
        w = rng.standard_normal((c, c // g, k, k)).astype(np.float32)
        params = dict(stride=(s, s), pads=((p, p), (p, p)), dilation=(d, d), groups=g)
        y = _ops._conv_fwd(np, x, w, **params)
        gy = rng.standard_normal(y.shape).astype(np.float32)
        ours = [clock(lambda: _ops._conv_fwd(np, x, w, **params), args.budget),
                clock(lambda: _ops._conv_t_fwd(np, gy, w, in_size=(size, size), **params), args.budget),
                clock(lambda: _ops._conv_w_fwd(np, x, gy, kernel=(k, k), **params), args.budget)]
        xt, wt, gyt = map(torch.from_numpy, (x, w, gy))
        back = lambda mask: torch.ops.aten.convolution_backward(gyt, xt, wt, None, [s, s], [p, p], [d, d], False,
                                                                [0, 0], g, mask)
        theirs = [clock(lambda: torch.ops.aten.convolution(xt, wt, None, [s, s], [p, p], [d, d], False, [0, 0], g),
                        args.budget),
                  clock(lambda: back([True, False, False]), args.budget),
                  clock(lambda: back([False, True, False]), args.budget)]
        print(f"{name:18s} t{args.threads} " + "  ".join(
            f"{lab} {a:6.3f}/{b:6.3f} ({b / a:4.2f})" for lab, a, b in zip(("fwd", "gx", "gw"), ours, theirs)),
            flush=True)


if __name__ == "__main__":
    main()

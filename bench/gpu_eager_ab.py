"""Eager cuda GEMMs: cuBLASLt (``kernels/cublaslt.py``) against cupy's ``matmul``, on a GPU.

    python bench/gpu_eager_ab.py          # a GPU machine with cupy, nvmath-python and PyTorch CUDA

Host time per product for the shapes of the bench's steps (median of 200 calls, each synchronized,
so it is the whole call: host work, launch and the kernel), then whole eager steps (MLP, GELU MLP,
Transformer and GPT blocks, SGD momentum) with the route on and off in alternating rounds, against
PyTorch CUDA. The route is switched off for a stream by its entry in ``cublaslt._EAGER`` (None: no
route, cupy's matmul), as a machine without nvmath-python runs. Not a test: nothing asserts.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import tapelab  # noqa: E402
from gpu_check import _setup  # noqa: E402
from tapelab.kernels import cublaslt  # noqa: E402

SHAPES = [((64, 784), (784, 512)), ((512, 128), (128, 384)), ((512, 128), (128, 100)),
          ((32, 64, 32), (32, 32, 64)), ((512, 256), (256, 128))]
STEPS = ("MLP 784-512-512-10, batch 64", "GELU MLP 784-1024-1024-10, batch 64", "Transformer block d128, batch 8x64",
         "GPT block d128 (pre-norm, GELU), batch 8x64")


def _key():
    return (cupy.cuda.Device().id, cupy.cuda.get_current_stream().ptr)


def _route(on: bool) -> None:
    """The eager route of the current stream on (built anew) or off (cupy's matmul)."""
    if on:
        cublaslt._EAGER.pop(_key(), None)
    else:
        cublaslt._EAGER[_key()] = None


def _per_call_us(fn, n=200) -> float:
    for _ in range(10):
        fn()
    cupy.cuda.Device().synchronize()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    return 1e6 * statistics.median(ts)


def products() -> None:
    print(f"{'product (float32)':34s} {'cupy.matmul':>12s} {'cuBLASLt':>10s} {'torch':>8s}   us a call, synchronized")
    import torch
    rng = np.random.default_rng(0)
    for sa, sb in SHAPES:
        a, b = (cupy.asarray(rng.standard_normal(s).astype(np.float32)) for s in (sa, sb))
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        got = cublaslt.eager_matmul(cupy, a, b)
        err = float(cupy.abs(got - cupy.matmul(a, b)).max())
        theirs = _per_call_us(lambda: cupy.matmul(a, b))
        ours = _per_call_us(lambda: cublaslt.eager_matmul(cupy, a, b))
        tt = _per_call_us(lambda: torch.matmul(ta, tb))
        print(f"{str(sa) + ' @ ' + str(sb):34s} {theirs:12.1f} {ours:10.1f} {tt:8.1f}   max |diff| {err:.1e}")


def steps(rounds=7, reps=20) -> None:
    import torch
    print(f"\n{'eager step, median ms':44s} {'route off':>9s} {'route on':>9s} {'torch':>8s} {'off/on':>7s} {'torch/on':>9s}")
    for name in STEPS:
        model, x, y, opt = _setup(tapelab, name, "cuda")

        def step():
            opt.zero_grad()
            tapelab.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        tm, tx, ty, topt = _setup(torch, name, "cuda")

        def tstep():
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tm(tx), ty).backward()
            topt.step()
        times = {"off": [], "on": [], "torch": []}
        for r in range(rounds):
            for side in (("off", "on") if r % 2 else ("on", "off")):
                _route(side == "on")
                times[side].append(_per_call_us(step, reps) / 1e3)
            times["torch"].append(_per_call_us(tstep, reps) / 1e3)
        off, on, tt = (statistics.median(times[k]) for k in ("off", "on", "torch"))
        print(f"{name:44s} {off:9.3f} {on:9.3f} {tt:8.3f} {off / on:7.2f} {tt / on:9.2f}")
    _route(True)


if __name__ == "__main__":
    print(f"cupy {cupy.__version__}, {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    products()
    steps()

"""Compiled against eager under bf16 autocast (issue 18): a GPT block (tests/_compile_models.GPTBlock, its
tanh-GELU written out) and a Transformer encoder layer, forward under ``autocast("cpu", bfloat16)``, loss in
float32, ``autograd.grad`` of every parameter. Rounds of 5 steps alternate eager and compiled in one
process; prints the median ratio eager/compiled, its range, whether the compiled step equals eager's bit
for bit and which groups fused.

    python bench/compile_autocast.py [--threads N] [--rounds R]

Thread time at one thread, wall clock above.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tapelab  # noqa: E402
from _compile_models import GPTBlock  # noqa: E402


def _models():
    tapelab.manual_seed(0)
    yield "gpt block d128, 8x64", GPTBlock(128, 4), tapelab.randn(8, 64, 128)
    tapelab.manual_seed(0)
    yield ("encoder layer d128 ff256, 8x64", tapelab.nn.TransformerEncoderLayer(
        128, 4, 256, dropout=0.0, activation="gelu", batch_first=True), tapelab.randn(8, 64, 128))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    tapelab.set_num_threads(a.threads)
    clock = time.thread_time if a.threads == 1 else time.perf_counter
    for name, m, x in _models():
        params = list(m.parameters())
        c = tapelab.compile(m)

        def step(f):
            with tapelab.autocast("cpu", tapelab.bfloat16):
                loss = f(x).float().pow(2).mean()
            return loss, tapelab.autograd.grad(loss, params)
        for _ in range(3):
            (lc, gc), (le, ge) = step(c), step(m)
        same = lc.item() == le.item() and all(np.array_equal(p.numpy(), q.numpy()) for p, q in zip(gc, ge))
        entry = next(iter(c._compiled.cache.values()))
        ratios, eager_ms = [], []
        for _ in range(a.rounds):
            t = {}
            for key, f in (("eager", m), ("compiled", c)):
                t0 = clock()
                for _ in range(5):
                    step(f)
                t[key] = clock() - t0
            ratios.append(t["eager"] / t["compiled"])
            eager_ms.append(t["eager"] / 5 * 1e3)
        print(f"{name}: eager/compiled {np.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), eager step "
              f"{np.median(eager_ms):.2f} ms, bit for bit {same}, fused {[o.name for o in entry.graph.fused_ops]}")


if __name__ == "__main__":
    main()

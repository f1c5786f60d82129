"""torch._foreach_* per call, torch vs tapelab: one thread, thread clock, medians of 9 repetitions.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/foreach_bench.py [--list mixed|small] [--only SUBSTR]
        [--target-ms 8] [--baseline OLD_FOREACH_PY]

Every function PyTorch has (unary out of place and in place, the binary ones with a list, a number,
a list of numbers and a 0-d tensor, alpha, addcmul/addcdiv with value and scalars, lerp with a number,
weight tensors and a list of numbers, the norms, clone/copy_/zero_, mm) on a list of 12 float32
parameters of mixed sizes (16 .. 512x512, ``--list small``: 8 of 16 .. 1728 numbers).

Each repetition runs K calls (K such that torch's repetition takes about --target-ms), each timed alone with
time.thread_time_ns; every call gets its inputs restored (untimed) first. torch and tapelab
repetitions alternate. Prints per case: torch us/call, tapelab us/call, ratio median [q1, q3] of the 9
per-repetition ratios.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch
import tapelab

torch.set_num_threads(1)
tapelab.set_num_threads(1)

SHAPES = {"mixed": [(512, 512), (512,), (256, 512), (256,), (128, 256), (128,), (64, 3, 3, 3), (64,), (16,),
                    (10, 128), (10,), (32, 32)],
          "small": [(16,), (64,), (32, 32), (64, 3, 3, 3), (128,), (10, 128), (256,), (16, 16)]}
UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor",
         "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt",
         "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")
POSITIVE = {"acos", "asin", "log", "log10", "log1p", "log2", "rsqrt", "sqrt", "lgamma", "reciprocal"}
BINARY = ("add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum", "minimum")


def cases():
    """(label, function name, args(d) -> (args, kwargs), in-place)."""
    out = []
    for n in UNARY:
        x = "P" if n in POSITIVE else "X"
        out.append((n, n, lambda d, x=x: ((d[x],), {}), False))
        out.append((n + "_", n + "_", lambda d, x=x: ((d[x],), {}), True))
    for n in BINARY:
        x = "P" if n == "pow" else "X"
        for ip in ("", "_"):
            out.append((f"{n}{ip}(L,L)", n + ip, lambda d, x=x: ((d[x], d["Y"]), {}), bool(ip)))
            out.append((f"{n}{ip}(L,s)", n + ip, lambda d, x=x: ((d[x], 0.75), {}), bool(ip)))
            out.append((f"{n}{ip}(L,[s])", n + ip, lambda d, x=x: ((d[x], d["S"]), {}), bool(ip)))
            if n in ("add", "sub", "mul", "div"):
                out.append((f"{n}{ip}(L,t0)", n + ip, lambda d, x=x: ((d[x], d["T0"]), {}), bool(ip)))
            if n in ("add", "sub"):
                out.append((f"{n}{ip}(L,L,alpha)", n + ip, lambda d: ((d["X"], d["Y"]), {"alpha": 0.1}), bool(ip)))
    out.append(("pow(s,L)", "pow", lambda d: ((2.0, d["X"]), {}), False))
    for n in ("addcmul", "addcdiv"):
        for ip in ("", "_"):
            out.append((f"{n}{ip}", n + ip, lambda d: ((d["X"], d["Y"], d["Z"]), {}), bool(ip)))
            out.append((f"{n}{ip}(v)", n + ip, lambda d: ((d["X"], d["Y"], d["Z"], 0.1), {}), bool(ip)))
            out.append((f"{n}{ip}([s])", n + ip, lambda d: ((d["X"], d["Y"], d["Z"], d["S"]), {}), bool(ip)))
    for ip in ("", "_"):
        out.append((f"lerp{ip}(s)", "lerp" + ip, lambda d: ((d["X"], d["Y"], 0.1), {}), bool(ip)))
        out.append((f"lerp{ip}(L)", "lerp" + ip, lambda d: ((d["X"], d["Y"], d["W"]), {}), bool(ip)))
        out.append((f"lerp{ip}([s])", "lerp" + ip, lambda d: ((d["X"], d["Y"], d["S"]), {}), bool(ip)))
    out.append(("norm", "norm", lambda d: ((d["X"],), {}), False))
    out.append(("norm(1)", "norm", lambda d: ((d["X"], 1), {}), False))
    out.append(("norm(inf)", "norm", lambda d: ((d["X"], float("inf")), {}), False))
    out.append(("powsum", "powsum", lambda d: ((d["X"],), {}), False))
    out.append(("max", "max", lambda d: ((d["X"],), {}), False))
    out.append(("clone", "clone", lambda d: ((d["X"],), {}), False))
    out.append(("copy_", "copy_", lambda d: ((d["X"], d["Y"]), {}), True))
    out.append(("zero_", "zero_", lambda d: ((d["X"],), {}), True))
    out.append(("mm", "mm", lambda d: ((d["M"], d["N"]), {}), False))
    return out


def data(lib, arrays):
    d = {k: [lib.from_numpy(a.copy()) for a in v] for k, v in arrays.items() if k != "S"}
    d["S"] = arrays["S"]
    d["T0"] = lib.tensor(0.5)
    return d


def build(shapes, seed=0):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    sign = lambda s: np.where(rng.random(s) < 0.5, -1, 1).astype(f32)
    a = {"X": [(rng.uniform(0.1, 0.9, s) * sign(s)).astype(f32) for s in shapes],
         "P": [rng.uniform(0.1, 0.9, s).astype(f32) for s in shapes],
         "Y": [rng.uniform(0.1, 0.9, s).astype(f32) for s in shapes],
         "Z": [rng.uniform(0.5, 1.5, s).astype(f32) for s in shapes],
         "W": [rng.uniform(0, 1, s).astype(f32) for s in shapes]}
    a["S"] = [float(v) for v in rng.uniform(0.5, 1.0, len(shapes))]
    mats = [(64, 64), (32, 64), (128, 32), (16, 16), (64, 128), (8, 64)]
    a["M"] = [rng.standard_normal(s).astype(f32) for s in mats]
    a["N"] = [rng.standard_normal(s[::-1]).astype(f32) for s in mats]
    return a


def run(lib, fn, argf, d, inplace, k, pristine):
    total = 0
    nt = time.thread_time_ns
    for _ in range(k):
        for key in ("X", "P"):   # every call sees the same inputs (an in-place case before leaves them changed)
            for t, s in zip(d[key], pristine[key]):
                t.numpy()[...] = s
        args, kwargs = argf(d)
        t0 = nt()
        fn(*args, **kwargs)
        total += nt() - t0
    return total / k / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", default="mixed", choices=sorted(SHAPES))
    ap.add_argument("--only", default=None)
    ap.add_argument("--target-ms", type=float, default=8.0)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--baseline", default=None, help="an older engine/_foreach.py, timed as a third column")
    opt = ap.parse_args()
    arrays = build(SHAPES[opt.list])
    libs = {"torch": (torch, data(torch, arrays)), "tapelab": (tapelab, data(tapelab, arrays))}
    old = None
    if opt.baseline:
        import importlib.util
        spec = importlib.util.spec_from_file_location("tapelab._foreach_baseline", opt.baseline)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        libs["before"] = (old, data(tapelab, arrays))
    print(f"# list {opt.list}: {len(SHAPES[opt.list])} float32 tensors, {sum(int(np.prod(s)) for s in SHAPES[opt.list])} "
          f"elements; torch {torch.__version__}, 1 thread")
    print(f"{'case':24s} {'torch us':>10s} {'tapelab us':>11s} {'ratio':>6s}  [q1, q3]"
          + ("   before us  ratio" if old else ""))
    rows = []
    for label, name, argf, inplace in cases():
        if opt.only and opt.only not in label:
            continue
        fns = {k: getattr(lib, "_foreach_" + name) for k, (lib, _) in libs.items()}
        try:
            with torch.no_grad():
                fns["torch"](*argf(libs["torch"][1])[0], **argf(libs["torch"][1])[1])
        except Exception as e:      # a form this torch lacks
            print(f"{label:24s} torch: {type(e).__name__}")
            continue
        for key in libs:       # warm, restore
            lib, d = libs[key]
            run(lib, fns[key], argf, d, inplace, 2, arrays)
        one = run(torch, fns["torch"], argf, libs["torch"][1], inplace, 3, arrays)
        k = max(1, int(opt.target_ms * 1000 / max(one, 1e-3)))
        ts, ls, bs = [], [], []
        for _ in range(opt.reps):
            ts.append(run(torch, fns["torch"], argf, libs["torch"][1], inplace, k, arrays))
            ls.append(run(tapelab, fns["tapelab"], argf, libs["tapelab"][1], inplace, k, arrays))
            if old:
                bs.append(run(old, fns["before"], argf, libs["before"][1], inplace, k, arrays))
        r = np.array(ls) / np.array(ts)
        q1, med, q3 = np.percentile(r, [25, 50, 75])
        rows.append((label, np.median(ts), np.median(ls), med, np.median(np.array(bs) / np.array(ts)) if old else 0))
        print(f"{label:24s} {np.median(ts):10.1f} {np.median(ls):11.1f} {med:6.2f}  [{q1:.2f}, {q3:.2f}]"
              + (f"  {np.median(bs):10.1f} {rows[-1][4]:6.2f}" if old else "")
              + ("  <--" if med > 1.0 else ""), flush=True)
    r = np.array([row[3] for row in rows])
    print(f"# {len(rows)} cases: ratio median {np.median(r):.2f}, max {r.max():.2f}, "
          f"{int((r > 1.0).sum())} above 1.0, {int((r > 1.1).sum())} above 1.1")
    if old:
        b = np.array([row[4] for row in rows])
        print(f"# before: ratio median {np.median(b):.2f}, max {b.max():.2f}, "
              f"{int((b > 1.0).sum())} above 1.0, {int((b > 1.1).sum())} above 1.1")


if __name__ == "__main__":
    sys.exit(main())

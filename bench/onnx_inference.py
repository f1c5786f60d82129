"""Inference on the production path: onnxruntime (tapelab's export) vs tapelab eager vs PyTorch eager.

The same MLP, CNN and Transformer encoder are built in both libraries with one set of weights
(tapelab's, copied into torch), exported with ``tapelab.onnx.export`` and served by
``tapelab.onnx.InferenceSession`` (onnxruntime, CPU). A fourth row measures the recurrent choice:
tapelab exports LSTM/GRU layers unrolled into their cell ops, PyTorch's exporter as one ONNX
``LSTM`` node; both files run in onnxruntime.

Every side runs on one thread (``--threads``) under ``no_grad``/eval; each time is the best and
the median of ``--reps`` repetitions of a timed batch of calls. Run: ``python bench/onnx_inference.py``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--target", type=float, default=0.05, help="seconds per repetition")
    return p.parse_args(argv)


def models(nn):
    """name -> (constructor, input shapes, dtype of inputs): written once, built in either library."""
    def mlp():
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))

    def cnn():
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(64 * 8 * 8, 10))

    def transformer():
        layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.1, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def lstm():
        return _LSTM(nn)

    return {"MLP (batch 64)": (mlp, (64, 256)), "CNN (batch 16, 3x32x32)": (cnn, (16, 3, 32, 32)),
            "Transformer encoder (8 x 64 tokens, d=128)": (transformer, (8, 64, 128)),
            "LSTM 2 layers (batch 16, 32 steps, 64->128)": (lstm, (16, 32, 64))}


def _LSTM(nn):
    class LSTMHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = nn.LSTM(64, 128, num_layers=2, batch_first=True), nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1])
    return LSTMHead()


def best_and_median(fn, reps: int, target: float) -> tuple[float, float]:
    """Per-call seconds: best and median over ``reps`` repetitions of a batch of calls."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    n = max(1, int(target / once))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n)
    return min(times), statistics.median(times)


def main(argv=None) -> int:
    args = parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import onnxruntime as ort
    import torch

    import tapelab
    torch.set_num_threads(args.threads)
    print(f"onnx inference bench: numpy {np.__version__}, torch {torch.__version__}, onnxruntime {ort.__version__}, "
          f"{args.threads} thread(s), load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| model | onnxruntime (tapelab export) | tapelab eager | PyTorch eager | onnxruntime (PyTorch export) |")
    print("|---|---|---|---|---|")
    tmp = tempfile.mkdtemp()
    ours, theirs = models(tapelab.nn), models(torch.nn)
    for name, (make, shape) in ours.items():
        tapelab.manual_seed(0)
        m = make().eval()
        t = theirs[name][0]().eval()
        t.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m.state_dict().items()})
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        xt, xtl = torch.from_numpy(x), tapelab.from_numpy(x)
        path = os.path.join(tmp, "m.onnx")
        tapelab.onnx.export(m, (xtl,), path, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        session = tapelab.onnx.InferenceSession(path, threads=args.threads, numpy=True)
        with tapelab.no_grad():
            ref = m(xtl).numpy()
        with torch.no_grad():
            assert np.allclose(t(xt).numpy(), ref, rtol=1e-3, atol=1e-4), f"{name}: torch and tapelab disagree"
        assert np.allclose(session(x), ref, rtol=1e-3, atol=1e-4), f"{name}: onnxruntime disagrees"
        rows = [best_and_median(lambda: session(x), args.reps, args.target)]

        def tapelab_eager():
            with tapelab.no_grad():
                m(xtl)

        def torch_eager():
            with torch.no_grad():
                t(xt)
        rows += [best_and_median(tapelab_eager, args.reps, args.target),
                 best_and_median(torch_eager, args.reps, args.target)]
        tpath = os.path.join(tmp, "t.onnx")
        try:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(t, (xt,), tpath, input_names=["x"], dynamic_axes={"x": {0: "batch"}},
                                  opset_version=17, dynamo=False)
            tsession = tapelab.onnx.InferenceSession(tpath, threads=args.threads, numpy=True)
            rows.append(best_and_median(lambda: tsession(x), args.reps, args.target))
        except Exception as e:  # noqa: BLE001 - PyTorch's exporter is optional here
            print(f"  (PyTorch's export of {name} failed: {type(e).__name__}: {e})", file=sys.stderr)
            rows.append(None)
        cells = [f"{b * 1e3:.3f} ms (median {md * 1e3:.3f})" if (b, md) != (None, None) else "-"
                 for b, md in [r if r else (None, None) for r in rows]]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

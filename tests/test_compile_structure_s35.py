"""What a fresh install compiles for its first step (issue 17, session 35): cross-entropy's backward is one
loop with and without label smoothing (the gradients torch's bit for bit); GELU's oneDNN form compiles no
ATen scalar tail beside it (values bit for bit as torch's)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

_CHILD = r"""
import json, sys
import numpy as np
import tapelab
from tapelab import kernels
rowwise = kernels.loops("rowwise")
x = np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32)
t = np.random.default_rng(1).integers(0, 10, 64)
out = {}
for smooth in json.loads(sys.argv[1]):
    a = tapelab.tensor(x, requires_grad=True)
    loss = tapelab.nn.functional.cross_entropy(a, tapelab.tensor(t), label_smoothing=smooth)
    loss.backward()
    out[str(smooth)] = [float(loss.item()), a.grad.numpy().tolist()]
if json.loads(sys.argv[2]):
    pointwise = kernels.loops("pointwise")
    a = tapelab.tensor(x, requires_grad=True)
    y = tapelab.nn.functional.gelu(a)
    y.backward(tapelab.ones_like(y))
    out["gelu"] = [y.detach().numpy().tolist(), a.grad.numpy().tolist(), pointwise.gelu_mode(x),
                   [len(getattr(pointwise, name).signatures)
                    for name in ("gelu", "gelu_backward", "gelu_onednn", "gelu_backward_onednn")]]
out["compiled"] = len(rowwise.cross_entropy_backward.signatures)
print(json.dumps(out))
"""


def _child(smoothings: list, gelu: bool = False) -> dict:
    env = dict(os.environ, TAPELAB_EAGER_KERNELS="1")
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(smoothings), json.dumps(gelu)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _torch(smooth: float):
    x = np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32)
    t = np.random.default_rng(1).integers(0, 10, 64)
    a = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(a, torch.tensor(t), label_smoothing=smooth)
    loss.backward()
    return float(loss.item()), a.grad.numpy()


def test_one_backward_loop_with_and_without_smoothing():
    """A process that smooths and one that does not each compile the one backward loop once; the gradients
    are torch's bit for bit, the losses to float32 rounding."""
    for smooth in (0.0, 0.2):
        got = _child([smooth])
        assert got["compiled"] == 1
        loss, grad = _torch(smooth)
        assert got[str(smooth)][0] == pytest.approx(loss, rel=1e-6)
        np.testing.assert_array_equal(np.array(got[str(smooth)][1], np.float32), grad)


def test_gelu_compiles_one_form():
    """GELU (erf) forward and backward on a contiguous float32 tensor: where oneDNN's form runs (``gelu_mode``
    nonzero, as on AVX2/AVX-512 hosts) only its loops run, not ATen's (``gelu``, ``gelu_backward``, whose
    scalar tail compiled beside oneDNN's form before); the values are torch's bit for bit."""
    y, grad, mode, called = _child([], True)["gelu"]
    x = torch.tensor(np.random.default_rng(0).standard_normal((64, 10)).astype(np.float32), requires_grad=True)
    ty = torch.nn.functional.gelu(x)
    ty.backward(torch.ones_like(ty))
    np.testing.assert_array_equal(np.array(y, np.float32), ty.detach().numpy())
    np.testing.assert_array_equal(np.array(grad, np.float32), x.grad.numpy())
    assert called == ([0, 0, 1, 1] if mode else [1, 1, 0, 0])

"""What a fresh install compiles for its first step (issue 17, session 35): cross-entropy's label-smoothing
gradient is its own loop, compiled only where a model smooths (with and without smoothing, the loss and
gradient against torch's); GELU's oneDNN form compiles no ATen scalar tail beside it (values bit for bit
as torch's)."""
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
out["compiled"] = [len(rowwise.cross_entropy_backward.signatures), len(rowwise.smoothed_cross_entropy_backward.signatures)]
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


def test_smoothing_gradient_compiled_only_where_a_model_smooths():
    """A process whose cross-entropy does not smooth compiles the plain backward loop only; one that
    smooths compiles the smoothing loop (and not the plain one); the values are torch's (the plain
    gradient bit for bit, the smoothed within float32 rounding)."""
    plain = _child([0.0])
    assert plain["compiled"] == [1, 0]
    loss, grad = _torch(0.0)
    assert plain["0.0"][0] == pytest.approx(loss, rel=1e-6)
    np.testing.assert_array_equal(np.array(plain["0.0"][1], np.float32), grad)
    smoothed = _child([0.2])
    assert smoothed["compiled"] == [0, 1]
    loss, grad = _torch(0.2)
    assert smoothed["0.2"][0] == pytest.approx(loss, rel=1e-6)
    np.testing.assert_allclose(np.array(smoothed["0.2"][1], np.float32), grad, rtol=1e-5, atol=1e-7)


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

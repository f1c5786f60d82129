"""What a fresh install compiles for its first step (issue 17, session 35): cross-entropy's label-smoothing
gradient is its own loop, compiled only where a model smooths; with and without smoothing the loss and
gradient against torch's."""
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
out["compiled"] = [len(rowwise.cross_entropy_backward.signatures), len(rowwise.smoothed_cross_entropy_backward.signatures)]
print(json.dumps(out))
"""


def _child(smoothings: list) -> dict:
    env = dict(os.environ, TAPELAB_EAGER_KERNELS="1")
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(smoothings)], capture_output=True, text=True,
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

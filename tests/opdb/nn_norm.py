"""OpInfos for batch normalisation in training mode (engine/nn/_ops.py ``batch_norm_normalize``,
with the per-channel weight and bias fused in, and its gradient op ``batch_norm_grads``), through
``nn.functional.batch_norm`` on both sides. Running statistics are left out (they are updated
under no_grad and checked in tests/test_nn_perf_semantics.py)."""
from __future__ import annotations

from .core import OpInfo, Sample, arr, pos


def _bn(m, x, w=None, b=None, **kw):
    return m.nn.functional.batch_norm(x, None, None, w, b, training=True, **kw)


def _samples():
    return [Sample((arr(4, 3, 5, 2), pos(3), arr(3)), name="affine_2d"),
            Sample((arr(6, 4), pos(4), arr(4)), {"eps": 1e-3}, name="affine_1d_eps"),
            Sample((arr(3, 2, 7), pos(2)), name="weight_only"),
            Sample((arr(3, 2, 7), None, arr(2)), name="bias_only"),
            Sample((arr(5, 3, 4),), name="plain"),
            Sample((arr(2, 3, 2, 2, 3), arr(3), arr(3)), name="3d_signed_weight"),
            Sample((arr(4, 3), pos(3), arr(3)), noncontig=True, name="noncontig")]


OPS = [OpInfo("nn.batch_norm_train", _bn, _samples, atol=1e-4, grad_atol=2e-4)]

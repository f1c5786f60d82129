"""Gaps met in session 17 (B) by researchers' programs (audio with CTC, point clouds, recommenders,
physics-informed networks, contrastive learning) run under real torch and under tapelab."""
import numpy as np
import pytest
import torch

import tapelab


def _np(t):
    return t.detach().numpy() if t is not None else None


@pytest.mark.parametrize("call", ["x.norm(dim=1)", "torch.norm(x, p=1)", "torch.linalg.norm(x)",
                                  "torch.linalg.vector_norm(x, 3, dim=0)"])
def test_norm_node_is_linalg_vector_norm(call):
    """``torch.norm``/``Tensor.norm`` print ``grad_fn=<LinalgVectorNormBackward0>`` in PyTorch 2.x (an
    ``Embedding(max_norm=...)`` program printed its row norms with ``NormBackward0``)."""
    names = []
    for lib in (torch, tapelab):
        x = lib.ones(3, 4, requires_grad=True)
        names.append(eval(call, {"torch": lib, "x": x}).grad_fn.name())
    assert names[0] == names[1] == "LinalgVectorNormBackward0"

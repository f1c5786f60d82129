"""Gaps found in session 24 (helper A) running the LLM-training ecosystem under ``install_aliases()``:
litgpt (GPT in several families, generate, LoRA, adapters, Fabric training and checkpoints), lightning
Fabric, torchtune, trl's loss math and small reference models; each pattern written here directly
(none of those libraries is imported) and checked against PyTorch 2.13."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- torch.utils._device
@BOTH
def test_utils_device_context_and_decorator_set_the_factories_device(m):
    """litgpt's utils imports ``torch.utils._device`` at import time; its ``set_device`` decorator and
    ``DeviceContext`` make factories create on the given device, restored afterwards."""
    d = importlib.import_module(f"{m.__name__}.utils._device")
    with d.DeviceContext("meta"):
        assert m.zeros(2).device.type == "meta" and m.get_default_device().type == "meta"
    assert m.zeros(2).device.type == "cpu"
    made = d.set_device("meta")(lambda n: m.ones(n))
    assert made(3).device.type == "meta" and tuple(made(3).shape) == (3,)
    assert made.__name__ == "<lambda>" and m.ones(1).device.type == "cpu"
    with pytest.raises(RuntimeError, match="device"):
        d.DeviceContext("nodevice")


# ---------------------------------------------------------------- torch.serialization's names
@BOTH
def test_serialization_location_tag_and_normalize_storage_type(m):
    """litgpt's incremental saver names storages as ``torch.save`` does."""
    s = m.zeros(3).untyped_storage()
    assert m.serialization.location_tag(s) == "cpu"
    assert m.serialization.location_tag(m.zeros(3, device="meta").untyped_storage()) == "meta"
    assert m.serialization.normalize_storage_type(type(s)) is m.UntypedStorage


# ---------------------------------------------------------------- selective activation checkpointing
def _sac(m, policy):
    return functools.partial(m.utils.checkpoint.create_selective_checkpoint_contexts, policy)


@BOTH
def test_selective_checkpoint_reuses_the_saved_outputs_in_the_recompute(m):
    """trl's SFTTrainer imports ``CheckpointPolicy``/``create_selective_checkpoint_contexts`` and passes
    ``context_fn`` to ``checkpoint``. A saved random draw is reused by the recompute (without the rng
    state the plain recompute draws new numbers), and the policy sees each forward call once."""
    C = m.utils.checkpoint
    calls = []

    def policy(ctx, op, *args, **kwargs):
        calls.append(ctx.is_recompute)
        assert isinstance(ctx.op_output, m.Tensor)
        return C.CheckpointPolicy.MUST_SAVE

    x = m.ones(5, requires_grad=True)
    fn = lambda x: x * m.rand_like(x)   # noqa: E731
    out = C.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False, context_fn=_sac(m, policy))
    out.sum().backward()
    assert m.equal(x.grad, out.detach()) and calls == [False, False]
    x.grad = None
    out = C.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False, context_fn=_sac(m, lambda *a, **k: False))
    out.sum().backward()
    assert not m.equal(x.grad, out.detach())   # recomputed: a new draw


def test_selective_checkpoint_gradients_match_torch():
    """Saving the matmuls and recomputing the rest gives the plain computation's gradients."""
    grads = []
    for m in (torch, tapelab):
        C = m.utils.checkpoint

        def policy(ctx, op, *args, **kwargs):
            return C.CheckpointPolicy.PREFER_SAVE if "mm" in str(op) else C.CheckpointPolicy.PREFER_RECOMPUTE

        m.manual_seed(0)
        x, y = m.randn(4, 4, requires_grad=True), m.randn(4, 4, requires_grad=True)
        fn = lambda x, y: m.nn.functional.dropout(m.sigmoid(m.matmul(m.matmul(x, y), y)) * y, 0.3)   # noqa: E731
        for context_fn in (_sac(m, policy), _sac(m, [m.ops.aten.mm.default])):
            C.checkpoint(fn, x, y, use_reentrant=False, context_fn=context_fn).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for ours, theirs in zip(grads[1], grads[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@BOTH
def test_selective_checkpoint_bad_arguments(m):
    C = m.utils.checkpoint
    assert [p.value for p in C.CheckpointPolicy] == list(range(6))
    with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload"):
        C.create_selective_checkpoint_contexts([m.ops.aten.mm])
    with pytest.raises(TypeError, match="either a function or a list of ops"):
        C.create_selective_checkpoint_contexts(3)
    x = m.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        C.checkpoint(m.sin, x, use_reentrant=True, context_fn=_sac(m, []))
    with pytest.raises(ValueError, match="determinism_check"):
        C.checkpoint(m.sin, x, use_reentrant=False, determinism_check="nope")
    assert m.equal(C.checkpoint(m.sin, x, use_reentrant=False, context_fn=C.noop_context_fn, debug=False), m.sin(x))

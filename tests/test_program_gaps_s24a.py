"""Gaps found in session 24 (helper A) running the LLM-training ecosystem under ``install_aliases()``:
litgpt (GPT in several families, generate, LoRA, adapters, Fabric training and checkpoints), lightning
Fabric, torchtune, trl's loss math and small reference models; each pattern written here directly
(none of those libraries is imported) and checked against PyTorch 2.13."""
from __future__ import annotations

import importlib

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

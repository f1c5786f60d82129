"""Process-wide settings with PyTorch's names (engine/_runtime.py, engine/backends.py): the lines
an ordinary training script starts with run unchanged, and those that have an effect in tapelab
have PyTorch's."""
from __future__ import annotations

import pytest
import torch

import tapelab


@pytest.fixture
def restore():
    yield
    tapelab.set_default_device("cpu")
    tapelab.set_float32_matmul_precision("highest")
    tapelab.use_deterministic_algorithms(False)


def test_a_script_preamble_runs(restore):
    for m in (torch, tapelab):
        m.backends.cudnn.benchmark = True
        m.backends.cudnn.deterministic = False
        m.backends.cuda.matmul.allow_tf32 = True
        m.set_float32_matmul_precision("high")
        m.use_deterministic_algorithms(True)
        assert m.get_float32_matmul_precision() == "high" and m.are_deterministic_algorithms_enabled()
        assert m.backends.cudnn.benchmark is True and m.backends.mps.is_available() is False
        with pytest.warns(UserWarning, match="fastest is not one of"):
            m.set_float32_matmul_precision("fastest")
        assert m.get_float32_matmul_precision() == "high"


def test_default_device_is_what_factories_use(restore):
    tapelab.set_default_device("meta")
    assert tapelab.get_default_device() == tapelab.device("meta")
    made = (tapelab.zeros(2), tapelab.randn(3), tapelab.tensor([1.0]), tapelab.arange(4), tapelab.nn.Linear(2, 3).weight)
    assert all(t.device == tapelab.device("meta") for t in made)
    assert tapelab.ones(2, device="cpu").device == tapelab.device("cpu")    # an explicit device wins
    x = tapelab.from_numpy(__import__("numpy").ones(2))
    assert x.device == tapelab.device("cpu")                                 # numpy memory stays on cpu
    tapelab.set_default_device(None)
    assert tapelab.zeros(1).device == tapelab.device("cpu")


def test_num_threads_round_trip():
    tapelab.set_num_threads(1)
    assert tapelab.get_num_threads() == 1
    with pytest.raises(RuntimeError, match="positive integer"):
        tapelab.set_num_threads(0)


@pytest.mark.skipif(tapelab.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_cuda_queries_without_a_gpu():
    assert tapelab.cuda.is_bf16_supported() is False
    for query in (tapelab.cuda.get_device_properties, tapelab.cuda.get_device_capability, tapelab.cuda.mem_get_info,
                  tapelab.cuda.memory_summary):
        with pytest.raises(RuntimeError, match="needs cupy and a CUDA device"):
            query(0)

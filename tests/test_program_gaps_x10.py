"""Gaps found running lucidrains' libraries (x-transformers, perceiver, performer, linear-attention,
local-attention, rotary-embedding) and pytorch-labs' gpt-fast (generate.py's prefill/decode loop with a
KV cache, its torch.compile and inductor settings, quantize.py's int8 path) unchanged under
``install_aliases()``, each checked against real torch."""
from __future__ import annotations

import importlib

import pytest
import torch
import torch._functorch.config  # noqa: F401
import torch._inductor.config  # noqa: F401

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


@BOTH
def test_gpt_fast_sets_inductor_and_functorch_settings(m):
    """generate.py sets four settings at import time (``torch._functorch.config`` without importing it);
    each reads PyTorch's default first, and a name PyTorch does not declare is refused."""
    inductor, functorch = m._inductor.config, m._functorch.config
    assert (inductor.coordinate_descent_tuning, inductor.fx_graph_cache, inductor.triton.unique_kernel_names,
            inductor.triton.cudagraph_trees, inductor.unroll_reductions_threshold) == (False, True, True, True, 8)
    assert functorch.enable_autograd_cache is True
    inductor.coordinate_descent_tuning = True
    inductor.triton.cudagraph_trees = False
    try:
        assert inductor.coordinate_descent_tuning is True and inductor.triton.cudagraph_trees is False
    finally:
        inductor.coordinate_descent_tuning = False
        inductor.triton.cudagraph_trees = True
    for owner, text in [(inductor, "torch._inductor.config.no_such_setting"),
                        (inductor.triton, "torch._inductor.config.triton.no_such_setting"),
                        (functorch, "torch._functorch.config.no_such_setting")]:
        with pytest.raises(AttributeError, match=f"{text} does not exist"):
            owner.no_such_setting = 1
        with pytest.raises(AttributeError, match="does not exist"):
            owner.no_such_setting


def test_settings_modules_import_by_torch_names():
    """``import torch._dynamo.config`` / ``torch._inductor.config`` / ``torch._functorch.config`` under
    the aliases give tapelab's, and the dynamo one is the compiler's own settings."""
    with tapelab.install_aliases():
        dynamo = importlib.import_module("torch._dynamo.config")
        inductor = importlib.import_module("torch._inductor.config")
        functorch = importlib.import_module("torch._functorch.config")
        assert importlib.import_module("torch._inductor") is tapelab._inductor
    assert dynamo is tapelab._dynamo.config is tapelab.compiler.config
    assert inductor is tapelab._inductor.config and functorch is tapelab._functorch.config
    before = dynamo.cache_size_limit
    assert before == torch._dynamo.config.cache_size_limit == 8
    dynamo.cache_size_limit = 16
    try:
        assert tapelab.compiler.config.cache_size_limit == 16
    finally:
        dynamo.cache_size_limit = before


@pytest.mark.skipif(torch.cuda.is_available() or tapelab.cuda.is_available(), reason="without a GPU only")
@BOTH
def test_cuda_memory_statistics_read_zero_without_a_gpu(m):
    """gpt-fast prints ``torch.cuda.max_memory_reserved() / 1e9`` after a cpu run."""
    assert [getattr(m.cuda, name)() for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                                                   "max_memory_reserved")] == [0, 0, 0, 0]


@pytest.mark.parametrize("name, attr", [("torch.cuda.amp", "cuda"), ("torch.cpu.amp", "cpu")])
def test_device_amp_subpackages_import_by_torch_names(name, attr):
    """performer-pytorch does ``from torch.cuda.amp import autocast``; ``torch.cuda``/``torch.cpu`` are
    modules here, whose ``amp`` attribute serves the import."""
    real = importlib.import_module(name)
    with tapelab.install_aliases():
        served = importlib.import_module(name)
        from torch.cuda.amp import GradScaler, autocast  # noqa: F401
    assert served is getattr(tapelab, attr).amp is getattr(tapelab.amp, attr)
    assert real.autocast.__name__ == served.autocast.__name__ == "autocast"


@BOTH
def test_cuda_initialized_flag(m):
    """linear-attention-transformer's reversible blocks read ``torch.cuda._initialized``; other
    missing names still raise AttributeError."""
    assert m.cuda._initialized is m.cuda.is_initialized()
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        m.cuda.no_such_name


@BOTH
def test_fork_rng_restores_the_generator(m):
    """linear-attention-transformer's reversible blocks replay a block's draws inside
    ``torch.random.fork_rng(devices=[], enabled=True)`` in backward."""
    m.manual_seed(3)
    with m.random.fork_rng(devices=[], enabled=True):
        inside = m.rand(3).tolist()
        m.manual_seed(7)
        m.rand(2)
    after = m.rand(3).tolist()
    assert inside == after
    with m.random.fork_rng(enabled=False):
        skipped = m.rand(2)
    assert m.rand(2).tolist() != skipped.tolist()

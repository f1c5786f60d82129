"""Gaps third-party programs found under install_aliases() (session 35, helper h3): DLRM's imports of
``torch._ops`` and ``torch.nn.parallel.parallel_apply`` / ``replicate``."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import tapelab


def test_torch_ops_module_serves_torch_ops():
    """``from torch._ops import ops`` (DLRM's dlrm_s_pytorch.py) gives the ``torch.ops`` namespace."""
    from tapelab._ops import ops
    assert ops is tapelab.ops
    x = tapelab.tensor([1.0, -2.0])
    np.testing.assert_array_equal(ops.aten.abs(x).numpy(), torch.ops.aten.abs(torch.tensor([1.0, -2.0])).numpy())


def test_torch_ops_module_under_aliases():
    with tapelab.install_aliases():
        mod = importlib.import_module("torch._ops")
        assert mod.ops is tapelab.ops


def _mlp(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(3, 4), m.nn.ReLU(), m.nn.Linear(4, 2))


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_parallel_apply_and_replicate_refuse_without_a_gpu_as_torch():
    """On a machine without a GPU PyTorch's refuse (DLRM calls them only with GPUs); the same errors."""
    for call in (lambda m: m.nn.parallel.parallel_apply([_mlp(m)] * 2, [m.ones(1, 3)] * 2),
                 lambda m: m.nn.parallel.replicate(_mlp(m), ["cpu"])):
        assert _error(lambda: call(tapelab)) == _error(lambda: call(torch))


def test_parallel_apply_counts_must_match():
    with pytest.raises(AssertionError, match="number of modules 2 is not equal to the number of inputs 1"):
        tapelab.nn.parallel.parallel_apply([_mlp(tapelab)] * 2, [tapelab.ones(1, 3)])


def test_replicate_on_the_modules_gpu_is_the_module():
    """On the (simulated) GPU the module is on, the replica is the module: its gradients reach its parameters."""
    from tapelab.base.backend import simulated_cuda
    with simulated_cuda():
        net = _mlp(tapelab).to("cuda")
        (replica,) = tapelab.nn.parallel.replicate(net, [0])
        replica(tapelab.ones(2, 3, device="cuda")).sum().backward()
        assert replica is net and all(p.grad is not None for p in net.parameters())
        with pytest.raises(NotImplementedError, match="replicate"):
            tapelab.nn.parallel.replicate(net, [1])


def test_parallel_submodules_import_under_aliases():
    """DLRM's imports: ``from torch.nn.parallel.parallel_apply import parallel_apply`` and ``...replicate``."""
    with tapelab.install_aliases():
        assert importlib.import_module("torch.nn.parallel.parallel_apply").parallel_apply is \
            tapelab.nn.parallel.parallel_apply
        assert importlib.import_module("torch.nn.parallel.replicate").replicate is tapelab.nn.parallel.replicate


@pytest.mark.parametrize("module,attr", [("torch.nn.utils.weight_norm", "weight_norm"),
                                         ("torch.nn.utils.spectral_norm", "spectral_norm"),
                                         ("torch.autograd.gradcheck", "gradcheck")])
def test_importing_a_submodule_keeps_the_function_of_its_name(module, attr):
    """``import torch.nn.utils.weight_norm`` loads the module without setting it over the package's function
    of that name: afterwards ``torch.nn.utils.weight_norm`` is still the function, as in PyTorch."""
    import sys
    parent = module.rpartition(".")[0]
    importlib.import_module(module)
    assert callable(getattr(sys.modules[parent], attr)) and not isinstance(getattr(sys.modules[parent], attr),
                                                                             type(importlib))
    with tapelab.install_aliases():
        importlib.import_module(module)
        assert getattr(importlib.import_module(parent), attr) is getattr(
            importlib.import_module(parent.replace("torch", "tapelab", 1)), attr)
        assert not isinstance(getattr(importlib.import_module(parent), attr), type(importlib))

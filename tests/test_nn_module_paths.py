"""Every public class PyTorch has in a ``torch.nn.modules.<file>`` that tapelab has at all is
importable from ``tapelab.nn.modules.<file>``, as the same object as ``tapelab.nn.<Name>`` (programs
import ``nn.modules.activation.MultiheadAttention``, ``nn.modules.loss._Loss`` subclasses, pickles
name these paths). The classes are defined where PyTorch defines them, so the few names a file
only imports in PyTorch (``activation.NonDynamicallyQuantizableLinear``) come along the same way."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch.nn.modules

import tapelab


def _torch_paths():
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"torch.nn.modules.{info.name}")
        for name in dir(mod):
            obj = getattr(mod, name)
            if not name.startswith("_") and inspect.isclass(obj) and obj.__module__.startswith("torch.nn.modules"):
                yield info.name, name


PATHS = sorted(set(_torch_paths()))
OURS = [(f, n) for f, n in PATHS if hasattr(tapelab.nn, n)]


def test_most_of_torchs_paths_are_covered():
    assert len(OURS) >= 0.9 * len(PATHS), sorted(set(PATHS) - set(OURS))


@pytest.mark.parametrize("file, name", OURS, ids=[f"{f}.{n}" for f, n in OURS])
def test_importable_from_torchs_path(file, name):
    mod = importlib.import_module(f"tapelab.nn.modules.{file}")
    assert getattr(mod, name, None) is getattr(tapelab.nn, name), f"tapelab.nn.modules.{file}.{name}"


def _defined_there(file: str, name: str) -> bool:
    return getattr(importlib.import_module(f"torch.nn.modules.{file}"), name).__module__ == f"torch.nn.modules.{file}"


@pytest.mark.parametrize("file, name", [(f, n) for f, n in OURS if _defined_there(f, n)])
def test_defined_where_torch_defines_it(file, name):
    """A class PyTorch defines in ``file`` is defined in tapelab's ``file`` too (its ``__module__``)."""
    assert getattr(tapelab.nn, name).__module__ == f"tapelab.nn.modules.{file}"


def test_private_base_classes_programs_subclass():
    from tapelab.nn.modules.batchnorm import _BatchNorm
    from tapelab.nn.modules.conv import _ConvNd
    from tapelab.nn.modules.loss import _Loss, _WeightedLoss
    from tapelab.nn.modules.module import Module
    assert issubclass(tapelab.nn.BatchNorm2d, _BatchNorm) and issubclass(tapelab.nn.Conv2d, _ConvNd)
    assert issubclass(tapelab.nn.CrossEntropyLoss, _WeightedLoss) and issubclass(_WeightedLoss, _Loss)
    assert issubclass(_Loss, Module)

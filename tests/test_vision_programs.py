"""Programs written against torch and torchvision run unchanged on tapelab through ``install_aliases``.

Each tests/programs/vision/*.py imports ``torch`` and ``torchvision`` at its top, as ordinary
programs do. Imported inside ``tapelab.install_aliases()``, those names are tapelab and
tapelab.vision; the numbers ``main()`` returns must equal the ones the same file returned under
real torch 2.14.1 and torchvision 0.29.1 (tests/fixtures/vision/programs.npz, written by
scripts/vision_references.py in the oracle venv).
"""
from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")

import tapelab  # noqa: E402

PROGRAMS = Path(__file__).parent / "programs" / "vision"
REF = np.load(Path(__file__).parent / "fixtures" / "vision" / "programs.npz")
NAMES = sorted(p.stem for p in PROGRAMS.glob("*.py") if p.stem != "__init__")
# ResNet-18's batch norm over four 32x32 images (2x2 at layer4) in train mode, then Adadelta at lr=1,
# amplifies float rounding: losses agree to 1e-4 after the first step, predictions to 1e-3
# siamese: batch norm over 4 samples at 1x1 (after layer4), then Adadelta at lr 1.0, amplifies float32 rounding;
# tapelab's batch norm equals this machine's torch 2.13 bit for bit, the reference came from another machine
# (its thread count sets ATen's (N, C) chunking): 6e-3 apart after two steps
RTOL = {"siamese": 1e-2}


def _run(name: str):
    """Import the program afresh with the aliases on (its module-level imports bind then) and run it."""
    import programs.vision  # noqa: F401  (the packages its relative imports need)
    full = f"programs.vision.{name}"
    with tapelab.install_aliases():
        spec = importlib.util.spec_from_file_location(full, PROGRAMS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        try:
            spec.loader.exec_module(module)
            assert module.torch is tapelab
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return np.asarray(module.main(module.STEPS), dtype=np.float64)
        finally:
            del sys.modules[full]


@pytest.mark.parametrize("name", NAMES)
def test_program_matches_torchvision(name):
    np.testing.assert_allclose(_run(name), REF[name], rtol=RTOL.get(name, 1e-4), atol=1e-6)


def test_every_program_has_a_reference():
    assert set(NAMES) == set(REF.files)


def test_aliases_are_undone():
    import torch as real_torch
    before = dict(sys.modules)
    with tapelab.install_aliases() as aliases:
        import torch
        import torch.nn.functional as F
        import torchvision.transforms as T
        assert torch is tapelab and F is tapelab.nn.functional and T is tapelab.vision.transforms
        assert aliases.active
    import torch
    assert torch is real_torch and sys.modules["torch.nn"] is before["torch.nn"]
    assert not any(name.startswith("torchvision") for name in sys.modules)
    tapelab.install_aliases(torchvision=False)
    try:
        import torch
        assert torch is tapelab
        with pytest.raises(ModuleNotFoundError):
            import torchvision  # noqa: F401
    finally:
        tapelab.uninstall_aliases()
    import torch
    assert torch is real_torch


def test_a_missing_module_names_what_tapelab_lacks():
    with tapelab.install_aliases():
        with pytest.raises(ModuleNotFoundError, match="'torch.no_such_module'.*'tapelab.no_such_module'"):
            import torch.no_such_module  # noqa: F401

"""The program corpus (tests/programs/) runs unchanged under tapelab and matches PyTorch.

Each case calls a program's ``main(torch, steps, **options)`` once with the real torch and once
with tapelab: both start from the same numpy-seeded weights and data, and every number the
program returns (losses, norms, learning rates, accuracies, generated tokens) must agree to
rtol 1e-4. Resumable programs also run with a checkpoint saved and loaded halfway, and must
produce the uninterrupted run's numbers. A case that fails only because tapelab lacks an API
is ``xfail(strict=True)`` with the missing API as its reason, so it flips when the API lands.
"""
from __future__ import annotations

import dataclasses
import importlib
import warnings

import numpy as np
import pytest
import torch

import programs
import tapelab


@dataclasses.dataclass(frozen=True)
class Case:
    program: str
    steps: int
    options: tuple = ()                 # (name, value) pairs for main()
    resume: bool = False                # also run with checkpoint-and-resume halfway
    missing: str | None = None          # the tapelab API whose absence fails this case today
    reference: tuple | None = None      # options for the torch run, when they differ
    rtol: float = 1e-4

    @property
    def id(self) -> str:
        return self.program + "".join(f"-{k}={v}" for k, v in self.options)


CASES = [
    Case("cnn_classifier", 2),
    Case("rnn_lm", 3, (("rnn_type", "LSTM"), ("tied", True)), resume=True),
    Case("rnn_lm", 3, (("rnn_type", "GRU"), ("tied", False)), resume=True),
    Case("vae", 2),
    Case("dcgan", 6),
    Case("gpt", 6, resume=True),
    Case("gpt", 6, (("attention", "manual"),), resume=True),
    Case("gpt", 4, (("amp", True),), rtol=2e-2, resume=True),
    Case("gpt", 4, (("compile", True),), reference=()),
    Case("transformer_lm", 2),
    Case("transformer_lm", 1, (("norm_first", True),)),
    Case("gcn", 10, (("legacy", False),)),
    Case("gcn", 10, (("legacy", True),)),
    Case("gcn", 10, (("sparse", True), ("legacy", False))),
    Case("resnet_surgery", 2),
    Case("lbfgs_fit", 4),
    Case("lbfgs_fit", 4, (("line_search_fn", None),)),
    Case("autograd_basics", 50),
    Case("scientific", 10, rtol=1e-6),
]

_TORCH_RUNS: dict = {}


def _run(module, case: Case, options: tuple, **extra) -> np.ndarray:
    program = importlib.import_module(f"programs.{case.program}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = program.main(module, case.steps, **dict(options), **extra)
    return np.asarray(out, dtype=np.float64)


def _torch_run(case: Case) -> np.ndarray:
    options = case.options if case.reference is None else case.reference
    key = (case.program, case.steps, options)
    if key not in _TORCH_RUNS:
        _TORCH_RUNS[key] = _run(torch, case, options)
    return _TORCH_RUNS[key]


def _param(case: Case, *marks):
    if case.missing:
        marks += (pytest.mark.xfail(strict=True, reason=f"tapelab lacks {case.missing}"),)
    return pytest.param(case, id=case.id, marks=marks)


def _compare(got: np.ndarray, want: np.ndarray, case: Case) -> None:
    assert got.shape == want.shape, f"{case.id}: {got.shape} numbers, torch returned {want.shape}"
    np.testing.assert_allclose(got, want, rtol=case.rtol, atol=1e-6, err_msg=case.id)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_program_matches_torch(case):
    want = _torch_run(case)
    got = _run(tapelab, case, case.options)
    _compare(got, want, case)


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.resume])
def test_program_resumed_from_a_checkpoint_matches_torch(case, tmp_path):
    """Saved halfway, rebuilt from other weights, loaded: the numbers of an uninterrupted run."""
    path = tmp_path / "checkpoint.pt"
    got = _run(tapelab, case, case.options, checkpoint=str(path))
    assert path.exists()
    _compare(got, _torch_run(case), case)


def test_every_program_has_a_case():
    assert sorted({c.program for c in CASES}) == sorted(programs.PROGRAMS)
    for name in programs.PROGRAMS:
        assert callable(importlib.import_module(f"programs.{name}").main)


def test_programs_never_import_torch():
    """The programs reach the library only through the module they are given."""
    import pathlib
    for path in pathlib.Path(programs.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "from torch" not in text, path.name

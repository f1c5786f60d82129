"""Gaps found by running pytorch/examples (mnist, vae, word_language_model, gat, gcn, imagenet, ...)
seeded under torch and under ``install_aliases()`` and diffing what they print: the API pattern each
program uses, exercised directly and compared with real torch (no example program is imported here)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import tapelab

# ---------------------------------------------------------------- gat/gcn: the sparse invariant-check warning
_SPARSE_WARNINGS = textwrap.dedent("""
    import json, sys, warnings
    if sys.argv[1] == "tapelab":
        import tapelab
        tapelab.install_aliases()
    import torch
    warnings.simplefilter("always")
    i, v = torch.tensor([[0, 1], [1, 0]]), torch.ones(2)
    steps = [
        ("to_sparse", lambda: torch.diag(v).to_sparse()),
        ("explicit False", lambda: torch.sparse_coo_tensor(i, v, (2, 2), check_invariants=False)),
        ("explicit True", lambda: torch.sparse_coo_tensor(i, v, (2, 2), check_invariants=True)),
        ("legacy", lambda: torch.sparse.FloatTensor(i, v, torch.Size([2, 2]))),
        ("implicit", lambda: torch.sparse_coo_tensor(i, v, (2, 2))),
        ("implicit again", lambda: torch.sparse_coo_tensor(i, v)),
    ]
    if sys.argv[2] == "opt-out":
        steps.insert(0, ("context", lambda: torch.sparse.check_sparse_tensor_invariants(False).__enter__()))
    seen = []
    for label, make in steps:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make()
        seen.append([label, sorted(str(w.message).split(".")[0] for w in caught),
                     sorted({w.filename == "<string>" for w in caught})])
    seen.append(torch.sparse.check_sparse_tensor_invariants.is_enabled())
    print(json.dumps(seen))
""")


def _sparse_warnings(backend: str, mode: str) -> list:
    out = subprocess.run([sys.executable, "-c", _SPARSE_WARNINGS, backend, mode], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_sparse_coo_tensor_warns_once_about_implicit_invariant_checks_as_torch():
    """gat and gcn build their adjacency with ``torch.sparse_coo_tensor(...)``: PyTorch warns once per process,
    at the caller's line, that invariant checks are implicitly off (not for an explicit ``check_invariants``,
    ``to_sparse`` or the legacy constructors); tapelab printed nothing. Opting out first silences it."""
    for mode in ("default", "opt-out"):
        ours = _sparse_warnings("tapelab", mode)
        assert ours == _sparse_warnings("torch", mode)
        assert any(step[1] == ["Sparse invariant checks are implicitly disabled"] for step in ours[:-1]) \
            == (mode == "default")


def test_check_sparse_tensor_invariants_context_and_decorator_restore_the_setting():
    checks = tapelab.sparse.check_sparse_tensor_invariants
    before = checks.is_enabled()
    with checks():
        assert checks.is_enabled()

        @checks(False)
        def inner() -> bool:
            return checks.is_enabled()

        assert inner() is False
        assert checks.is_enabled()
    assert checks.is_enabled() == before


# ---------------------------------------------------------------- imagenet: DataLoader(pin_memory=True) on a host without a GPU
def _pass_warnings(m, **options) -> list:
    import warnings
    loader = m.utils.data.DataLoader(list(range(6)), batch_size=4, **options)
    seen = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = [b.tolist() for b in loader]
        seen.append((batches, [(w.category, str(w.message)) for w in caught]))
    return seen


@pytest.mark.skipif(tapelab.accelerator.is_available(), reason="the warning is about a host without an accelerator")
def test_dataloader_warns_each_pass_that_pinned_memory_is_unused_without_an_accelerator_as_torch():
    """imagenet's loaders pass ``pin_memory=True``; on a host without an accelerator PyTorch warns at the
    start of every pass that pinned memory won't be used (and that ``pin_memory_device`` is deprecated)."""
    import torch
    for options in ({"pin_memory": True}, {"pin_memory": True, "pin_memory_device": "cpu"}, {}):
        ours = _pass_warnings(tapelab, **options)
        assert ours == _pass_warnings(torch, **options)
        assert len(ours[1][1]) == len(options)

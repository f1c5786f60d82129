"""Gaps found by running pytorch/examples (mnist, vae, word_language_model, gat, gcn, imagenet, ...)
seeded under torch and under ``install_aliases()`` and diffing what they print: the API pattern each
program uses, exercised directly and compared with real torch (no example program is imported here)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
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


def _in_fresh_process(script: str, backend: str, *args: str) -> list:
    """What ``script`` prints last as JSON, run in a new process under ``torch`` or tapelab's aliases
    (the warnings compared here are given once per process)."""
    out = subprocess.run([sys.executable, "-c", script, backend, *args], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_sparse_coo_tensor_warns_once_about_implicit_invariant_checks_as_torch():
    """gat and gcn build their adjacency with ``torch.sparse_coo_tensor(...)``: PyTorch warns once per process,
    at the caller's line, that invariant checks are implicitly off (not for an explicit ``check_invariants``,
    ``to_sparse`` or the legacy constructors); tapelab printed nothing. Opting out first silences it."""
    for mode in ("default", "opt-out"):
        ours = _in_fresh_process(_SPARSE_WARNINGS, "tapelab", mode)
        assert ours == _in_fresh_process(_SPARSE_WARNINGS, "torch", mode)
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


# ---------------------------------------------------------------- time_sequence_prediction: LBFGS's float(closure())
_SCALAR_WARNINGS = textwrap.dedent("""
    import json, sys, warnings
    if sys.argv[1] == "tapelab":
        import tapelab
        tapelab.install_aliases()
    import torch
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 1, dtype=torch.float64)
    x, y = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    opt = torch.optim.LBFGS(lin.parameters(), lr=0.5, max_iter=4)
    def closure():
        opt.zero_grad()
        loss = ((lin(x) - y) ** 2).mean()
        loss.backward()
        return loss
    loss = (lin(x) ** 2).sum()
    def under(mode):
        with mode():
            return float(loss)
    steps = [("lbfgs step", lambda: opt.step(closure)), ("no_grad float", lambda: under(torch.no_grad)),
             ("inference float", lambda: under(torch.inference_mode)), ("int", lambda: int(loss)),
             ("float", lambda: float(loss)), ("float again", lambda: float(loss)), ("complex", lambda: complex(loss))]
    seen = []
    for label, run in steps:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
        seen.append([label, [str(w.message).split(".")[0] for w in caught]])
    seen.append(lin.weight.tolist())
    print(json.dumps(seen))
""")


def test_scalar_of_a_grad_tensor_warns_only_in_grad_mode_as_torch():
    """LBFGS.step runs under no_grad and converts the closure's loss with ``float``: PyTorch says nothing
    there (its warning needs grad mode on), tapelab warned, so time_sequence_prediction printed an extra
    warning. Once per process, not for ``int``, shared with ``complex``; LBFGS's steps equal torch's."""
    ours = _in_fresh_process(_SCALAR_WARNINGS, "tapelab")
    theirs = _in_fresh_process(_SCALAR_WARNINGS, "torch")
    assert ours[:-1] == theirs[:-1]
    assert [label for label, caught in ours[:-1] if caught] == ["float"]
    np.testing.assert_allclose(ours[-1], theirs[-1], rtol=1e-12)

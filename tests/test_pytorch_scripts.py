"""Ordinary PyTorch programs run unchanged with ``torch`` bound to tapelab.

Each script in tests/scripts runs in a subprocess twice: with the real torch, and with
``sys.modules['torch'] = tapelab``. Every printed line must match: same names, numbers
equal to 1e-4.
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

SCRIPTS = pathlib.Path(__file__).parent / "scripts"
# `torch` and every loaded `tapelab.*` submodule under its `torch.*` name, so `import torch.nn as nn`
# and `from torch.utils.data import DataLoader` find tapelab's modules instead of loading a second copy
SHIM = ("import sys, runpy, tapelab; sys.modules['torch'] = tapelab; "
        "sys.modules.update({'torch' + k[7:]: v for k, v in list(sys.modules.items()) if k.startswith('tapelab.')}); "
        "runpy.run_path(sys.argv[1], run_name='__main__')")


def _run(script: pathlib.Path, with_tapelab: bool) -> list[str]:
    cmd = [sys.executable, "-c", SHIM, str(script)] if with_tapelab else [sys.executable, str(script)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{script.name} failed ({'tapelab' if with_tapelab else 'torch'}):\n{res.stderr[-3000:]}"
    return res.stdout.splitlines()


def _numbers(text: str):
    try:
        return np.asarray(ast.literal_eval(text), dtype=float)
    except (ValueError, SyntaxError):
        return text


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.py")), ids=lambda p: p.stem)
def test_script_matches_torch(script):
    want, got = _run(script, False), _run(script, True)
    assert len(got) == len(want), f"{len(got)} lines printed, torch printed {len(want)}"
    for w, g in zip(want, got):
        wname, _, wval = w.partition(" ")
        gname, _, gval = g.partition(" ")
        assert gname == wname
        wn, gn = _numbers(wval), _numbers(gval)
        if isinstance(wn, str):
            assert gval == wval, f"{wname}: {gval} != {wval}"
        else:
            np.testing.assert_allclose(gn, wn, atol=1e-4, rtol=1e-4, err_msg=wname)

"""Gaps found in session 23 (helper B) running ultralytics (YOLOv8), open_clip, sentence-transformers, neuraloperator, nflows, torchcde/torchdyn, lightly and einx under tapelab, each pattern written directly and checked against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _outcome(fn, lib):
    """``fn(lib)``'s dtype and values, or its exception type."""
    try:
        r = fn(lib)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__
    return str(r.dtype).split(".")[-1], r.tolist()


# ---------------------------------------------------------------- arange's keyword overloads
# ultralytics' TaskAlignedAssigner writes ``torch.arange(end=self.bs, dtype=torch.int64)``: PyTorch's
# ``(Number end)`` overload takes ``end`` by keyword; tapelab required ``start``.
_ARANGE = {
    "end_kw": lambda L: L.arange(end=5),
    "end_kw_dtype": lambda L: L.arange(end=4, dtype=L.int64),
    "end_kw_float": lambda L: L.arange(end=2.5),
    "start_end_kw": lambda L: L.arange(start=1, end=5),
    "start_pos_end_kw": lambda L: L.arange(1, end=4),
    "start_end_step_kw": lambda L: L.arange(1, 7, step=3),
    "three": lambda L: L.arange(1, 7, 2),
    "one": lambda L: L.arange(3),
    "end_step_kw": lambda L: L.arange(end=5, step=2),       # a step needs start: TypeError
    "one_step_kw": lambda L: L.arange(5, step=2),
    "none": lambda L: L.arange(),
}


@pytest.mark.parametrize("case", sorted(_ARANGE))
def test_arange_keyword_overloads(case):
    assert _outcome(_ARANGE[case], tapelab) == _outcome(_ARANGE[case], torch)

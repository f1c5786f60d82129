"""Regressions that session 18's sweep over earlier sessions' program drivers found (a program whose
tapelab output had matched PyTorch's and no longer did), each against PyTorch itself."""
import pytest
import torch

import tapelab


def _cases(m):
    p = m.arange(1., 25.).reshape(2, 3, 4).permute(2, 0, 1)      # strides (1, 12, 4)
    t = m.arange(15.).reshape(5, 3).t()                           # strides (1, 3)
    tall = m.arange(600.).reshape(3, 200).t()                     # topk's heap path (k * 64 <= n)
    return {
        "sort": lambda: p.sort(1), "sort_desc": lambda: p.sort(1, descending=True),
        "sort_stable": lambda: p.sort(dim=1, stable=True), "sort_last": lambda: p.sort(-1),
        "argsort": lambda: (p.argsort(1),), "msort": lambda: (p.msort(),), "sort_t": lambda: t.sort(1),
        "topk": lambda: p.topk(2, 1), "topk_unsorted": lambda: p.topk(2, 1, sorted=False),
        "topk_smallest": lambda: p.topk(2, 0, largest=False), "topk_heap": lambda: tall.topk(2, 0),
        "topk_t0": lambda: t.topk(2, 0), "kthvalue": lambda: p.kthvalue(1, 1),
        "kthvalue_keepdim": lambda: p.kthvalue(2, 1, keepdim=True), "median": lambda: p.median(1),
    }


@pytest.mark.parametrize("case", list(_cases(torch)))
def test_sort_and_topk_results_are_laid_out_as_pytorchs(case):
    """sort/argsort give their results the input's layout (ATen's empty_like of a permuted input keeps its
    strides), topk and kthvalue contiguous ones. The libstdc++-order loops (session 17) sort rows along the
    last axis and handed back a moved-axis view: a permuted input's topk had strides (6, 1, 2) where
    PyTorch's are (6, 3, 1) (s16k/sumlay2.py had printed PyTorch's)."""
    want = [(tuple(r.shape), r.stride(), r.tolist()) for r in _cases(torch)[case]()]
    got = [(tuple(r.shape), r.stride(), r.tolist()) for r in _cases(tapelab)[case]()]
    assert got == want

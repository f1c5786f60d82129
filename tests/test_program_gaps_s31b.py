"""Gaps found in session 31 (helper w4) following up h7's nlp-tutorial runs: the recurrent layers' dropout
warning shown as often as PyTorch shows it, and tensors among a list's items read as numbers (PyTorch 2.13)."""
import subprocess
import sys
import textwrap

import pytest
import tapelab
import torch

# Fresh processes: the first numba loop a process runs imports scipy, whose import resets Python's warning
# registries, which is what made tapelab repeat the warning.
_LAYERS = textwrap.dedent("""
    import os, warnings, {module} as torch
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        torch.nn.RNN(4, 3, dropout=0.5)
        torch.nn.RNN(4, 3, dropout=0.5)
        torch.nn.LSTM(4, 3, dropout=0.5)
        torch.nn.LSTM(4, 3, dropout=0.5)
        torch.nn.GRU(4, 3, dropout=0.5)
        torch.nn.GRU(4, 3, dropout=0.25)
    for x in w:
        print(x.category.__name__, os.path.basename(x.filename), str(x.message)[-30:])
""")


def _warnings(module: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", _LAYERS.format(module=module)], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_recurrent_dropout_warning_shows_once_per_layer_class_and_message():
    """nlp-tutorial's seq2seq builds ``nn.RNN(dropout=0.5)`` twice and PyTorch prints its warning once: it points
    into the library (each class's ``super().__init__`` line), so Python's default filter shows it once per class
    and message; tapelab pointed at each program line and showed it for every layer."""
    want, got = _warnings("torch"), _warnings("tapelab")
    assert len(want) == 4 and all(" rnn.py " in line for line in want)
    assert got == want


_ITEMS = {
    "1-d tensors": lambda t: [t.ones(2), t.zeros(2)],
    "a tuple of 1-d tensors": lambda t: (t.ones(2), t.zeros(2)),
    "nested 1-d tensors": lambda t: [[t.ones(2)], [t.zeros(2)]],
    "a number and a 1-d tensor": lambda t: [1.0, t.ones(2)],
    "empty tensors": lambda t: [t.ones(0), t.ones(0)],
    "one-element tensors": lambda t: [t.ones(1), t.zeros(1)],
    "1x1 tensors": lambda t: [t.ones(1, 1), t.full((1, 1), 3.0)],
    "0-d tensors": lambda t: [t.tensor(1.5), t.tensor(2.0)],
    "nested 0-d int tensors": lambda t: [[t.tensor(1)], [t.tensor(2)]],
    "0-d double tensors": lambda t: [t.tensor(1.5, dtype=t.float64), t.tensor(2.0, dtype=t.float64)],
}


def _outcome(make):
    try:
        r = make()
    except Exception as e:   # the outcome compared is the exception's type and message
        return type(e).__name__, str(e)
    return str(r.dtype).split(".")[-1], tuple(r.shape), r.tolist()


@pytest.mark.parametrize("ctor", ["tensor", "as_tensor", "Tensor"])
@pytest.mark.parametrize("items", list(_ITEMS))
def test_tensors_among_a_lists_items_are_read_as_numbers(items, ctor):
    """``torch.tensor([torch.ones(2), torch.zeros(2)])`` is PyTorch's ValueError ("only one element tensors can be
    converted to Python scalars"), not a stack; a one-element tensor of any shape is one number."""
    want = _outcome(lambda: getattr(torch, ctor)(_ITEMS[items](torch)))
    got = _outcome(lambda: getattr(tapelab, ctor)(_ITEMS[items](tapelab)))
    assert got == want

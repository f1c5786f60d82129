"""Gaps found in session 31 (helper h7) running graykode's nlp-tutorial (NNLM, word2vec skip-gram, TextCNN,
TextRNN, TextLSTM, Bi-LSTM, seq2seq with and without attention, Bi-LSTM attention, Transformer, BERT) and
karpathy's nn-zero-to-hero makemore notebooks unchanged under ``install_aliases()`` and diffing what they
print against real torch; each pattern written here directly and checked against PyTorch 2.13."""
import subprocess
import sys
import textwrap

# Calls in the order a program makes them; each line prints the warnings that call gave.
_CALLS = textwrap.dedent("""
    import warnings, numpy as np, {module} as torch
    def show(make):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = make()
        print(str(t.dtype).split(".")[-1], tuple(t.shape), [(x.category.__name__, x.lineno, str(x.message).split(" (Triggered")[0])
                                        for x in w])
    show(lambda: torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    show(lambda: torch.tensor([torch.tensor(1.0), torch.tensor(2.0)]))
    show(lambda: torch.tensor([np.zeros(0)]))
    show(lambda: torch.tensor([np.float32(1.0), np.int64(2)]))
    show(lambda: torch.tensor(np.ones((2, 2))))
    show(lambda: torch.FloatTensor([[np.array([1.0, 2.0])]]))
    show(lambda: torch.LongTensor([np.asarray([1, 2]), np.asarray([3, 4])]))
    show(lambda: torch.as_tensor([np.zeros(3)]))
""")


def _run(module: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _CALLS.format(module=module)], capture_output=True, text=True,
                         check=True).stdout
    return out.splitlines()


def test_tensor_from_a_list_of_ndarrays_warns_once_per_process_at_the_callers_line():
    """nlp-tutorial's ``torch.FloatTensor(input_batch)`` over a list of numpy arrays prints PyTorch's
    "extremely slow" UserWarning once per process (a nested array counts; numbers, numpy scalars, 0-d
    tensors, a whole array and data with no elements do not); fresh processes, since the warning is given once."""
    want, got = _run("torch"), _run("tapelab")
    assert "extremely slow" in want[5] and want[4].endswith("[]") and want[6].endswith("[]")
    assert got == want

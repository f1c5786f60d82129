"""nn.utils.rnn (pad_sequence, pack_padded_sequence, pad_packed_sequence, pack_sequence) and
RNN/LSTM/GRU on PackedSequence input, against PyTorch: values, batch sizes, permutations,
final states and gradients w.r.t. the sequences, the initial states and every parameter."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_attention import TOL, pair, randn, same_error

LR, TR = tl.nn.utils.rnn, torch.nn.utils.rnn
I, H = 3, 4


def close(a, b, what=""):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape, what
    np.testing.assert_allclose(a, b, err_msg=what, **TOL["float64"])


def same_ints(a, b):
    if b is None:
        assert a is None
        return
    assert a.tolist() == b.tolist()
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


def same_packed(lp, tp):
    close(lp.data, tp.data, "data")
    same_ints(lp.batch_sizes, tp.batch_sizes)
    same_ints(lp.sorted_indices, tp.sorted_indices)
    same_ints(lp.unsorted_indices, tp.unsorted_indices)


def both(arrays):
    return ([tl.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays])


def backward_both(lout, tout):
    g = randn(*tout.shape)
    (lout * tl.tensor(g)).sum().backward()
    (tout * torch.tensor(g)).sum().backward()


LENGTHS = [[4, 2, 3], [5, 5, 1, 3], [1], [3, 3, 2]]


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence(lengths, batch_first, side):
    ls, ts = both([randn(n, 2, 3) for n in lengths])
    lout = LR.pad_sequence(ls, batch_first=batch_first, padding_value=-2.5, padding_side=side)
    tout = TR.pad_sequence(ts, batch_first=batch_first, padding_value=-2.5, padding_side=side)
    close(lout, tout)
    backward_both(lout, tout)
    for a, b in zip(ls, ts):
        close(a.grad, b.grad, "grad")


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_then_pad_packed(lengths, batch_first):
    x = randn(len(lengths), max(lengths), 2) if batch_first else randn(max(lengths), len(lengths), 2)
    (lx,), (tx,) = both([x])
    sorted_ = lengths == sorted(lengths, reverse=True)
    for enforce in ([True, False] if sorted_ else [False]):
        for as_tensor in (False, True):
            lens = (tl.tensor(lengths), torch.tensor(lengths)) if as_tensor else (lengths, lengths)
            lp = LR.pack_padded_sequence(lx, lens[0], batch_first=batch_first, enforce_sorted=enforce)
            tp = TR.pack_padded_sequence(tx, lens[1], batch_first=batch_first, enforce_sorted=enforce)
            same_packed(lp, tp)
            for total in (None, max(lengths) + 2):
                lpad, llen = LR.pad_packed_sequence(lp, batch_first, padding_value=7.0, total_length=total)
                tpad, tlen = TR.pad_packed_sequence(tp, batch_first, padding_value=7.0, total_length=total)
                close(lpad, tpad)
                same_ints(llen, tlen)
    lx.grad = tx.grad = None
    lp = LR.pack_padded_sequence(lx, lengths, batch_first=batch_first, enforce_sorted=False)
    tp = TR.pack_padded_sequence(tx, lengths, batch_first=batch_first, enforce_sorted=False)
    lpad, _ = LR.pad_packed_sequence(lp, batch_first)
    tpad, _ = TR.pad_packed_sequence(tp, batch_first)
    backward_both(lpad, tpad)
    close(lx.grad, tx.grad, "grad through pack and unpack")


@pytest.mark.parametrize("enforce", [True, False])
def test_pack_sequence_and_unpack(enforce):
    lengths = [5, 3, 3, 1] if enforce else [2, 5, 1, 3]
    ls, ts = both([randn(n, 2) for n in lengths])
    lp, tp = LR.pack_sequence(ls, enforce), TR.pack_sequence(ts, enforce)
    same_packed(lp, tp)
    assert isinstance(lp, tuple) and type(lp).__name__ == "PackedSequence"
    for a, b in zip(LR.unpack_sequence(lp), TR.unpack_sequence(tp)):
        close(a, b)
    backward_both(lp.data, tp.data)
    for a, b in zip(ls, ts):
        close(a.grad, b.grad)


def test_packed_sequence_methods():
    lp = LR.pack_sequence([tl.tensor(randn(3, 2)), tl.tensor(randn(1, 2))])
    assert lp.float().data.dtype == tl.float32 and lp.to(tl.float32).data.dtype == tl.float32
    assert lp.double().data.dtype == tl.float64 and not lp.is_cuda
    data, batch_sizes, sorted_indices, unsorted_indices = lp
    assert batch_sizes.tolist() == [2, 1, 1] and sorted_indices is None and unsorted_indices is None
    assert LR.invert_permutation(tl.tensor([2, 0, 1])).tolist() == [1, 2, 0]


def test_errors_match_torch():
    seqs = [randn(3, 2), randn(1, 2), randn(2, 2)]
    lseq, tseq = [tl.tensor(s) for s in seqs], [torch.tensor(s) for s in seqs]
    same_error(lambda: TR.pad_sequence(tseq, padding_side="mid"), lambda: LR.pad_sequence(lseq, padding_side="mid"))
    same_error(lambda: TR.pack_sequence(tseq), lambda: LR.pack_sequence(lseq))
    same_error(lambda: TR.pad_sequence([]), lambda: LR.pad_sequence([]))
    x = randn(3, 3, 2)
    for lengths, enforce in (([3, 0, 2], False), ([3, 2], True)):
        same_error(lambda: TR.pack_padded_sequence(torch.tensor(x), lengths, enforce_sorted=enforce),
                   lambda: LR.pack_padded_sequence(tl.tensor(x), lengths, enforce_sorted=enforce))
    lp = LR.pack_padded_sequence(tl.tensor(x), [3, 2, 1])
    tp = TR.pack_padded_sequence(torch.tensor(x), [3, 2, 1])
    same_error(lambda: TR.pad_packed_sequence(tp, total_length=2), lambda: LR.pad_packed_sequence(lp, total_length=2))


# ---------------------------------------------------------------- recurrent layers on packed input

MODES = {"rnn_tanh": ("RNN", {}), "rnn_relu": ("RNN", {"nonlinearity": "relu"}), "lstm": ("LSTM", {}),
         "gru": ("GRU", {}), "lstm_proj": ("LSTM", {"proj_size": 2})}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True), (1, True)])
@pytest.mark.parametrize("enforce,with_state", [(True, False), (False, False), (False, True)])
def test_layers_on_packed_input(mode, num_layers, bidirectional, enforce, with_state):
    name, extra = MODES[mode]
    tm, lm = pair(getattr(torch.nn, name), getattr(tl.nn, name), I, H, num_layers, bidirectional=bidirectional,
                  **extra)
    lengths = [5, 4, 4, 2] if enforce else [2, 5, 1, 4]
    ls, ts = both([randn(n, I) for n in lengths])
    lp, tp = LR.pack_sequence(ls, enforce), TR.pack_sequence(ts, enforce)
    dirs = 2 if bidirectional else 1
    lstate = tstate = None
    if with_state:
        shapes = [(num_layers * dirs, len(lengths), extra.get("proj_size") or H)]
        if name == "LSTM":
            shapes.append((num_layers * dirs, len(lengths), H))
        lst, tst = both([randn(*s) for s in shapes])
        lstate, tstate = (tuple(lst), tuple(tst)) if name == "LSTM" else (lst[0], tst[0])
    lout, lh = lm(lp, lstate)
    tout, th = tm(tp, tstate)
    assert type(lout).__name__ == "PackedSequence"
    same_packed(lout, tout)
    lh, th = (list(lh), list(th)) if name == "LSTM" else ([lh], [th])
    for a, b in zip(lh, th):
        close(a, b, "final state")
    lpad, _ = LR.pad_packed_sequence(lout, batch_first=True)
    tpad, _ = TR.pad_packed_sequence(tout, batch_first=True)
    close(lpad, tpad, "padded output")
    gs = [randn(*tpad.shape)] + [randn(*t.shape) for t in th]
    sum((a * tl.tensor(g)).sum() for a, g in zip([lpad] + lh, gs)).backward()
    sum((a * torch.tensor(g)).sum() for a, g in zip([tpad] + th, gs)).backward()
    for a, b in zip(ls, ts):
        close(a.grad, b.grad, "grad of a sequence")
    if with_state:
        for a, b in zip(lst, tst):
            close(a.grad, b.grad, "grad of the initial state")
    tparams = dict(tm.named_parameters())
    for pname, p in lm.named_parameters():
        close(p.grad, tparams[pname].grad, f"grad of {pname}")


def test_packed_matches_padded_run_for_equal_lengths():
    tm, lm = pair(torch.nn.GRU, tl.nn.GRU, I, H, batch_first=True)
    x = tl.tensor(randn(3, 4, I))
    out, h = lm(LR.pack_padded_sequence(x, [4, 4, 4], batch_first=True))
    ref, href = lm(x)
    np.testing.assert_allclose(LR.pad_packed_sequence(out, True)[0].detach().numpy(), ref.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), href.detach().numpy(), rtol=1e-12)


def test_packed_state_shape_error():
    tm, lm = pair(torch.nn.GRU, tl.nn.GRU, I, H)
    seqs = [randn(3, I), randn(2, I)]
    for bad in (randn(1, 3, H), randn(1, 2, H + 1)):
        same_error(lambda: tm(TR.pack_sequence([torch.tensor(s) for s in seqs]), torch.tensor(bad)),
                   lambda: lm(LR.pack_sequence([tl.tensor(s) for s in seqs]), tl.tensor(bad)))

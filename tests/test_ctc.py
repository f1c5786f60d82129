"""``ctc_loss`` (engine/nn/_ctc.py): losses and PyTorch's gradient convention against torch, every
target layout, length pattern and reduction; PyTorch's argument errors; no double backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab._backend import simulated_cuda

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}

# name: (T, C, padded targets, input lengths, target lengths, blank); padding past a target's length
# holds labels that must be ignored
CASES = {
    "varying": (12, 6, [[1, 5, 2, 2, 4, 3], [3, 1, 4, 5, 5, 1], [2, 3, 3, 3, 3, 3], [5, 4, 4, 1, 2, 2]],
                [12, 9, 5, 10], [5, 3, 1, 4], 0),
    "repeats": (10, 4, [[2, 2, 2], [1, 1, 3], [3, 3, 1]], [5, 10, 3], [3, 3, 2], 0),   # tight: blanks forced
    "empty": (7, 5, [[4, 4], [1, 2], [3, 3]], [7, 7, 0], [0, 2, 0], 0),                # no label; no frame
    "impossible": (6, 4, [[1, 1, 1], [2, 3, 1], [1, 2, 3]], [4, 1, 6], [3, 2, 3], 0),   # 5 and 2 frames needed
    "no_frames": (5, 4, [[1, 2], [3, 1]], [0, 5], [1, 2], 0),                           # inf loss, zero gradient
    "blank_last": (9, 5, [[0, 3, 3, 1], [2, 0, 0, 0], [3, 4, 4, 4]], [9, 8, 6], [4, 2, 1], 4),
    "long": (60, 9, np.random.default_rng(1).integers(1, 9, (3, 16)).tolist(), [60, 41, 52], [16, 9, 13], 0),
}


def _lengths(m, values, kind):
    return m.tensor(values) if kind == "tensor" else list(values)


def _targets(m, padded, tl, layout):
    if layout == "padded":
        return m.tensor(padded)
    return m.tensor([lab for row, n in zip(padded, tl) for lab in row[:n]], dtype=m.int64)


def _run(m, case, dtype, layout="padded", lengths="list", wrt="log_probs", **kw):
    """The loss and the gradient w.r.t. the log-probabilities as a leaf (PyTorch's convention) or
    w.r.t. the logits before ``log_softmax``; a weighted sum of the unreduced losses is taken."""
    T, C, padded, il, tl, blank = CASES[case]
    x = np.random.default_rng(0).standard_normal((T, len(il), C)) * 2
    if wrt == "log_probs":   # the same values for both (log_softmax's own rounding differs by an ulp)
        leaf = lp = m.tensor((x - np.log(np.exp(x).sum(2, keepdims=True))).astype(dtype), requires_grad=True)
    else:
        leaf = m.tensor(x.astype(dtype), requires_grad=True)
        lp = leaf.log_softmax(2)
    loss = m.nn.functional.ctc_loss(lp, _targets(m, padded, tl, layout), _lengths(m, il, lengths),
                                    _lengths(m, tl, lengths), blank=blank, **kw)
    weight = m.tensor(np.linspace(0.5, 2.0, loss.numel()).reshape(tuple(loss.shape)).astype(dtype))
    (loss * weight).sum().backward()
    return loss.detach().numpy(), leaf.grad.numpy()


def _assert_same(case, dtype, **kw):
    want_loss, want_grad = _run(torch, case, dtype, **kw)
    loss, grad = _run(tapelab, case, dtype, **kw)
    np.testing.assert_allclose(loss, want_loss, **TOL[dtype], equal_nan=True)
    np.testing.assert_allclose(grad, want_grad, **TOL[dtype], equal_nan=True)
    return loss, grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_losses_and_gradients_match_torch(case, layout, dtype):
    loss, grad = _assert_same(case, dtype, layout=layout, reduction="none")
    assert np.isfinite(grad).any()


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", ["varying", "impossible", "empty"])
def test_reductions_and_zero_infinity_match_torch(case, reduction, zero_infinity):
    for dtype in (np.float32, np.float64):
        _assert_same(case, dtype, lengths="tensor", reduction=reduction, zero_infinity=zero_infinity)


def test_an_impossible_alignment_is_inf_with_nan_gradient_unless_zero_infinity():
    loss, grad = _assert_same("impossible", np.float64, reduction="none")
    assert loss[0] == loss[1] == np.inf and np.isnan(grad[:4, 0]).all() and (grad[4:, 0] == 0).all()
    loss, grad = _assert_same("impossible", np.float64, reduction="none", zero_infinity=True)
    assert loss[0] == loss[1] == 0 and (grad[:, :2] == 0).all() and np.isfinite(loss[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["varying", "repeats", "blank_last"])
def test_gradient_through_log_softmax_matches_torch(case, dtype):
    _assert_same(case, dtype, wrt="logits", reduction="mean")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("lengths", ["list", "0-d tensor"])
def test_unbatched_input_matches_torch(reduction, lengths):
    x = np.random.default_rng(2).standard_normal((8, 5))
    out = {}
    for m in (torch, tapelab):
        lp = m.tensor(x).log_softmax(1).requires_grad_()
        il, tl = ([8], [3]) if lengths == "list" else (m.tensor(8), m.tensor(3))
        loss = m.nn.functional.ctc_loss(lp, m.tensor([1, 4, 4]), il, tl, reduction=reduction)
        loss.backward()
        out[m] = (tuple(loss.shape), loss.detach().numpy(), lp.grad.numpy())
    assert out[tapelab][0] == out[torch][0] == ()
    np.testing.assert_allclose(out[tapelab][1], out[torch][1], rtol=1e-10)
    np.testing.assert_allclose(out[tapelab][2], out[torch][2], rtol=1e-10, atol=1e-12)


def test_batch_first_model_output_transposed_to_time_first_matches_torch():
    """The usual speech program: logits ``(N, T, C)``, ``log_softmax``, ``transpose(0, 1)`` (a strided view)."""
    x = np.random.default_rng(10).standard_normal((3, 15, 7)).astype(np.float32)
    got = []
    for m in (torch, tapelab):
        logits = m.tensor(x, requires_grad=True)
        loss = m.nn.functional.ctc_loss(logits.log_softmax(-1).transpose(0, 1), m.tensor([[1, 2, 2, 6], [3, 4, 0, 0],
                                        [5, 5, 5, 1]]), m.tensor([15, 12, 10]), m.tensor([4, 2, 3]))
        loss.backward()
        got.append((loss.item(), logits.grad.numpy()))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-5)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-5, atol=1e-6)


def test_module_and_torch_level_entry_points_use_the_op():
    x = np.random.default_rng(3).standard_normal((10, 2, 6))
    got = {}
    for m in (torch, tapelab):
        lp = m.tensor(x).log_softmax(2)
        tg, il, tl = m.tensor([[1, 2, 3], [4, 5, 5]]), m.tensor([10, 7]), m.tensor([3, 3])
        got[m] = [m.nn.CTCLoss(blank=0, reduction="sum")(lp, tg, il, tl).item(),
                  m.ctc_loss(lp, tg, il, tl, 0, 0, True).numpy()]
    np.testing.assert_allclose(got[tapelab][0], got[torch][0], rtol=1e-10)
    np.testing.assert_allclose(got[tapelab][1], got[torch][1], rtol=1e-10)


def test_gradcheck_through_log_softmax():
    x = tapelab.tensor(np.random.default_rng(4).standard_normal((6, 2, 4)), requires_grad=True)
    tg, il, tl = tapelab.tensor([[1, 1, 2], [3, 2, 0]]), [6, 5], [3, 2]
    assert tapelab.autograd.gradcheck(
        lambda v: tapelab.nn.functional.ctc_loss(v.log_softmax(2), tg, il, tl, reduction="none"), (x,))


def test_double_backward_is_refused_as_in_torch():
    messages = []
    for m in (torch, tapelab):
        lp = m.tensor(np.random.default_rng(5).standard_normal((6, 2, 4))).log_softmax(2).requires_grad_()
        loss = m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 3]]), [6, 6], [2, 2])
        (g,) = m.autograd.grad(loss, lp, create_graph=True)
        with pytest.raises(RuntimeError) as info:
            m.autograd.grad(g.sum(), lp)
        messages.append(str(info.value))
    assert messages[0] == messages[1] == "derivative for aten::_ctc_loss_backward is not implemented"


def test_simulated_cuda_gives_the_cpu_values():
    """The op runs through ``xp`` only: on the simulated device (numpy behind cupy's rules) the
    same arithmetic gives the same bits as on cpu, whose values the tests above check against torch."""
    T, C, padded, il, tl, blank = CASES["varying"]
    x = np.random.default_rng(0).standard_normal((T, len(il), C))
    lp_values = (x - np.log(np.exp(x).sum(2, keepdims=True))).astype(np.float32)
    weight = np.linspace(0.5, 2.0, len(il)).astype(np.float32)
    got = []
    with simulated_cuda():
        for device in ("cpu", "cuda"):
            lp = tapelab.tensor(lp_values, device=device, requires_grad=True)
            loss = tapelab.nn.functional.ctc_loss(lp, _targets(tapelab, padded, tl, "concatenated"),   # cpu targets
                                                  tapelab.tensor(il), tapelab.tensor(tl), reduction="none")
            assert loss.device.type == device
            (loss * tapelab.tensor(weight, device=device)).sum().backward()
            got.append((loss.detach().cpu().numpy(), lp.grad.cpu().numpy()))
    np.testing.assert_array_equal(got[1][0], got[0][0])
    np.testing.assert_array_equal(got[1][1], got[0][1])


def test_cpu_autocast_runs_it_in_float32_as_torch():
    """PyTorch's cpu autocast lists ctc_loss as float32: a bfloat16 input is cast, not refused."""
    x = np.random.default_rng(8).standard_normal((8, 2, 5))
    got = {}
    for m in (torch, tapelab):
        lp = m.tensor(x).log_softmax(2).to(m.bfloat16).requires_grad_()
        with m.autocast("cpu", dtype=m.bfloat16):
            loss = m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 3]]), [8, 7], [2, 2], reduction="none")
        loss.sum().backward()
        got[m] = (str(loss.dtype).split(".")[-1], loss.detach().numpy(), str(lp.grad.dtype).split(".")[-1],
                  lp.grad.float().numpy())
    assert got[tapelab][0] == got[torch][0] == "float32" and got[tapelab][2] == got[torch][2] == "bfloat16"
    np.testing.assert_allclose(got[tapelab][1], got[torch][1], rtol=1e-6)
    np.testing.assert_array_equal(got[tapelab][3], got[torch][3])


def _bad_calls():
    """Calls PyTorch refuses: name -> (fn(m, lp)), each raising in the same order PyTorch checks."""
    tg = lambda m: m.tensor([[1, 2, 2], [3, 1, 0]])     # noqa: E731
    F = lambda m: m.nn.functional                        # noqa: E731
    return {
        "reduction": lambda m, lp: F(m).ctc_loss(lp, tg(m), [6, 5], [3, 2], reduction="bad"),
        "float lengths": lambda m, lp: F(m).ctc_loss(lp, tg(m), m.tensor([6., 5.]), m.tensor([3., 2.])),
        "integer log_probs": lambda m, lp: F(m).ctc_loss(lp.long(), tg(m), [6, 5], [3, 2]),
        "half log_probs": lambda m, lp: F(m).ctc_loss(lp.half(), tg(m), [6, 5], [3, 2]),
        "empty": lambda m, lp: F(m).ctc_loss(lp[:, :0], tg(m)[:0], [], [], blank=9),
        "4-d log_probs": lambda m, lp: F(m).ctc_loss(lp[None], tg(m), [6, 5], [3, 2]),
        "1-d log_probs": lambda m, lp: F(m).ctc_loss(lp[:, 0, 0], tg(m), [6, 5], [3, 2]),
        "3-d targets": lambda m, lp: F(m).ctc_loss(lp, tg(m)[None], [6, 5], [3, 2], blank=7),
        "blank": lambda m, lp: F(m).ctc_loss(lp, tg(m), [6], [3, 2], blank=5),
        "negative blank": lambda m, lp: F(m).ctc_loss(lp, tg(m), [6, 5], [3, 2], blank=-1),
        "input_lengths size": lambda m, lp: F(m).ctc_loss(lp, tg(m), [6], [3, 2]),
        "target_lengths size": lambda m, lp: F(m).ctc_loss(lp, tg(m), [6, 5], [3]),
        "negative target length": lambda m, lp: F(m).ctc_loss(lp, tg(m)[:1], [6, 5], [-1, 2]),
        "padded rows": lambda m, lp: F(m).ctc_loss(lp, tg(m)[:1], [6, 5], [3, 2]),
        "padded too short": lambda m, lp: F(m).ctc_loss(lp, tg(m), [7, 5], [4, 2]),
        "concatenated size": lambda m, lp: F(m).ctc_loss(lp, m.tensor([1, 2, 3]), [6, 5], [3, 2]),
        "negative input length": lambda m, lp: F(m).ctc_loss(lp, tg(m), [-1, 5], [1, 2]),
        "input length past T": lambda m, lp: F(m).ctc_loss(lp, tg(m), [7, 5], [3, 2]),
        "unbatched, two lengths": lambda m, lp: F(m).ctc_loss(lp[:, 0], tg(m)[0], [6, 5], [3, 2]),
        "complex": lambda m, lp: F(m).ctc_loss(lp.to(m.complex64), tg(m), [6, 5], [3, 2]),
    }


@pytest.mark.parametrize("name", sorted(_bad_calls()))
def test_errors_match_torch(name):
    fn = _bad_calls()[name]
    x = np.random.default_rng(6).standard_normal((6, 2, 5)).astype(np.float32)
    raised = []
    for m in (torch, tapelab):
        with pytest.raises(Exception) as info:
            fn(m, m.tensor(x).log_softmax(2))
        raised.append(info.value)
    assert type(raised[1]) is type(raised[0]), (raised[1], raised[0])
    assert str(raised[1]) == str(raised[0])


def test_lengths_may_be_any_integers_in_a_list_as_in_torch():
    x = np.random.default_rng(9).standard_normal((6, 2, 5))
    got = []
    for m in (torch, tapelab):
        lp = m.tensor(x).log_softmax(2)
        got.append(m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 1]]).int(), [np.int64(6), m.tensor(5)],
                                            (2, np.int32(2)), reduction="none").numpy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-10)


def test_mixed_length_kinds_raise_type_error_as_in_torch():
    x = np.random.default_rng(7).standard_normal((6, 2, 5))
    for m in (torch, tapelab):
        lp = m.tensor(x).log_softmax(2)
        with pytest.raises(TypeError):
            m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 1]]), m.tensor([6, 5]), [2, 2])
        with pytest.raises(TypeError):
            m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 1]]), [6., 5.], [2, 2])
        with pytest.raises(TypeError):
            m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 1]]), np.array([6, 5]), [2, 2])
        with pytest.raises(TypeError):
            m.nn.functional.ctc_loss(lp, m.tensor([[1, 2], [3, 1]]), [True, 5], [2, 2])

"""Gaps found in session 20, each against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.core.dispatch import Mode


@pytest.mark.parametrize("index", [[0], 0])
def test_index_select_of_a_scalar_stays_a_scalar(index):
    xt, xl = torch.tensor(5.0, requires_grad=True), tapelab.tensor(5.0, requires_grad=True)
    yt, yl = xt.index_select(0, torch.tensor(index)), xl.index_select(0, tapelab.tensor(index))
    assert tuple(yl.shape) == tuple(yt.shape) == () and float(yl) == float(yt.detach())
    yt.backward()
    yl.backward()
    assert float(xl.grad) == float(xt.grad) == 1.0


@pytest.mark.parametrize("index", [[0, 0], []])
def test_index_select_of_a_scalar_takes_one_index(index):
    with pytest.raises(RuntimeError) as want:
        torch.tensor(5.0).index_select(0, torch.tensor(index, dtype=torch.long))
    with pytest.raises(RuntimeError) as got:
        tapelab.tensor(5.0).index_select(0, tapelab.tensor(index, dtype=tapelab.long))
    assert str(got.value) == str(want.value)


def test_index_select_of_a_scalar_out_of_range():
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.tensor(5.0).index_select(0, torch.tensor([1]))
    with pytest.raises(IndexError, match="index out of range in self"):
        tapelab.tensor(5.0).index_select(0, tapelab.tensor([1]))
    np.testing.assert_array_equal(tapelab.tensor(5.0).index_select(0, tapelab.tensor([0])).numpy(), 5.0)


def _ema_lists(lib, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    shapes = [(64, 784), (64,), (10, 64), (10,)]
    params = [lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    ema = [lib.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    return ema, params


@pytest.mark.parametrize("weight", [0.001, 0.9])      # both of lerp's exact forms (|w| < 0.5 and not)
def test_foreach_lerp_on_arrays_equals_torch_and_moves_versions(weight):
    """``torch._foreach_lerp_(ema, params, w)`` (a model-EMA update) runs the float32 loop on the arrays
    when nobody watches: PyTorch's floats bit for bit, each tensor's version moved once."""
    ema, params = _ema_lists(tapelab)
    tema, tparams = _ema_lists(torch)
    versions = [t._version for t in ema]
    assert tapelab._foreach_lerp_(ema, params, weight) is ema
    torch._foreach_lerp_(tema, tparams, weight)
    for a, b, v in zip(ema, tema, versions):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a._version == v + 1


def test_foreach_lerp_under_a_tape_records_each_update():
    ema, params = _ema_lists(tapelab)
    ref, _ = _ema_lists(tapelab)
    with tapelab.tape() as t:
        tapelab._foreach_lerp_(ema, params, 0.01)
    for a, r, p in zip(ema, ref, params):
        np.testing.assert_array_equal(a.numpy(), r.lerp_(p, 0.01).numpy())
    assert [n.op for n in t.nodes] == ["lerp"] * 4       # the tape sees each update


def test_foreach_lerp_of_trained_parameters_under_no_grad_is_the_arrays_loop():
    """The EMA's usual frame: ``@torch.no_grad()`` around ``_foreach_lerp_(ema, model.parameters(), w)``,
    the parameters requiring grad. The update takes the arrays' loop (no op dispatched: a mode sees
    none), gives PyTorch's floats, and leaves the EMA not requiring grad."""
    ema, params = _ema_lists(tapelab)
    tema, tparams = _ema_lists(torch)
    for p in params + tparams:
        p.requires_grad_()

    class Seen(Mode):
        ops: list = []

        def dispatch(self, op, args, kw):
            Seen.ops.append(op.name)
            return super().dispatch(op, args, kw)
    from tapelab.ops.elementwise import lerp_arrays_
    with tapelab.no_grad():
        assert lerp_arrays_(list(zip(ema, params)), 0.001)          # the arrays' loop takes it
    assert not lerp_arrays_(list(zip(_ema_lists(tapelab)[0], params)), 0.001)   # grad on: dispatched
    with torch.no_grad():
        torch._foreach_lerp_(tema, tparams, 0.001)
    for a, b in zip(ema, tema):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert not a.requires_grad
    ref, _ = _ema_lists(tapelab)
    with tapelab.no_grad(), Seen():      # while a mode watches, each lerp_ is dispatched: it sees four
        tapelab._foreach_lerp_(ref, params, 0.001)
    assert Seen.ops == ["lerp"] * 4
    for a, r in zip(ema, ref):
        np.testing.assert_array_equal(a.numpy(), r.numpy())

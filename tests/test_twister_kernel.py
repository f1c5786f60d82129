"""The twister's words drawn in numba from numpy's MT19937 state (``kernels/twister.py``): the same
words as numpy's ``random_raw`` at every position, one state shared with numpy, and PyTorch's numbers
for the draws that take the loops (float32 uniforms, double uniforms, Bernoulli masks, normals)."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import tapelab
from tapelab.core import cpu_stream

pytest.importorskip("numba")


def _pair(seed: int, skip: int):
    ours, theirs = cpu_stream.Twister(), np.random.MT19937()
    for bits in (ours, theirs):
        cpu_stream.seed_twister(bits, seed)
        bits.random_raw(skip)
    return ours, theirs


@pytest.mark.parametrize("skip", [0, 1, 623, 624, 1000])
@pytest.mark.parametrize("n", [0, 1, 17, 623, 624, 625, 2000])
def test_words_are_numpys_at_every_position(skip, n):
    ours, theirs = _pair(1234, skip)
    got = cpu_stream.words32(ours, n)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got.astype(np.uint64), theirs.random_raw(n))
    # the loops left numpy's position where numpy's own draw would have: the next words agree
    np.testing.assert_array_equal(ours.random_raw(5), theirs.random_raw(5))


def test_doubles_and_masks_read_two_words_each():
    ours, theirs = _pair(7, 600)   # the pairs straddle a twist
    raw = theirs.random_raw(2 * 50).reshape(50, 2)
    want = ((raw[:, 0] & np.uint64((1 << 21) - 1)) << np.uint64(32)) | raw[:, 1]
    np.testing.assert_array_equal(cpu_stream._doubles53(ours, 50), want)
    ours, theirs = _pair(7, 600)
    raw = theirs.random_raw(2 * 50).reshape(50, 2)
    want = (((raw[:, 0] & np.uint64((1 << 21) - 1)) << np.uint64(32)) | raw[:, 1]) < 0.25 * 2.0 ** 53
    np.testing.assert_array_equal(cpu_stream.bernoulli(ours, 50, 0.25), want)


@pytest.mark.parametrize("size", [(3,), (16,), (17,), (64, 33), (50176,)])
def test_draws_are_pytorchs(loops, size):
    for seed in (0, 2 ** 40 + 3):
        torch.manual_seed(seed)
        tapelab.manual_seed(seed)
        for name in ("rand", "randn"):
            for dt in ("float32", "float64"):
                want = getattr(torch, name)(*size, dtype=getattr(torch, dt)).numpy()
                got = getattr(tapelab, name)(*size, dtype=getattr(tapelab, dt)).numpy()
                if loops or (name, dt) != ("randn", "float64"):
                    np.testing.assert_array_equal(got, want)
                else:   # numpy's own log/cos/sin: an ulp off libm's now and then
                    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
        np.testing.assert_array_equal(tapelab.empty(*size).uniform_(-3, 5).numpy(),
                                      torch.empty(*size).uniform_(-3, 5).numpy())
        np.testing.assert_array_equal(tapelab.empty(*size).bernoulli_(0.3).numpy(),
                                      torch.empty(*size).bernoulli_(0.3).numpy())
        np.testing.assert_array_equal(tapelab.randint(0, 10, size).numpy(), torch.randint(0, 10, size).numpy())
        np.testing.assert_array_equal(tapelab.randperm(100).numpy(), torch.randperm(100).numpy())


def test_generator_state_copies_and_pickles_keep_the_stream(loops):
    g = tapelab.Generator().manual_seed(3)
    tapelab.randn(700, generator=g)
    twin, thawed = copy.deepcopy(g), pickle.loads(pickle.dumps(g))
    want = tapelab.rand(1000, generator=g)
    for other in (twin, thawed):   # each has its own state memory, at the same position
        np.testing.assert_array_equal(tapelab.rand(1000, generator=other).numpy(), want.numpy())
    state = g.get_state()
    first = tapelab.rand(1000, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(tapelab.rand(1000, generator=g).numpy(), first.numpy())


def test_float64_normals_are_pytorchs_with_a_scale(loops):
    """ATen's double Box-Muller calls libm and contracts ``r * cos * std + mean`` into an FMA: the last
    bit of a third of ``normal_(0.3, 1.7)``'s numbers differed before (numpy's product and sum)."""
    for seed in range(40):
        torch.manual_seed(seed)
        tapelab.manual_seed(seed)
        for args in ((0.0, 1.0), (0.3, 1.7), (-2.0, 0.01)):
            want = torch.empty(64, dtype=torch.float64).normal_(*args).numpy()
            got = tapelab.empty(64, dtype=tapelab.float64).normal_(*args).numpy()
            if loops:
                np.testing.assert_array_equal(got, want)
            else:   # the FMA emulated exactly; numpy's log/cos/sin an ulp off libm's now and then
                assert np.mean(got == want) > 0.9
                np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,args", [("exponential_", (1.5,)), ("cauchy_", (0.0, 2.0)), ("log_normal_", (0.0, 0.5)),
                                       ("geometric_", (0.3,))])
def test_double_transforms_are_pytorchs(loops, dtype, name, args):
    """ATen transforms double uniforms with libm's log1p, tan and exp (``kernels/libm.py``): numpy's own
    SIMD functions gave another last bit in up to 6% of float64 numbers."""
    for seed in range(20):
        torch.manual_seed(seed)
        tapelab.manual_seed(seed)
        want = getattr(torch.empty(200, dtype=getattr(torch, dtype)), name)(*args).numpy()
        got = getattr(tapelab.empty(200, dtype=getattr(tapelab, dtype)), name)(*args).numpy()
        if loops or dtype == "float32":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-14)

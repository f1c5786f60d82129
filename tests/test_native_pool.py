"""Parallel parts as OpenMP regions on numba's threads (``TAPELAB_NATIVE_POOL=1``): our GEMM's parts
(kernels/sgemm.py ``parallel_parts``) and the fused loops' blocks (kernels/regions.py, through
``kernels.parallel``/``parallel_ranges``) give the same floats as one call at one and two threads, and
PyTorch's where the loop is bitwise its op; the fallback where the layer is not a cheap one, a forked
child after regions ran, concurrent callers, torch imported in the same process, and a region's
machine code loaded from numba's disk cache in a fresh process."""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tapelab

G = importlib.import_module("tapelab.kernels.gemm")
from tapelab import kernels
from tapelab.base import pool
from tapelab.kernels import enabled, loops

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")


@pytest.fixture(autouse=True)
def native():
    """The parts on numba's threads are opt-in (TAPELAB_NATIVE_POOL=1): on for these tests."""
    old = kernels.set_native(True)
    yield
    kernels.set_native(old)

SHAPES = [(64, 512, 512), (20, 200, 800), (37, 50, 33), (8, 784, 512), (130, 96, 160)]


def _serial(a, b):
    SG = loops("sgemm")
    return SG.matmul_into(a, b, np.empty((a.shape[0], b.shape[1]), np.float32))


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_parts_equal_one_call(m, k, n, n_threads):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    SG = loops("sgemm")
    whole = _serial(a, b)
    for parts in (2, 3, n_threads):
        got = SG.matmul_into(a, b, np.empty((m, n), np.float32), parts)
        assert np.array_equal(got, whole)
        got_t = SG.matmul_into(np.asfortranarray(a), np.asfortranarray(b), np.empty((m, n), np.float32), parts)
        assert np.array_equal(got_t, _serial(np.asfortranarray(a), np.asfortranarray(b)))
    tapelab.set_num_threads(1)
    one = G.gemm(np, a, b)
    tapelab.set_num_threads(n_threads)
    for _ in range(40):   # both ways of the timed choice
        assert np.array_equal(G.gemm(np, a, b), one)
    stack_a, stack_b = rng.standard_normal((4, m, k), np.float32), rng.standard_normal((4, k, n), np.float32)
    ref = SG.matmul_batch_into(stack_a, stack_b, np.empty((4, m, n), np.float32))
    assert np.array_equal(SG.matmul_batch_into(stack_a, stack_b, np.empty((4, m, n), np.float32), 2), ref)


def test_one_thread_no_region():
    tapelab.set_num_threads(1)
    assert loops("sgemm").parallel_parts(tapelab.get_num_threads()) == 1


def test_fallback_layer(monkeypatch):
    """Where the layer is not omp/tbb (or after a fork) the product runs as one call or on the pool."""
    SG = loops("sgemm")
    SG.parallel_parts(2)
    monkeypatch.setattr(loops("regions"), "_LAYER", [False])
    tapelab.set_num_threads(2)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    assert SG.parallel_parts(2) == 1
    tapelab.set_num_threads(1)
    one = G.gemm(np, a, b)
    tapelab.set_num_threads(2)
    for _ in range(20):
        assert np.array_equal(G.gemm(np, a, b), one)


def _child(q):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    out = G.gemm(np, a, b)
    tapelab.set_num_threads(1)
    q.put((loops("sgemm").parallel_parts(2), bool(np.array_equal(out, G.gemm(np, a, b)))))


def _after_regions(seed: int) -> None:
    """Two threads, and 40 products whose parts ran on numba's threads: the OpenMP layer is started."""
    tapelab.set_num_threads(2)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    for _ in range(40):
        G.gemm(np, a, b)


def test_fork_child_after_regions():
    _after_regions(2)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, "the forked child hung or failed"
    assert q.get(timeout=5) == (1, True)


def test_dataloader_fork_workers_after_regions():
    _after_regions(3)

    class DS(tapelab.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            x = tapelab.randn(64, 512) @ tapelab.randn(512, 512)
            return x.sum()

    loader = tapelab.utils.data.DataLoader(DS(), batch_size=2, num_workers=2, multiprocessing_context="fork",
                                           timeout=60)
    assert len(list(loader)) == 4


def test_concurrent_callers():
    tapelab.set_num_threads(2)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    tapelab.set_num_threads(1)
    want = G.gemm(np, a, b)
    tapelab.set_num_threads(2)
    bad = []

    def work():
        for _ in range(30):
            if not np.array_equal(G.gemm(np, a, b), want):
                bad.append(1)

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    work()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts) and not bad


def test_with_torch_imported():
    torch = pytest.importorskip("torch")
    tapelab.set_num_threads(2)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    x = torch.from_numpy(a) @ torch.from_numpy(b)
    got = G.gemm(np, a, b)
    tapelab.set_num_threads(1)
    assert np.array_equal(got, G.gemm(np, a, b))
    assert x.shape == (64, 512)


# ---------------------------------------------------------------- the fused loops' blocks as regions
def _one_and_two(monkeypatch, fn):
    """``fn()`` at one thread, then at two with every timed choice split (one OpenMP region) and
    whole."""
    tapelab.set_num_threads(1)
    results = [fn()]
    tapelab.set_num_threads(2)
    for way in (1, 0):
        monkeypatch.setattr(pool._Timings, "choose", lambda self, way=way: way)
        results.append(fn())
    return results


def _regions(*names):
    """Asserts a region was built for each loop named (the split calls ran as regions)."""
    built = {getattr(k[0], "__name__", None) for k, twin in loops("regions")._TWINS.items() if twin is not None}
    assert set(names) <= built, set(names) - built


def _same(results, torch_result=None):
    for got in results[1:]:
        for a, ref in zip(got, results[0]):
            np.testing.assert_array_equal(a, ref)
    if torch_result is not None:
        for a, ref in zip(results[0], torch_result):
            np.testing.assert_array_equal(a, ref)


def _grads(lib, fn, *arrays):
    """``fn``'s output and the inputs' gradients of ``(out * weights).sum()``, as numpy arrays."""
    xs = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*xs)
    w = lib.tensor(np.random.default_rng(9).standard_normal(tuple(out.shape)).astype(np.float32))
    (out * w).sum().backward()
    return [out.detach().numpy().copy()] + [x.grad.numpy().copy() for x in xs]


def test_region_twin_blocks_equal_whole_call():
    """A twin's blocks, cut anywhere, are the serial loop on their rows or ranges."""
    R, P = loops("regions"), loops("pointwise")
    assert R.parts(2) == 2
    x = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
    want = np.empty_like(x)
    P.relu(x, want)
    for cuts in ([0, 5, 1 << 16], [0, 1 << 15, 1 << 16], [0, 0, 1 << 16]):
        got = np.full_like(x, np.nan)
        R.rows(P.relu, 2, 2)(np.array(cuts, np.int64), x, got)
        np.testing.assert_array_equal(got, want)
    assert R.rows(lambda a: a, 1, 1) is None           # a Python function: the pool's blocks


def test_region_falls_back_where_numba_cannot_compile():
    """A nested tuple does not pass into a ``prange`` body: the blocks then run one after another,
    the same floats, and the loop's later calls go to the pool."""
    from numba import njit

    @njit
    def affine(x, out, pair):
        for i in range(x.shape[0]):
            out[i] = x[i] * pair[0][0][0] + pair[1]
    R = loops("regions")
    x = np.random.default_rng(8).standard_normal(1 << 16).astype(np.float32)
    got, want = np.empty_like(x), np.empty_like(x)
    pair = ((np.full(1, 2, np.float32), np.float32(1)), np.float32(1))
    affine(x, want, pair)
    R.rows(affine, 2, 3)(np.array([0, 5, 1 << 16], np.int64), x, got, pair)
    np.testing.assert_array_equal(got, want)
    assert R.rows(affine, 2, 3) is None


def test_relu_gelu_and_backwards_split_as_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((64, 4096)).astype(np.float32)
    for name in ("relu", "gelu"):
        def run(lib):
            return _grads(lib, getattr(lib.nn.functional, name), x)
        _same(_one_and_two(monkeypatch, lambda: run(tapelab)), run(torch))
    onednn = "_onednn" if loops("pointwise").gelu_mode(x) else ""   # oneDNN's erf form has loops of its own
    _regions("relu", "relu_backward", "gelu" + onednn, "gelu_backward" + onednn)


def test_batch_norm_and_max_pool_split_as_torch(monkeypatch):
    """Batch norm's channel ranges (train forward and backward) and max-pool's backward, bit for
    bit PyTorch's at its thread count (ATen's (N, C, H, W) sums do not depend on it)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((32, 16, 28, 28)).astype(np.float32)

    def run(lib):
        bn = lib.nn.BatchNorm2d(16)
        return _grads(lib, lambda t: lib.nn.functional.max_pool2d(lib.relu(bn(t)), 2), x)
    _same(_one_and_two(monkeypatch, lambda: run(tapelab)), run(torch))
    _regions("_forward", "_backward", "relu", "relu_backward", "max2x2_put")


def test_row_loops_split_equal_one_thread(monkeypatch):
    """softmax, log_softmax, layer_norm and cross-entropy (forward and backward) on two threads as
    on one, and within float32 rounding of PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    t = rng.integers(0, 256, 512)
    cases = {
        "softmax": lambda lib, a: lib.softmax(a, -1),
        "log_softmax": lambda lib, a: lib.log_softmax(a, -1),
        "layer_norm": lambda lib, a: lib.nn.functional.layer_norm(a, (256,)),
        "cross_entropy": lambda lib, a: lib.nn.functional.cross_entropy(a, lib.tensor(t), reduction="none"),
    }
    for name, fn in cases.items():
        got = _one_and_two(monkeypatch, lambda: _grads(tapelab, lambda a: fn(tapelab, a), x))
        _same(got)
        for a, ref in zip(got[0], _grads(torch, lambda a: fn(torch, a), x)):
            np.testing.assert_allclose(a, ref, rtol=2e-5, atol=2e-6, err_msg=name)
    _regions("softmax", "log_softmax", "layer_norm", "cross_entropy", "cross_entropy_backward")


def test_conv_narrow_and_winograd_taps_split_equal_one_thread(monkeypatch):
    """im2col's narrow GEMM (``winograd.narrow_rows``) and the Winograd taps (``tap_gemm``), their
    ranges as regions: a CNN stem's and a ResNet block's convolutions, forward and gradients (MKL's
    GEMMs at one thread: on its own threads it cuts a weight gradient's long sums as PyTorch does)."""
    monkeypatch.setattr(G, "_mkl_team", lambda n: 1)
    rng = np.random.default_rng(4)
    # the last: a 14x14 output, whose weight gradient is F(2, 3)'s whole-batch taps, 16 x 64 x 64 of them
    # (F(4, 3)'s runs ``weight_f43`` an image at a time, its taps cut into ranges: the third case); 16
    # input channels and more run Winograd's forward, 8 im2col's with the narrow GEMM (the fifth)
    cases = [((32, 1, 28, 28), (16, 1, 3, 3)), ((32, 16, 14, 14), (32, 16, 3, 3)), ((16, 32, 16, 16), (32, 32, 3, 3)),
             ((8, 64, 14, 14), (64, 64, 3, 3)), ((32, 8, 14, 14), (32, 8, 3, 3))]
    for xs, ws in cases:
        x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
        run = lambda: _grads(tapelab, lambda a, b: tapelab.nn.functional.conv2d(a, b, padding=1), x, w)
        _same(_one_and_two(monkeypatch, run))
    _regions("narrow_rows", "tap_gemm")


def _relu_child(q):
    x = np.random.default_rng(5).standard_normal((64, 4096)).astype(np.float32)
    tapelab.set_num_threads(2)
    y = [tapelab.relu(tapelab.tensor(x)).numpy() for _ in range(20)]
    q.put((loops("regions").parts(2), all(np.array_equal(a, np.maximum(x, 0)) for a in y)))


def test_fork_child_after_loop_regions(monkeypatch):
    """A child forked after regions ran (a DataLoader worker) runs the blocks on the pool instead."""
    x = np.random.default_rng(6).standard_normal((64, 4096)).astype(np.float32)
    tapelab.set_num_threads(2)
    monkeypatch.setattr(pool._Timings, "choose", lambda self: 1)
    for _ in range(5):
        tapelab.relu(tapelab.tensor(x))
    assert loops("regions").parts(2) == 2
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_relu_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, "the forked child hung or failed"
    assert q.get(timeout=5) == (1, True)


def test_concurrent_callers_of_loop_regions():
    """Four user threads at once through batch norm and relu: each gets the one-thread floats."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 16, 16, 16)).astype(np.float32)

    def step():
        bn = tapelab.nn.BatchNorm2d(16)
        return _grads(tapelab, lambda t: tapelab.relu(bn(t)), x)
    tapelab.set_num_threads(1)
    want = step()
    tapelab.set_num_threads(2)
    bad = []

    def work():
        for _ in range(15):
            if not all(np.array_equal(a, b) for a, b in zip(step(), want)):
                bad.append(1)
    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    work()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts) and not bad


_CACHED = """
import numpy as np, tapelab
from tapelab import kernels
R, P = kernels.loops("regions"), kernels.loops("pointwise")
x = np.ones(1 << 16, np.float32)
twin = R.rows(P.relu, 2, 2)
twin(np.array([0, 1 << 15, 1 << 16], np.int64), x, np.empty_like(x))
print(sum(twin.twin.stats.cache_hits.values()), sum(twin.twin.stats.cache_misses.values()))
"""


def test_region_machine_code_from_disk_cache(tmp_path):
    """The twin is a file in the cache directory, so a second process loads its compiled code
    (numba's cache) instead of compiling it again."""
    env = {**os.environ, "TAPELAB_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", _CACHED], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["0", "1"], ["1", "0"]], [r.stderr[-2000:] for r in runs]


def test_a_large_region_splits_untimed_and_a_small_one_is_timed():
    """From ``REGION_SPLIT_MIN`` elements a region splits without the pool's timing (as ATen's
    parallel_for above its grain); below it, above ``PARALLEL_MIN``, both ways are timed; at
    ``PARALLEL_MIN`` (ATen's grain: one task) it runs whole, untimed. Either way relu's values are numpy's."""
    tapelab.set_num_threads(2)
    if loops("regions").parts(2) < 2:
        pytest.skip("numba's threading layer forks slowly here: no regions")
    relu = loops("pointwise").relu
    for size in (kernels.REGION_SPLIT_MIN, kernels.PARALLEL_MIN + 8, kernels.PARALLEL_MIN):
        x = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        before = dict(pool.timings((relu, 2, "region")))
        np.testing.assert_array_equal(tapelab.relu(tapelab.tensor(x)).numpy(), np.maximum(x, 0))
        seen = pool.timings((relu, 2, "region")).get(size.bit_length())
        if size >= kernels.REGION_SPLIT_MIN or size <= kernels.PARALLEL_MIN:
            assert seen == before.get(size.bit_length())       # no timing kept: split, or whole
        else:
            assert seen is not None and seen["calls"] >= 1

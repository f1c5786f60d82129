"""Our GEMM's parts on numba's OpenMP threads (kernels/sgemm.py ``parallel_parts``): the same floats
as one call at one and two threads, the fallback where the layer is not a cheap one, a forked
child after regions ran, concurrent callers, and torch imported in the same process."""
from __future__ import annotations

import importlib
import multiprocessing as mp
import threading

import numpy as np
import pytest

import tapelab

G = importlib.import_module("tapelab.kernels.gemm")
from tapelab.kernels import enabled, loops

pytestmark = pytest.mark.skipif(not enabled(), reason="numba loops off")


@pytest.fixture(autouse=True)
def native(monkeypatch):
    """The parts on numba's threads are opt-in (TAPELAB_NATIVE_POOL=1): on for these tests."""
    monkeypatch.setattr(G, "NATIVE_POOL", True)

SHAPES = [(64, 512, 512), (20, 200, 800), (37, 50, 33), (8, 784, 512), (130, 96, 160)]


def _serial(a, b):
    SG = loops("sgemm")
    return SG.matmul_into(a, b, np.empty((a.shape[0], b.shape[1]), np.float32))


@pytest.fixture
def threads():
    before = tapelab.get_num_threads()
    yield
    tapelab.set_num_threads(before)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_parts_equal_one_call(m, k, n, n_threads, threads):
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


def test_one_thread_no_region(threads):
    tapelab.set_num_threads(1)
    assert loops("sgemm").parallel_parts(tapelab.get_num_threads()) == 1


def test_fallback_layer(monkeypatch, threads):
    """Where the layer is not omp/tbb (or after a fork) the product runs as one call or on the pool."""
    SG = loops("sgemm")
    SG.parallel_parts(2)
    monkeypatch.setattr(SG, "_PARALLEL", [False])
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


def test_fork_child_after_regions(threads):
    _after_regions(2)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0, "the forked child hung or failed"
    assert q.get(timeout=5) == (1, True)


def test_dataloader_fork_workers_after_regions(threads):
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


def test_concurrent_callers(threads):
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


def test_with_torch_imported(threads):
    torch = pytest.importorskip("torch")
    tapelab.set_num_threads(2)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 512), np.float32), rng.standard_normal((512, 512), np.float32)
    x = torch.from_numpy(a) @ torch.from_numpy(b)
    got = G.gemm(np, a, b)
    tapelab.set_num_threads(1)
    assert np.array_equal(got, G.gemm(np, a, b))
    assert x.shape == (64, 512)

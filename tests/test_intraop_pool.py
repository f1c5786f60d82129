"""tapelab's intra-op pool (engine/base/pool.py) and the GEMMs split over it (engine/kernels/gemm.py)."""
import importlib
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import tapelab
from tapelab import kernels
from tapelab.base import cpus, pool


@pytest.fixture
def two_threads():
    tapelab.set_num_threads(2)


def _idents(n_blocks):
    seen, barrier = [], threading.Barrier(n_blocks, timeout=10)

    def block(i):
        barrier.wait()          # every block running at once: fails unless each has its own thread
        seen.append((i, threading.get_ident()))
    pool.run_blocks(block, [(i,) for i in range(n_blocks)])
    return seen


def test_blocks_run_at_once_on_distinct_threads_the_first_on_the_caller():
    seen = dict(_idents(3))
    assert sorted(seen) == [0, 1, 2]
    assert len(set(seen.values())) == 3
    assert seen[0] == threading.get_ident()


def test_a_blocks_error_reaches_the_caller_and_the_pool_stays_usable():
    def block(i):
        if i == 1:
            raise ValueError("block 1 failed")
    with pytest.raises(ValueError, match="block 1 failed"):
        pool.run_blocks(block, [(0,), (1,)])
    assert len(set(t for _, t in _idents(2))) == 2


def test_nested_and_concurrent_callers_run_serially_without_deadlock():
    out = []

    def inner(i):
        out.append(("inner", i, threading.get_ident()))

    def outer(i):
        pool.run_blocks(inner, [(10 * i,), (10 * i + 1,)])     # from a worker: on that thread
    pool.run_blocks(outer, [(0,), (1,)])
    assert sorted(i for _, i, _ in out) == [0, 1, 10, 11]
    by_block = {}
    for _, i, ident in out:
        by_block.setdefault(i // 10, set()).add(ident)
    assert all(len(ids) == 1 for ids in by_block.values())     # each nested pair ran on one thread

    results, errors = {}, []
    a = np.random.default_rng(0).standard_normal((300, 200), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((200, 250), dtype=np.float32)

    def user_thread(k):
        try:
            for _ in range(20):
                results[k] = kernels.gemm(np, a * k, b)
        except BaseException as exc:
            errors.append(exc)
    threads = [threading.Thread(target=user_thread, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    for k in range(1, 5):
        np.testing.assert_allclose(results[k], np.matmul(a * k, b), rtol=1e-5, atol=1e-4)


def _ways(key, block_seconds, rounds):
    """Run two-block work under ``key`` ``rounds`` times; which ways ran (1 split, 0 on the caller)."""
    ways = []

    def block(i, caller, taken):
        if i == 1:
            taken.set()
            ways.append(int(threading.get_ident() != caller))
        elif pool._BUSY.locked():       # split: wait for the worker to take block 1 (else the caller would)
            taken.wait(5)
        time.sleep(block_seconds(threading.get_ident() != caller))
    for _ in range(rounds):
        taken = threading.Event()
        pool.run_blocks(block, [(0, threading.get_ident(), taken), (1, threading.get_ident(), taken)], key, 1000)
    return ways


def test_work_with_a_key_runs_split_or_whole_as_measured_faster():
    """Split first; then each way is timed; the faster wins, the slower is re-timed now and then."""
    slow_worker = _ways(("test", "slow worker"), lambda on_worker: 0.006 if on_worker else 0.0002, 40)
    assert slow_worker[:3] == [1, 1, 0]             # the first of each way is not counted
    assert slow_worker[4:].count(1) <= 3 and slow_worker[-4:] == [0, 0, 0, 0]
    parallel_pays = _ways(("test", "even blocks"), lambda on_worker: 0.008, 40)   # margin for wake-ups on a loaded host
    assert parallel_pays[:4] == [1, 1, 0, 0] and parallel_pays[-4:] == [1, 1, 1, 1]
    assert parallel_pays[4:].count(0) <= 3
    (figures,) = pool.timings(("test", "even blocks")).values()
    assert figures["split"] < figures["whole"] and figures["calls"] == 40


def test_a_confirmed_choice_is_retimed_ever_less_often():
    """The slower way is re-timed in streaks of three calls, ever further apart."""
    ways = _ways(("test", "backoff"), lambda on_worker: 0.006 if on_worker else 0.0002, 160)
    starts = [i for i in range(4, len(ways)) if ways[i] == 1 and ways[i - 1] == 0]
    assert all(ways[i:i + 3] == [1, 1, 1] and ways[i + 3] == 0 for i in starts[:-1])
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    between = [g - pool._STREAK for g in gaps]           # calls from a streak's end to the next
    assert len(between) >= 2 and between == sorted(between) and between[-1] >= 2 * between[0]


def test_a_retiming_counts_the_warm_calls_of_its_streak():
    """A worker that is slow on its first call after the pool ran whole (its CPU asleep) and fast
    after: the streak's first split is not counted, so once the machine frees up the pool
    finds splitting faster again. A one-call re-timing would only ever see the cold call."""
    state = {"busy": True, "last_split": False}

    def block(i, caller):
        on_worker = threading.get_ident() != caller
        if on_worker:
            time.sleep(0.012 if state["busy"] or not state["last_split"] else 0.0005)
        else:
            time.sleep(0.002)
    ways = []
    for n in range(80):
        state["busy"] = n < 12                       # a loaded machine, then a free one
        before = len(ways)
        split_seen = []

        def run(i, caller):
            split_seen.append(threading.get_ident() != caller)
            block(i, caller)
        pool.run_blocks(run, [(0, threading.get_ident()), (1, threading.get_ident())], ("test", "cold worker"), 1000)
        ways.append(int(any(split_seen)))
        state["last_split"] = bool(ways[-1])
        assert len(ways) == before + 1
    assert ways[4:12].count(1) == 0                  # whole while the worker was slow
    assert ways[-10:] == [1] * 10                    # split again once its warm calls were timed


def _child_gemm(q):
    a = np.ones((400, 300), np.float32)
    q.put(float(kernels.gemm(np, a, a.T).sum()))


def test_a_forked_child_gets_a_fresh_pool():
    pool.run_blocks(lambda i: None, [(0,), (1,)])              # the parent's workers exist
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_gemm, args=(q,))
    p.start()
    assert q.get(timeout=60) == 400 * 400 * 300
    p.join(30)
    assert p.exitcode == 0


@pytest.mark.parametrize("sa, sb", [
    ((768, 128), (128, 384)),            # rows
    ((64, 256), (256, 4000)),            # columns (n > m)
    ((12, 4, 64, 32), (12, 4, 32, 64)),  # the batch axis
    ((1, 4, 300, 64), (5, 4, 64, 300)),  # a broadcasting batch
    ((300, 300), (3, 300, 300)),         # a matrix against a batch
    ((2, 300, 300), (300, 300)),
    ((5, 7), (7, 3)),                    # below GEMM_PARALLEL_MIN: unsplit
])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_gemm_equals_numpy_matmul(two_threads, sa, sb, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(sa).astype(dtype)
    want = np.matmul(a, b)
    got = kernels.gemm(np, a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype != "float64" else 1e-12, atol=1e-3)
    out = np.empty_like(want)
    assert kernels.gemm(np, a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4 if dtype != "float64" else 1e-12, atol=1e-3)


def test_gemm_splits_only_large_products(two_threads, monkeypatch):
    monkeypatch.setattr(importlib.import_module("tapelab.kernels.gemm"), "_mkl_team", lambda n: 1)
    calls = []
    real = pool.run_blocks
    monkeypatch.setattr(pool, "run_blocks", lambda fn, blocks, *key: (calls.append(len(blocks)), real(fn, blocks, *key)))
    a = np.ones((256, 256), np.float32)
    kernels.gemm(np, a, a)
    assert calls == [2]
    kernels.gemm(np, a[:8, :8], a[:8, :8])
    kernels.gemm(np, a.astype(np.float16), a.astype(np.float16))      # no BLAS for half: numpy's loop
    kernels.gemm(np, a, a.astype(np.float64))                          # mixed: numpy's promotion
    assert calls == [2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemms_side_by_side_or_one_after_another_equal_numpy(two_threads, dtype, monkeypatch):
    """Independent products (a linear backward's two gradients): run side by side on two threads,
    or one after another, whichever the pool times faster; both ways give numpy's products (where
    MKL's own threads do not take them, ``gemm._mkl_team``)."""
    monkeypatch.setattr(importlib.import_module("tapelab.kernels.gemm"), "_mkl_team", lambda n: 1)
    rng = np.random.default_rng(0)
    g, w, x = (rng.standard_normal(s).astype(dtype) for s in ((96, 160), (160, 200), (96, 200)))
    want = (g @ w, g.T @ x)
    for _ in range(6):
        got = kernels.gemms(np, (g, w), (g.T, x))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-3)
    figures = pool.timings(("gemms", 2, 2))[(2 * 96 * 160 * 200).bit_length()]   # this size class
    assert figures["whole"] is not None and figures["split"] is not None   # both ways ran and were timed
    small = kernels.gemms(np, (g[:4, :4], w[:4, :4]), (g[:4, :4].T, x[:4, :4]))   # below the floor: plain gemm
    np.testing.assert_allclose(small[1], g[:4, :4].T @ x[:4, :4], rtol=1e-4, atol=1e-4)


def test_a_products_rounding_does_not_depend_on_the_way_the_pool_chose(two_threads, monkeypatch):
    """Split or whole, ``gemm`` runs the same BLAS calls (whole: its blocks one after another) and
    ``gemms`` one call per product: results are bitwise the same run to run, whatever was timed
    (a whole call rounding differently once flipped a max-pool's argmax in googlenet's backward)."""
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((300, 257), (257, 190), (300, 190)))
    results = []
    for way in (1, 0):
        monkeypatch.setattr(pool._Timings, "choose", lambda self, way=way: way)
        results.append((kernels.gemm(np, a, b), *kernels.gemms(np, (a, b), (a.T, c))))
    for split, whole in zip(*results):
        np.testing.assert_array_equal(split, whole)
    np.testing.assert_array_equal(results[0][2], kernels.gemm_here(np, a.T, c))     # one call


def test_fused_loops_split_after_the_pool_loops_module_loads(two_threads):
    """``kernels.pool`` is the max-pool loop module; the intra-op pool must not be shadowed by it."""
    pytest.importorskip("numba")
    kernels.loops("pool")
    seen = set()
    # each block lasts long enough for the worker to take the second (else the caller takes both)
    kernels.parallel(lambda a: (seen.add(threading.get_ident()), time.sleep(0.2)), 1, np.zeros((1 << 16, 1), np.float32))
    assert len(seen) == 2


def test_set_num_threads_holds_the_blas_at_one_thread(two_threads):
    assert tapelab.get_num_threads() == 2
    # numpy's BLAS, the one tapelab's products run on (a BLAS another library loads later is not held)
    blas = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas" and "numpy" in i["filepath"]]
    assert blas and set(blas) == {1}


def test_a_linear_step_at_two_threads_matches_torch(two_threads):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((512, 384), dtype=np.float32), rng.standard_normal((256, 384), dtype=np.float32)
    tx, tw = tapelab.tensor(x, requires_grad=True), tapelab.tensor(w, requires_grad=True)
    rx, rw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tapelab.nn.functional.linear(tx, tw).tanh().sum().backward()
    torch.nn.functional.linear(rx, rw).tanh().sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), rx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tw.grad.numpy(), rw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_dataloader_workers_run_one_intra_op_thread_each(two_threads):
    """As PyTorch's: N worker processes, each with one thread, the parent keeps its count."""
    from tapelab.utils.data import DataLoader, Dataset

    class Threads(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return tapelab.tensor([float(tapelab.get_num_threads())])
    assert [b.tolist() for b in DataLoader(Threads(), batch_size=2, num_workers=2)] == [[[1.0], [1.0]]] * 2
    assert tapelab.get_num_threads() == 2


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or cpus.current() is None,
                    reason="needs two CPUs and sched_getcpu")
def test_workers_keep_to_cpus_off_the_calling_thread(monkeypatch):
    """With the pool owning every CPU, each worker keeps to one CPU, never the caller's: a split's
    blocks run on two CPUs, even after the scheduler put the caller on the worker's CPU."""
    allowed = os.sched_getaffinity(0)
    tapelab.set_num_threads(len(allowed))
    monkeypatch.setattr(pool, "_WORKERS", [])             # workers placed afresh
    ran_on = []
    try:
        pool.run_blocks(lambda i: ran_on.append(cpus.current()), [(i,) for i in range(2)])
        worker = pool._WORKERS[0]
        deadline = time.time() + 10
        while worker.tid is None and time.time() < deadline:
            time.sleep(0.01)
        assert worker.cpu is not None and os.sched_getaffinity(worker.tid) == {worker.cpu}
        taken = worker.cpu
        os.sched_setaffinity(0, {taken})                   # the caller moves onto the worker's CPU
        ran_on.clear()
        started = threading.Event()

        def block(i):        # block 0 waits for the worker to take block 1 (else the caller takes it too)
            if i == 1:
                started.set()
            else:
                started.wait(10)
            ran_on.append((i, cpus.current()))
        pool.run_blocks(block, [(i,) for i in range(2)])
        assert dict(ran_on) == {0: taken, 1: worker.cpu} and worker.cpu != taken
        assert os.sched_getaffinity(worker.tid) == {worker.cpu}
    finally:
        os.sched_setaffinity(0, allowed)


def test_workers_float_when_the_pool_has_fewer_threads_than_cpus():
    """Processes sharing a machine (ranks with set_num_threads below the CPU count) do not pin:
    pinning each one's first worker to the same CPU would crowd it."""
    n = len(os.sched_getaffinity(0))
    assert cpus.for_workers(n - 1) == []
    if n >= 2 and cpus.current() is not None:
        assert sorted(cpus.for_workers(n)) == sorted(set(os.sched_getaffinity(0)) - {cpus.current()})

"""Issue 18, session 27: above ``cpu.OMP_MIN`` elements and one thread a compiled loop's rows are cut
into blocks run as one OpenMP region inside the kernel library's entry (libgomp's team, the one MKL's
GEMMs use); every element is computed by the same loop, so the floats are those of one block."""
import os

import numpy as np
import pytest

import tapelab as T
from tapelab import kernels
from tapelab.compiler import cpu
from tapelab.compiler.kernel import Kernel
from tapelab.compiler.symbolic import input_sym

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the generated loops need numba")


@pytest.fixture
def two_threads():
    T.set_num_threads(2)


def _chain_kernel(shape, second):
    """tanh(x * w + 1) and sigmoid(tanh(.) * x) with ``w`` of shape ``second`` (full, a row or a column)."""
    x0, x1 = input_sym(0, np.float32), input_sym(1, np.float32)
    t = np.tanh(x0 * x1 + 1.0)
    return Kernel("fused(mul, add, tanh, mul, sigmoid)", [("float32", shape), ("float32", second)],
                  [t, 1.0 / (1.0 + np.exp(-(t * x0)))], shape, ["mul", "add", "tanh", "mul", "sigmoid"])


def _split_happens(rows: int, size: int) -> bool:
    return cpu._parts(rows, size) > 1


@pytest.mark.parametrize("shape,second", [((64, 300), (64, 300)), ((3, 9000), (9000,)), ((700, 7), (700, 1)),
                                          ((5, 4, 1100), (1100,))])
def test_split_rows_give_the_floats_of_one_block(monkeypatch, tmp_path, two_threads, shape, second):
    """Full, row-broadcast and column-broadcast operands, rows that do not divide evenly: two threads'
    blocks equal one block bit for bit, and both are torch's values within float32 rounding."""
    import torch
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(second).astype(np.float32)
    monkeypatch.setattr(cpu, "OMP_MIN", 1 << 62)
    whole = cpu.load(_chain_kernel(shape, second), True)(a, b)
    monkeypatch.setattr(cpu, "OMP_MIN", 1024)
    rows = int(np.prod(shape[:-1]))
    if kernels.native():
        assert _split_happens(rows, a.size)
    split = cpu.load(_chain_kernel(shape, second), True)(a, b)
    for s, w in zip(split, whole):
        np.testing.assert_array_equal(s, w)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    t = torch.tanh(ta * tb + 1.0)
    np.testing.assert_allclose(split[0], t.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(split[1], torch.sigmoid(t * ta).numpy(), rtol=1e-5, atol=1e-6)


def test_split_writes_into_given_buffers(monkeypatch, tmp_path, two_threads):
    """A captured replay's ``out=`` buffers take the split loop's results, equal to a fresh call's."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu, "OMP_MIN", 1024)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((128, 96)).astype(np.float32) for _ in range(2))
    run = cpu.load(_chain_kernel((128, 96), (128, 96)), True)
    fresh = run(a, b)
    out = (np.empty((128, 96), np.float32), np.empty((128, 96), np.float32))
    got = run(a, b, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    for g, f in zip(got, fresh):
        np.testing.assert_array_equal(g, f)


def test_no_split_below_the_bound_at_one_thread_or_one_row(monkeypatch):
    """One block where a region cannot pay or cannot cut: under ``OMP_MIN`` elements, one thread, one row."""
    monkeypatch.setattr(cpu, "OMP_MIN", 1 << 16)
    T.set_num_threads(2)
    assert cpu._parts(64, (1 << 16) - 64) == 1
    assert cpu._parts(1, 1 << 20) == 1
    T.set_num_threads(1)
    assert cpu._parts(1024, 1 << 20) == 1


def test_compiled_step_with_split_kernels_equals_whole_and_torch(monkeypatch, tmp_path, two_threads):
    """A tanh-GELU MLP's one-node step at two threads: its fused GELU loops split (forward and backward)
    give the loss and gradients of the same step with them whole, bit for bit, and torch's within rounding."""
    import torch
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    w1, b1 = rng.standard_normal((128, 32)).astype(np.float32) / 6, rng.standard_normal(128).astype(np.float32)
    w2, b2 = rng.standard_normal((16, 128)).astype(np.float32) / 11, rng.standard_normal(16).astype(np.float32)

    def run(bound):
        monkeypatch.setattr(cpu, "OMP_MIN", bound)
        net = T.nn.Sequential(T.nn.Linear(32, 128), T.nn.GELU(approximate="tanh"), T.nn.Linear(128, 16))
        with T.no_grad():
            for p, v in zip(net.parameters(), (w1, b1, w2, b2)):
                p.copy_(T.tensor(v))
        step = T.compile(net)
        for _ in range(3):
            for p in net.parameters():
                p.grad = None
            y = step(T.tensor(x))
            loss = (y * y).mean()
            loss.backward()
        return [loss.detach().numpy()] + [p.grad.numpy() for p in net.parameters()]
    whole, split = run(1 << 62), run(1024)
    for s, w in zip(split, whole):
        np.testing.assert_array_equal(s, w)
    tx = torch.from_numpy(x)
    tp = [torch.from_numpy(v.copy()).requires_grad_() for v in (w1, b1, w2, b2)]
    ty = torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(tx, tp[0], tp[1]),
                                                             approximate="tanh"), tp[2], tp[3])
    tl = (ty * ty).mean()
    tl.backward()
    np.testing.assert_allclose(split[0], tl.detach().numpy(), rtol=1e-5)
    for s, p in zip(split[1:], tp):
        np.testing.assert_allclose(s, p.grad.numpy(), rtol=1e-4, atol=1e-5 * float(np.abs(p.grad.numpy()).max()))


def _sum_kernel(shape):
    """sigmoid(x * w) written and its whole sum as the 0-d last output."""
    x0, x1 = input_sym(0, np.float32), input_sym(1, np.float32)
    s = 1.0 / (1.0 + np.exp(-(x0 * x1)))
    return Kernel("fused(mul, sigmoid, sum)", [("float32", shape), ("float32", shape)], [s, s], shape,
                  ["mul", "sigmoid"], "sum")


def test_the_entry_allocating_its_outputs_equals_the_python_path(monkeypatch, tmp_path):
    """The library's ``fresh`` entry (inputs checked, outputs allocated in C) gives the floats of the
    Python path writing into given buffers, for written and summed outputs; an input it does not take
    (strided, byte-swapped, another dtype, a numpy scalar) goes the Python way, converted."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((6, 40)).astype(np.float32) for _ in range(2))
    entry = cpu._entry(_sum_kernel((6, 40)))
    if getattr(entry, "fresh", None) is None:
        pytest.skip("the kernel library was linked without numpy's headers")
    run = cpu.load(_sum_kernel((6, 40)), True)
    got = run(a, b)
    assert got[0].shape == (6, 40) and got[1].shape == () and got[0].flags.c_contiguous
    out = (np.empty((6, 40), np.float32), np.empty((), np.float32))
    want = run(a, b, out=out)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    wide = rng.standard_normal((6, 80)).astype(np.float32)
    for other in (wide[:, ::2], a.astype(">f4"), a.astype(np.float64)):
        assert cpu._entry(_sum_kernel((6, 40))).fresh((6, 40), 6, 40, other, b) is None
        res = run(other, b)
        np.testing.assert_array_equal(res[0], run(np.ascontiguousarray(other, dtype=np.float32), b)[0])
    one = cpu.load(_chain_kernel((4,), ()), True)
    x = rng.standard_normal(4).astype(np.float32)
    for w in (np.float32(0.5), np.array(0.5, np.float32)):
        t, s = one(x, w)
        np.testing.assert_allclose(t, np.tanh(x * 0.5 + 1.0), rtol=1e-6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_after_a_split_runs_its_loops_whole(monkeypatch, tmp_path, two_threads):
    """A child forked after a compiled loop ran as an OpenMP region plans it again and runs it whole (the
    parent's libgomp threads are gone: the cached split waited for them forever), with the same floats."""
    import time
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu, "OMP_MIN", 1024)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    run = cpu.load(_chain_kernel((64, 96), (96,)), True)
    want = run(a, b)
    pid = os.fork()
    if pid == 0:                                    # the child: exit 0 when equal, 3 when not
        got = run(a, b)
        os._exit(0 if all(np.array_equal(g, w) for g, w in zip(got, want)) else 3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's loop did not return")

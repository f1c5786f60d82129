"""Issue 18, session 26: the cpu kernels are vectorised once, by the compiler's own LLVM pipeline, at
512 bits where the host has AVX-512 (numba's vectoriser, which LLVM's Intel tuning holds to 256 bits,
is off while the loop compiles)."""
import importlib
import shutil
import subprocess

import numpy as np
import pytest

import tapelab as T
from tapelab.compiler import cpu
from tapelab.compiler.kernel import Kernel
from tapelab.compiler.symbolic import input_sym

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the generated loops need numba")


def _sigmoid_tanh_kernel(shape):
    x0, x1 = input_sym(0, np.float32), input_sym(1, np.float32)
    t = np.tanh(x0 * x1 + 1.0)
    return Kernel("fused(mul, add, tanh, mul, sigmoid)", [("float32", shape), ("float32", shape)],
                  [t, 1.0 / (1.0 + np.exp(-(t * x0)))], shape, ["mul", "add", "tanh", "mul", "sigmoid"])


def _host_has_avx512() -> bool:
    import llvmlite.binding as llvm
    return bool(llvm.get_host_cpu_features().get("avx512f"))


def test_every_position_of_a_row_is_the_same_scalar_chain(monkeypatch, tmp_path):
    """The vector body and the scalar remainder compute the same floats: each element of rows of 1..70
    columns equals that element computed alone (a 1-element loop never enters the vector body)."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    for cols in (1, 7, 16, 17, 31, 32, 33, 64, 70):
        a, b = (rng.standard_normal((3, cols)).astype(np.float32) * 3 for _ in range(2))
        run = cpu.load(_sigmoid_tanh_kernel((3, cols)), True)
        t, s = run(a, b)
        alone = cpu.load(_sigmoid_tanh_kernel((1, 1)), True)
        for (r, c) in np.ndindex(a.shape):
            t1, s1 = alone(a[r:r + 1, c:c + 1], b[r:r + 1, c:c + 1])
            assert t1[0, 0].tobytes() == t[r, c].tobytes() and s1[0, 0].tobytes() == s[r, c].tobytes()
        np.testing.assert_allclose(t, np.tanh(a * b + np.float32(1.0)), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(s, 1 / (1 + np.exp(-(t * a))), rtol=2e-6, atol=1e-7)


def test_numba_vectoriser_setting_is_restored(monkeypatch, tmp_path):
    """The loop compiles with numba's own vectoriser off; the setting every other numba function
    compiles under comes back, also when numba cannot compile the loop."""
    from numba.core import config
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    before = config.LOOP_VECTORIZE
    cpu.load(_sigmoid_tanh_kernel((4, 8)), True)
    assert config.LOOP_VECTORIZE == before
    with pytest.raises(Exception):
        cpu._scalar_loop("raise ValueError('no loop')\n", "tapelab_kbroken")
    assert config.LOOP_VECTORIZE == before


@pytest.mark.skipif(shutil.which("objdump") is None, reason="reads the library's instructions with objdump")
def test_loops_use_512_bit_registers_where_the_host_has_avx512(monkeypatch, tmp_path):
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    cpu.load(_sigmoid_tanh_kernel((64, 1024)), True)
    libs = [p for p in tmp_path.iterdir() if p.suffix == ".so"]
    if not libs:
        pytest.skip("no C compiler: the object file is loaded by MCJIT")
    text = subprocess.run(["objdump", "-d", str(libs[0])], capture_output=True, text=True, check=True).stdout
    assert ("zmm" in text) == _host_has_avx512()
    assert "ymm" in text or "zmm" in text          # vectorised at all (AVX2 hosts: 256 bits)


def test_compiled_chain_equals_eager():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((33, 100)).astype(np.float32) for _ in range(2)]

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    sides = []
    for f in (chain6, T.compile(chain6)):
        x, w = (T.tensor(a, requires_grad=True) for a in xs)
        for _ in range(2):
            x.grad = w.grad = None
            y = f(x, w)
            y.backward()
        sides.append((y.item(), x.grad.numpy(), w.grad.numpy()))
    np.testing.assert_allclose(sides[1][0], sides[0][0], rtol=1e-5)
    for a, b in zip(sides[1][1:], sides[0][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _torch_grads(fn, arrays, needs):
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=n) for a, n in zip(arrays, needs)]
    y = fn(*ts)
    y.backward()
    return y.item(), [t.grad.numpy() if n else None for t, n in zip(ts, needs)]


def _compiled_grads(fn, arrays, needs, calls=3):
    f = T.compile(fn)
    for _ in range(calls):                  # the first call traces; the later ones run the fused op
        ts = [T.tensor(a, requires_grad=n) for a, n in zip(arrays, needs)]
        y = f(*ts)
        y.backward()
    return y, ts


@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_one_kernel_backward_gradients_equal_torch(needs):
    """The generated one-kernel backward: each input's gradient, None for an input needing none."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(16).astype(np.float32) for _ in range(2)]

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    y, ts = _compiled_grads(chain6, arrays, needs)
    assert y.grad_fn.op.name.startswith("fused(")
    value, grads = _torch_grads(chain6, arrays, needs)
    np.testing.assert_allclose(y.item(), value, rtol=1e-6)
    for t, g, n in zip(ts, grads, needs):
        if n:
            np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-5, atol=1e-6)
        else:
            assert t.grad is None


def test_one_output_that_is_two_inputs_gradients_gives_two_tensors():
    """``(x + w).tanh().sum()``: x's and w's gradients are one kernel output; each leaf gets its own
    tensor, so an in-place update of one ``.grad`` leaves the other as it was."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(16).astype(np.float32) for _ in range(2)]

    def f(x, w):
        return (x + w).tanh().sum()
    _, (x, w) = _compiled_grads(f, arrays, (True, True))
    _, (gx, gw) = _torch_grads(f, arrays, (True, True))
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)
    before = w.grad.numpy().copy()
    x.grad.mul_(0.0)
    np.testing.assert_array_equal(w.grad.numpy(), before)


def test_a_float64_input_takes_the_dispatched_backward():
    """The generated backward tests each argument's dtype: a float64 array where the loop reads float32
    gives None (the caller then dispatches through ``apply``), so no pointer of another type reaches
    the loop; float32 arguments give torch's gradients."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(16).astype(np.float32) for _ in range(2)]

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    f = T.compile(chain6)
    for _ in range(2):
        x, w = (T.tensor(a, requires_grad=True) for a in arrays)
        y = f(x, w)
    op = y.grad_fn.op
    direct = next(iter(op._backwards.values())).direct
    g = T.ones(())
    with T.no_grad():
        fast = direct.build()(g, None, x, w)
        w64 = T.tensor(arrays[1].astype(np.float64))
        assert direct.run(g, None, x, w64) is None          # not the kernel's dtype: the caller dispatches
    _, (gx, gw) = _torch_grads(chain6, arrays, (True, True))
    np.testing.assert_allclose(fast[0].numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast[1].numpy(), gw, rtol=1e-5, atol=1e-6)


def test_generated_one_op_call_equals_torch_for_a_repeated_argument_and_one_needing_no_grad():
    """The entry's generated call reads each picked placeholder (one twice: ``x * x``), records the node
    only for what needs a gradient, and gives torch's values and gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))

    def f(x, w):
        return ((x * x + w).tanh() * x).sum()
    c = T.compile(f)
    for _ in range(3):
        x, w = T.tensor(a, requires_grad=True), T.tensor(b)
        y = c(x, w)
        y.backward()
    assert y.grad_fn.op.name.startswith("fused(")
    xt = torch.tensor(a, requires_grad=True)
    yt = f(xt, torch.tensor(b))
    yt.backward()
    np.testing.assert_allclose(y.item(), yt.item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    with T.no_grad():
        assert c(T.tensor(a), T.tensor(b)).grad_fn is None


def test_generated_one_op_call_refreshes_a_stale_view():
    """A view whose base was written after the view was made goes through the graph's forward (the
    dispatcher refreshes it), as eager does: the written value is what the call reads."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 16)).astype(np.float32)

    def f(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    c = T.compile(f)
    for _ in range(2):
        base = T.tensor(a)
        x, w = base[0], base[1]
        c(x, w)
    base[0].mul_(2.0)                   # x's base written after x was taken: a stale view
    y = c(x, w)
    at = torch.tensor(a)
    xt, wt = at[0], at[1]
    at[0].mul_(2.0)
    np.testing.assert_allclose(y.item(), f(xt, wt).item(), rtol=1e-6)


def test_the_ops_vjp_becomes_its_first_backwards_and_other_keys_take_the_general_one(monkeypatch):
    """After the first backward the fused op's vjp is the generated one of that call's key (each input's
    requires_grad and shape); the same op asked for other gradients, and a backward under
    ``create_graph=True``, take ``_vjp``; every one gives torch's gradients."""
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    c = T.compile(chain6)

    def grads(create_graph=False):
        x, w = T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)
        y = c(x, w)
        y.backward(create_graph=create_graph)
        return y, [t.grad.detach().numpy() for t in (x, w)]
    grads()
    y, got = grads()
    op = y.grad_fn.op
    assert op.vjp != op._vjp and op.vjp.__code__.co_filename.startswith("<tapelab vjp of fused(")
    _, (gx, gw) = _torch_grads(chain6, [a, b], (True, True))
    np.testing.assert_allclose(got[0], gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], gw, rtol=1e-5, atol=1e-6)
    with T.no_grad():                        # the same op, w needing no gradient: another key
        one = T.ones(())
        for needs in [(True, False), (False, True)]:
            x, w = T.tensor(a, requires_grad=needs[0]), T.tensor(b, requires_grad=needs[1])
            res = op.vjp(one, None, x, w)
            for r, want, n in zip(res, (gx, gw), needs):
                if n:
                    np.testing.assert_allclose(r.numpy(), want, rtol=1e-5, atol=1e-6)
                else:
                    assert r is None
    # backward's create_graph warning is once a process (torch's TORCH_WARN_ONCE): an earlier test may have had it
    monkeypatch.setattr(importlib.import_module("tapelab.autograd.engine"), "_CYCLE_WARNED", [])
    with pytest.warns(UserWarning, match="create_graph=True"):
        _, got = grads(create_graph=True)
    np.testing.assert_allclose(got[0], gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], gw, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_numba", [True, False])
def test_a_kernel_writes_its_outputs_and_sums_the_last(monkeypatch, tmp_path, use_numba):
    """``Kernel.reduce`` with outputs before the reduced one: those are written whole, the last is the
    loop's sum (or mean) in float64 partials, as the fused trailing sum's; fresh arrays and ``out=``
    buffers (a capture's) alike, compiled loop and numpy chain alike."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(8)
    a, b = (rng.standard_normal((5, 300)).astype(np.float32) for _ in range(2))
    t_want = np.tanh(a * b + np.float32(1.0))
    s_want = 1 / (1 + np.exp(-(t_want * a)))
    for reduce in ("sum", "mean"):
        k = _sigmoid_tanh_kernel((5, 300))
        k.outputs.append(k.outputs[1])
        k.reduce = reduce
        assert k.out_shapes == [(5, 300), (5, 300), ()]
        run = cpu.load(k, use_numba)
        out = (np.empty((5, 300), np.float32), np.empty((5, 300), np.float32), np.empty((), np.float32))
        for t, s, total in (run(a, b), run(a, b, out=out)):
            assert t.shape == s.shape == (5, 300) and total.shape == () and total.dtype == np.float32
            np.testing.assert_allclose(t, t_want, rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(s, s_want, rtol=2e-6, atol=1e-7)
            want = s.astype(np.float64).sum() / (s.size if reduce == "mean" else 1)
            np.testing.assert_allclose(total, want, rtol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_the_steps_forward_sums_in_its_kernel_and_equals_torch(reduce):
    """chain1M's form over 64k elements runs as the one-node step; its forward kernel keeps tanh's and
    sigmoid's outputs for the backward and sums sigmoid's in the same loop (no separate ``sum`` op)."""
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2)]

    def chain6(x, w):
        return getattr(((x * w + 1.0).tanh() * x).sigmoid(), reduce)()
    y, (x, w) = _compiled_grads(chain6, arrays, (True, True), calls=2)
    assert y.grad_fn.op.name == "compiled(chain6)"
    assert y.grad_fn.op.members == (f"fused(mul, add, tanh, mul, sigmoid, {reduce})",)
    value, (gx, gw) = _torch_grads(chain6, arrays, (True, True))
    np.testing.assert_allclose(y.item(), value, rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)

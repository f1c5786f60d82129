"""Issue 18, session 33: a cpu kernel's array pointers are marked noalias whatever attributes LLVM
writes beside them, so loops over many arrays (the one-node step's backward) are vectorised."""
import shutil
import subprocess

import numpy as np
import pytest

import tapelab as T
from tapelab.compiler import cpu
from tapelab.compiler.kernel import Kernel
from tapelab.compiler.symbolic import input_sym

pytestmark = pytest.mark.skipif(not cpu.numba_available(), reason="the generated loops need numba")

NEW_LLVM = ("define noundef range(i32 -1, -2) i32 @k(ptr noalias writeonly captures(none) %retptr, "
            "ptr noalias readnone captures(none) %excinfo, ptr writeonly captures(none) %arg.po0, "
            "ptr readonly captures(none) %arg.pa0, ptr readonly captures(none) %arg.pa1, i64 %arg.r0) {")
OLD_LLVM = ("define i32 @k(i8** noalias nocapture %retptr, { i8*, i32 }** noalias nocapture %excinfo, "
            "float* nocapture %arg.po0, float* nocapture readonly %arg.pa0, i64 %arg.r0) {")


@pytest.mark.parametrize("line, pointers", [(NEW_LLVM, 3), (OLD_LLVM, 0)])
def test_every_array_pointer_is_marked_noalias_once(line, pointers):
    """``captures(none)`` (parentheses) no longer hides a pointer; the numba result and exception
    pointers keep their one ``noalias``; typed pointers of older LLVMs are left as they were."""
    out = cpu._noalias_pointers(line)
    assert out.count("ptr noalias") == line.count("ptr noalias") + pointers
    assert "noalias noalias" not in out
    assert cpu._noalias_pointers(out) == out
    for arg in ("%arg.po0", "%arg.pa0"):
        if pointers:
            assert f"ptr noalias {'writeonly' if 'po' in arg else 'readonly'} captures(none) {arg}" in out


def test_the_arguments_the_loop_is_compiled_from_are_all_noalias():
    """The line numba gives for a seven-pointer loop (this host's LLVM) gets every pointer marked."""
    kernel = _sigmoid_tanh_backward((8, 32))
    fn = cpu._scalar_loop(cpu.numba_source(kernel), "tapelab_ktest_noalias")
    cres = fn.overloads[fn.signatures[0]]
    symbol = cres.fndesc.mangled_name
    define = next(ln for ln in cres.library.get_llvm_str().splitlines()
                  if ln.startswith("define") and f"@{symbol}(" in ln)
    marked = cpu._noalias_pointers(define)
    pointers = [part for part in marked.split(",") if "%arg.p" in part]
    assert len(pointers) == 7 and all("noalias" in part for part in pointers)


def _sigmoid_tanh_backward(shape):
    """chain1M's step backward as its kernel reads it: the 0-d gradient, sigmoid's output, x, tanh's
    output and w in; the two inputs' gradients out (seven pointers)."""
    g, s, x, t, w = (input_sym(i, np.float32) for i in range(5))
    gs = g * (1.0 - s) * s
    dt = gs * x * (1.0 - t * t)
    return Kernel("fused(mul, sub, mul, mul, mul, add)", [("float32", ()), *[("float32", shape)] * 4],
                  [dt * x, gs * t + dt * w], shape, ["mul", "sub", "mul", "mul", "mul", "add"])


@pytest.mark.skipif(shutil.which("objdump") is None, reason="reads the library's instructions with objdump")
def test_a_seven_pointer_loop_is_vectorised(monkeypatch, tmp_path):
    """Before, LLVM left this loop scalar (its runtime overlap checks between seven pointers were too
    many): no vector register in the library."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    cpu.load(_sigmoid_tanh_backward((64, 1024)), True)
    libs = [p for p in tmp_path.iterdir() if p.suffix == ".so"]
    if not libs:
        pytest.skip("no C compiler: the object file is loaded by MCJIT")
    text = subprocess.run(["objdump", "-d", str(libs[0])], capture_output=True, text=True, check=True).stdout
    assert "ymm" in text or "zmm" in text


def test_the_vector_body_computes_each_element_as_the_scalar_loop(monkeypatch, tmp_path):
    """The vectorised loop's floats are the scalar chain's: every element of rows of 1..70 columns
    equals the same element computed by a one-element loop (never in the vector body), and numpy's."""
    monkeypatch.setenv("TAPELAB_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(0)
    g = np.array(0.75, np.float32)
    alone = cpu.load(_sigmoid_tanh_backward((1, 1)), True)
    for cols in (1, 15, 16, 17, 33, 70):
        s, x, t, w = (rng.standard_normal((3, cols)).astype(np.float32) for _ in range(4))
        gx, gw = cpu.load(_sigmoid_tanh_backward((3, cols)), True)(g, s, x, t, w)
        for r, c in np.ndindex(s.shape):
            one = [a[r:r + 1, c:c + 1] for a in (s, x, t, w)]
            ax, aw = alone(g, *one)
            assert ax.tobytes() == gx[r:r + 1, c:c + 1].tobytes() and aw.tobytes() == gw[r:r + 1, c:c + 1].tobytes()
        gs = g * (np.float32(1.0) - s) * s
        dt = gs * x * (np.float32(1.0) - t * t)
        np.testing.assert_array_equal(gx, dt * x)
        np.testing.assert_array_equal(gw, gs * t + dt * w)


@pytest.mark.parametrize("shape", [(256, 256), (33, 100)])
def test_the_compiled_chain_step_equals_eager_and_torch(shape):
    """chain6 at the one-node step's size (64k elements, two transcendental members: a vectorised
    seven-pointer backward) and below it: the loss and both gradients equal eager's bit for bit where
    eager's are the step's floats, and torch's within float32 rounding."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]

    def chain6(x, w):
        return ((x * w + 1.0).tanh() * x).sigmoid().sum()
    sides = []
    for f in (chain6, T.compile(chain6)):
        x, w = (T.tensor(a, requires_grad=True) for a in xs)
        for _ in range(3):                  # the first call traces; the later ones run the step
            x.grad = w.grad = None
            y = f(x, w)
            y.backward()
        sides.append((y.item(), x.grad.numpy().copy(), w.grad.numpy().copy()))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in xs)
    ty = chain6(tx, tw)
    ty.backward()
    (eager, compiled) = sides
    np.testing.assert_allclose(compiled[0], ty.item(), rtol=1e-5)
    for c, e, t in zip(compiled[1:], eager[1:], (tx.grad.numpy(), tw.grad.numpy())):
        np.testing.assert_allclose(c, t, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)

"""The cpu backend: a kernel description becomes machine code in a shared library, or a numpy chain.

``numba_source`` writes the scalar DAG as one numba function over raw pointers,
``kernel(o0.., a0.., r0, r1, C)``: rows ``r0..r1`` of a ``(rows, C)`` loop nest. numba compiles it
once (``no_cpython_wrapper``: nothing but the loop), llvmlite emits its object code, and the C
compiler links it with a one-line C entry into ``tapelab_k<key>.so`` in the disk cache
(``TAPELAB_CACHE_DIR``, else ``~/.cache/tapelab/compile``; the key is the kernel's hash, the
fastmath file's and the host's). A later process loads that file with ``ctypes``: no numba import,
no numba type-system start-up (1-3 s here), so a warm compile costs the trace alone. Without a C
compiler the object file is cached instead and loaded through llvmlite's MCJIT. With more than one
thread, from ``OMP_MIN`` elements the library's entry splits the rows over one OpenMP region on libgomp's
team (``_parts``: where MKL runs on GNU OpenMP, whose spinning threads the eager loops' regions share);
elsewhere, above ``PARALLEL_MIN`` elements (``TAPELAB_COMPILE_PARALLEL_MIN``) the rows are split over the
intra-op pool (ctypes calls release the GIL) where that has measured faster than one call (``base/pool.py``).
Without numba (or with ``TAPELAB_COMPILE_NUMBA=0``)
``numpy_source`` evaluates the same DAG as numpy ufunc calls writing into a few reused buffers,
and a warning says so once.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
import weakref
from pathlib import Path

import numpy as np

from ..base import dtype as _dtype, runtime
from ..base.disk_cache import cache_dir, write_atomically
from ..base.pool import ranges, run_blocks
from .kernel import Kernel
from .symbolic import Sym

__all__ = ["numba_source", "numpy_source", "load", "numba_available", "cache_dir", "PARALLEL_MIN", "calls_libm"]

# elements from which rows are split over threads. Measured on this project's 2-core machine (shared,
# loaded): the serial gelu chain took 3.3 ms on 256x1024, a parallel one 19 ms, so threads start late.
PARALLEL_MIN = int(os.environ.get("TAPELAB_COMPILE_PARALLEL_MIN", 1 << 22))
# elements from which a loop's rows are split inside its entry, as one OpenMP region on libgomp's threads
# (``_parts``): a region forks and joins in ~2 us while MKL's GEMMs keep those threads spinning
OMP_MIN = int(os.environ.get("TAPELAB_COMPILE_OMP_MIN", 1 << 16))

# a fused sum() adds the loop's values into per-lane partial sums of the output dtype (``lane_add``
# may reassociate, so LLVM vectorises the loop: one float64 accumulator kept chain1M's kernel serial,
# 42 -> 7.7 ms on 1M float32 here), restarted every REDUCE_BLOCK elements and added in float64: each
# lane sums at most REDUCE_BLOCK / (vector width) values, so the float32 error stays that of a short sum.
REDUCE_BLOCK = 4096
_LANE_ADD = """@njit(fastmath={'reassoc'}, error_model='numpy')
def lane_add(a, b):
    return a + b
"""

# what each numpy ufunc computes on scalars inside a numba loop; float32 gets fastmath.py's
_INFIX = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "less": "<", "less_equal": "<=",
          "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!=", "logical_and": "and",
          "logical_or": "or", "floor_divide": "//", "remainder": "%"}
_F32 = {"exp": "exp32", "log": "log32", "tanh": "tanh32", "erf": "erf32", "expm1": "expm1_sleef_u10"}
_CALL = {"maximum": "maximum", "minimum": "minimum", "erf": "math.erf", "erfc": "math.erfc",
         "absolute": "abs", "logical_not": "not "}


# ufuncs a numba loop computes with one scalar libm call per element (llvmlite has no SVML), where numpy's
# own loops are vectorised: fused, one such member made the kernel slower than the eager ops (1M float32,
# ``x*1.5`` then the member then a sum, thread time: sin 6.6 ms against eager's 1.3, tan 11.9 / 1.4,
# asinh 19.2 / 1.7, log1p 10.2 / 1.4, pow 6.1 / 1.8). float32 exp, log, tanh and erf have fastmath.py's
# vectorisable forms, and expm1 Sleef's (eager's own floats; ``x*1.5-3`` then expm1 then a sum, 1M: 1.68 ->
# 1.11 ms; log1p's, which needs Sleef's logf beside it above 1e38, made that kernel slower: 1.02 -> 1.42);
# a power by 2, 3 or 0.5 is written as multiplies or sqrt
_LIBM = frozenset({"sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
                   "arcsinh", "arccosh", "arctanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                   "logaddexp", "logaddexp2", "erf", "erfc", "cbrt", "hypot", "power", "float_power"})


def calls_libm(s: Sym) -> bool:
    """Whether the numba loop of ``s`` (a kernel's value) calls libm once per element somewhere: such a
    value is left to numpy's vectorised ufuncs (``fused._fusible``), so compiled code is never the slower.
    A bfloat16 value's call is not counted: ml_dtypes' loops call float32 libm per element too."""
    seen, stack = set(), [s]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.kind in _LIBM and x.dtype != BF16 and not (x.dtype == np.float32 and x.kind in _F32) and not (
                x.kind == "power" and x.args[1].kind == "const" and x.args[1].value in (2, 3, 0.5)):
            return True
        stack.extend(x.args)
    return False


def numba_available() -> bool:
    if os.environ.get("TAPELAB_COMPILE_NUMBA", "1") == "0":
        return False
    return importlib.util.find_spec("numba") is not None


def _const(s: Sym) -> str:
    v = s.value
    if s.dtype == np.bool_:
        return repr(bool(v))
    if s.dtype.kind == "f" or s.dtype == BF16:   # inf and nan by their numpy names (repr's 'inf' is none)
        name = "float32" if s.dtype == BF16 else s.dtype.name        # a bfloat16 value is its float32
        return f"np.{name}({float(v)!r})".replace("inf", "np.inf").replace("nan", "np.nan")
    return f"np.{s.dtype.name}({int(v)})"


# ops whose float32 result on bfloat16 values is a bfloat16 value (no rounding needed)
_EXACT_ON_BF16 = frozenset({"where", "negative", "absolute", "maximum", "minimum"})


def _scalar(s: Sym, ref) -> str:
    """One statement's right-hand side in numba's scalar Python; a bfloat16 value is computed as its
    float32 op rounded to bfloat16 (``rounds_as_eager`` says where that is eager's value)."""
    if s.dtype != BF16:
        return _scalar32(s, ref)
    if s.kind == "cast":
        return f"round_bf16(np.float32({ref(s.args[0])}))"
    if s.kind == "power":           # libm's powf, as ml_dtypes' (no multiplies: powf(x, 3) rounds once)
        return f"round_bf16(np.power({ref(s.args[0])}, np.float32({ref(s.args[1])})))"
    as32 = Sym(s.kind, s.args, np.float32, s.value)
    return (_scalar32(as32, ref, libm=True) if s.kind in _EXACT_ON_BF16
            else f"round_bf16({_scalar32(as32, ref, libm=True)})")


def _scalar32(s: Sym, ref, libm: bool = False) -> str:
    """``libm``: exp, log, tanh and erf as libm's float32 functions (ml_dtypes' bfloat16 ufuncs call them),
    not fastmath's forms."""
    a = [ref(x) for x in s.args]
    k, dt = s.kind, s.dtype
    if k == "cast":
        return f"({a[0]} != 0)" if dt == np.bool_ else f"np.{dt.name}({a[0]})"
    if k == "where":
        return f"({a[1]} if {a[0]} else {a[2]})"
    if k == "negative":
        return f"(-{a[0]})"
    if k in _INFIX:
        return f"({a[0]} {_INFIX[k]} {a[1]})"
    if k == "power":
        e = s.args[1]
        if e.kind == "const" and e.value in (2, 3):
            return "(" + " * ".join([a[0]] * int(e.value)) + ")"
        if e.kind == "const" and e.value == 0.5:
            return f"np.sqrt({a[0]})"
        return f"({a[0]} ** {a[1]})"
    if dt == np.float32 and k in _F32 and not libm:
        return f"{_F32[k]}({a[0]})"
    if k in _CALL:
        fn = _CALL[k]
        return f"({fn}{a[0]})" if fn.endswith(" ") else f"{fn}({', '.join(a)})"
    return f"np.{k}({', '.join(a)})"


def _load(item: str, dtype) -> str:
    return f"load_bf16({item})" if np.dtype(dtype) == BF16 else item


def _body(kernel: Kernel, indent: str) -> list:
    order, outs = kernel.lines()
    names = {id(s): f"t{i}" for i, s in enumerate(order)}

    def ref(s: Sym) -> str:
        if s.kind == "input":
            return f"v{s.value}"
        if s.kind == "const":
            return _const(s)
        return names[id(s)]
    at = {"full": "i", "expand": "i", "row": "cu", "col": "ru", "scalar": "0"}
    lines = [f"{indent}v{i} = {_load(f'a{i}[{at[lay]}]', dt)}"
             for i, ((dt, _), lay) in enumerate(zip(kernel.inputs, kernel.layouts()))]
    lines += [f"{indent}{names[id(s)]} = {_scalar(s, ref)}" for s in order]
    written = outs[:-1] if kernel.reduce else outs
    lines += [f"{indent}o{j}[i] = {'store_bf16' if o.dtype == BF16 else ''}({ref(o)})" for j, o in enumerate(written)]
    if kernel.reduce:
        lines += [f"{indent}part = lane_add(part, np.{_part_dtype(kernel)}({ref(outs[-1])}))"]
    return lines


@functools.cache
def _inlined_hash() -> str:
    """The kernels inline fastmath's and bfloat16's functions: a new version of either file is a new key."""
    kernels = Path(__file__).resolve().parents[1] / "kernels"
    return hashlib.sha256(b"".join((kernels / f).read_bytes() for f in ("fastmath.py", "bfloat16.py"))).hexdigest()[:12]


# the dtypes a generated loop reads and writes: the module text imports numba's type of each. A bfloat16
# array is read and written as its uint16 bit patterns (``kernels/bfloat16.py``); float16 has no loop
# type here, so the fusion pass (fused.py) leaves its groups to the eager ops
BF16 = np.dtype(_dtype.BFLOAT16_NP)
LOOP_DTYPES = frozenset(map(np.dtype, ("bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64",
                                       BF16)))


def _numba_type(dt) -> str:
    name = np.dtype(dt).name
    return {"bool": "boolean", "bfloat16": "uint16"}.get(name, name)


def rounds_as_eager(s: Sym) -> bool:
    """Whether a loop computes every bfloat16 value of ``s`` as eager does: ml_dtypes' bfloat16 ufuncs are
    the float32 op (libm's float32 function for exp, tanh, ...) rounded to bfloat16, which the loop repeats.
    Not: a cast to bfloat16 from a dtype other than float32 (eager rounds float64 twice, through float32),
    or a bfloat16 result of a float32 exp/log/tanh/erf (gelu's, sigmoid's opmath: eager's float32 loops,
    the loop's fastmath forms, can round to another bfloat16: gelu's backward in a Transformer layer did)."""
    seen, stack, half, fast = set(), [s], False, False
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.dtype == BF16 and x.kind == "cast" and x.args[0].dtype not in (np.float32, BF16):
            return False
        half |= x.dtype == BF16
        fast |= x.dtype == np.float32 and x.kind in _F32
        stack.extend(x.args)
    return not (half and fast)


def numba_source(kernel: Kernel) -> str:
    """The module text of ``kernel``: one numba loop over rows ``r0..r1`` of raw pointers.

    Indices are unsigned: with a signed one numba tests for negative (wrap-around) indices, and that
    branch kept LLVM from vectorising the loop (a two-output backward kernel: 25 ms on 1M elements,
    unsigned 5 ms)."""
    outs = [f"po{j}" for j in range(len(kernel.outputs))]
    ins = [f"pa{i}" for i in range(len(kernel.inputs))]
    types_ = [_numba_type(o.dtype) for o in kernel.outputs] + [_numba_type(dt) for dt, _ in kernel.inputs]
    sig = f"void({', '.join(f'CPointer({t})' for t in types_)}, int64, int64, int64)"
    length = {"full": "r1 * C", "expand": "r1 * C", "row": "C", "col": "r1", "scalar": "1"}
    views = [f"    o{j} = carray(po{j}, ({'1' if sh == () else 'r1 * C'},))" for j, sh in enumerate(kernel.out_shapes)]
    views += [f"    a{i} = carray(pa{i}, ({length[lay]},))" for i, lay in enumerate(kernel.layouts())]
    head = [f"# {kernel.name}: generated by tapelab.compiler from the ops' declarations; key {kernel.digest}",
            "import math", "import numpy as np", "from numba import carray, njit",
            "from numba.types import CPointer, void, " + ", ".join(sorted(map(_numba_type, LOOP_DTYPES))),
            "from tapelab.kernels.fastmath import exp32, log32, tanh32, erf32, maximum, minimum, expm1_sleef_u10",
            *(["from tapelab.kernels.bfloat16 import load_bf16, round_bf16, store_bf16"] * _touches_bf16(kernel)),
            "", ""]
    if kernel.reduce:
        head += [_LANE_ADD, ""]
    top = [f"@njit({sig}, error_model='numpy', no_cpython_wrapper=True, no_cfunc_wrapper=True)",
           f"def kernel({', '.join(outs + ins)}, r0, r1, C):", *views]
    if not kernel.reduce:
        return "\n".join([*head, *top, "    for r in range(r0, r1):", "        base = r * C",
                          "        ru = np.uint64(r)", "        for c in range(C):",
                          "            i = np.uint64(base + c)", "            cu = np.uint64(c)",
                          *_body(kernel, " " * 12), ""])
    return "\n".join([*head, *top, "    acc = np.float64(0.0)",
                      "    for r in range(r0, r1):", "        base = r * C", "        ru = np.uint64(r)",
                      f"        for c0 in range(0, C, {REDUCE_BLOCK}):",
                      f"            part = np.{_part_dtype(kernel)}(0.0)",
                      f"            for c in range(c0, min(c0 + {REDUCE_BLOCK}, C)):",
                      "                i = np.uint64(base + c)", "                cu = np.uint64(c)",
                      *_body(kernel, " " * 16), "            acc += np.float64(part)",
                      f"    o{len(outs) - 1}[0] = np.{kernel.outputs[-1].dtype.name}({_total(kernel)})", ""])


def _touches_bf16(kernel: Kernel) -> bool:
    return any(np.dtype(dt) == BF16 for dt, _ in kernel.inputs) or any(
        s.dtype == BF16 for s in kernel.lines()[0] + list(kernel.outputs))


def _total(kernel: Kernel) -> str:
    """The reduced value from the float64 accumulator ``acc`` over rows ``r0..r1`` of ``C``: a mean
    divides once at the end (an empty loop's 0/0 is NaN, as ``mean()`` of nothing)."""
    return "acc" if kernel.reduce == "sum" else "acc / np.float64((r1 - r0) * C)"


def _part_dtype(kernel: Kernel) -> str:
    """The partial sums' dtype: float64 for float64, else float32 (a half-precision sum would round)."""
    return "float64" if kernel.outputs[-1].dtype == np.float64 else "float32"


def numpy_source(kernel: Kernel) -> str:
    """The same DAG as numpy calls: each full-shape result written ``out=`` into a buffer that
    is reused once its value is dead (the fallback without numba)."""
    order, outs = kernel.lines()
    shapes = {}
    names = {id(s): f"t{i}" for i, s in enumerate(order)}
    last = {}
    for i, s in enumerate(order):
        for x in s.args:
            last[id(x)] = i
    for o in outs:
        last[id(o)] = len(order)

    def ref(s: Sym) -> str:
        if s.kind == "input":
            return f"a{s.value}"
        if s.kind == "const":
            return _const(s)
        return names[id(s)]

    def shape(s: Sym) -> tuple:
        if s.kind == "input":
            return tuple(kernel.inputs[s.value][1])
        if s.kind == "const":
            return ()
        return shapes[id(s)]
    full = tuple(kernel.shape)
    lines, free = [], {}
    for i, s in enumerate(order):
        shapes[id(s)] = np.broadcast_shapes(*(shape(a) for a in s.args)) if s.args else ()
        a = [ref(x) for x in s.args]
        if s.kind == "cast":
            call = f"{a[0]}.astype(np.{s.dtype.name})"
        elif s.kind == "where":
            call = f"np.where({', '.join(a)})"
        elif s.kind in ("erf", "erfc"):
            call = f"special.{s.kind}({a[0]})"
        else:
            call = None
        key = (s.dtype.name,)
        pool = free.get(key, [])
        if call is None and shapes[id(s)] == full and pool:
            buf = pool.pop()
            lines.append(f"    {names[id(s)]} = np.{s.kind}({', '.join(a)}, out={buf})")
        elif call is None:
            lines.append(f"    {names[id(s)]} = np.{s.kind}({', '.join(a)})")
        else:
            lines.append(f"    {names[id(s)]} = {call}")
        for x in s.args:                      # values dead after this statement free their buffer
            if id(x) in names and last.get(id(x)) == i and shapes[id(x)] == full and x.dtype.name == s.dtype.name \
                    and x.kind not in ("cast", "where", "erf", "erfc"):
                free.setdefault((x.dtype.name,), []).append(names[id(x)])
    rets = [f"np.broadcast_to({ref(o)}, full)" if shape(o) != full or o.kind in ("input", "const") else ref(o)
            for o in outs]
    if kernel.reduce:                     # the whole loop's sum, accumulated in float64 as the loop's
        rets[-1] = (f"np.asarray(np.broadcast_to({ref(outs[-1])}, full).{kernel.reduce}(dtype=np.float64), "
                    f"np.{outs[-1].dtype.name})")
    ret = ", ".join(rets)
    args = ", ".join(f"a{i}" for i in range(len(kernel.inputs)))
    sizes = f"    full = np.broadcast_shapes({''.join(f'a{i}.shape, ' for i in range(len(kernel.inputs)))})"
    return "\n".join([f"# {kernel.name}: numpy fallback, key {kernel.digest}", "import numpy as np",
                      "from scipy import special", "", f"def run({args}):", sizes, *lines, f"    return ({ret},)", ""])


_USER_DTYPES = 256   # NPY_USERDEF: a registered dtype's (bfloat16's) number is the process's, not the library's
_WARNED = []
_ENTRY = "tapelab_kernel"
_DATA_OFFSET = object.__basicsize__        # an ndarray's data pointer follows the object header


@functools.cache
def _data_offset_holds() -> bool:
    """Whether ``_DATA_OFFSET`` is where this numpy keeps the data pointer (else ``.ctypes.data``)."""
    a = np.arange(3.0)
    return ctypes.c_void_p.from_address(id(a) + _DATA_OFFSET).value == a.ctypes.data


@functools.cache
def _host_key() -> str:
    """What machine code depends on besides the kernel: the cpu (its flags), numba, numpy (the extension
    entry is built against its headers), fastmath and this file (the generator: a cached library built
    by an older one is not reused)."""
    try:
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    except OSError:
        flags = ""
    version = Path(importlib.util.find_spec("numba").origin).with_name("_version.py")
    generator = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()   # a new code generator, new files
    text = repr((platform.machine(), platform.processor(), flags, sys.implementation.cache_tag, _DATA_OFFSET, version.read_text() if version.exists() else "", np.__version__,
                 _inlined_hash(), generator))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _scalar_loop(source: str, name: str):
    """numba's compiled ``kernel`` of ``source`` with numba's own loop vectoriser off: the loop is
    vectorised once, by ``_object_code``'s pipeline at the width it asks for (a loop numba vectorised
    already is not vectorised again, so it kept numba's 256-bit choice)."""
    from numba.core import config
    scope = {"__name__": name}
    before, config.LOOP_VECTORIZE = config.LOOP_VECTORIZE, False
    try:
        exec(compile(source, f"<{name}>", "exec"), scope)
    finally:
        config.LOOP_VECTORIZE = before
    return scope["kernel"]


def _vector_width(features: dict) -> str:
    """The widest vector the loop vectoriser may use: 512 bits where the cpu has AVX-512. LLVM's
    tuning for Intel's AVX-512 cores prefers 256 (an old clock penalty), so numba's loops used ymm
    registers; on this project's Xeon (Sapphire Rapids, reported as rocketlake) zmm loops run chain1M's
    transcendental forward 1.51-1.58 -> 1.27-1.35 ms and its memory-bound backward 0.98 -> 0.89-0.91
    ms (the same floats: each lane computes the same scalar chain)."""
    return "512" if features.get("avx512f") else "256"


def _noalias_pointers(define: str) -> str:
    """The loop's ``define`` line with every array pointer (``%arg.p..``) marked ``noalias``: the outputs
    are fresh arrays and the inputs are only read, so LLVM vectorises the loop without runtime overlap
    checks between them. Past a few pointers it gives up on those checks and leaves the loop scalar:
    chain1M's backward (five inputs, two outputs) ran so, 1.42 ms against 0.70 vectorised, after LLVM's
    ``captures(none)`` attribute (parentheses) kept an older pattern from marking any pointer."""
    return re.sub(r"ptr (?!noalias)([^%,]*?)%arg\.p", r"ptr noalias \1%arg.p", define)


def _object_code(kernel: Kernel) -> tuple:
    """``(object file bytes, symbol)``: numba compiles the loop, llvmlite vectorises it and emits
    position-independent code."""
    import llvmlite.binding as llvm
    from numba.core.errors import NumbaError
    try:
        fn = _scalar_loop(numba_source(kernel), f"tapelab_k{kernel.digest}")
    except NumbaError as e:             # a ufunc numba has no scalar loop for
        raise NoStandaloneLoop(f"tapelab.compile: numba cannot compile the loop: {str(e).splitlines()[0]}") from e
    cres = fn.overloads[fn.signatures[0]]
    symbol = cres.fndesc.mangled_name
    features = llvm.get_host_cpu_features()
    width = f' "prefer-vector-width"="{_vector_width(features)}" {{'
    text = "\n".join(re.sub(r"\{$", width, _noalias_pointers(line))
                     if line.startswith("define") and f"@{symbol}(" in line else line
                     for line in cres.library.get_llvm_str().splitlines())
    module = llvm.parse_assembly(text)
    for f in module.functions:          # numba's unused runtime helpers would need its runtime
        if not f.is_declaration and f.name != symbol:
            f.linkage = "internal"
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=features.flatten(), reloc="pic",
        codemodel="default", opt=3)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(module, pb)          # vectorises again; drops the now-internal dead helpers
    needs = sorted(f.name for f in module.functions if f.is_declaration and f.name.startswith(("numba_", "NRT_")))
    if needs:
        raise NoStandaloneLoop(f"tapelab.compile: the kernel calls numba's runtime ({', '.join(needs)})")
    return tm.emit_object(module), symbol


class NoStandaloneLoop(RuntimeError):
    """numba compiles no standalone loop for the kernel: a ufunc it has no scalar form for, or a call
    into numba's helper library (``np.nextafter``'s ``numba_nextafterf``), which the kernel's shared
    library does not link. The group runs as the numpy chain instead."""


def _fresh_entry(in_nums: tuple, out_nums: tuple, reduced: bool) -> str:
    """C text of the extension module's ``fresh(shape, rows, cols, *inputs)``: the loop on arrays it
    checks and outputs it allocates, returned as a tuple, or None when an input is not an aligned,
    C-contiguous ndarray of the kernel's dtype in native byte order (the caller's Python path then
    converts it). The checks and ``np.empty`` calls were ~0.3 us of Python per 16-element call, two
    calls a compiled chain16 step. ``in_nums``/``out_nums``: numpy's type numbers; ``reduced``: the
    last output is 0-d."""
    n_in, n_out = len(in_nums), len(out_nums)
    checks = "".join(f"  if (!PyArray_CheckExact(a[{3 + i}]) || PyArray_TYPE((PyArrayObject *)a[{3 + i}]) != {num} "
                     f"|| !PyArray_ISCARRAY_RO((PyArrayObject *)a[{3 + i}]) "
                     f"|| !PyArray_ISNOTSWAPPED((PyArrayObject *)a[{3 + i}])) Py_RETURN_NONE;\n"
                     for i, num in enumerate(in_nums))
    allocs = "".join(f"  PyObject *o{j} = PyArray_EMPTY({'0' if reduced and j == n_out - 1 else 'nd'}, dims, {num}, 0);\n"
                     f"  if (!o{j}) goto fail;\n  PyTuple_SET_ITEM(res, {j}, o{j});\n"
                     for j, num in enumerate(out_nums))
    datas = ", ".join([f"PyArray_DATA((PyArrayObject *)o{j})" for j in range(n_out)]
                      + [f"PyArray_DATA((PyArrayObject *)a[{3 + i}])" for i in range(n_in)])
    return ("static PyObject *fresh(PyObject *self, PyObject *const *a, Py_ssize_t n) {\n"
            "  npy_intp dims[NPY_MAXDIMS];\n  Py_ssize_t nd = PyTuple_GET_SIZE(a[0]);\n"
            "  if (nd > NPY_MAXDIMS) Py_RETURN_NONE;\n" + checks +
            "  for (Py_ssize_t d = 0; d < nd; d++) dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(a[0], d));\n"
            "  int64_t r1 = PyLong_AsLongLong(a[1]), C = PyLong_AsLongLong(a[2]);\n"
            f"  PyObject *res = PyTuple_New({n_out});\n  if (!res) return NULL;\n" + allocs +
            f"  void *ret = 0, *exc = 0;\n  Py_BEGIN_ALLOW_THREADS k(&ret, &exc, {datas}, 0, r1, C); Py_END_ALLOW_THREADS\n"
            "  return res;\nfail:\n  Py_DECREF(res);\n  return NULL;\n}\n")


def _link(obj: bytes, symbol: str, n_ptr: int, target: Path, fresh: tuple | None = None) -> bool:
    """Link the object with its C entries into ``target``: ``tapelab_kernel(ptr.., r0, r1, C)``,
    ``tapelab_kernel_obj(array.., r0, r1, C)``, which takes the ndarray objects themselves and reads
    each one's data pointer (``PyArrayObject``'s first field after the object header): ctypes passes
    an object as is, where ``a.ctypes.data`` costs microseconds per array (most of a 16-element call);
    and, where Python's headers are installed, the same as a CPython extension module's ``run``
    (``METH_FASTCALL``, the GIL released around the loop): ~0.1 us a call against ctypes' ~1 us,
    which was a third of a compiled 16-element kernel call. That ``run`` takes an optional last
    argument, ``parts``: above 1 the rows ``r0..r1`` are cut into that many blocks run as one OpenMP
    region (``_parts``); the module says ``openmp = 1`` where it was built with OpenMP. Where numpy's
    headers are found too, ``fresh`` (``_fresh_entry``; ``fresh`` here: its type numbers and whether
    the last output is 0-d) allocates the outputs itself."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    ptrs = ", ".join(f"void *p{k}" for k in range(n_ptr))
    names = ", ".join(f"p{k}" for k in range(n_ptr))
    datas = ", ".join(f"*(void **)((char *)p{k} + {_DATA_OFFSET})" for k in range(n_ptr))
    fast = ", ".join(f"*(void **)((char *)a[{k}] + {_DATA_OFFSET})" for k in range(n_ptr))
    r0, r1, cols = (f"PyLong_AsLongLong(a[{n_ptr + k}])" for k in range(3))
    block = ", ".join(f"d{k}" for k in range(n_ptr))
    entry = (f"#include <stdint.h>\nextern int32_t k(void **, void **, {', '.join(['void *'] * n_ptr)}, int64_t, "
             f"int64_t, int64_t) __asm__(\"{symbol}\");\nvoid {_ENTRY}({ptrs}, int64_t r0, int64_t r1, int64_t C) "
             f"{{ void *ret = 0, *exc = 0; k(&ret, &exc, {names}, r0, r1, C); }}\n"
             f"void {_ENTRY}_obj({ptrs}, int64_t r0, int64_t r1, int64_t C) "
             f"{{ void *ret = 0, *exc = 0; k(&ret, &exc, {datas}, r0, r1, C); }}\n"
             "#ifdef TAPELAB_PY\n#include <Python.h>\n"
             "#ifdef TAPELAB_NP\n#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION\n#include <numpy/arrayobject.h>\n#endif\n"
             "static PyObject *run(PyObject *self, PyObject *const *a, Py_ssize_t n) {\n"
             f"  void *ret = 0, *exc = 0; int64_t r0 = {r0}, r1 = {r1}, C = {cols};\n"
             f"  int64_t parts = n > {n_ptr + 3} ? PyLong_AsLongLong(a[{n_ptr + 3}]) : 1;\n"
             "  if (parts < 2) {\n"
             f"    Py_BEGIN_ALLOW_THREADS k(&ret, &exc, {fast}, r0, r1, C); Py_END_ALLOW_THREADS\n"
             "    Py_RETURN_NONE;\n  }\n"
             + "".join(f"  void *d{k} = *(void **)((char *)a[{k}] + {_DATA_OFFSET});\n" for k in range(n_ptr)) +
             "  Py_BEGIN_ALLOW_THREADS\n"
             "  #pragma omp parallel for num_threads(parts) schedule(static, 1)\n"
             "  for (int64_t t = 0; t < parts; t++) {\n"
             "    void *ret = 0, *exc = 0;\n"
             f"    k(&ret, &exc, {block}, r0 + (r1 - r0) * t / parts, r0 + (r1 - r0) * (t + 1) / parts, C);\n"
             "  }\n  Py_END_ALLOW_THREADS\n"
             "  Py_RETURN_NONE;\n}\n"
             "#ifdef TAPELAB_NP\n" + (_fresh_entry(*fresh) if fresh else "") + "#endif\n"
             "static PyMethodDef methods[] = {{\"run\", (PyCFunction)(void (*)(void))run, METH_FASTCALL, 0},\n"
             + ("#ifdef TAPELAB_NP\n  {\"fresh\", (PyCFunction)(void (*)(void))fresh, METH_FASTCALL, 0},\n#endif\n"
                if fresh else "") + "  {0}};\n"
             f"static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, \"{target.stem}\", 0, -1, methods}};\n"
             f"PyMODINIT_FUNC PyInit_{target.stem}(void) {{\n"
             "#ifdef TAPELAB_NP\n  import_array();\n#endif\n  PyObject *m = PyModule_Create(&module);\n"
             "#ifdef _OPENMP\n  if (m) PyModule_AddIntConstant(m, \"openmp\", 1);\n#endif\n"
             "  return m;\n}\n#endif\n")
    include = sysconfig.get_paths().get("include")
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        (Path(tmp) / "k.o").write_bytes(obj)
        (Path(tmp) / "entry.c").write_text(entry)
        # the extension module with numpy's API and OpenMP (libgomp, as MKL's GNU layer), else without them,
        # else the plain entries
        py = [f"-I{include}", "-DTAPELAB_PY"]
        numpy_api = [f"-I{np.get_include()}", "-DTAPELAB_NP"]
        tries = ([*py, *numpy_api, "-fopenmp"], [*py, *numpy_api], [*py, "-fopenmp"], py, []) if include else ([],)
        for extra in tries:
            done = subprocess.run([cc, "-shared", "-fPIC", "-O2", *extra, "-o", "k.so", "entry.c", "k.o"], cwd=tmp,
                                  capture_output=True)
            if not done.returncode:
                break
        if done.returncode:
            return False
        os.replace(Path(tmp) / "k.so", target)
    return True


def _module_run(so: Path):
    """The library's extension-module entry (``run``, its ``openmp`` flag set on the ctypes entry's
    caller), or None where it was linked without one."""
    try:
        spec = importlib.util.spec_from_file_location(so.stem, so)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


def _mcjit(obj: bytes, symbol: str, n_ptr: int):
    """The object loaded in process by llvmlite (no C compiler), called through ctypes."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), llvm.Target.from_default_triple()
                                        .create_target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                             *[ctypes.c_void_p] * n_ptr, *[ctypes.c_int64] * 3)
    fn = proto(engine.get_function_address(symbol))
    ret, exc = ctypes.c_void_p(), ctypes.c_void_p()

    def call(*args):
        fn(ctypes.byref(ret), ctypes.byref(exc), *args)
    call.engine = engine                  # the machine code lives as long as the engine
    return call


def _entry(kernel: Kernel):
    """The kernel's ``entry(ptr.., r0, r1, C)``: from the disk cache, else compiled and stored."""
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    n_ptr = len(kernel.inputs) + len(kernel.outputs)
    stem = d / f"tapelab_k{kernel.digest}_{_host_key()}"
    so, obj_path = stem.with_suffix(".so"), stem.with_suffix(".o")
    if not so.exists() and obj_path.exists():
        obj, symbol = obj_path.read_bytes(), obj_path.with_suffix(".sym").read_text()
        return _mcjit(obj, symbol, n_ptr)
    if not so.exists():
        obj, symbol = _object_code(kernel)
        nums = [np.dtype(dt).num for dt, _ in kernel.inputs] + [o.dtype.num for o in kernel.outputs]
        fresh = None if max(nums) >= _USER_DTYPES else (tuple(nums[:len(kernel.inputs)]),
                                                        tuple(nums[len(kernel.inputs):]), bool(kernel.reduce))
        if not _link(obj, symbol, n_ptr, so, fresh):
            obj_path.with_suffix(".sym").write_text(symbol)
            write_atomically(obj_path, obj)
            return _mcjit(obj, symbol, n_ptr)
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, _ENTRY)
    fn.argtypes = [ctypes.c_void_p] * n_ptr + [ctypes.c_int64] * 3
    fn.restype = None
    fn.openmp = False
    if _data_offset_holds():
        module = _module_run(so)
        fn.objects = None if module is None else module.run
        fn.openmp = bool(getattr(module, "openmp", 0))
        fn.fresh = getattr(module, "fresh", None)
        if fn.objects is None:
            fn.objects = getattr(lib, _ENTRY + "_obj")
            fn.objects.argtypes = [ctypes.py_object] * n_ptr + [ctypes.c_int64] * 3
            fn.objects.restype = None
    return fn


_SPLIT_RUNNERS: weakref.WeakSet = weakref.WeakSet()     # ``load``'s runners holding a plan split as a region


def _plan_again_after_fork() -> None:
    """In a child forked after a loop ran as an OpenMP region, every runner plans its shapes again: the
    parent's libgomp threads are gone, and a region would wait for them forever (``regions.parts`` is 1
    in the child, so the new plans run whole)."""
    for run in list(_SPLIT_RUNNERS):
        run.plans.clear()


os.register_at_fork(after_in_child=_plan_again_after_fork)


def load(kernel: Kernel, use_numba: bool | None = None):
    """A callable ``run(*arrays, out=None) -> tuple of arrays`` for ``kernel`` on numpy arrays.
    ``out``: one C-contiguous array per output (the kernel's dtypes and shape), overlapping no input,
    that the loop writes into instead of fresh ones: capture's replay passes its recorded buffers, which
    it checked once (``graphs/_program.py``); the loop writes through raw pointers and checks nothing."""
    if use_numba is None:
        use_numba = numba_available()
    if not use_numba:
        if not _WARNED and not numba_available():      # options={"kernels": "numpy"} asked for this
            _WARNED.append(True)
            warnings.warn("tapelab.compile: numba is not available (pip install tapelab[jit]); fused groups "
                          "run as numpy out= chains instead of compiled loops", RuntimeWarning, stacklevel=3)
        return _numpy_run(kernel)
    try:
        entry = _entry(kernel)
    except (NoStandaloneLoop, OSError):    # OSError: a cached library an older build linked unresolved
        return _numpy_run(kernel)
    layouts = kernel.layouts()
    in_dtypes = [np.dtype(dt) for dt, _ in kernel.inputs]
    out_dtypes = [o.dtype for o in kernel.outputs]
    plans: dict = {}

    def plan(shapes: tuple) -> tuple:
        """``(shape, rows, cols, row ranges)`` for these input shapes (a dynamic size is an argument)."""
        shape = tuple(np.broadcast_shapes(*shapes)) if shapes else tuple(kernel.shape)
        if kernel.layouts(list(shapes), shape) != layouts:
            raise RuntimeError(f"tapelab.compile: {kernel.name} was built for inputs broadcasting as {layouts}, "
                               f"called with shapes {list(shapes)}")
        size = int(np.prod(shape, dtype=np.int64))
        cols = shape[-1] if shape else 1
        rows = size // cols if cols else 0
        parts = _parts(rows, size) if openmp and not kernel.reduce else 1
        threads = runtime.intra_op_threads() if size >= PARALLEL_MIN and not kernel.reduce and parts == 1 else 1
        found = plans[shapes] = (shape, rows, cols, ranges(rows, threads), parts)
        if parts > 1:
            _SPLIT_RUNNERS.add(run)
        return found

    objects = getattr(entry, "objects", None)
    openmp = getattr(entry, "openmp", False)
    reduced = bool(kernel.reduce)         # the last output is the loop's 0-d sum
    timed_as = kernel.digest            # the pool's key: the same loop is timed once, whichever compile made it

    expands = "expand" in layouts
    contiguous = np.ascontiguousarray

    def run(*arrays, out=None):
        shapes = tuple([a.shape for a in arrays])     # a list, not a generator: a 16-element call is
        shape, rows, cols, bounds, parts = plans.get(shapes) or plan(shapes)    # mostly this Python
        if expands:
            keep = [contiguous(a if lay != "expand" else np.broadcast_to(a, shape), dtype=dt)
                    for a, lay, dt in zip(arrays, layouts, in_dtypes)]
        else:
            keep = [contiguous(a, dtype=dt) for a, dt in zip(arrays, in_dtypes)]
        outs = out if out is not None else [np.empty(() if reduced and j == len(out_dtypes) - 1 else shape, dt)
                                            for j, dt in enumerate(out_dtypes)]
        if parts > 1:
            objects(*outs, *keep, 0, rows, cols, parts)
            return tuple(outs)
        if len(bounds) == 1 and objects is not None:
            objects(*outs, *keep, 0, rows, cols)     # the arrays stay alive in outs and keep meanwhile
            return tuple(outs)
        ptrs = [o.ctypes.data for o in outs] + [a.ctypes.data for a in keep]
        if len(bounds) == 1:
            entry(*ptrs, 0, rows, cols)
        else:
            run_blocks(entry, [(*ptrs, lo, hi, cols) for lo, hi in bounds], (timed_as, len(bounds)), rows * cols,
                       (*ptrs, 0, rows, cols))
        return tuple(outs)
    run.plans = plans
    if expands or objects is None:
        return run
    return _fixed_arity(run, plan, objects, getattr(entry, "fresh", None), in_dtypes, out_dtypes, reduced)


def _parts(rows: int, size: int) -> int:
    """Blocks of rows one call runs at once inside the library's entry, as one OpenMP region: the
    intra-op threads from ``OMP_MIN`` elements where parallel parts run as regions on libgomp's team
    (``kernels.native()``: MKL on GNU OpenMP, so the GEMMs before and after keep the team spinning and a
    region starts in microseconds; ``regions.parts`` is 1 in a child forked after the team started), else
    1. The rows are cut, each element computed by the same loop: the same floats as one block."""
    from .. import kernels
    threads = runtime.intra_op_threads()
    if size < OMP_MIN or threads < 2 or rows < 2 or not kernels.native():
        return 1
    return min(rows, kernels.loops("regions").parts(threads))


def _numpy_run(kernel: Kernel):
    """``load``'s callable from the numpy ``out=`` chain (``numpy_source``)."""
    scope: dict = {}
    exec(compile(numpy_source(kernel), f"<tapelab fused {kernel.digest}>", "exec"), scope)
    chain = scope["run"]

    def run_numpy(*arrays, out=None):
        res = chain(*arrays)
        if out is None:
            return res
        for o, r in zip(out, res):
            np.copyto(o, r)
        return out
    return run_numpy


def _fixed_arity(run, plan, objects, fresh, in_dtypes: list, out_dtypes: list, reduced: bool):
    """``run`` for a kernel whose loop runs whole (one block) on arrays it reads in place: straight-line
    Python of the kernel's own arity (no lists built around the arrays, no star-arguments), the plan by
    the input shapes read once; a shape split into blocks over threads (the pool's or an OpenMP region's)
    goes to ``run``. A 16-element call was ~2 us of Python around a ~0.2 us loop. ``fresh``: the
    library's entry that checks the inputs and allocates the outputs itself (``_fresh_entry``), tried
    first for a call without ``out``; None where the library has none."""
    ins = [f"a{i}" for i in range(len(in_dtypes))]
    outs = [f"o{j}" for j in range(len(out_dtypes))]
    scope = {"run": run, "plan": plan, "objects": objects, "fresh": fresh, "contiguous": np.ascontiguousarray,
             "empty": np.empty, "single": {},
             **{f"d{i}": dt for i, dt in enumerate(in_dtypes)}, **{f"od{j}": dt for j, dt in enumerate(out_dtypes)}}
    args = ", ".join(ins)
    src = "\n".join([
        f"def fixed({args}, out=None):",
        f"    key = ({''.join(f'{a}.shape, ' for a in ins)})",
        "    p = single.get(key)",
        "    if p is None:",
        "        shape, rows, cols, bounds, parts = plan(key)",
        "        p = single[key] = (rows, cols, shape) if len(bounds) == 1 and parts == 1 else False",
        "    if p is False:",
        f"        return run({args}, out=out)",
        "    rows, cols, oshape = p",
        *([ "    if out is None:", f"        res = fresh(oshape, rows, cols, {args})",
            "        if res is not None:", "            return res"] if fresh is not None else []),
        *[f"    k{i} = contiguous({a}, dtype=d{i})" for i, a in enumerate(ins)],
        "    if out is None:",
        *[f"        {o} = empty({'()' if reduced and j == len(outs) - 1 else 'oshape'}, od{j})" for j, o in enumerate(outs)],
        "    else:",
        f"        {', '.join(outs)}, = out",
        f"    objects({', '.join(outs)}, {', '.join(f'k{i}' for i in range(len(ins)))}, 0, rows, cols)",
        f"    return ({''.join(f'{o}, ' for o in outs)})",
    ]) + "\n"
    exec(compile(src, "<tapelab fused run>", "exec"), scope)
    fixed = scope["fixed"]
    fixed.source = src
    return fixed

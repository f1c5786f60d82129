"""Fused eager loops for the hot row-wise and elementwise ops: softmax, log_softmax, the causal
attention weights, layer_norm, gelu, relu, cross-entropy, the Adam step, 2-D max-pool's backward,
the Winograd input and output transforms, train-mode batch norm, the LSTM/GRU cell of a whole-layer
step and the scatter-add of index backwards.

numpy runs softmax as six passes over memory (max, subtract, exp, sum, divide, and a
temporary for each), gelu as eight; a numba loop reads its input once and writes its result
once, and float32 ``exp``/``erf``/``tanh`` come from ``fastmath.py`` so the loop vectorises.
The ops keep one declaration each: an op's forward (or its backward op's forward) asks
``use(arrays)`` and takes the loop when it says yes, its numpy formula otherwise. The loops are
optional (numba is the ``[jit]`` extra) and ``TAPELAB_EAGER_KERNELS=0`` turns them off, so both
paths stay tested. Compiled code is cached on disk (``cache=True``); the first call in a fresh
checkout compiles (seconds), later processes load it. With more than one thread
(``set_num_threads``), ``parallel`` cuts a large array's rows into one block per thread (the
loops release the GIL), as PyTorch splits its elementwise and row loops, and runs the blocks at
once where that has measured faster for the loop and size: on the pool's workers, or with
``TAPELAB_NATIVE_POOL=1`` as one OpenMP region on numba's threads (``regions.py``).
"""
from __future__ import annotations

import numpy as np

from ..base import runtime
from ..base.pool import ranges, run_blocks
from .gemm import GEMM_PARALLEL_MIN, gemm, gemm_add, gemm_here, gemms, prepack
from .switch import enabled, loops, native, set_enabled, set_native, use

__all__ = ["enabled", "set_enabled", "native", "set_native", "use", "threads", "parallel", "loops", "gemm", "gemm_add", "gemms", "gemm_here", "prepack",
           "GEMM_PARALLEL_MIN", "parallel_ranges", "split_count", "entry", "small_entry"]

_F32 = np.dtype(np.float32)


def entry(fn, *args):
    """The compiled code of the numba loop ``fn`` for arguments of ``args``' numba types, called without
    numba's dispatcher: its type matching is ~0.1 us of a small loop's ~0.3 (two such loops a step of
    chain16 forward, two backward). ``fn(*args)`` runs once here (it compiles or loads the code). The
    caller passes only arguments of those types: an array of another dtype, rank, order or alignment would
    be read as the compiled one (the callers test each, and keep ``fn`` itself for the rest)."""
    fn(*args)
    return fn.overloads[tuple(fn.typeof_pyval(a) for a in args)].entry_point


class SmallEntry:
    """``run(*args)``: the pointwise loop ``name``'s compiled code (``entry``) for the types of its first
    call's arguments, made (and run) at that call. ``run`` is a plain attribute, so a small call pays one
    attribute load for it (xn.relu() on 16 floats 2.3 -> 1.7 us without ``parallel``'s frame and numba's
    dispatcher); the caller passes only arguments of those types (flat aligned float32 arrays, ints)."""

    __slots__ = ("run", "name")

    def __init__(self, name: str):
        self.name, self.run = name, self._made

    @property
    def loop(self):
        """The numba loop itself (its dispatcher: any argument types)."""
        return getattr(loops("pointwise"), self.name)

    def _made(self, *args) -> None:
        self.run = entry(self.loop, *args)


_SMALL_ENTRIES: dict = {}


def small_entry(name: str) -> SmallEntry:
    """The one ``SmallEntry`` of the pointwise loop ``name`` (each op that calls it holds it)."""
    found = _SMALL_ENTRIES.get(name)
    if found is None:
        found = _SMALL_ENTRIES[name] = SmallEntry(name)
    return found


def threads() -> int:
    """Threads a parallel loop may use: ``set_num_threads``'s count, else the BLAS thread count
    from the environment (as ``bench/run.py --threads`` sets it), else the usable CPUs."""
    return runtime.intra_op_threads()


# ATen's grain (``at::internal::GRAIN_SIZE``): up to this many elements a loop runs on the calling thread
# alone, untimed, and a split makes as many blocks as ``parallel_for`` makes tasks (``ceil(size / grain)``,
# capped by the threads); above it the pool times it split and whole per size class
# and keeps the faster (engine/base/pool.py): a hand-off costs 20-80 us on the project machine, a relu
# 0.1 ns and a softmax 3-6 ns per element. At exactly the grain (a 64 x 512 layer's bias fill) a split took
# 6 us against 2.2 whole, and the GEMM after it 5-10 us more: MLP b64 at two threads 1.05x whole (session 29).
PARALLEL_MIN = 1 << 15

# From this many elements (or units of ``parallel_ranges``' size) a loop whose blocks run as one OpenMP
# region splits untimed, as ATen's ``parallel_for`` does above its grain: in a step the timed choice
# measured a region's split against whatever the other CPU had just done (libgomp's threads sleep
# ~150 us after their last region, and a vCPU halted for a millisecond is slow to come back), and it
# flipped between the ways: GPT d128 11.0-11.1 ms a step with these always split against 11.1-11.9,
# ResNet 8.7-9.3 against 11.5-12.1 (two threads, issue 17, session 27).
REGION_SPLIT_MIN = 1 << 17


def split_count(size: int) -> int:
    """How many threads a loop over ``size`` elements splits into, as ATen's ``parallel_for`` counts its
    tasks: one up to ``PARALLEL_MIN``, else ``ceil(size / PARALLEL_MIN)`` capped by ``threads()``."""
    return 1 if size <= PARALLEL_MIN else min(threads(), -(-size // PARALLEL_MIN))


def parallel(fn, n_split: int, *args, align: int = 1) -> None:
    """``fn(*args)``, with the first ``n_split`` arrays (same leading dim) cut into ``split_count``
    blocks of rows, each block a multiple of ``align`` rows (a loop that reads ``r % align``
    sees the same index in its block); arrays up to ``PARALLEL_MIN`` elements, or one thread, run
    in one call. A numba loop's blocks run as one OpenMP region where ``switch.native()``
    (``regions.rows``), else on the pool's workers; the two splits are timed apart (key
    ``(fn, n, "region")``), as they cost differently."""
    size = args[0].size
    if size <= PARALLEL_MIN:   # the small call first: no thread count read
        fn(*args)
        return
    rows = args[0].shape[0]
    key = (rows, align, size, runtime.intra_op_threads(), PARALLEL_MIN)
    cut = _CUTS.get(key) or _cut(key, _row_cuts(rows, align, size))
    if cut[1] is None:
        fn(*args)
        return
    cuts, starts = cut
    region = _region(fn, len(cuts) - 1, len(args), n_split)
    run_blocks(fn, lambda: _row_blocks(args, n_split, cuts), _key(fn, len(cuts) - 1, region, size),
               size, args, region and (lambda: region(starts, *args)))


def _row_cuts(rows: int, align: int, size: int) -> list | None:
    """``parallel``'s row cuts for ``split_count(size)`` blocks of ``align`` rows, or None: one call."""
    n = split_count(size)
    if n < 2 or rows < 2 * align:
        return None
    blocks = -(-rows // align)
    n = min(n, blocks)
    return [min(rows, blocks * i // n * align) for i in range(n + 1)]


def _range_cuts(count: int, size: int) -> list | None:
    """``parallel_ranges``' range edges for ``split_count(size)`` ranges, or None: one call."""
    n = split_count(size)
    return None if n < 2 or count < 2 else [lo for lo, _ in ranges(count, n)] + [count]


# A split's cuts by what decides them (rows or items, align, size, threads, grain): ``(cuts, int64 array of
# them)``, the array the region's ``cuts`` argument (read only), or ``(None, None)``: one call. Made once,
# as a region's Python was ~4 us a call against its ~2 us fork and join (issue 17, session 30).
_CUTS: dict = {}
_CUTS_MAX = 4096


def _cut(key: tuple, cuts: list | None) -> tuple:
    """``cuts`` with its array, kept for ``key`` (the table cleared when full: a model's shapes are few)."""
    if len(_CUTS) >= _CUTS_MAX:
        _CUTS.clear()
    cut = _CUTS[key] = (None, None) if cuts is None else (cuts, np.array(cuts, np.int64))
    return cut


def _row_blocks(args: tuple, n_split: int, cuts: list) -> list:
    rest = args[n_split:]
    return [tuple(a[cuts[i]:cuts[i + 1]] for a in args[:n_split]) + rest for i in range(len(cuts) - 1)]


def parallel_ranges(fn, count: int, size: int, args_for, shared: bool = False) -> None:
    """``fn(*args_for(first, lo, hi))`` for one range ``lo:hi`` of ``count`` items (images,
    columns) per thread, the ranges covering ``0:count``; one call over all of them when the work
    (``size`` elements) is at most ``PARALLEL_MIN`` or there is one thread (``split_count``). For loops that take
    their range as arguments and need per-thread scratch (``first`` says the block may reuse the
    caller's). ``shared``: ``args_for``'s tuple ends in ``lo, hi`` and is otherwise the same for
    every range (no scratch of its own), so a numba loop's ranges may run as one OpenMP region
    (``regions.spans``)."""
    whole = args_for(True, 0, count)
    key = (count, None, size, runtime.intra_op_threads(), PARALLEL_MIN)
    cut = _CUTS.get(key) or _cut(key, _range_cuts(count, size))
    if cut[1] is None:
        fn(*whole)
        return
    cuts, starts = cut
    region = _region(fn, len(cuts) - 1, len(whole) - 2, None) if shared else None
    run_blocks(fn, lambda: [args_for(i == 0, cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)],
               _key(fn, len(cuts) - 1, region, size), size, whole,
               region and (lambda: region(starts, *whole[:-2])))


def _key(fn, n: int, region, size: int):
    """The pool's timing key for ``fn``'s ``n`` blocks: ``(fn, n)`` on the pool's workers, ``(fn, n,
    "region")`` as a region, None (split, untimed) for a region from ``REGION_SPLIT_MIN``."""
    if region is None:
        return fn, n
    return None if size >= REGION_SPLIT_MIN else (fn, n, "region")


def _region(fn, n: int, n_args: int, n_split: int | None):
    """The OpenMP region of ``fn``'s ``n`` blocks (``n_split`` arrays cut by rows, or None: a
    range ``lo, hi`` as its last two arguments), or None: the pool's workers then run them."""
    if not native():
        return None
    regions = loops("regions")
    if regions.parts(n) < 2:
        return None
    return regions.rows(fn, n_split, n_args) if n_split is not None else regions.spans(fn, n_args)

"""GEMMs inside a CUDA stream capture: cuBLASLt on the capturing stream with a preallocated workspace.

cupy refuses every cuBLAS call while a stream captures, which split a captured training step
into one graph per run of ops between matmuls. cuBLASLt's ``cublasLtMatmul`` itself is legal
in a capture when it allocates nothing: it gets a workspace allocated before the capture
(``WORKSPACE_BYTES``, the 32 MiB cuBLAS recommends for Hopper) and the algorithm comes from
``cublasLtMatmulAlgoGetHeuristic`` (host-only, no stream work). nvmath-python's thin bindings
(``nvmath.bindings.cublasLt``, the ``[cuda]`` extra) make those calls; its high-level ``Matmul``
is not used because it allocates its own workspace and synchronizes while planning.

``plan`` turns a row-major ``a @ b`` into one column-major cuBLASLt problem (D^T = B^T A^T),
reading transposed operands (``x @ W.T``) in place and batch dimensions as one batch stride
(0 for a broadcast operand); what no single stride describes is first copied contiguous (a
copy kernel, legal in a capture). The same ``Problem`` runs on a GPU (``_Lt``) and on the
simulated device (``simulated``, numpy over exactly the memory cuBLASLt would read), so the
layout logic is tested on CPU. ``GemmRoute`` hands the captured steps a namespace whose
``matmul``/``dot`` go this way; every other function is the device's own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Problem", "plan", "GemmRoute", "gemm_route", "simulated", "WORKSPACE_BYTES"]

WORKSPACE_BYTES = 32 << 20
_TYPES = ("float16", "float32", "float64", "complex64", "complex128")


@dataclass(frozen=True)
class Problem:
    """One ``cublasLtMatmul`` in column-major terms: D (n x m) = op(A) (n x k) op(B) (k x m), ``batch`` times.

    A is ``b``'s memory, B is ``a``'s (row-major ``a @ b`` is column-major ``b^T a^T``); each is a
    ``rows x cols`` column-major matrix with leading dimension ``ld`` and ``stride`` elements
    between batch entries, transposed when ``trans``. D is contiguous."""
    dtype: str
    m: int
    n: int
    k: int
    batch: int
    a: tuple          # (rows, cols, ld, stride, trans) of b's memory
    b: tuple          # the same for a's memory


def _matrix(shape, strides, itemsize):
    """("row"|"col", ld) for a matrix whose elements one leading dimension reaches, else None."""
    r, c = shape[-2], shape[-1]
    s0, s1 = strides[-2] // itemsize, strides[-1] // itemsize
    if strides[-2] % itemsize or strides[-1] % itemsize:
        return None
    s1 = 1 if c == 1 else s1
    s0 = max(c, 1) if r == 1 else s0
    if s1 == 1 and s0 >= max(c, 1):
        return "row", s0
    if s0 == 1 and s1 >= max(r, 1):
        return "col", s1
    return None


def _batch_stride(shape, strides, itemsize, batch_shape):
    """The one element stride that walks the operand's batch entries in ``batch_shape`` order, or None."""
    nb = len(batch_shape)
    dims = (1,) * (nb - (len(shape) - 2)) + tuple(shape[:-2])
    steps = (0,) * (nb - (len(shape) - 2)) + tuple(strides[:-2])
    stride = None
    for j in range(nb):
        if batch_shape[j] == 1:
            continue
        after = math.prod(batch_shape[j + 1:])
        st = 0 if dims[j] == 1 else steps[j]
        if st % itemsize:
            return None
        want = st // itemsize
        if stride is None:
            if want % after:
                return None
            stride = want // after
        if want != stride * after:
            return None
    return 0 if stride is None else stride


def plan(a_shape, a_strides, b_shape, b_strides, dtype) -> tuple:
    """``(problem, copy_a, copy_b)`` for ``a @ b`` (at least 2-d, inner sizes equal, none zero):
    ``copy_x`` says the operand must first be made contiguous (over the broadcast batch)."""
    dt = np.dtype(dtype)
    isz = dt.itemsize
    batch_shape = tuple(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    batch = math.prod(batch_shape)
    la, sa = _matrix(a_shape, a_strides, isz), _batch_stride(a_shape, a_strides, isz, batch_shape)
    lb, sb = _matrix(b_shape, b_strides, isz), _batch_stride(b_shape, b_strides, isz, batch_shape)
    copy_a, copy_b = la is None or sa is None, lb is None or sb is None
    if copy_a:
        la, sa = ("row", k), m * k
    if copy_b:
        lb, sb = ("row", n), k * n
    # A (from b, logically k x n): row-major b is column-major n x k; column-major b is k x n, transposed
    opa = (n, k, lb[1], sb, False) if lb[0] == "row" else (k, n, lb[1], sb, True)
    # B (from a, logically m x k): row-major a is column-major k x m; column-major a is m x k, transposed
    opb = (k, m, la[1], sa, False) if la[0] == "row" else (m, k, la[1], sa, True)
    return Problem(dt.name, m, n, k, batch, opa, opb), copy_a, copy_b


def simulated(p: Problem, d, mem_a, mem_b) -> None:
    """cuBLASLt's computation of ``p`` in numpy, reading only the memory cuBLASLt would read
    (arrays on the host: the simulated device's). An operand described past the end of its
    buffer raises, as the GPU would fault."""
    def view(x, rows, cols, ld, stride, trans, name):
        isz = x.itemsize
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        start = x.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        extent = (p.batch - 1) * stride + (cols - 1) * ld + rows
        if start // isz + extent > root.nbytes // isz:
            raise RuntimeError(f"cuBLASLt (simulated): matrix {name} ({rows}x{cols}, ld {ld}, batch stride "
                               f"{stride}) reads past the end of its buffer")
        v = np.lib.stride_tricks.as_strided(x, (p.batch, cols, rows), (stride * isz, ld * isz, isz),
                                            writeable=False).transpose(0, 2, 1)
        return v.transpose(0, 2, 1) if trans else v
    a = view(mem_a, *p.a, "A")
    b = view(mem_b, *p.b, "B")
    isz = d.itemsize
    out = np.lib.stride_tricks.as_strided(d, (p.batch, p.m, p.n), (p.m * p.n * isz, p.n * isz, isz)).transpose(0, 2, 1)
    if p.dtype == "float16":       # cuBLASLt computes half products in float32 (CUBLAS_COMPUTE_32F)
        out[...] = np.matmul(a.astype(np.float32), b.astype(np.float32))
    else:
        np.matmul(a, b, out=out)


class GemmRoute:
    """``matmul``/``dot`` for steps run inside a stream capture, each product one ``launch(problem,
    d, mem_a, mem_b)`` on the capturing stream; ``name`` says which library that is."""

    def __init__(self, xp, launch, name: str):
        self.xp, self._launch, self.name = xp, launch, name
        self.calls = 0                  # products launched through this route
        self.namespace = _CaptureNamespace(xp, self)

    def matmul(self, a, b, out=None, **kw):
        xp = self.xp
        if (kw or a.dtype != b.dtype or a.dtype.name not in _TYPES or a.ndim == 0 or b.ndim == 0
                or a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]):
            return xp.matmul(a, b, out=out, **kw)     # integers (a cupy kernel), or cupy's own error
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        batch_shape = tuple(np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]))
        full = batch_shape + (a2.shape[-2], b2.shape[-1])
        shape = full[:-2] + full[-2:-1] * (a.ndim > 1) + full[-1:] * (b.ndim > 1)
        if 0 in full or a2.shape[-1] == 0:
            res = xp.zeros(full, a.dtype)           # a fill kernel: no product to compute
        else:
            p, copy_a, copy_b = plan(a2.shape, a2.strides, b2.shape, b2.strides, a.dtype)
            if copy_a:
                a2 = xp.ascontiguousarray(xp.broadcast_to(a2, batch_shape + a2.shape[-2:]))
            if copy_b:
                b2 = xp.ascontiguousarray(xp.broadcast_to(b2, batch_shape + b2.shape[-2:]))
            direct = (out is not None and a.ndim > 1 and b.ndim > 1 and out.dtype == a.dtype
                      and tuple(out.shape) == full and out.flags.c_contiguous)
            res = out if direct else xp.empty(full, a.dtype)
            self._launch(p, res, b2, a2)
            self.calls += 1
            if direct:
                return out
        res = res.reshape(shape)
        if out is None:
            return res
        xp.copyto(out, res)
        return out

    def dot(self, a, b, out=None):
        if a.ndim <= 2 and b.ndim <= 2 and (a.ndim and b.ndim):
            return self.matmul(a, b, out=out)
        return self.xp.dot(a, b, out=out)

    def substitute(self, name: str, value):
        """What a captured step's namespace entry becomes inside the capture: the device's array
        module becomes ``namespace``, its ``matmul`` (the op's ``out=`` form) this route's."""
        if value is self.xp:
            return self.namespace
        if name.startswith("u") and getattr(value, "__name__", None) == "matmul":
            return self.matmul
        return value


class _CaptureNamespace:
    """The device's array module, with ``matmul`` and ``dot`` taken by a ``GemmRoute``."""

    def __init__(self, xp, route: GemmRoute):
        self._xp, self.matmul, self.dot = xp, route.matmul, route.dot

    def __getattr__(self, name):
        return getattr(self._xp, name)


def gemm_route(cp, device) -> tuple:
    """``(route, why)``: the capture-legal GEMM route for ``device`` (cupy, or the simulated device's
    namespace), or ``(None, reason)`` where there is none (the capture is then split at GEMMs)."""
    from ..base.simarray import _SimNamespace, launch_kernel
    if isinstance(cp, _SimNamespace):
        def sim(p, d, mem_a, mem_b):
            launch_kernel(lambda d_, a_, b_: simulated(p, d_, a_, b_), "cublasLtMatmul", d, mem_a, mem_b)
        return GemmRoute(cp, sim, "cuBLASLt (simulated)"), ""
    try:
        lt = _Lt(cp, device)
    except Exception as e:  # noqa: BLE001 - no nvmath-python, or no cuBLASLt it can load
        return None, f"no cuBLASLt through nvmath-python ({type(e).__name__}: {e}); pip install tapelab[cuda]"
    return GemmRoute(cp, lt, "cuBLASLt (nvmath-python)"), ""


class _Lt:
    """cuBLASLt through ``nvmath.bindings.cublasLt``: one handle and one workspace, allocated
    before the capture; descriptors and the heuristic's algorithm cached per problem and alignment."""

    _HANDLES: dict = {}                 # device index -> cublasLt handle (one per process)

    def __init__(self, cp, device):
        import nvmath
        from nvmath.bindings import cublas, cublasLt
        self.cp, self.lt, self.ops = cp, cublasLt, cublas.Operation
        data, compute = nvmath.CudaDataType, cublas.ComputeType
        self.types = {"float16": (data.CUDA_R_16F, compute.COMPUTE_32F, np.float32, data.CUDA_R_32F),
                      "float32": (data.CUDA_R_32F, compute.COMPUTE_32F, np.float32, data.CUDA_R_32F),
                      "float64": (data.CUDA_R_64F, compute.COMPUTE_64F, np.float64, data.CUDA_R_64F),
                      "complex64": (data.CUDA_C_32F, compute.COMPUTE_32F, np.complex64, data.CUDA_C_32F),
                      "complex128": (data.CUDA_C_64F, compute.COMPUTE_64F, np.complex128, data.CUDA_C_64F)}
        with cp.cuda.Device(device.index):
            h = self._HANDLES.get(device.index)
            if h is None:
                h = self._HANDLES[device.index] = cublasLt.create()
            self.handle = h
            self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        self.plans: dict = {}

    def _set(self, setter, dtype_of, obj, attr, value) -> None:
        buf = np.asarray(value, dtype=dtype_of(attr))
        setter(obj, attr, buf.ctypes.data, buf.itemsize)

    def _layout(self, dtype, rows, cols, ld, stride, batch):
        lt = self.lt
        layout = lt.matrix_layout_create(dtype, rows, cols, ld)
        if batch > 1:
            A = lt.MatrixLayoutAttribute
            self._set(lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype, layout, A.BATCH_COUNT, batch)
            self._set(lt.matrix_layout_set_attribute, lt.get_matrix_layout_attribute_dtype, layout,
                      A.STRIDED_BATCH_OFFSET, stride)
        return layout

    def _plan(self, p: Problem, align: tuple):
        lt = self.lt
        data, compute, scale_np, scale = self.types[p.dtype]
        desc = lt.matmul_desc_create(compute, scale)
        D = lt.MatmulDescAttribute
        for attr, trans in ((D.TRANSA, p.a[4]), (D.TRANSB, p.b[4])):
            self._set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, desc, attr,
                      self.ops.T if trans else self.ops.N)
        la = self._layout(data, *p.a[:4], p.batch)
        lb = self._layout(data, *p.b[:4], p.batch)
        ld = self._layout(data, p.n, p.m, p.n, p.m * p.n, p.batch)
        pref = lt.matmul_preference_create()
        P = lt.MatmulPreferenceAttribute
        setp = (lt.matmul_preference_set_attribute, lt.get_matmul_preference_attribute_dtype, pref)
        self._set(*setp, P.MAX_WORKSPACE_BYTES, WORKSPACE_BYTES)
        for attr, a in zip((P.MIN_ALIGNMENT_A_BYTES, P.MIN_ALIGNMENT_B_BYTES, P.MIN_ALIGNMENT_C_BYTES,
                            P.MIN_ALIGNMENT_D_BYTES), align):
            self._set(*setp, attr, a)
        result = lt.MatmulHeuristicResult(1)
        count = np.zeros(1, np.int32)
        lt.matmul_algo_get_heuristic(self.handle, desc, la, lb, ld, ld, pref, 1, result.ptr, count.ctypes.data)
        lt.matmul_preference_destroy(pref)
        if count[0] == 0:
            raise RuntimeError(f"cuBLASLt has no algorithm for {p} within a {WORKSPACE_BYTES}-byte workspace")
        alpha, beta = np.ones(1, scale_np), np.zeros(1, scale_np)
        return desc, la, lb, ld, result, alpha, beta        # result.ptr: its algo is the struct's first field

    def __call__(self, p: Problem, d, mem_a, mem_b) -> None:
        ptrs = (mem_a.data.ptr, mem_b.data.ptr, d.data.ptr)
        align = tuple(min(256, ptr & -ptr) if ptr else 256 for ptr in ptrs)
        key = (p, align)
        plan_ = self.plans.get(key)
        if plan_ is None:
            plan_ = self.plans[key] = self._plan(p, align + align[2:])
        desc, la, lb, ld, result, alpha, beta = plan_
        stream = self.cp.cuda.get_current_stream().ptr
        self.lt.matmul(self.handle, desc, alpha.ctypes.data, ptrs[0], la, ptrs[1], lb, beta.ctypes.data,
                       ptrs[2], ld, ptrs[2], ld, result.ptr, self.workspace.data.ptr, WORKSPACE_BYTES, stream)

"""The op registry: each primitive is declared once, and every mode reads that declaration.

An ``Op`` holds the forward (``fwd(xp, *arrays, **params)`` on backend arrays), the
vector-Jacobian product (``vjp(g, out, *inputs, **params)`` written with Tensor ops, so
it is itself differentiable), and the metadata the dispatcher, tracer, capture,
profiler and ONNX exporter need.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["Op", "defop", "REGISTRY", "kernel_refusal"]

REGISTRY: dict[str, "Op"] = {}

# Which input values a vjp reads, so only those are saved and version-checked:
NONE, ALL, OTHERS = "none", "all", "others"  # OTHERS: input j only when another input needs grad
KINDS = ("compute", "factory", "random")


class Op:
    """A primitive operation.

    Args:
        name: the public name (``"add"``), also the tape and graph label.
        fwd: ``fwd(xp, *arrays, **params) -> array`` (or a tuple whose first item is the
            differentiable output and the rest are non-differentiable extras).
        vjp: ``vjp(g, out, *inputs, **params) -> tuple`` with one gradient (or None) per
            input; ``None`` marks the op non-differentiable. Outputs that are not floating
            point never require grad, so integer/bool results need no vjp.
        array_vjp: ``array_vjp(g, out, inputs, params) -> tuple | None``, the same gradients on numpy
            arrays (``g`` and ``out`` arrays, ``inputs`` the node's tensors and numbers), for the
            backward walk while nobody watches and no graph is made (``autograd/engine.py``'s
            ``_run_arrays``): a dispatch costs ~0.6 us over its numpy call, and a short chain's
            backward is mostly dispatch. Its arrays must be those ``vjp`` would wrap (values, dtype,
            layout; a fresh array where ``vjp`` returns a new tensor, ``g`` itself where it passes
            ``g`` on), so it takes only the cases it can promise that for and returns None for the
            rest, which then take ``vjp``.
        promote: dtype rule applied by the dispatcher: ``None`` (none), ``"common"``
            (PyTorch promotion across tensor and scalar inputs), ``"float"`` (common, then
            integers become the default float).
        saves: which input values the vjp reads (``"none"``, ``"all"``, ``"others"``).
        save_output: whether the vjp reads ``out``.
        recomputes_output: the ``out`` the vjp reads is the forward of the saved inputs, which PyTorch's
            formula reads instead (its node keeps no output): once the output is changed in place
            (``MaxPool2d`` then ``ReLU(inplace=True)``), the backward recomputes it where it would raise.
        elementwise: a pure elementwise map (fusion groups these).
        n_extra: number of non-differentiable extra outputs (e.g. indices of ``max``).
        n_kept: for a pass-through op (its forward returns an input another op computed, so that
            its vjp reads what that forward kept: attention's weights, batch norm's statistics),
            the number of trailing inputs that are such kept values, not the caller's arguments:
            ``next_functions`` leaves them out, as PyTorch's node has no edge for them.
        is_view: the forward returns a view of input 0, which then shares its version counter.
        kind: ``"compute"`` (tensors in, tensors out), ``"factory"`` (makes a tensor from
            params alone: ``full``, ``arange``) or ``"random"`` (draws from a generator).
        ufunc: the name of the array namespace's ufunc that computes the same forward, so
            in-place variants outside autograd (and capture's replay) can write straight
            into the target with ``out=`` instead of through a temporary.
        out_form: the name of an array-namespace function equal to the forward that also
            takes ``out=`` (``"matmul"``), for capture's replay; ``ufunc`` implies it.
        fwd_out: ``fwd_out(xp, *arrays, out=(array, ...), **params)``, the forward writing each of
            its outputs into the given arrays (a compiled kernel's), for capture's replay of an op
            no array-namespace function equals: the replay writes into its buffers, no copy. The
            caller passes C-contiguous arrays of the outputs' shapes and dtypes, overlapping no input
            (for an ``elementwise`` op, an input may be the output array itself: an in-place update).
        data_dependent: the output's shape depends on input values (``nonzero``): a short
            description for the error a captured graph gives.
        onnx: the ONNX lowering ``tapelab.onnx`` exports the op with: an ONNX op name when the op
            is that one node on the same inputs (``"Exp"``), else ``onnx(g, *inputs, **params)``
            writing nodes through the exporter's emitter ``g`` (``engine/onnx/_emitter.py``).
        cost: ``cost(input_shapes, output_shape) -> int``, the FLOP count the profiler reports
            (both optional).
        aliases: the other public names (``tapelab.<name>`` functions, Tensor methods) whose
            call is this op: PyTorch's aliases (``arcsin``) and front ends that check or
            canonicalise their arguments, then apply this op (``mm``, ``transpose``). The
            declaration tests check every public name against these.
        inplace: the Tensor methods that are this op in place (``exp_``, ``arcsin_``):
            ``install_methods`` generates each as ``apply_(op, self, *args, **params)``.
        operator: the name in Python's ``operator`` module whose use on Tensors is this op
            (``"truediv"`` for ``/``), so graph passes can map ``operator.*`` targets to it.
        complex: the vjp follows PyTorch's convention for complex tensors (the conjugate
            Wirtinger gradient: local derivatives conjugated). Default: true when the vjp reads
            no values (``saves="none"`` without ``save_output``: a map of ``g`` alone, as sums
            and views are). A complex result of any other op refuses to record a node.
        complex_error: PyTorch refuses complex inputs of this op: ``(exception type, message)``, the
            message formatted with ``dtype`` (PyTorch's name, ``ComplexFloat``), ``device`` (its type)
            and the op's params (``kernel_refusal(name)`` is the common form). The dispatcher raises
            it when an operand is complex, so the forward never computes numpy's complex ordering.
        contiguous: the result is C-contiguous whatever the inputs' layout, as ATen allocates a
            reduction's or a scan's result (numpy's follows the input's memory order: a sum over a
            permuted tensor came out strided, and ``.view()`` of it failed); ``fwd`` is wrapped so.
        backward_name: the name of the op's backward node (``grad_fn.name()``, a tensor's printed
            ``grad_fn=<...>``, the tape and debugger labels) where PyTorch's differs from the name
            derived from ``name`` (``cross_entropy``'s is ``NllLossBackward0``); or
            ``backward_name(input_ndims, params) -> str`` where PyTorch's depends on the call (``linear`` on a
            matrix is ``AddmmBackward0``), ``input_ndims`` holding each input's ndim (None for a
            non-tensor, and for every input once the node's saved inputs are freed).
        aten: PyTorch's operator call for this op, as its profiler names the events (``torch.profiler``
            keys, tables, traces: ``profiler/names.py``), where it is not ``aten::<name>``: the call
            tree ``"linear(t, addmm)"`` (names without ``::`` are ``aten::`` ones; the nested calls in
            parentheses; ``*`` marks the call that carries the FLOPs), or ``aten(input_shapes, params)
            -> str`` where it depends on the call (``matmul`` of two matrices is ``matmul(mm)``);
            ``params`` are the op's for factories, empty for other ops (their events carry none).
    """

    __slots__ = ("name", "fwd", "vjp", "promote", "saves", "save_output", "elementwise",
                 "n_extra", "n_kept", "is_view", "kind", "onnx", "cost", "ufunc", "out_form", "data_dependent",
                 "aliases", "inplace", "operator", "backward_name", "complex", "complex_error", "fast", "fwd_out",
                 "node_type", "aten", "array_vjp", "recomputes_output")

    def __init__(self, name: str, fwd: Callable, vjp: Callable | None = None, *,
                 promote: str | None = None, saves: str = ALL, save_output: bool = False,
                 elementwise: bool = False, n_extra: int = 0, n_kept: int = 0, is_view: bool = False,
                 kind: str = "compute", ufunc: str | None = None, out_form: str | None = None,
                 data_dependent: str | None = None, onnx=None, cost=None, aliases: tuple = (),
                 inplace: tuple = (), operator: str | None = None, complex: bool | None = None,
                 complex_error: tuple | None = None, fwd_out: Callable | None = None, contiguous: bool = False,
                 backward_name: str | Callable[[tuple | None, dict], str] | None = None,
                 aten: str | Callable[[tuple, dict], str] | None = None, array_vjp: Callable | None = None,
                 recomputes_output: bool = False):
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is already registered")
        if kind not in KINDS:
            raise ValueError(f"op {name!r}: kind must be one of {KINDS}, got {kind!r}")
        self.name, self.fwd, self.vjp = name, _contiguous(fwd) if contiguous else fwd, vjp
        self.promote, self.saves, self.save_output = promote, saves, save_output
        self.elementwise, self.n_extra, self.n_kept = elementwise, n_extra, n_kept
        self.is_view, self.kind, self.onnx, self.cost = is_view, kind, onnx, cost
        self.ufunc, self.out_form, self.data_dependent = ufunc, out_form or ufunc, data_dependent
        self.aliases, self.inplace, self.operator = tuple(aliases), tuple(inplace), operator
        self.complex = (saves == NONE and not save_output) if complex is None else complex
        self.complex_error, self.fwd_out = complex_error, fwd_out
        self.fast = None   # the dispatcher's compiled eager path (core/dispatch.py), made at first use
        self.node_type = None   # the class of its nodes, made at the first (core/node.py: node_type)
        self.backward_name = backward_name or "".join(p.capitalize() for p in name.split("_")) + "Backward0"
        self.aten, self.array_vjp, self.recomputes_output = aten, array_vjp, recomputes_output
        REGISTRY[name] = self

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def _contiguous(fwd: Callable) -> Callable:
    """``fwd`` whose array results are C-contiguous (copied only where they are not)."""
    def run(xp, *arrays, **params):
        out = fwd(xp, *arrays, **params)
        if type(out) is tuple:
            return tuple(_c_order(xp, o) for o in out)
        return _c_order(xp, out)
    run.__name__, run.__qualname__, run.__doc__ = fwd.__name__, fwd.__qualname__, fwd.__doc__
    run.__wrapped__ = fwd     # the dispatcher's fast path calls it and orders a result of one or more dims itself
    return run


def _c_order(xp, a):
    """``a`` row-major with ATen's strides: numpy's contiguity ignores the strides of one-element
    dimensions (a reduction keeps the input's there), which ATen's elementwise ordering reads."""
    flags = getattr(a, "flags", None)
    if flags is None:
        return a
    if not flags.c_contiguous:
        return xp.ascontiguousarray(a)
    if 1 in a.shape:
        step, strides = a.itemsize, []
        for n in reversed(a.shape):
            strides.append(step)
            step *= max(n, 1)
        strides.reverse()
        if tuple(strides) != a.strides:
            if type(a) is np.ndarray:       # numpy's view keeps the array's writeability; cupy has no flag
                return np.lib.stride_tricks.as_strided(a, a.shape, strides, writeable=a.flags.writeable)
            return xp.lib.stride_tricks.as_strided(a, a.shape, strides)
    return a


def kernel_refusal(kernel: str) -> tuple:
    """``complex_error`` as PyTorch's dtype dispatch words it: ``"lt_cpu" not implemented for 'ComplexFloat'``."""
    return NotImplementedError, f'"{kernel}_{{device}}" not implemented for \'{{dtype}}\''


def defop(name: str, vjp: Callable | None = None, **meta) -> Callable[[Callable], Op]:
    """Decorator form: ``@defop("exp", lambda g, out, x: (g * out,), save_output=True)``."""
    def register(fwd: Callable) -> Op:
        return Op(name, fwd, vjp, **meta)
    return register

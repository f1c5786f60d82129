"""The emitter: the ``g`` every op's ``onnx=`` lowering writes ONNX nodes through.

A lowering is ``onnx(g, *inputs, **params) -> name | tuple of names``, declared on the ``Op``
(``engine/ops/*``, ``engine/nn/_ops.py``...), with tensor inputs as ONNX value names and
everything else as the op's own params; ``onnx="Exp"`` is the 1:1 form. Ops modules never import
``onnx``: this object is handed to them, and it knows the opset, the dtypes and (symbolic)
shapes of the values a lowering receives, and how to turn sizes that follow dynamic axes into
run-time int64 tensors (``g.ints``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ._dims import Dim, ExportError

__all__ = ["Emitter"]


class Emitter:
    """Collects nodes and initializers for one export; ``opset`` is the target opset."""

    def __init__(self, opset: int, symbols: dict[str, tuple[str, int]]):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.info: dict[str, tuple[np.dtype, tuple]] = {}    # value name -> (dtype, shape with Dims)
        self.symbols = symbols                               # symbol -> (input name, axis)
        self._sym: dict = {}
        self._consts: dict = {}
        self._values: dict = {}                              # initializer name -> its array
        self._count = 0
        self.prefix = "n"
        self.output_dtype: np.dtype | None = None          # the dtype of the node being lowered

    # ------------------------------------------------------------ names and values
    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{self.prefix}/{hint}_{self._count}"

    def dtype(self, name: str) -> np.dtype:
        """The numpy dtype of a value the lowering received."""
        return self.info[name][0]

    def shape(self, name: str) -> tuple:
        """The shape of a value the lowering received: ints, and ``Dim``s for dynamic sizes."""
        return self.info[name][1]

    def rank(self, name: str) -> int:
        return len(self.info[name][1])

    def const(self, value: Any, dtype=None, name: str | None = None) -> str:
        """An initializer holding ``value`` (an array or a Python number, of ``dtype``)."""
        arr = np.asarray(value, dtype=dtype)
        key = None
        if arr.size <= 16 and name is None:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            if key in self._consts:
                return self._consts[key]
        name = name or self.fresh("const")
        self.initializers.append(numpy_helper.from_array(np.require(arr, requirements="C"), name))  # keeps 0-d
        self._values[name] = arr
        self.info[name] = (arr.dtype, arr.shape)
        if key is not None:
            self._consts[key] = name
        return name

    def full(self, shape, value, dtype) -> str:
        """A tensor of ``shape`` (ints and ``Dim``s) filled with ``value``: an initializer, or
        ConstantOfShape when a size follows a dynamic axis."""
        dt = np.dtype(getattr(dtype, "np", dtype))
        if not any(isinstance(d, Dim) for d in shape):    # a static shape is an initializer
            return self.const(np.full([int(d) for d in shape], value, dt))
        out = self.op("ConstantOfShape", self.ints(shape), value=numpy_helper.from_array(np.array([value], dt)))
        self.info[out] = (dt, tuple(shape))
        return out

    def scalar_dim(self, d) -> str:
        """One size (int or ``Dim``) as a 0-d int64 tensor (``Range``'s bounds)."""
        if not isinstance(d, Dim):
            return self.const(int(d), np.int64)
        return self.op("Squeeze", self.dim(d), self.const([0], np.int64))

    def limits(self, x: str) -> tuple:
        """The lowest and highest finite values of ``x``'s dtype (``nan_to_num``'s defaults)."""
        info = np.finfo(self.dtype(x)) if self.dtype(x).kind == "f" else np.iinfo(self.dtype(x))
        return info.min.item(), info.max.item()

    def constant_value(self, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is an initializer (a parameter, a folded or literal
        constant), else None: lowerings may pick a form runtimes optimise better."""
        return self._values.get(name)

    def scalar(self, value, like: str) -> str:
        """A 0-d constant of ``like``'s dtype (``x * 2.0`` as ``Mul(x, const)``)."""
        return self.const(value, self.dtype(like))

    # ------------------------------------------------------------ nodes
    def op(self, op_type: str, *inputs, outputs: int = 1, domain: str = "", **attrs):
        """Append one node; Python numbers among ``inputs`` become constants of the first
        non-bool tensor input's dtype, ``None`` an omitted optional input. Returns the output
        name, or a tuple of ``outputs`` names."""
        names = [i for i in inputs if isinstance(i, str) and i in self.info]
        like = next((n for n in names if self.dtype(n) != np.bool_), None)
        ins = []
        for i in inputs:
            if i is None:
                ins.append("")
            elif isinstance(i, str):
                ins.append(i)
            else:
                ins.append(self.const(i, self.dtype(like) if like else self._number_dtype(i)))
        outs = [self.fresh(op_type) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, ins, outs, name=outs[0], domain=domain, **attrs))
        dt = _out_dtype(op_type, ins, attrs, self.info, like)
        if dt is not None:
            self.info[outs[0]] = (dt, None)
        return outs[0] if outputs == 1 else tuple(outs)

    def _number_dtype(self, v) -> np.dtype:
        """A number beside only bool operands (``Where(mask, 0.0, -inf)``): the node's result dtype
        when it is floating and the number a float, else PyTorch's default for the number."""
        out = self.output_dtype
        return out if isinstance(v, float) and out is not None and out.kind == "f" else _python_dtype(v)

    def cast(self, x: str, dtype) -> str:
        """``x`` as ``dtype`` (numpy or tapelab dtype); no node when it already is."""
        dt = np.dtype(getattr(dtype, "np", dtype))
        if x in self.info and self.dtype(x) == dt:
            return x
        out = self.op("Cast", x, to=helper.np_dtype_to_tensor_dtype(dt))
        if x in self.info:
            self.info[out] = (dt, self.shape(x))
        return out

    # ------------------------------------------------------------ sizes
    def sym(self, s: str) -> str:
        """The run-time value of dynamic axis ``s``: an int64 tensor of shape (1,)."""
        if s not in self._sym:
            inp, axis = self.symbols[s]
            shape = self.op("Shape", inp)
            self._sym[s] = self.op("Gather", shape, self.const([axis], np.int64), axis=0)
        return self._sym[s]

    def dim(self, d) -> str:
        """One size (int or ``Dim``) as an int64 tensor of shape (1,)."""
        if not isinstance(d, Dim):
            return self.const([int(d)], np.int64)
        out = None
        for s in d.syms:
            out = self.sym(s) if out is None else self.op("Mul", out, self.sym(s))
        if d.coef != 1:
            out = self.op("Mul", out, self.const([d.coef], np.int64))
        if d.offset:
            out = self.op("Add", out, self.const([d.offset], np.int64))
        return out

    def ints(self, values) -> str:
        """A 1-D int64 tensor of ``values`` (ints and ``Dim``s): a constant when all are ints."""
        values = list(values)
        if not any(isinstance(v, Dim) for v in values):
            return self.const(np.array([int(v) for v in values], np.int64).reshape(len(values)))
        return self.op("Concat", *[self.dim(v) for v in values], axis=0)

    # ------------------------------------------------------------ version-dependent forms
    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        """``ReduceSum``/``ReduceMean``/... over ``axes`` (None: all), axes as an input or an
        attribute as the opset wants (ReduceSum from 13, the rest from 18)."""
        axes = None if axes is None else [int(a) for a in axes]
        as_input = op_type == "ReduceSum" or self.opset >= 18
        if axes is not None and as_input:
            return self.op(op_type, x, self.const(np.array(axes, np.int64)), keepdims=int(keepdims))
        return self.op(op_type, x, keepdims=int(keepdims), axes=axes)

    def numel(self, shape) -> int:
        """The product of static sizes (a count a lowering bakes in); a dynamic size refuses."""
        dyn = [s for s in shape if isinstance(s, Dim)]
        if dyn:
            raise ExportError(f"this lowering needs a static size but {dyn[0].name()} follows a dynamic axis; "
                              "export without that dynamic axis")
        return math.prod(int(s) for s in shape)


_BOOL_OUT = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf"}
_INT_OUT = {"Shape", "ArgMax", "ArgMin", "NonZero", "Size"}


def _python_dtype(v):
    """A Python number as PyTorch's default dtypes see it (float32, int64, bool)."""
    return np.bool_ if isinstance(v, bool) else np.int64 if isinstance(v, int) else np.float32


def _out_dtype(op_type: str, ins: list, attrs: dict, info: dict, like):
    """The output dtype of a node a lowering made, so later Python numbers become constants of it."""
    if op_type in _BOOL_OUT:
        return np.dtype(np.bool_)
    if op_type in _INT_OUT:
        return np.dtype(np.int64)
    if op_type == "Cast":
        return helper.tensor_dtype_to_np_dtype(attrs["to"])
    if op_type == "Where" and ins[1] in info:
        return info[ins[1]][0]
    if op_type == "ConstantOfShape":
        return None if "value" not in attrs else helper.tensor_dtype_to_np_dtype(attrs["value"].data_type)
    if op_type in ("Gather", "GatherElements", "Slice", "Reshape", "Transpose", "Expand", "Squeeze",
                   "Unsqueeze", "Concat", "Identity", "Tile", "Trilu", "Pad", "ScatterElements", "Range"):
        return info[ins[0]][0] if ins and ins[0] in info else None
    return info[like][0] if like in info else None

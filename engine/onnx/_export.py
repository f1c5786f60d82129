"""``export``: a traced program lowered op by op through each ``Op.onnx`` into a ModelProto.

Parameters and buffers become initializers named as in ``state_dict``; subgraphs that read only
them (a Linear's transposed weight, a static ``zeros``) are folded to initializers when
``do_constant_folding`` (their values are already in the trace). Every other node is lowered by
the declaration of its op (each ONNX node's ``doc_string`` names that op, module and line); an op
without one stops the export naming the op, its module path and the user's line. Opset 17 by
default (18 to 21 on request) with the IR version pinned to the oldest that carries that opset (8
for 17, 10 for 21), so runtimes of that opset's generation load the file.
"""
from __future__ import annotations

import inspect
import io
import operator
import os
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..base.dtype import get_default_dtype, result_type
from ..core.tensor import Tensor
from ..fx.node import Node, map_aggregate
from ..fx.trace_from_tape import guard_inputs
from ..nn.modules.module import Module
from ._dims import EXPORTING, Dim, ExportError
from ._emitter import Emitter
from ._trace import Traced, trace

__all__ = ["export", "build", "Exported", "UnsupportedOperatorError", "IR_VERSIONS", "where"]

IR_VERSIONS = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}   # the oldest IR that carries each opset


class UnsupportedOperatorError(ExportError):
    """An op of the traced graph has no ONNX lowering (``onnx=`` on its declaration)."""


class Exported:
    """One export: the ModelProto, the trace it came from, and each FX node's ONNX value name."""

    def __init__(self, model: onnx.ModelProto, traced: Traced, names: dict, input_names: list, output_names: list):
        self.model, self.traced, self.names = model, traced, names
        self.input_names, self.output_names = input_names, output_names


def where(node: Node) -> str:
    """``op 'add' in module encoder.layers.0 (model.py:12  x = a + b)``: what an error names."""
    path = ".".join(list(node.meta.get("nn_module_stack", {}))[-1:]) or "<top>"
    op = getattr(node.target, "__name__", node.target)
    return f"op '{op}' (node {node.name}) in module {path} at {node.meta.get('source') or '<unknown line>'}"


def _axes(dynamic_axes, input_names, output_names) -> dict[str, dict[int, str]]:
    out = {}
    for name, ax in (dynamic_axes or {}).items():
        if name not in input_names and name not in output_names:
            raise ValueError(f"tapelab.onnx.export: dynamic_axes names {name!r}, which is neither an input "
                             f"{input_names} nor an output {output_names}")
        out[name] = dict(ax) if isinstance(ax, dict) else {a: f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(ax)}
    return out


def _value_info(name: str, dtype, shape, names: dict) -> onnx.ValueInfoProto:
    dims = [names.get(i) or (d.name() if isinstance(d, Dim) else int(d)) for i, d in enumerate(shape)]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), dims)


def _np(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy())


def build(model, args, input_names=None, output_names=None, dynamic_axes=None, opset_version=None,
          do_constant_folding=True, export_params=True) -> Exported:
    """Trace and lower ``model``; the ModelProto is checked with ``full_check``."""
    opset = 17 if opset_version is None else int(opset_version)
    if opset not in IR_VERSIONS:
        raise ValueError(f"tapelab.onnx.export: opset_version {opset} is not supported; "
                         f"use one of {sorted(IR_VERSIONS)}")
    args = args if isinstance(args, tuple) else (args,)
    if args and isinstance(args[-1], dict):          # PyTorch's trailing kwargs dict; empty is allowed
        if args[-1]:
            raise ValueError("tapelab.onnx.export: keyword inputs are not supported; pass them positionally")
        args = args[:-1]
    target = type(model).forward if isinstance(model, Module) else model
    try:
        sig = [p for p in inspect.signature(target).parameters][1 if isinstance(model, Module) else 0:]
    except (TypeError, ValueError):
        sig = []
    tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    default_names = [sig[i] if i < len(sig) else f"input_{i}" for i in tensor_pos]
    input_names = list(input_names or []) + default_names[len(input_names or []):]
    all_names = [None] * len(args)
    for i, n in zip(tensor_pos, input_names):
        all_names[i] = n
    axes = _axes(dynamic_axes, input_names, output_names or [])
    symbols, sizes = {}, {}
    for i, name in zip(tensor_pos, input_names):
        for axis, sym in axes.get(name, {}).items():
            if sym not in symbols:
                symbols[sym], sizes[sym] = (name, axis), int(args[i].shape[axis])
    EXPORTING.append(model)
    try:
        traced = trace(model, args, all_names, axes, sizes)
    finally:
        EXPORTING.pop()
    return _lower(traced, opset, input_names, output_names, axes, symbols, do_constant_folding, export_params)


def _lower(tr: Traced, opset, input_names, output_names, axes, symbols, fold, export_params) -> Exported:
    g = Emitter(opset, symbols)
    names: dict[Node, Any] = {}
    folded: set = set()
    graph_inputs, param_inputs = [], []
    placeholders = iter(input_names)

    def ref(n: Node):
        """The ONNX name of node ``n``'s value, emitting an initializer on first use of a constant."""
        if n not in names:
            v = tr.values[n]
            names[n] = g.const(_np(v), name=n.target if n.op == "get_attr" else n.name)
        return names[n]

    def info(n: Node, out) -> None:
        shapes, v = tr.shapes.get(n), tr.values[n]
        pairs = zip(out, v, shapes) if isinstance(out, tuple) else [(out, v, shapes)]
        for name, val, shape in pairs:
            if isinstance(val, Tensor) and isinstance(name, str):
                g.info[name] = (np.dtype(val.dtype.np), shape)

    for n in tr.nodes:
        g.prefix = n.name
        if n.op == "placeholder":
            v = tr.values[n]
            if not isinstance(v, Tensor):
                continue
            name = next(placeholders)
            names[n] = name
            info(n, name)
            graph_inputs.append(_value_info(name, v.dtype.np, tr.shapes[n], axes.get(name, {})))
        elif n.op == "get_attr" and not export_params and not n.target.startswith("_tensor_constant"):
            v = tr.values[n]                     # a parameter or buffer the caller feeds at run time
            names[n] = n.target
            info(n, n.target)
            param_inputs.append(_value_info(n.target, v.dtype.np, tuple(v.shape), {}))
        elif n.op == "get_attr":
            folded.add(n)
        elif n.op == "call_method":             # detach of a value read again: the same value
            if n.args[0] in folded:
                folded.add(n)
            else:
                names[n] = ref(n.args[0])
        elif n.op == "call_function" and n.target is guard_inputs:
            continue
        elif n.op == "call_function" and n.target is operator.getitem:
            src = n.args[0]
            if src in folded:
                folded.add(n)
            elif isinstance(names[src], tuple):
                names[n] = names[src][n.args[1]]
                info(n, names[n])
            else:
                raise ExportError(f"tapelab.onnx.export: the lowering of {where(src)} returns one value, but "
                                  f"output {n.args[1]} of it is read; return every output of the op")
        elif n.op == "call_function":
            op = n.target.op
            static = not any(isinstance(x, Dim) for x in _leaves(tr.params[n]) + _leaves(tr.args_of[n]))
            if fold and op.kind != "random" and static and all(a in folded for a in n.all_input_nodes) \
                    and isinstance(tr.values[n], (Tensor, tuple)):
                folded.add(n)
                continue
            start = len(g.nodes)
            names[n] = out = _lower_node(g, n, op, tr, ref)
            info(n, out)
            note = _doc(n)
            for made in g.nodes[start:]:
                made.doc_string = note
    outs = _outputs(tr)
    output_names = list(output_names or []) + [("output" if len(outs) == 1 else f"output_{i}")
                                               for i in range(len(output_names or []), len(outs))]
    graph_outputs = []
    for node, oname in zip(outs, output_names):
        src = ref(node)
        g.nodes.append(helper.make_node("Identity", [src], [oname], name=f"output/{oname}"))
        v = tr.values[node]
        graph_outputs.append(_value_info(oname, v.dtype.np, tr.shapes[node], axes.get(oname, {})))
    graph = helper.make_graph(g.nodes, "tapelab", graph_inputs + param_inputs, graph_outputs,
                              initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tapelab",
                              ir_version=IR_VERSIONS[opset])
    onnx.checker.check_model(model, full_check=True)
    return Exported(model, tr, {n: v for n, v in names.items() if isinstance(v, str)}, input_names, output_names)


def _doc(node: Node) -> str:
    """Each ONNX node's ``doc_string``: the tapelab op, module path and source line it came from
    (the graph view groups by ``module``; PyTorch writes its stack trace there)."""
    stack = list(node.meta.get("nn_module_stack", {}))
    return (f"op: {getattr(node.target, '__name__', node.target)}\nnode: {node.name}\n"
            f"module: {stack[-1] if stack else ''}\nsource: {node.meta.get('source', '')}")


def _leaves(x) -> list:
    out = []
    map_aggregate(x, lambda v: out.append(v.start) or out.append(v.stop) or out.append(v.step)
                  if isinstance(v, slice) else out.append(v))
    return out


def _outputs(tr: Traced) -> list[Node]:
    out = [n for n in tr.nodes if n.op == "output"][0].args[0]
    leaves = []
    map_aggregate(out, lambda v: leaves.append(v) if isinstance(v, Node) else None)
    return leaves


def _lower_node(g: Emitter, n: Node, op, tr: Traced, ref):
    lower = op.onnx
    if lower is None:
        raise UnsupportedOperatorError(
            f"tapelab.onnx.export: {where(n)} has no ONNX lowering; declare one with onnx= on the op "
            f"'{op.name}' ({op.fwd.__module__}), or export without that op")
    def arg(a, dims):        # the FX argument, with Nodes as ONNX names and sizes as Dims
        if isinstance(a, Node):
            return ref(a)
        if isinstance(a, (list, tuple)):
            return tuple(arg(x, d) for x, d in zip(a, dims))
        return dims
    args = tuple(arg(a, d) for a, d in zip(n.args, tr.args_of[n]))
    params = tr.params[n]
    v = tr.values[n]
    g.output_dtype = np.dtype((v[0] if isinstance(v, tuple) else v).dtype.np)
    if op.promote:
        args = _promoted(g, op, args, n, tr)
    try:
        return g.op(lower, *args) if isinstance(lower, str) else lower(g, *args, **params)
    except Exception as e:  # the lowering's own reason, with the node it was lowering
        raise ExportError(f"tapelab.onnx.export: lowering {where(n)} failed: {type(e).__name__}: {e}") from e


def _promoted(g: Emitter, op, args: tuple, n: Node, tr: Traced) -> tuple:
    """Cast operands to PyTorch's result dtype, as the dispatcher does before the forward."""
    vals = [tr.values[a] if isinstance(a, Node) else a for a in n.args]
    operands = [v for v in vals if isinstance(v, Tensor) or type(v) in (int, float, bool)]
    if not operands:
        return args
    rt = result_type(*operands)
    if op.promote == "float" and not rt.is_floating_point:
        rt = get_default_dtype()
    dt = np.dtype(rt.np)
    return tuple(g.cast(a, dt) if isinstance(a, str) else g.const(a, dt) if type(a) in (int, float, bool) else a
                 for a in args)


def export(model, args, f=None, *, kwargs=None, export_params: bool = True, verbose: bool = False,
           input_names=None, output_names=None, opset_version: int | None = None, dynamic_axes=None,
           do_constant_folding: bool = True, dynamo: bool = False, **ignored) -> None:
    """Export ``model`` to ONNX, as ``torch.onnx.export``.

    Args:
        model: an ``nn.Module`` (run in eval mode for the trace) or a function of tensors.
        args: the example inputs (a tensor or a tuple).
        f: a path or a binary file object to write the model to.
        input_names, output_names: names of the graph's inputs and outputs.
        dynamic_axes: ``{name: {axis: "batch"}}`` or ``{name: [axis]}``: those sizes stay symbolic.
        opset_version: 17 (default) to 21.
        do_constant_folding: fold subgraphs of parameters into initializers.
        export_params: False leaves the parameters and buffers out of the file: they become graph
            inputs after ``args`` (named as in ``state_dict``), to be fed at run time.
        dynamo: accepted for PyTorch's signature; tapelab has one exporter (the tape trace).
    Returns:
        None, as PyTorch's TorchScript path (``tapelab.onnx.build`` returns the ModelProto).

    >>> tapelab.onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    if kwargs:
        raise ValueError("tapelab.onnx.export: kwargs inputs are not supported; pass them positionally")
    ex = build(model, args, input_names, output_names, dynamic_axes, opset_version, do_constant_folding,
               export_params)
    if verbose:
        print(onnx.helper.printable_graph(ex.model.graph))
    data = ex.model.SerializeToString()
    if f is None:
        return None
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    elif isinstance(f, io.IOBase) or hasattr(f, "write"):
        f.write(data)
    return None

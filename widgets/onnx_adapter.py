"""ONNX files in the view model: ``graph_from_onnx`` (a ``ModelProto`` or ``.onnx`` path -> the
schema ``fx_adapter.graph_from_fx`` writes), so ``GraphView`` and the mime renderer draw an
exported model with the renderer that draws FX graphs.

One view node per graph input (``input``), initializer (a leaf with ``param`` and its dims), ONNX
node (``op`` its op type, ``args`` its line ``y = Gelu(x) {approximate=tanh}``) and graph output;
shapes come from ``onnx.shape_inference`` (symbolic dims as their names). A node exported by
``tapelab.onnx`` names its tapelab op, module path and source line in ``doc_string``: the module
path groups the nodes as the FX view groups ops, and ``source`` is kept on the node.

>>> GraphView(graph_from_onnx("model.onnx"))
"""
from __future__ import annotations

import os

from .fx_adapter import ModuleGroups
from .viewmodel import SCHEMA, VERSION

__all__ = ["graph_from_onnx"]


def _dims(tensor_type) -> list | None:
    if not tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]


def _doc(text: str) -> dict:
    """``key: value`` lines of a tapelab node's ``doc_string`` (empty for other producers)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("op", "node", "module", "source"):
            out[key] = value
    return out


def _attr(a) -> str:
    import onnx
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    elif isinstance(v, onnx.TensorProto):
        v = f"tensor{list(v.dims)}"
    return f"{a.name}={v}"


def graph_from_onnx(model, title: str = "") -> dict:
    """The view-model graph of an ONNX model (a ``ModelProto``, bytes or a path); see the module doc."""
    import onnx
    if isinstance(model, (str, os.PathLike)):
        title = title or os.path.basename(os.fspath(model))
        model = onnx.load(os.fspath(model))
    elif isinstance(model, bytes):
        model = onnx.load_from_string(model)
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:          # a model inference refuses is still drawn, without shapes
        pass
    g = model.graph
    types = {v.name: v.type.tensor_type for v in list(g.input) + list(g.value_info) + list(g.output)}
    dtypes = {n: onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name for n, t in types.items() if t.elem_type}
    shape_of = {n: _dims(t) for n, t in types.items()}
    for init in g.initializer:
        shape_of[init.name] = list(init.dims)
        dtypes[init.name] = onnx.helper.tensor_dtype_to_np_dtype(init.data_type).name
    producer: dict[str, str] = {}
    groups = ModuleGroups()

    nodes, edges = [], []

    def add(vid: str, kind: str, op: str, label: str, value: str | None, inputs: list[str], args: str,
            module: str = "", **extra) -> None:
        gid = groups.group(module)
        shape = shape_of.get(value) if value else None
        node = {"id": vid, "kind": kind, "label": label, "op": op, "index": len(nodes), "seq": None,
                "forward_seq": None, "group": gid, "module": module, "shape": shape,
                "input_shapes": [shape_of.get(i) for i in inputs], "dtype": dtypes.get(value, "") if value else "",
                "device": "", "requires_grad": False, "start_ns": 0, "time_ns": 0, "value": None, "grad": None,
                "grad_ops": 0, "name": label, "opcode": kind if kind != "forward" else "node", "target": op,
                "args": args, "line": None, **extra}
        nodes.append(node)
        for i in inputs:
            if i in producer:
                s = shape_of.get(i)
                edges.append({"source": producer[i], "target": vid, "kind": "data",
                              "shape": s if (s is not None and all(isinstance(d, int) for d in s)) else None})
        groups.count(gid, f"{kind}:{op}")

    inits = {i.name for i in g.initializer}
    for v in g.input:
        if v.name not in inits:
            add("onnx:in:" + v.name, "leaf", "input", v.name, v.name, [], f"{v.name}: {shape_of.get(v.name)}")
            producer[v.name] = "onnx:in:" + v.name
    for init in g.initializer:
        add("onnx:init:" + init.name, "leaf", "initializer", init.name, init.name, [],
            f"{init.name}: {list(init.dims)}", param=init.name)
        producer[init.name] = "onnx:init:" + init.name
    forward = 0
    for k, n in enumerate(g.node):
        vid = f"onnx:node:{k}"
        doc = _doc(n.doc_string)
        ins = [i for i in n.input if i]
        attrs = " {" + ", ".join(_attr(a) for a in n.attribute) + "}" if n.attribute else ""
        line = f"{', '.join(n.output)} = {n.op_type}({', '.join(n.input)}){attrs}"
        add(vid, "forward", n.op_type, n.name or (n.output[0] if n.output else n.op_type),
            n.output[0] if n.output else None, ins, line, doc.get("module", ""),
            **{k2: doc[k2] for k2 in ("source",) if k2 in doc}, **({"tapelab_op": doc["op"]} if "op" in doc else {}))
        forward += 1
        for o in n.output:
            producer[o] = vid
    for v in g.output:
        add("onnx:out:" + v.name, "forward", "output", v.name, v.name, [v.name], f"return {v.name}")
    return {"schema": SCHEMA, "version": VERSION, "nodes": nodes, "edges": edges, "groups": groups.payload(),
            "meta": {"title": title or g.name or "ONNX", "forward": forward, "backward": 0, "total": len(nodes),
                     "truncated": False, "kind": "fx", "code": "",
                     "onnx": {"ir_version": model.ir_version,
                              "opset": {o.domain or "ai.onnx": o.version for o in model.opset_import},
                              "producer": model.producer_name}}}

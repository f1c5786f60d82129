"""A TensorBoard ``GraphDef`` of one forward pass of a model, recorded at the dispatcher.

``add_graph`` runs ``model(*inputs)`` under a ``Mode`` that sees every op and module call:
each op becomes a node scoped by the module that ran it (``Net/Linear[fc1]/matmul_3``, so
TensorBoard folds modules into boxes), with edges from the nodes that produced its inputs
and its output shape. Parameters and buffers become nodes named after them, the inputs
``input/input.<k>`` and the outputs ``output/output.<k>``. (``tapelab.fx`` sits above
``tapelab.utils`` in the engine's layers, so the recording uses the ``Mode`` interface that
``fx.trace_from_tape`` also builds on.)
"""
from __future__ import annotations

from tensorboard.compat.proto.attr_value_pb2 import AttrValue
from tensorboard.compat.proto.graph_pb2 import GraphDef
from tensorboard.compat.proto.node_def_pb2 import NodeDef
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.compat.proto.versions_pb2 import VersionDef

from ...base.grad_mode import no_grad
from ...core.dispatch import Mode
from ...core.tensor import Tensor

__all__ = ["graph_def"]


def _shape_attr(shape) -> dict:
    dims = [TensorShapeProto.Dim(size=int(s)) for s in shape]
    return {"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=[TensorShapeProto(dim=dims)]))}


class _Recorder(Mode):
    """Every compute op as a node; module calls push their scope."""

    def __init__(self, root: str, module_scopes: dict, named: dict):
        self.nodes: list = []
        self.names: dict = {}          # id(tensor) -> node name (its producer, parameter or input)
        self.keep: list = []           # the tensors named, so their ids stay theirs
        self.scope = [root]
        self.module_scopes, self.named, self.count = module_scopes, named, 0

    def name_of(self, t: Tensor, op_kind: str = "Constant") -> str:
        key = id(t)
        if key not in self.names:
            name = self.named.get(key)
            kind = "Parameter" if name is not None else op_kind
            name = name or f"{'/'.join(self.scope)}/constant_{len(self.names)}"
            self.names[key] = name
            self.keep.append(t)
            self.nodes.append(NodeDef(name=name, op=kind, attr=_shape_attr(t.shape)))
        return self.names[key]

    def dispatch(self, op, args, params):
        out = super().dispatch(op, args, params)
        if op.kind != "compute":
            return out
        inputs = [self.name_of(a) for a in args if isinstance(a, Tensor)]
        res = out[0] if isinstance(out, tuple) else out
        self.count += 1
        name = f"{'/'.join(self.scope)}/{op.name}_{self.count}"
        self.nodes.append(NodeDef(name=name, op=op.name, input=inputs, attr=_shape_attr(res.shape)))
        self.names[id(res)] = name
        self.keep.append(res)
        return out

    def call_module(self, module, forward, args, kwargs):
        scope = self.module_scopes.get(id(module))
        if scope is None:
            return forward(*args, **kwargs)
        self.scope.append(scope)
        try:
            return forward(*args, **kwargs)
        finally:
            self.scope.pop()


def graph_def(model, inputs: tuple) -> GraphDef:
    """The ``GraphDef`` of ``model(*inputs)``, run once without gradients and, as PyTorch's trace
    for the graph runs it, in eval mode (batch norm's running statistics stay as they are and
    dropout draws no random numbers); the model's training flags are restored after."""
    root = type(model).__name__
    scopes, paths = {}, {"": root}      # module -> its scope piece; qualified name -> full scope
    for name, m in model.named_modules():
        if name:
            parent, _, leaf = name.rpartition(".")
            scopes[id(m)] = f"{type(m).__name__}[{leaf}]"
            paths[name] = f"{paths[parent]}/{scopes[id(m)]}"
    named = {}
    for name, p in list(model.named_parameters()) + list(model.named_buffers()):
        owner, _, leaf = name.rpartition(".")
        named[id(p)] = f"{paths[owner]}/{leaf}"
    rec = _Recorder(root, scopes, named)
    for k, x in enumerate(inputs):
        if isinstance(x, Tensor):
            rec.name_of(x)
            rec.nodes[-1].name = rec.names[id(x)] = f"input/input.{k}"
            rec.nodes[-1].op = "IO Node"
    training = getattr(model, "training", None)
    if training is not None:
        model.train(False)
    try:
        with no_grad(), rec:
            out = model(*inputs)
    finally:
        if training is not None:
            model.train(training)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for k, y in enumerate(o for o in outs if isinstance(o, Tensor)):
        rec.nodes.append(NodeDef(name=f"output/output.{k}", op="IO Node", input=[rec.name_of(y)],
                                 attr=_shape_attr(y.shape)))
    return GraphDef(node=rec.nodes, versions=VersionDef(producer=22))

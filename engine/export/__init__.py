"""``torch.export``: a module's forward as one graph of primitive ops, with its signature.

``export(mod, args)`` runs the module once on the example inputs while ``fx.trace_from_tape``
records the primitive ops (``prims.linear``, ``prims.add`` ...: already the decomposed core set, so
``run_decompositions`` has nothing left to do) and returns an ``ExportedProgram``:
``graph_module``/``graph`` (the recorded GraphModule, which guards its inputs), ``graph_signature``
(which inputs are parameters, buffers and user inputs; which buffers the forward mutates),
``state_dict``, ``example_inputs`` and ``module()``, the callable form. As with PyTorch's, the
program is not callable itself. Sizes are specialised to the example unless ``dynamic_shapes``
names a dimension ``Dim``: ``module()`` then accepts any size in the ``Dim``'s range for it (each
new size is traced once and kept) and refuses the others with PyTorch's message.

A program is traced by running it (PyTorch's non-strict mode): control flow takes the example's
branch. ``save``/``load`` write a program to a file and read it back in tapelab's own format (a
``tapelab.save`` archive of the graph, the tensors its ``get_attr`` nodes read, the signature and the
examples), not PyTorch's ``.pt2``: a loaded program runs its saved graph, so it accepts the sizes that
graph was traced for (a new size of a dynamic dimension needs the original module).
"""
from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field
from typing import Any

from .. import serialization
from ..base.grad_mode import no_grad
from ..core.tensor import Tensor
from ..fx.graph_module import GraphModule
from ..fx.trace_from_tape import trace_with_output, write_state
from ..nn.modules.module import Module
from ..utils._pytree import tree_flatten, tree_leaves, tree_unflatten

__all__ = ["export", "ExportedProgram", "ExportGraphSignature", "InputKind", "OutputKind", "InputSpec",
           "OutputSpec", "Dim", "save", "load"]


class _DimHint(enum.Enum):
    AUTO = "AUTO"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"


class Dim:
    """A named dynamic dimension with an inclusive range, as ``torch.export.Dim("batch", min=2, max=64)``."""

    AUTO = _DimHint.AUTO
    STATIC = _DimHint.STATIC
    DYNAMIC = _DimHint.DYNAMIC

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None):
        lo, hi = 0 if min is None else min, (2 ** 63 - 2) if max is None else max
        if hi < lo:
            raise ValueError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        self.__name__, self.min, self.max = name, lo, hi

    def __repr__(self) -> str:
        return f"Dim('{self.__name__}', min={self.min}, max={self.max})"


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()


@dataclass
class InputSpec:
    kind: InputKind
    name: str
    target: str | None = None
    persistent: bool | None = None


@dataclass
class OutputSpec:
    kind: OutputKind
    name: str
    target: str | None = None


@dataclass
class ExportGraphSignature:
    """Which graph inputs are parameters, buffers and user inputs, and what the graph writes."""

    input_specs: list = field(default_factory=list)
    output_specs: list = field(default_factory=list)

    def _names(self, specs, kind, attr="target") -> tuple:
        return tuple(getattr(s, attr) for s in specs if s.kind is kind)

    @property
    def parameters(self) -> tuple:
        return self._names(self.input_specs, InputKind.PARAMETER)

    @property
    def buffers(self) -> tuple:
        return self._names(self.input_specs, InputKind.BUFFER)

    @property
    def user_inputs(self) -> tuple:
        return self._names(self.input_specs, InputKind.USER_INPUT, "name")

    @property
    def user_outputs(self) -> tuple:
        return self._names(self.output_specs, OutputKind.USER_OUTPUT, "name")

    @property
    def inputs_to_parameters(self) -> dict:
        return {s.name: s.target for s in self.input_specs if s.kind is InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self) -> dict:
        return {s.name: s.target for s in self.input_specs if s.kind is InputKind.BUFFER}

    @property
    def buffers_to_mutate(self) -> dict:
        return {s.name: s.target for s in self.output_specs if s.kind is OutputKind.BUFFER_MUTATION}


def _input_names(mod: Module, n: int, kwargs: dict) -> list[str]:
    try:
        params = list(inspect.signature(mod.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:n]
    names += [f"args_{i}" for i in range(len(names), n)]
    return names + list(kwargs)


def _dynamic_dims(dynamic_shapes, names: list[str], inputs: list) -> dict:
    """``{input index: {dim: Dim or hint}}`` from ``dynamic_shapes`` (a dict by input name, or a
    tuple/list by position), checked against the example sizes."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        unknown = set(dynamic_shapes) - set(names)
        if unknown:
            raise ValueError(f"dynamic_shapes names {sorted(unknown)}, which are not inputs of forward "
                             f"(its inputs: {names})")
        per_input = [dynamic_shapes.get(n) for n in names]
    else:
        per_input = list(dynamic_shapes) + [None] * (len(names) - len(dynamic_shapes))
    dims = {}
    for i, spec in enumerate(per_input):
        if spec is None:
            continue
        spec = dict(enumerate(spec)) if isinstance(spec, (tuple, list)) else dict(spec)
        spec = {d: s for d, s in spec.items() if s is not None and s is not _DimHint.STATIC}
        for d, s in spec.items():
            size = inputs[i].shape[d]
            if isinstance(s, Dim) and not s.min <= size <= s.max:
                raise ValueError(f"Received user-specified dim hint for {s.__name__} = {size} at "
                                 f"{names[i]}.shape[{d}], outside its range [{s.min}, {s.max}]")
        if spec:
            dims[i] = spec
    return dims


class _Exported(Module):
    """``ExportedProgram.module()``: the graph for the example's sizes; a new size of a dynamic
    dimension is traced once from the original module and kept."""

    def __init__(self, program: "ExportedProgram"):
        super().__init__()
        self._program = program
        gm = self.__dict__["graph_module"] = program.graph_module   # its state at the top, as PyTorch's keys
        for name, child in gm.named_children():
            self.add_module(name, child)
        for name, p in gm.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in gm.named_buffers(recurse=False):
            self.register_buffer(name, b)

    def forward(self, *args, **kwargs):
        ep = self._program
        inputs = list(args) + [kwargs[k] for k in ep._kw_names]
        key = []
        for i, (x, example) in enumerate(zip(inputs, ep._examples)):
            if not isinstance(x, Tensor):
                continue
            if x.dim() != example.dim():
                raise RuntimeError(f"Expected input at {ep._names[i]}.shape to have {example.dim()} dims, "
                                   f"but got {x.dim()}")
            for d, (got, want) in enumerate(zip(x.shape, example.shape)):
                hint = ep._dims.get(i, {}).get(d)
                if hint is None:
                    if got != want:
                        raise RuntimeError(f"Expected input at {ep._names[i]}.shape[{d}] to be equal to {want}, "
                                           f"but got {got}")
                elif isinstance(hint, Dim) and not hint.min <= got <= hint.max:
                    raise RuntimeError(f"Expected input at {ep._names[i]}.shape[{d}] to be "
                                       f"{'>= ' + str(hint.min) if got < hint.min else '<= ' + str(hint.max)}, "
                                       f"but got {got}")
            key.append(tuple(x.shape))
        gm = ep._graphs.get(tuple(key))
        if gm is None:
            gm = ep._graphs[tuple(key)] = ep._trace(inputs)
        out = gm(*inputs)
        spec = getattr(ep, "_out_spec", None)
        # the forward's own output types (the graph holds dicts and tuples: a ``ModelOutput``, a registered
        # dataclass, come back as PyTorch's unflattening by the traced result's pytree spec makes them)
        return out if spec is None else tree_unflatten(tree_leaves(out), spec)


class ExportedProgram:
    """What ``export`` returns: the graph, its signature and state; ``module()`` runs it."""

    def __init__(self, mod: Module, names: list[str], kw_names: list[str], examples: list, dims: dict,
                 args: tuple, kwargs: dict):
        self._mod, self._names, self._kw_names, self._examples, self._dims = mod, names, kw_names, examples, dims
        self.example_inputs = (args, kwargs)
        self._out_spec = None
        self.graph_module = self._trace(examples)
        self._graphs = {tuple(tuple(x.shape) for x in examples if isinstance(x, Tensor)): self.graph_module}
        self.graph = self.graph_module.graph
        self.graph_signature = self._signature()
        self.range_constraints = {d.__name__: (d.min, d.max) for spec in dims.values() for d in spec.values()
                                  if isinstance(d, Dim)}

    def _trace(self, inputs: list) -> GraphModule:
        mod, n = self._mod, len(self._names) - len(self._kw_names)
        kw_names = self._kw_names

        def call(*xs):
            return mod(*xs[:n], **dict(zip(kw_names, xs[n:])))
        call.__signature__ = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_ONLY)
                                                for name in self._names])
        # tracing runs the forward: the buffers it updates (running statistics) are put back, since
        # exporting leaves the module's state as it was, as PyTorch's
        kept = [(b, b.detach().clone()) for b in mod.buffers()]
        try:
            gm, result = trace_with_output(mod if not kw_names else call, *inputs)
            if self._out_spec is None:
                self._out_spec = tree_flatten(result)[1]
            return gm
        finally:
            with no_grad():
                for b, old in kept:
                    b.copy_(old)

    def _signature(self) -> ExportGraphSignature:
        """PyTorch's lifted order: every parameter, then every buffer (by name), then the user inputs."""
        mod = self._mod
        persistent = set(mod.state_dict(keep_vars=True))
        specs = [InputSpec(InputKind.PARAMETER, "p_" + name.replace(".", "_"), name)
                 for name, _ in mod.named_parameters()]
        specs += [InputSpec(InputKind.BUFFER, "b_" + name.replace(".", "_"), name, name in persistent)
                  for name, _ in mod.named_buffers()]
        specs += [InputSpec(InputKind.USER_INPUT, name) for name in self._names]
        outputs = []
        for node in self.graph.nodes:
            if node.op == "call_function" and node.target is write_state and node.args[0].op == "get_attr":
                outputs.append(OutputSpec(OutputKind.BUFFER_MUTATION, node.name, node.args[0].target))
            elif node.op == "output":
                flat = node.args[0] if isinstance(node.args[0], (tuple, list)) else (node.args[0],)
                outputs += [OutputSpec(OutputKind.USER_OUTPUT, getattr(o, "name", repr(o))) for o in flat]
        return ExportGraphSignature(specs, outputs)

    @property
    def state_dict(self) -> dict:
        return self._mod.state_dict()

    @property
    def constants(self) -> dict:
        return {}

    def module(self) -> Module:
        """The program as a callable module (PyTorch's unlifted form)."""
        return _Exported(self)

    def run_decompositions(self, decomp_table: dict | None = None, **_: Any) -> "ExportedProgram":
        """The graph already holds only primitive ops: the same program."""
        return self

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use `exported_program.module()` "
                           "instead.")

    def __str__(self) -> str:
        return ("ExportedProgram:\n" + self.graph_module.code + "\nGraph signature: "
                + f"parameters {self.graph_signature.parameters}, buffers {self.graph_signature.buffers}, "
                + f"user inputs {self.graph_signature.user_inputs}"
                + (f"\nRange constraints: {self.range_constraints}" if self.range_constraints else ""))


def export(mod: Module, args: tuple = (), kwargs: dict | None = None, *, dynamic_shapes=None, strict: bool = False,
           preserve_module_call_signature: tuple = ()) -> ExportedProgram:
    """Trace ``mod(*args, **kwargs)`` into an ``ExportedProgram`` (see the module docstring)."""
    if not isinstance(mod, Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod)}.")
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got {type(args)}")
    kwargs = dict(kwargs or {})
    names = _input_names(mod, len(args), kwargs)
    examples = list(args) + list(kwargs.values())
    dims = _dynamic_dims(dynamic_shapes, names, examples)
    return ExportedProgram(mod, names, list(kwargs), examples, dims, args, kwargs)


# ---------------------------------------------------------------- save / load (tapelab's format, not .pt2)
_FORMAT = "tapelab.export/1"


def _attr(module: Module, target: str):
    for part in target.split("."):
        module = getattr(module, part)
    return module


def save(ep: ExportedProgram, f, *, extra_files: dict | None = None, opset_version: dict | None = None,
         pickle_protocol: int = 2) -> None:
    """Write ``ep`` to ``f`` (a path or a binary file); ``extra_files`` maps names to strings stored beside it."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got '{type(ep).__name__}' "
                        "instead.")
    gm = ep.graph_module
    attrs = {n.target: _attr(gm, n.target) for n in ep.graph.nodes if n.op == "get_attr"}
    serialization.save({"format": _FORMAT, "graph": ep.graph, "attrs": attrs, "training": gm.training,
                        "names": ep._names, "kw_names": ep._kw_names, "examples": ep._examples, "dims": ep._dims,
                        "example_inputs": ep.example_inputs, "signature": ep.graph_signature,
                        "range_constraints": ep.range_constraints, "out_spec": ep._out_spec,
                        "extra_files": dict(extra_files or {})},
                       f, pickle_protocol=pickle_protocol)


def load(f, *, extra_files: dict | None = None, expected_opset_version: dict | None = None) -> ExportedProgram:
    """Read a program ``save`` wrote; the names in ``extra_files`` are filled with the strings saved under them."""
    saved = serialization.load(f, weights_only=False)
    if not isinstance(saved, dict) or saved.get("format") != _FORMAT:
        raise RuntimeError(f"{f!r} is not an ExportedProgram saved by tapelab.export.save (PyTorch's .pt2 archives "
                           "are not read)")
    for name in extra_files or {}:
        extra_files[name] = saved["extra_files"].get(name, "")
    gm = GraphModule(saved["attrs"], saved["graph"], "GraphModule")
    gm.train(saved["training"])
    ep = ExportedProgram.__new__(ExportedProgram)
    ep._mod, ep._names, ep._kw_names, ep._examples, ep._dims = (gm, saved["names"], saved["kw_names"],
                                                                saved["examples"], saved["dims"])
    ep.example_inputs, ep.graph_module, ep.graph = saved["example_inputs"], gm, gm.graph
    ep._graphs = {tuple(tuple(x.shape) for x in ep._examples if isinstance(x, Tensor)): gm}
    ep.graph_signature, ep.range_constraints = saved["signature"], saved["range_constraints"]
    ep._out_spec = saved.get("out_spec")
    return ep

"""``compile``'s wrapper: guards, a cache of compiled entries, graph breaks, ``explain``.

A call computes its guard key (each tensor input's shape, dtype, device and requires_grad,
each Python value, the grad mode, the module's training flag). A key seen before runs its
entry; a new one traces the call with ``trace_from_tape`` (a real eager run, whose result is
returned: the compiled graph runs from the next call), builds the call as one autograd node where
its graph is all declared ops (``step.build``, from the traced graph; ``entry.step_reason`` says why
not), lowers the graph's fusible groups into kernels (``fused.lower``) and stores the entry. A branch on a
tensor (``bool(t)``), an ``.item()``, ``.tolist()``, ``.numpy()`` or a printed tensor during the trace
splits the call into compiled segments guarded on the value read (``segments.py``, as torch compiles
the code around a graph break); what the call printed is written again each call (``printed.py``).
A host read of a value over 65536 elements, an in-place write the graph does not write back
(through a view; inputs and buffers such as BatchNorm's running statistics it writes back itself)
or a recurrence the trace unrolled (the tracer keeps an ``nn.LSTM``/``nn.GRU`` layer as its
whole-sequence ops, ``Mode.whole_layer_ops``, except with packed input or a projection, which run
per step) is a graph break: the trace's writes are undone, that key runs eagerly from then on,
and the reason is kept for ``explain``. After ``config.recompile_limit`` (``cache_size_limit``)
entries a function runs eagerly for every new key and says so once on the ``_dynamo.convert_frame``
logger, in ``torch._dynamo``'s words (the limit, the function, the last guard that failed).
``disable`` marks a function never to compile: called inside a trace it is a graph break.
A Python value the graph may have baked in (a module's plain attribute, a function's global or closure
value: ``_Reads``) that changed since the trace drops the entry (a recompile); a call that changes one
itself runs eagerly. Autocast's state is part of the key, and a trace under autocast records the casts
(``autocast.py``): the graph replays with autocast aside.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import logging
import time
import traceback
from threading import get_ident as _get_ident
import weakref
from dataclasses import dataclass, field

from operator import itemgetter

from ..amp.autocast_mode import _STATE as _AUTOCAST
from ..base.device import CPU
from ..base.dtype import _SCALAR_TYPES
from ..base.grad_mode import GRAD_OFF, STATE as GRAD, no_grad
from ..core.dispatch import STATE, Mode
from ..core.tensor import Size, Tensor
from ..fx.proxy import TraceError
from ..fx.graph_module import GraphModule
from ..fx.node import Node
from ..fx.trace_from_tape import guard_inputs, trace_with_output, write_state
from ..nn.modules.module import _PARAMETER_READERS, Module
from ..nn.modules.rnn import GRU, LSTM
from ..utils._pytree import _node_type, keystr, tree_flatten_with_path, tree_unflatten
from . import autocast as _autocast
from . import fused as _fused
from . import printed as _printed
from . import segments as _segments
from . import step as _step
from .pool import _Call as _pool_call
from .overhead import Replays

__all__ = ["compile", "explain", "reset", "config", "disable", "is_compiling", "OptimizedModule", "CompiledFunction",
           "ExplainOutput", "GraphCompileReason", "Unsupported", "TorchDynamoException"]

MODES = (None, "default", "lite", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
REPLAYED = ("reduce-overhead", "max-autotune")      # torch's modes that use CUDA graphs
OPTIONS = ("fuse", "kernels")
# torch's debugging backends (traced, guarded, run op by op without fusion): here all ``backend="eager"``
EAGER_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")
# torch.compile's inductor options that programs pass (``options={"triton.cudagraphs": True,
# "max_autotune": True, ...}``): accepted, as PyTorch accepts its config names, and without effect
# here except ``triton.cudagraphs``, which captures and replays as ``mode="reduce-overhead"``
INDUCTOR_OPTIONS = ("triton.cudagraphs", "max_autotune", "max_autotune_gemm", "max_autotune_pointwise",
                    "epilogue_fusion", "shape_padding", "coordinate_descent_tuning", "freezing", "trace.enabled",
                    "trace.graph_diagram", "cpp_wrapper", "fallback_random", "aggressive_fusion",
                    "layout_optimization", "benchmark_kernel", "triton.unique_kernel_names", "debug",
                    "split_reductions", "conv_1x1_as_mm", "search_autotune_cache", "dce", "size_asserts",
                    "keep_output_stride", "force_same_precision", "triton.cudagraph_trees", "permute_fusion",
                    "pattern_matcher", "reorder_for_locality", "unroll_reductions_threshold")


class _Config:
    """``recompile_limit`` (``cache_size_limit`` is the same setting, as in ``torch._dynamo.config``):
    compiled entries per function before it runs eagerly for new keys."""
    recompile_limit = 8

    @property
    def cache_size_limit(self) -> int:
        return self.recompile_limit

    @cache_size_limit.setter
    def cache_size_limit(self, value: int) -> None:
        self.recompile_limit = value


config = _Config()
LOG = logging.getLogger(__name__.rpartition(".")[0].rpartition(".")[0] + "._dynamo.convert_frame")
_FRAMES = itertools.count()      # each compiled function's frame number, as torch._dynamo's "0/2"
_ALL: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


class TorchDynamoException(RuntimeError):
    """The compiler's errors' base, as ``torch._dynamo.exc.TorchDynamoException``."""


class Unsupported(TorchDynamoException):
    """``fullgraph=True`` and the call needs a graph break (the reason is the message)."""


class _Nested(Exception):
    """An argument is a container (tuple, list, dict, namedtuple): the call goes through its leaves."""


@dataclass
class _Entry:
    guards: list
    graph: object = None            # the lowered GraphModule, or None when eager
    run: object = None
    reason: str | None = None       # why this key runs eagerly
    attrs: list = field(default_factory=list)   # (module, store, name, object) the graph reads: by identity
    signature: tuple | None = None  # the traced graph without sizes' guard: equal ones are size-generic
    times: dict = field(default_factory=dict)
    replays: Replays | None = None  # mode="reduce-overhead": the captured graphs, by exact input shapes
    step: object = None             # the call as one autograd node (``step.Step``), or None
    step_reason: str | None = None  # why the call is not one node
    sizes: object = None            # where the result holds a ``Size`` (``_size_template``), or None
    reads: "_Reads | None" = None   # the Python values the graph baked in (module attributes, globals, closures)
    segments: list = field(default_factory=list)    # a call split at host reads: its graphs (``segments.py``)
    breaks: list = field(default_factory=list)      # the reads' reasons, one per split
    retraces: int = 0               # calls whose reads took another path (each traced as a variant)


class _BreakWatch(Mode):
    """Notes host reads during a trace: each one is data-dependent Python, a graph break."""

    whole_layer_ops = True      # it only watches: an LSTM layer stays one op for the tracer below

    def __init__(self):
        self.reasons: list = []
        self.reads: list = []       # what each host read was (``item``, ``bool``, ``print``...)
        self.shown: list = []       # how a printed tensor may show in the text (``printed.renderings``), else None

    def host_read(self, tensor, what: str) -> None:
        self.reads.append(what)
        self.shown.append(_printed.renderings(tensor) if what == "print" else None)
        stack = _user_stack()
        where = f"{stack[-1].filename}:{stack[-1].lineno}  {stack[-1].line}" if stack else "?"
        self.reasons.append(GraphCompileReason(f"data-dependent: Tensor.{what}() reads a value at {where}", stack))


_TRACING: list = []     # the break watchers of the traces running now (innermost last): ``disable``'s functions


def is_compiling() -> bool:
    """Whether a compiled function is tracing now, as ``torch.compiler.is_compiling()`` is True while Dynamo
    traces: code that skips work when compiled (``if not is_compiling(): log(...)``) records the graph
    that skips it (the trace is an eager run, so the call's first result takes that branch too)."""
    return bool(_TRACING)


class GraphCompileReason(str):
    """Why a call is a graph break, as ``torch._dynamo``'s ``GraphCompileReason``: ``reason``, ``user_stack``
    (the caller's frames, ``traceback.FrameSummary``), ``graph_break``; the reason's text itself too."""

    def __new__(cls, reason: str, user_stack: list | None = None, graph_break: bool = True):
        self = super().__new__(cls, reason)
        self.reason, self.user_stack, self.graph_break = str(reason), list(user_stack or []), graph_break
        return self


def _user_stack() -> list:
    """The calling program's frames (the engine's own left out), outermost first."""
    return [f for f in traceback.extract_stack() if "/engine/" not in f.filename and "tapelab" not in f.filename]


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``torch.compiler.disable``: ``fn`` runs eagerly, never compiled (a decorator too; ``recursive=False``
    the same here: the trace runs the functions ``fn`` calls eagerly either way). Called while a compiled
    function traces, it is a graph break (reported by ``explain``; ``fullgraph=True`` raises), so that call
    runs eagerly; ``compile(disable(f))`` runs ``f`` eagerly."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if isinstance(fn, Module) or getattr(fn, "_tapelab_disabled", False):
        return fn

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        if _TRACING:
            _TRACING[-1].reasons.append(GraphCompileReason(
                f"Skip calling `torch.compiler.disable()`d function\n  Explanation: Skip calling function `{fn!r}` "
                f"since it was wrapped with `torch.compiler.disable` (reason: {reason})\n  Hint: Remove the "
                "`torch.compiler.disable` call", _user_stack()))
        return fn(*args, **kwargs)
    disabled._tapelab_disabled = True
    return disabled


def _part(a):
    """One input's share of the guard key (a Tensor's metadata, a plain value itself; the device by its
    name: devices are interned, and hashing the name's string costs nothing, the device's own hash a call)."""
    if isinstance(a, Tensor):
        return (a._data.shape, a._data.dtype, a._device._name, a.requires_grad)
    if a is None or isinstance(a, (bool, int, float, str)):
        return (type(a), a)
    if _node_type(a) is not None:
        raise _Nested
    if isinstance(a, Module):   # gpt-fast compiles decode_one_token(model, x, input_pos): the module by identity,
        # with its mode and the identity of each parameter and buffer (one reassigned is a new graph input)
        return (type(a), id(a), a.training, tuple(map(id, a.parameters())), tuple(map(id, a.buffers())))
    raise TypeError(type(a).__name__)


def _guard_failure(old: tuple, new: tuple, names: list) -> str:
    """Why guard key ``new`` is not ``old``, in ``torch._dynamo``'s recompile words (its first difference)."""
    if old[0] != new[0]:
        return f"GLOBAL_STATE changed: grad_mode (expected {old[0]}, actual {new[0]})"
    if old[1] != new[1]:
        return f"self.training == {old[1]}"
    for i, (a, b) in enumerate(zip(old[2:], new[2:])):
        if a == b:
            continue
        name = names[i] if i < len(names) else f"arg{i}"
        if type(a) is tuple and len(a) == 2 and type(a[0]) is str and type(b) is tuple:    # a keyword's (name, part)
            a, b = a[1], b[1]
        if type(a) is tuple and len(a) == 4 and type(a[0]) is tuple and type(b) is tuple and len(b) == 4:
            if len(a[0]) != len(b[0]):
                return f"tensor '{name}' rank mismatch. expected {len(a[0])}, actual {len(b[0])}"
            for d, (m, n) in enumerate(zip(a[0], b[0])):
                if m is not None and m != n:
                    return f"tensor '{name}' size mismatch at index {d}. expected {m}, actual {n}"
            if a[1] != b[1]:
                return (f"tensor '{name}' dtype mismatch. expected {_SCALAR_TYPES.get(a[1].name, a[1].name)}, "
                        f"actual {_SCALAR_TYPES.get(b[1].name, b[1].name)}")
            if a[2] != b[2]:
                return f"tensor '{name}' device mismatch. expected {a[2]}, actual {b[2]}"
            return f"tensor '{name}' requires_grad mismatch. expected requires_grad={int(a[3])}"
        if type(a) is tuple and len(a) == 2 and type(a[0]) is type:
            return f"{name} == {a[1]!r}"
        return f"{name} changed"
    return "the guard key changed"


def _guard_text(name: str, a) -> str:
    if isinstance(a, Tensor):
        return (f"{name}: Tensor shape={tuple(a.shape)} dtype={a.dtype.name} device={a.device} "
                f"requires_grad={a.requires_grad}")
    return f"{name} == {a!r}"


class CompiledFunction:
    """``fn`` behind guards and a cache (what ``compile`` returns for a function)."""

    def __init__(self, fn, *, fullgraph: bool, backend, options: dict, module: Module | None = None,
                 dynamic: bool | None = None, mode: str | None = None):
        if module is None:   # a module's bound method (``compile(model.forward)``) is guarded as its module
            owner = getattr(fn, "__self__", None)
            module = owner if isinstance(owner, Module) else None
        self.fn, self.module, self.fullgraph, self.backend, self.mode = fn, module, fullgraph, backend, mode
        self.options = options
        self.cache: dict = {}
        self.dynamic: dict = {}         # key position -> dimensions whose size is an argument
        self.dynamic_mode = dynamic
        self.limit_warned = False
        self.value_recompiles = 0       # entries dropped because a Python value they read changed
        self.nested: dict = {}          # a container arguments' structure -> the compiled call of its leaves
        self.names: list | None = None  # the guards' names of the arguments (the leaves' paths when nested)
        self.frame_id: int | None = None  # torch's frame number ("0/2": frame 0, its third compile), at the first
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        _ALL.add(self)

    @property
    def __code__(self):
        """The wrapper's own code, as the function ``torch.compile`` returns has (dynamo's ``_fn``):
        Lightning compiles a compiled step method again when ``validate`` follows ``fit`` and then
        unwraps one ``__wrapped__`` and compares ``__code__`` with the parent's."""
        return type(self).__call__.__code__

    def _key(self, args: tuple, kwargs: dict) -> tuple:
        """The guard key: grad mode, the module's training flag, one part per argument (``_part``; a
        plain Tensor's inline: this is most of a chain16 call's guard, 0.46 us against 0.72)."""
        m = self.module
        key = [not GRAD_OFF or _get_ident() not in GRAD_OFF, m.training if m is not None else None]
        if _AUTOCAST.mode is not None:
            key[1] = (key[1], _autocast.key())
        for a in args:
            if type(a) is Tensor:
                d = a._data
                key.append((d.shape, d.dtype, a._device._name, a.requires_grad))
            else:
                key.append(_part(a))
        if kwargs:
            key += [(k, _part(v)) for k, v in kwargs.items()]
        return tuple(key)

    def _guards(self, args: tuple, kwargs: dict) -> list:
        """The key in words, for explain()."""
        guards = [f"grad_mode enabled == {GRAD.enabled}"]
        if self.module is not None:
            guards.append(f"self.training == {self.module.training}")
        if _AUTOCAST.mode is not None:
            guards.append(f"autocast (device type, dtype) == {_autocast.key()}")
        names = self.names or [f"arg{i}" for i in range(len(args))]
        return guards + [_guard_text(n, a) for n, a in [*zip(names, args), *kwargs.items()]]

    def __call__(self, *args, **kwargs):
        try:
            key = self._key(args, kwargs)
        except _Nested:
            return self._nested(args, kwargs)
        except TypeError as e:
            return self._eager(args, kwargs, f"unsupported input type {e}")
        exact = key
        entry = self.cache.get(key)
        if entry is None and self.dynamic:
            key = self._masked(key)
            entry = self.cache.get(key)
        if entry is not None and entry.attrs and not _same_attrs(entry.attrs):
            del self.cache[key]          # a parameter or buffer was reassigned: the graph holds the old one
            entry = None
        if entry is not None and entry.reads is not None and not entry.reads.same():
            del self.cache[key]          # a Python value the trace read changed: the graph holds the old one
            entry = None
            self.value_recompiles += 1
            if self.value_recompiles > config.recompile_limit:
                if not self.limit_warned:
                    self.limit_warned = True
                    self._limit_warning(exact, args, kwargs)
                return self.fn(*args, **kwargs)
        if entry is not None:
            if entry.run is None:
                return self.fn(*args, **kwargs)
            if _AUTOCAST.mode is not None:      # the graph holds its casts
                try:
                    with _AUTOCAST.mode.aside():
                        out = self._run(entry, exact, args, kwargs)
                except _segments.Diverged:
                    return self._diverged(entry, args, kwargs)
                return out if entry.sizes is None else _with_sizes(entry.sizes, out)
            if entry.replays is not None:
                out = entry.replays(exact, (*args, *kwargs.values()))
            else:        # without keywords, no unpacking of their values (~0.1 us of a chain16 call)
                try:
                    out = entry.run(*args, *kwargs.values()) if kwargs else entry.run(*args)
                except _segments.Diverged:
                    return self._diverged(entry, args, kwargs)
            return out if entry.sizes is None else _with_sizes(entry.sizes, out)
        guards = self._guards(args, kwargs)
        if len(self.cache) >= config.recompile_limit:
            if not self.limit_warned:
                self.limit_warned = True
                self._limit_warning(exact, args, kwargs)
            return self.fn(*args, **kwargs)
        for mode in STATE.modes:
            mode.compiling(self.__name__)
        if self.frame_id is None:
            self.frame_id = next(_FRAMES)
        entry, out = self._compile(args, kwargs, guards)
        self.cache[self._relax(key, entry)] = entry
        return out

    @staticmethod
    def _run(entry: "_Entry", exact: tuple, args: tuple, kwargs: dict):
        """The entry's graph (or captured replays) on this call's arguments."""
        if entry.replays is not None:
            return entry.replays(exact, (*args, *kwargs.values()))
        return entry.run(*args, *kwargs.values())

    def _diverged(self, entry: "_Entry", args: tuple, kwargs: dict):
        """A split call whose read took a path none of its traces took: trace this call (its result is
        the eager run's) and keep the trace as another variant, up to ``config.recompile_limit`` tries;
        after that the key runs eagerly."""
        entry.retraces += 1
        if entry.retraces > config.recompile_limit:
            entry.run = None
            return self.fn(*args, **kwargs)
        new, out = self._compile(args, kwargs, self._guards(args, kwargs))
        if isinstance(new.run, _segments.Variants):
            entry.run.traces.append(new.run.traces[0])
        return out

    def _limit_warning(self, key: tuple, args: tuple, kwargs: dict) -> None:
        """``torch._dynamo``'s recompile-limit warning, on its logger (``logging``, not ``warnings``): the
        limit, the function and where it is defined, and why the newest entry's guard failed."""
        frame = self.frame_id if self.frame_id is not None else 0
        last = next(reversed(self.cache)) if self.cache else None
        why = _guard_failure(last, key, self._arg_names(args, kwargs)) if last is not None else "no entry"
        code = getattr(self.fn, "__code__", None) or getattr(getattr(self.fn, "forward", None), "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
        LOG.warning("torch._dynamo hit config.recompile_limit (%d)\n   function: '%s'%s\n   last reason: %d/%d: %s\n"
                    'To log all recompilation reasons, use TORCH_LOGS="recompiles".\n'
                    "To diagnose recompilation issues, see "
                    "https://docs.pytorch.org/docs/main/user_guide/torch_compiler/compile/"
                    "programming_model.recompilation.html",
                    config.recompile_limit, self.__name__, where, frame, len(self.cache) - 1, why)

    def _arg_names(self, args: tuple, kwargs: dict) -> list:
        """The arguments' names as the guards call them (the parameters' own where the signature says)."""
        if self.names is not None:
            return [*self.names, *kwargs]
        try:
            fn = self.fn.forward if isinstance(self.fn, Module) else self.fn
            params = [p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        return [params[i] if i < len(params) else f"arg{i}" for i in range(len(args))] + list(kwargs)

    def _nested(self, args: tuple, kwargs: dict):
        """A call with container arguments (``f((a, b), x)``, a dict of tensors), as ``torch.compile``
        takes them: guarded on the containers' structure (types, lengths, keys), the compiled call
        takes their leaves (tensors and plain values, each guarded as a lone argument would be) and
        rebuilds the containers for ``fn``. One compiled call (with its own cache) per structure."""
        pairs, spec = tree_flatten_with_path((args, kwargs))
        inner = self.nested.get(spec)
        if inner is None:
            fn = self.fn

            def leaves_call(*leaves):
                a, k = tree_unflatten(leaves, spec)
                return fn(*a, **k)
            inner = CompiledFunction(leaves_call, fullgraph=self.fullgraph, backend=self.backend,
                                     options=self.options, module=self.module, dynamic=self.dynamic_mode,
                                     mode=self.mode)
            inner.__name__ = self.__name__
            inner.names = [(f"arg{path[1].idx}" if path[0].idx == 0 else str(path[1].key)) + keystr(path[2:])
                           for path, _ in pairs]
            self.nested[spec] = inner
        return inner(*(leaf for _, leaf in pairs))

    def _masked(self, key: tuple) -> tuple:
        """``key`` with the sizes of dynamic dimensions as None."""
        def one(i, part):
            dims = self.dynamic.get(i)
            if not dims or type(part) is not tuple or len(part) != 4 or type(part[0]) is not tuple:
                return part
            return (tuple(None if d in dims else n for d, n in enumerate(part[0])), *part[1:])
        return tuple(one(i, p) for i, p in enumerate(key))

    def _relax(self, key: tuple, entry: "_Entry") -> tuple:
        """Automatic dynamic shapes, as ``torch.compile``'s: a recompile whose trace differs from an
        earlier entry's only in some tensor sizes (the same ops, the same arguments: no size was
        baked into the graph) marks those dimensions dynamic; the entry is stored under the key
        with them masked, and its kernels take sizes as arguments, so a third size runs it."""
        if self.dynamic_mode is False or entry.signature is None:
            return key
        for old_key, old in self.cache.items():
            if old.signature != entry.signature or len(old_key) != len(key):
                continue
            dims = {}
            for i, (a, b) in enumerate(zip(old_key, key)):
                if a == b:
                    continue
                if not (type(a) is tuple and len(a) == 4 and type(a[0]) is tuple and a[1:] == b[1:]
                        and len(a[0]) == len(b[0])):
                    break
                changed = {d for d, (m, n) in enumerate(zip(a[0], b[0])) if m != n}
                if any(a[0][d] in (0, 1) or b[0][d] in (0, 1) for d in changed if a[0][d] is not None):
                    break                              # 0 and 1 stay specialised (broadcasting), as torch's
                dims[i] = changed
            else:
                if dims:
                    for i, d in dims.items():
                        self.dynamic.setdefault(i, set()).update(d)
                    entry.guards += [f"arg{i - 2}.size({d}) is dynamic" for i, ds in sorted(dims.items())
                                     for d in sorted(ds)]        # key positions 0, 1: grad mode, training
                    return self._masked(key)
        return key

    def _eager(self, args, kwargs, reason):
        if self.fullgraph:
            raise Unsupported(f"tapelab.compile(fullgraph=True): {self.__name__}: {reason}")
        return self.fn(*args, **kwargs)

    def _step(self, gm, flat: tuple, result, autocast: bool) -> tuple:
        """``(step.Step, None)``: the call as one autograd node (default mode, fused, grad mode on, not
        traced under autocast), else ``(None, why not)``. Built from the traced graph before it is lowered."""
        if callable(self.backend) or self.backend == "eager" or not self.options.get("fuse", True):
            return None, "one-node step: not built for this backend or options"
        if self.mode in REPLAYED:
            return None, f"one-node step: mode={self.mode!r} replays captured graphs instead"
        if not GRAD.enabled:
            return None, "one-node step: grad mode is off (nothing to differentiate)"
        if autocast:
            return None, "one-node step: not built under autocast (its half floats take the dispatcher's conversions)"
        try:
            name = type(self.module).__name__ if self.module is not None else self.__name__
            return _step.build(gm, flat, result, name, backend=self.options.get("kernels", "auto")), None
        except _step.Unbuildable as e:
            return None, str(e)

    def _splits(self, whats: list, host: list, flat: tuple) -> bool:
        """Whether a call with host reads or printed text (and no other break) runs as segments: each
        read a branch's ``bool``, an ``.item()``, ``.tolist()``, ``.numpy()`` or a print of a recorded
        tensor, on the cpu, with tapelab's or the eager backend and no replayed mode.
        ``fullgraph=True`` takes ``.item()`` reads (torch 2.13 captures the scalar there), not the
        others (torch raises)."""
        return (all(w in _segments.SPLIT_READS for w in whats)
                and all(node is not None and value is not None for node, _, value in host)
                and not callable(self.backend) and self.mode not in REPLAYED
                and all(a._device is CPU for a in flat if isinstance(a, Tensor))
                and not (self.fullgraph and any(w != "item" for w in whats)))

    def _split(self, gm, host: list, reasons: list, flat: tuple, out, guards: list, reads, times: dict,
               texts: "_printed.Texts | None"):
        """The call as compiled segments between its host reads (``segments.py``), each lowered as a
        whole graph is (no one-node step: the reads sit between the segments), writing the text the
        trace printed (``printed.py``)."""
        t1 = time.perf_counter()
        segments = _segments.split(gm, host, self.__name__)
        inputs = _segments.examples(segments, flat)
        checks = [_segments.Check(what, None if texts is not None and texts.filled(k + 1) else value)
                  for k, (_, what, value) in enumerate(host)]
        runs, attrs = [], []
        k0 = _fused.STATS["kernel_seconds"]
        for i, (seg, example) in enumerate(zip(segments, inputs)):
            if self.backend != "eager" and self.options.get("fuse", True):
                seg = segments[i] = _fused.lower(seg, example, backend=self.options.get("kernels", "auto"))
                attrs += _attrs(self.module, seg)
                _bind_attrs(seg)
                _fused.prepare_kernels(seg)
                runs.append(seg.forward)
            else:
                attrs += _attrs(self.module, seg)
                runs.append(seg)
        times["fuse"] = time.perf_counter() - t1 - (_fused.STATS["kernel_seconds"] - k0)
        times["kernels"] = _fused.STATS["kernel_seconds"] - k0
        guards += [f"self.{path} is the tensor traced" for path, *_ in attrs]
        guards += [f"segment {i} read: {c!r}" for i, c in enumerate(checks)]
        return _Entry(guards, graph=segments[-1], run=_segments.Variants(_segments.Segments(runs, checks, texts)),
                      times=times, attrs=[(owner, _store(owner, leaf), leaf, obj) for _, owner, leaf, obj in attrs],
                      step_reason="one-node step: not built for a call split at a graph break",
                      sizes=_size_template(out), reads=reads, segments=segments, breaks=list(reasons)), out

    def _compile(self, args: tuple, kwargs: dict, guards: list):
        fn, names = self.fn, list(kwargs)
        n = len(args)
        call = fn if not names else (lambda *a: fn(*a[:n], **dict(zip(names, a[n:]))))
        flat = (*args, *kwargs.values())
        watch = _BreakWatch()
        state = _State(flat, self.module)
        reads = _Reads.of(self.module, self.fn)
        t0 = time.perf_counter()
        kept, host = [], []
        with contextlib.ExitStack() as casts:      # autocast: off from here on but inside the trace
            again = casts.enter_context(_autocast.traced()) if _AUTOCAST.mode is not None else None
            try:
                _TRACING.append(watch)
                with watch, _printed.Tee(watch.reads) as tee:
                    gm, out = trace_with_output(call, *flat, whole_layer_ops=True, kept=kept, reads=host,
                                                inside=again)
            except TraceError as e:
                reason = GraphCompileReason(f"untraceable: {e}")
                if hasattr(e, "result") and not self.fullgraph:   # the trace ran the call eagerly to its end
                    return _Entry(guards, reason=reason), e.result
                state.restore()
                casts.close()
                return _Entry(guards, reason=reason), self._eager(args, kwargs, reason)
            finally:
                _TRACING.remove(watch)
            texts = _printed.Texts(tee, watch.shown) if tee.writes else None
            return self._build(gm, out, args, kwargs, guards, watch, state, reads, kept, host, t0, texts,
                               again is not None)

    def _build(self, gm, out, args: tuple, kwargs: dict, guards: list, watch: "_BreakWatch", state: "_State",
               reads, kept: list, host: list, t0: float, texts: "_printed.Texts | None", autocast: bool):
        """The entry for a traced call: a graph break's reason, its segments, or its lowered graph."""
        flat = (*args, *kwargs.values())
        times = {"trace": time.perf_counter() - t0}
        signature = _signature(gm)
        mutated = state.mutated(_written(gm, flat))
        if mutated:       # the graph would not replay an in-place write into state it does not own
            watch.reasons.append(GraphCompileReason(f"in-place update of {mutated}: a graph cannot replay it"))
        if kept:          # a graph replays tensor work only, not the hand-over (torch.compile replays it)
            watch.reasons.append(GraphCompileReason(
                f"Python side effect: a tensor the call made is kept in {', '.join(kept)}; "
                "a graph would not hand it over again"))
        if reads is not None and not reads.same():      # ``self.calls += 1``: the graph would not repeat it
            watch.reasons.append(GraphCompileReason("Python side effect: the call changed a module attribute, "
                                                    "global or closure value; a graph would not change it again"))
        unrolled = _unrolled_recurrence(self.module, gm)
        if ((host or texts) and len(host) == len(watch.reasons) and not unrolled
                and self._splits(watch.reads, host, flat)):
            return self._split(gm, host, watch.reasons, flat, out, guards, reads, times, texts)
        if watch.reasons or unrolled:
            reason = (watch.reasons or [GraphCompileReason(unrolled)])[0]
            if self.fullgraph:
                state.restore()
                raise Unsupported(f"tapelab.compile(fullgraph=True): {self.__name__}: {reason}")
            # the trace ran every op eagerly to the end, so its result is this call's eager result;
            # running the call again would repeat its effects (an optimizer step, a list.append)
            return _Entry(guards, reason=reason, times=times), out
        t1 = time.perf_counter()
        step, step_reason = self._step(gm, flat, out, autocast)
        if step is not None:
            times["step"] = time.perf_counter() - t1        # its kernels' build included
            t1 = time.perf_counter()
        k0 = _fused.STATS["kernel_seconds"]
        if callable(self.backend):
            run = self.backend(gm, list(flat))
        elif self.backend == "eager" or not self.options.get("fuse", True):
            run = gm
        else:
            run = gm = _fused.lower(gm, list(flat), backend=self.options.get("kernels", "auto"), prepare=step is None)
        attrs = _attrs(self.module, gm)
        guards += [f"self.{path} is the tensor traced" for path, *_ in attrs]
        lowered = run is gm and isinstance(gm, GraphModule) and hasattr(gm, "fused_ops")
        if lowered:
            _bind_attrs(gm)
            run = gm.forward          # the graph's own code: no Module.__call__ (hooks) around it
        if step is not None:
            step_reason = _keeps_lowered(gm)
            step = None if step_reason else step
        if lowered and step is None:
            _name_call_node(gm)
            run = _one_op_call(gm, flat) or run
        if step is None and lowered:
            _fused.prepare_kernels(gm)     # the lowered graph is the call: its kernels and backwards now
        times["fuse"] = time.perf_counter() - t1 - (_fused.STATS["kernel_seconds"] - k0)
        times["kernels"] = _fused.STATS["kernel_seconds"] - k0
        entry = _Entry(guards, graph=gm, run=step or run, times=times,
                       attrs=[(owner, _store(owner, leaf), leaf, obj) for _, owner, leaf, obj in attrs],
                       signature=signature if lowered else None, step=step, step_reason=step_reason,
                       sizes=_size_template(out), reads=reads)

        if self.mode in REPLAYED and isinstance(gm, GraphModule):
            entry.replays = Replays(entry, self.__name__)
        return entry, out


_PLAIN = (bool, int, float, str, type(None))


class _Reads:
    """The Python values a graph may have baked in, as ``torch._dynamo`` guards the attributes and globals
    it reads (``x / self.temperature``, ``x * SCALE``, ``x * cfg["k"]``): each module's public plain
    attributes (numbers, strings, flags, None), and a function's globals its code names and closure cells
    (plain values, tensors by identity, lists, tuples and dicts of them). The trace is an eager run, so
    what it read is not known: all of them."""

    def __init__(self, reads: list):
        self.reads = reads          # (read(), its value when traced)

    @classmethod
    def of(cls, module: Module | None, fn) -> "_Reads | None":
        reads, seen = [], set()
        if module is not None:
            for m in module.modules():
                d = m.__dict__
                names = [k for k, v in d.items() if k[0] != "_" and type(v) in _PLAIN]
                if names:
                    reads.append(functools.partial(itemgetter(*names), d))
                forward = getattr(type(m), "forward", None)      # the globals each module's forward names
                if forward not in seen:
                    seen.add(forward)
                    reads += _global_reads(forward)
        else:
            reads += _global_reads(fn)
            reads += [functools.partial(_cell_print, c) for c in getattr(fn, "__closure__", None) or ()]
        pairs = []
        for read in reads:
            try:
                value = read()
            except (KeyError, ValueError):      # a cell not filled yet
                continue
            if value is not _UNKNOWN:
                pairs.append((read, value))
        return cls(pairs) if pairs else None

    def same(self) -> bool:
        """Whether every value is still what the trace saw (a removed attribute is a change), NaN equal to
        NaN as in torch's guards. ``==`` first (a tuple compares its items by identity, then value, in C);
        the slower walk only where that says no. Unlike torch's guards, ``1`` and ``1.0`` are the same
        value here: checking each value's type too took a 22-module GPT's check from 2.3 to 6.3 us a call."""
        try:
            for read, old in self.reads:
                new = read()
                if new != old and not _equal(new, old):
                    return False
            return True
        except (KeyError, ValueError):
            return False


def _equal(a, b) -> bool:
    """Equal as ``torch._dynamo``'s value guards are: identical, or the same type and value (a float NaN
    equal to NaN, which ``==`` says is not), tuples item by item (where ``==`` said no)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(map(_equal, a, b))
    if type(a) is float and a != a:
        return b != b
    return a == b


def _global_reads(fn) -> list:
    """A read of each global ``fn``'s code names (its nested functions' and comprehensions' too)."""
    glob, code = getattr(fn, "__globals__", None), getattr(fn, "__code__", None)
    if glob is None or code is None:
        return []
    names, codes = [], [code]
    while codes:
        c = codes.pop()
        names += c.co_names
        codes += [k for k in c.co_consts if inspect.iscode(k)]
    return [functools.partial(_global_print, glob, n) for n in dict.fromkeys(names) if n in glob]


_UNKNOWN = object()     # a value no guard watches (a module, a function, an object)
_CONTAINER_MAX = 64


class _Same:
    """A tensor in a guard's value: equal to the same tensor object only."""
    __slots__ = ("t",)

    def __init__(self, t: Tensor):
        self.t = t

    def __eq__(self, other) -> bool:
        return type(other) is _Same and other.t is self.t

    __hash__ = None


def _print(v):
    """What a guard compares of ``v``: a plain value itself, a tensor by identity, a short list, tuple or
    dict of those element by element; ``_UNKNOWN`` for anything else."""
    if type(v) in _PLAIN:
        return v
    if isinstance(v, Tensor):
        return _Same(v)
    if type(v) in (list, tuple) and len(v) <= _CONTAINER_MAX:
        parts = tuple(map(_print, v))
        return _UNKNOWN if any(p is _UNKNOWN for p in parts) else (type(v), parts)
    if type(v) is dict and len(v) <= _CONTAINER_MAX:
        parts = tuple((k, _print(x)) for k, x in v.items())
        return _UNKNOWN if any(p is _UNKNOWN for _, p in parts) else (dict, parts)
    return _UNKNOWN


def _global_print(glob: dict, name: str):
    return _print(glob[name])


def _cell_print(cell):
    return _print(cell.cell_contents)


def _size_template(result):
    """Where ``result`` holds a ``Size`` (a shape the call returns): ``Size`` there, a list or dict of
    the parts around it, None for everything else (and for a result holding none). A graph's output
    holds each as a plain tuple, as fx's ``map_aggregate`` rebuilds it; ``_with_sizes`` puts it back."""
    if isinstance(result, Size):
        return Size
    if isinstance(result, (tuple, list)):
        parts = [_size_template(a) for a in result]
    elif isinstance(result, dict):
        parts = {k: _size_template(a) for k, a in result.items()}
    else:
        return None
    return parts if any(p is not None for p in (parts.values() if isinstance(parts, dict) else parts)) else None


def _with_sizes(template, out):
    """A replayed ``out`` with a ``Size`` again wherever the traced call returned one."""
    if template is Size:
        return Size(out)
    if isinstance(template, dict):
        return {k: a if template[k] is None else _with_sizes(template[k], a) for k, a in out.items()}
    parts = [a if t is None else _with_sizes(t, a) for t, a in zip(template, out)]
    return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)


def _keeps_lowered(gm) -> str | None:
    """Why the lowered graph runs rather than the one-node step, or None: it is one op already
    (chain16's fused kernel), or it holds a fused ReLU and 2x2 max-pool, whose one-pass backward
    the step's joint graph would split back into the pool's and the ReLU's (the relu's output is
    read by the backward, so the forward half cannot fuse it)."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if len(calls) == 1 and not _recompute_costly(calls[0]):
        return "one-node step: the lowered graph is one op already"
    if any(isinstance(n.target, _pool_call) for n in calls):
        return "one-node step: the graph keeps its fused relu_max_pool2d (one-pass forward and backward)"
    return None


_RECOMPUTE_MIN = 1 << 16


def _recompute_costly(node) -> bool:
    """Whether a one-op lowered graph's fused kernel is better run as the one-node step: at least
    64k elements and two transcendental members, so that its backward's recompute (the fused op's
    vjp runs the whole chain again from the inputs) costs more than the step's saved intermediates'
    memory traffic. chain1M (tanh, sigmoid over 1M floats, process CPU time, fresh processes): fused op
    3.0-3.3 ms a step (forward 1.15, recomputing backward 1.94), the step 1.9-2.5 ms (forward with two
    saved outputs 1.4, sum 0.15, backward over saved values 0.6); one tanh over 1M is a tie (1.75 / 1.86 ms), mul/add chains
    are 3x faster recomputed (0.42 / 1.5 ms), and under 4k elements the fused op's one call wins
    (chain16 19 / 27 us)."""
    op = getattr(getattr(node, "target", None), "op", None)
    kernel = getattr(op, "kernel", None)
    if not isinstance(node.target, _fused.FusedCall) or kernel is None:
        return False
    size = 1
    for s in kernel.shape:
        if not isinstance(s, int):
            return False
        size *= s
    return size >= _RECOMPUTE_MIN and sum(m in _fused.TRANSCENDENTAL for m in kernel.members) >= 2


def _name_call_node(gm) -> None:
    """A lowered graph that is one op (chain16's fused kernel) is the call's node: its outputs' ``grad_fn``
    is named as torch's for a compiled call (``CompiledFunctionBackward``); the op is this graph's own."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if len(calls) == 1 and isinstance(calls[0].target, _fused.FusedCall) and calls[0].target.op.differentiable:
        op = calls[0].target.op
        op.backward_name, op.node_type = "CompiledFunctionBackward", None


def _one_op_call(gm, flat: tuple):
    """The entry's call when the lowered graph is one fused op on its placeholders returning its
    result (``FusedOp.call``: no graph ``forward``, ``apply`` or ``fast`` around the loop) and the
    tensors are on the cpu (the key holds each tensor's device: the entry's calls are too), else None."""
    if not all(a._device is CPU for a in flat if isinstance(a, Tensor)):
        return None
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    if len(calls) != 1 or calls[0].op != "call_function" or not isinstance(calls[0].target, _fused.FusedCall):
        return None
    node, places = calls[0], [n for n in gm.graph.nodes if n.op == "placeholder"]
    if node.kwargs or gm.graph.output_node().args[0] is not node or not all(a in places for a in node.args):
        return None
    if not node.target.op.differentiable:
        return None
    return node.target.op.call(tuple(places.index(a) for a in node.args), len(places), gm.forward)


def _same_attrs(attrs: list) -> bool:
    """Whether each parameter or buffer a graph holds is still its module's: one read of the dict
    that held it (through ``Module.__getattr__`` the guard was 6 us a call for tiny_mlp's eight
    parameters, 3% of its compiled step; the dict 0.8 us), by ``getattr`` while a
    ``reading_parameters`` context (fx's symbolic tracing) stands in for what a module reads."""
    if _PARAMETER_READERS:
        return all(getattr(owner, leaf, None) is obj for owner, _, leaf, obj in attrs)
    return all(store.get(leaf) is obj for _, store, leaf, obj in attrs)


def _store(owner: Module, leaf: str) -> dict:
    """The dict an attribute read of ``owner.leaf`` finds it in (``__setattr__`` keeps a name in one)."""
    d = owner.__dict__
    return d if leaf in d else d["_parameters"] if leaf in d["_parameters"] else d["_buffers"]


def _unrolled_recurrence(module: Module | None, gm) -> str | None:
    """Why the graph would be slower than eager, when it is: an ``nn.LSTM``/``nn.GRU`` layer the
    tracer could not keep as its two whole-sequence ops (``RNNBase._whole_layer_op``: packed input, a
    projection) was recorded as one cell op per time step, and a graph unrolling the recurrence ran
    slower than eager (the bench's LSTM LM step: 0.19 s against 0.10 s)."""
    if module is None:
        return None
    cells = sum(1 for n in gm.graph.nodes if getattr(n.target, "__name__", None) in ("lstm_cell", "gru_cell"))
    layers = [name for name, m in module.named_modules() if isinstance(m, (LSTM, GRU))]
    if not cells or not layers:
        return None
    return (f"unrolled recurrence: {layers[0] or type(module).__name__} traced as {cells} per-step cell ops "
            "(no whole-layer op for this configuration: packed input or proj_size); the eager call is faster")


def _signature(gm) -> tuple:
    """The traced graph as ops and arguments (nodes by name, constants by shape), its input guard
    left out: two traces at different sizes with equal signatures baked no size into the graph."""
    def one(a):
        if isinstance(a, Node):
            return a.name
        if isinstance(a, (tuple, list)):
            return tuple(one(x) for x in a)
        if isinstance(a, dict):
            return tuple((k, one(v)) for k, v in a.items())
        return repr(a)
    out = []
    for n in gm.graph.nodes:
        if n.target is guard_inputs:
            continue
        if n.op == "get_attr":
            t = _fetch(gm, n.target)
            out.append((n.op, n.target, tuple(t.shape) if isinstance(t, Tensor) else repr(t)))
            continue
        out.append((n.op, getattr(n.target, "__name__", str(n.target)), one(n.args), one(n.kwargs)))
    return tuple(out)


def _fetch(gm, path: str):
    obj = gm
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _attrs(module: Module | None, gm) -> list:
    """``(path, owner, name, object)`` for each parameter or buffer the graph reads from ``module``:
    the graph holds those objects, so ``module.fc.weight = Parameter(...)`` must recompile."""
    if module is None:
        return []
    out = []
    for path in (n.target for n in gm.graph.nodes if n.op == "get_attr"):
        owner_path, _, leaf = path.rpartition(".")
        try:
            owner = module.get_submodule(owner_path) if owner_path else module
        except AttributeError:
            continue                       # a constant the trace made, not the module's
        obj = getattr(owner, leaf, None)
        if isinstance(obj, Tensor):
            out.append((path, owner, leaf, obj))
    return out


def _bind_attrs(gm) -> None:
    """Each dotted ``get_attr`` (``net.0.weight``: three ``Module.__getattr__`` calls a step, about a
    microsecond per parameter) reads one name in the GraphModule's own ``__dict__`` instead. The
    tensor is the same object, so in-place updates (an optimizer step, ``.data =``) are seen; a
    reassigned parameter is caught by the entry's identity guard (``_attrs``, taken before this)."""
    for n in gm.graph.nodes:
        if n.op == "get_attr" and "." in n.target:
            flat = "_attr_" + n.target.replace(".", "_")
            while flat in gm.__dict__ and gm.__dict__[flat] is not _fetch(gm, n.target):
                flat += "_"
            gm.__dict__[flat] = _fetch(gm, n.target)
            n.meta["attr_path"], n.target = n.target, flat      # the module path, for views and explain
    gm.recompile()


def _written(gm, flat: tuple) -> set:
    """ids of the tensors the graph's ``write_state`` nodes update (inputs and module state)."""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is write_state:
            target = n.args[0]
            out.add(id(flat[places.index(target)] if target.op == "placeholder" else _fetch(gm, target.target)))
    return out


class _State:
    """The tensors a call may write in place (its tensor inputs, the module's buffers), their
    versions and copies: a trace that wrote them is undone before the call runs eagerly."""

    def __init__(self, flat: tuple, module: Module | None):
        named = [(f"input {i}", a) for i, a in enumerate(flat) if isinstance(a, Tensor)]
        if module is not None:
            named += [(f"buffer {n}", b) for n, b in module.named_buffers()]
            named += [(f"parameter {n}", p) for n, p in module.named_parameters()]
        with no_grad():
            self.saved = [(n, t, t._vc[0], None if n.startswith("parameter") else t.detach().clone())
                          for n, t in named]

    def mutated(self, written: set) -> str:
        """The state the trace changed that the graph does not write back (ids in ``written``)."""
        return ", ".join(n for n, t, v, _ in self.saved if t._vc[0] != v and id(t) not in written)

    def restore(self) -> None:
        with no_grad():
            for _, t, v, copy in self.saved:
                if copy is not None and t._vc[0] != v:
                    t.copy_(copy)


class OptimizedModule(Module):
    """A compiled module: calls go through the compiled forward; parameters, buffers,
    ``state_dict`` (keys prefixed ``_orig_mod.``, as PyTorch's) and attributes are the
    original module's."""

    def __init__(self, mod: Module, compiled: CompiledFunction):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = compiled

    def forward(self, *args, **kwargs):
        return self.__dict__["_compiled"](*args, **kwargs)

    @property
    def dynamo_ctx(self):
        """A decorator that compiles a function with this module's settings, as ``torch.compile``'s
        ``OptimizedModule.dynamo_ctx`` (Lightning's ``from_compiled`` wraps the step methods with it)."""
        c = self.__dict__["_compiled"]
        return compile(fullgraph=c.fullgraph, backend=c.backend, options=c.options or None, dynamic=c.dynamic_mode,
                       mode=c.mode)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._modules['_orig_mod']!r})"


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="tapelab", mode=None,
            options: dict | None = None, disable: bool = False):
    """Compile a module or function: fusible elementwise groups become one kernel each.

    Args:
        model: an ``nn.Module`` (returns an ``OptimizedModule``) or a function (returns a
            ``CompiledFunction``); omitted, returns a decorator.
        fullgraph: raise ``Unsupported`` instead of running eagerly at a graph break.
        dynamic: ``None`` or ``True``: automatic dynamic shapes (a second size whose trace is the
            same graph marks the changed dimensions dynamic; later sizes reuse that entry);
            ``False``: every new size recompiles.
        backend: ``"tapelab"`` (``"inductor"`` is the same), ``"eager"`` (trace and guards,
            no fusion) or a callable ``backend(gm, example_inputs) -> callable``.
        mode: one of PyTorch's mode names (all compile the same way); ``"reduce-overhead"`` and
            ``"max-autotune"`` also capture each compiled entry's forward and backward as graphs
            after a warm-up call and replay them (``overhead.py``), as torch's CUDA graphs.
        options: ``{"fuse": bool, "kernels": "auto" | "numba" | "numpy"}``.
        disable: return ``model`` unchanged.

    >>> @tapelab.compile
    ... def f(x):
    ...     return (x * 2.0 + 1.0).tanh()
    >>> f(tapelab.randn(4))        # traced, fused into fused(mul, add, tanh), run
    """
    if mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in MODES if m)}")
    options = dict(options or {})
    unknown = [k for k in options if k not in OPTIONS and k not in INDUCTOR_OPTIONS]
    if unknown:
        raise RuntimeError(f"Unexpected optimization option {unknown[0]}, known options are "
                           f"{list(OPTIONS + INDUCTOR_OPTIONS)}")
    if mode is not None and options:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if options.get("triton.cudagraphs"):
        mode = "reduce-overhead"
    options = {k: v for k, v in options.items() if k in OPTIONS}
    if not (callable(backend) or backend in ("tapelab", "inductor", *EAGER_BACKENDS)):
        raise RuntimeError(f"tapelab.compile: unknown backend {backend!r}; use 'tapelab', 'inductor', "
                           f"{', '.join(map(repr, EAGER_BACKENDS))} or a callable backend(gm, example_inputs)")
    if backend in EAGER_BACKENDS:
        backend = "eager"

    def wrap(m):
        if disable:
            return m
        if isinstance(m, Module):
            return OptimizedModule(m, CompiledFunction(m, fullgraph=fullgraph, backend=backend, options=options,
                                                       module=m, dynamic=dynamic, mode=mode))
        if not callable(m):
            raise RuntimeError(f"tapelab.compile: expected a Module or a callable, got {type(m).__name__}")
        if isinstance(m, CompiledFunction):    # compiled again: the original, as torch.compile does
            m = m.fn
        return CompiledFunction(m, fullgraph=fullgraph, backend=backend, options=options, dynamic=dynamic, mode=mode)
    return wrap if model is None else wrap(model)


@dataclass
class ExplainOutput:
    """What one call of a compiled function did, shaped like ``torch._dynamo.explain``'s: ``break_reasons``
    are ``GraphCompileReason`` (``.reason``, ``.user_stack``), ``compile_times`` torch's text of the
    phases' seconds (``times``: the same as a dict), ``out_guards`` the guards in words; ``one_node`` is
    tapelab's: per graph, the one-node step's op and members, or why the call is not one node."""
    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list | None = None
    out_guards: list | None = None
    compile_times: str | None = None
    one_node: list = field(default_factory=list)
    times: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, r in enumerate(self.break_reasons):
            lines += [f"  Break Reason {i + 1}:", f"    Reason: {getattr(r, 'reason', r)}", "    User Stack:"]
            lines += [f"      {f}" for f in getattr(r, "user_stack", ())]
        if self.ops_per_graph is not None:
            lines.append("Ops per Graph:")
            for i, ops in enumerate(self.ops_per_graph):
                lines.append(f"  Ops {i + 1}:")
                lines += [f"    {o}" for o in ops]
        if self.out_guards is not None:
            lines.append("Out Guards:")
            for i, g in enumerate(self.out_guards):
                lines += [f"  Guard {i + 1}:", f"    {g}"]
        lines.append("One Node:")
        lines += [f"  {o}" for o in self.one_node]
        if self.compile_times is not None:
            lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__


def explain(fn, *args, **kwargs):
    """Compile ``fn`` afresh, call it on ``args``, and report its graphs, guards, breaks and times.
    Without arguments it returns the function to call with them, as ``torch._dynamo.explain(fn)(*args)``.

    >>> print(tapelab.compiler.explain(f, tapelab.randn(4)))     # or explain(f)(tapelab.randn(4))
    Graph Count: 1 ...
    """
    if not args and not kwargs:
        return lambda *a, **k: _explain(fn, *a, **k)
    return _explain(fn, *args, **kwargs)


def _explain(fn, *args, **kwargs) -> ExplainOutput:
    # a compiled function is explained as its function; any other wrapper (``disable``'s, a program's own
    # ``functools.wraps`` decorator) runs as it is, as torch's explain traces the callable it is given
    target = fn._orig_mod if isinstance(fn, OptimizedModule) else fn.fn if isinstance(fn, CompiledFunction) else fn
    compiled = CompiledFunction(target, fullgraph=False, backend="tapelab", options={},
                                module=target if isinstance(target, Module) else None)
    compiled(*args, **kwargs)
    entries = [*compiled.cache.values(), *(e for inner in compiled.nested.values() for e in inner.cache.values())]
    graphs = [g for e in entries for g in (e.segments or ([e.graph] if e.graph is not None else []))]
    ops = [[_op_label(n) for n in g.graph.nodes if n.op in ("call_function", "call_method")
            and _op_label(n) != "guard_inputs"] for g in graphs]
    times: dict = {}
    for e in entries:
        for k, v in e.times.items():
            times[k] = times.get(k, 0.0) + v
    one_node = [f"{e.step.op.name}: one autograd node ({', '.join(e.step.members)})" if e.step is not None
                else e.step_reason for e in entries if e.graph is not None]
    text = "TorchDynamo compilation metrics:\nFunction, Runtimes (s)\n" + "".join(
        f"{k}, {v:.4f}\n" for k, v in times.items())
    breaks = [r for e in entries for r in (e.breaks or ([e.reason] if e.reason else []))]
    return ExplainOutput(graphs, len(graphs), len(breaks), breaks, sum(map(len, ops)), ops,
                         [g for e in entries for g in e.guards], text, one_node, times)


def _op_label(node) -> str:
    t = node.target
    return repr(t) if isinstance(t, _fused.FusedCall) else getattr(t, "__name__", str(t))


def reset() -> None:
    """Forget every compiled entry (the next call of each compiled function traces again)."""
    for c in list(_ALL):
        c.cache.clear()
        c.nested.clear()
        c.dynamic.clear()            # automatic dynamic shapes start again from the next sizes seen
        c.limit_warned = False
        c.value_recompiles = 0

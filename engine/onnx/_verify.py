"""``verify``: the exported file in onnxruntime against tapelab, down to the first node that differs.

Every output is compared with the model's eager outputs. On a mismatch every traced node's ONNX
value is exposed as an extra graph output of the file, one onnxruntime run gives them all, and
the nodes are compared in graph order against the values the trace kept: the first that differs
(its inputs agreed, since every node before it did) is the culprit, named by its tapelab op,
module path and source line. ``onnx.reference.ReferenceEvaluator`` runs the same exposed graph as
the second oracle: it agreeing with onnxruntime there says the lowering is wrong, agreeing with
tapelab says the runtime is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from ..base.grad_mode import no_grad
from ..core.tensor import Tensor
from ..fx.node import map_aggregate
from ..nn.modules.module import Module
from ._export import Exported, build

__all__ = ["verify", "VerifyResult", "Mismatch"]


@dataclass
class Mismatch:
    """The first node whose onnxruntime value differs from tapelab's."""
    node: str
    op: str
    module: str
    source: str
    onnx_value: str
    max_abs_diff: float
    max_rel_diff: float
    shape: tuple
    reference: str = ""       # which side onnx.reference agrees with: "onnxruntime", "tapelab", "neither", ""

    def __str__(self) -> str:
        ref = f"; onnx.reference agrees with {self.reference}" if self.reference else ""
        return (f"first mismatch at node {self.node}: op '{self.op}' in module {self.module or '<top>'} at "
                f"{self.source or '<unknown line>'} (ONNX value {self.onnx_value}, shape {self.shape}): max abs "
                f"diff {self.max_abs_diff:.3g}, max rel diff {self.max_rel_diff:.3g}{ref}")


@dataclass
class VerifyResult:
    """What ``verify`` found: per-output max differences and, if any differs, the first node."""
    ok: bool
    outputs: dict = field(default_factory=dict)      # output name -> max abs diff
    mismatch: Mismatch | None = None

    def __str__(self) -> str:
        head = "onnxruntime matches tapelab" if self.ok else "onnxruntime differs from tapelab"
        lines = [head] + [f"  {k}: max abs diff {v:.3g}" for k, v in self.outputs.items()]
        if self.mismatch:
            lines.append("  " + str(self.mismatch))
        return "\n".join(lines)


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "biu" or b.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True))


def _diffs(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    if a.shape != b.shape or a.size == 0:
        return (float("inf"), float("inf")) if a.shape != b.shape else (0.0, 0.0)
    a, b = a.astype(np.float64), b.astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    d = np.abs(a - b)[both]
    same_special = np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~both & ~np.isnan(a)],
                                                                               b[~both & ~np.isnan(b)])
    if not same_special:
        return float("inf"), float("inf")
    if d.size == 0:
        return 0.0, 0.0
    big = np.abs(b[both]) > 1e-6                      # relative differences where the value is not ~0
    return float(d.max()), float((d[big] / np.abs(b[both][big])).max()) if big.any() else 0.0


def _arr(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, Tensor) else np.asarray(t)


def _session(model: onnx.ModelProto):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # keep every exposed value
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _exposed(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """``model`` with each of ``names`` (values its nodes produce) added as a graph output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(helper.make_empty_tensor_value_info(n))
    return m


def verify(model, args, path=None, *, rtol: float = 1e-4, atol: float = 1e-5, reference: bool = True,
           **export_kwargs) -> VerifyResult:
    """Compare ``model`` (tapelab) with its ONNX export (onnxruntime) on ``args``.

    Args:
        model: the module or function that was (or is to be) exported.
        args: the inputs, as given to ``export``.
        path: the ``.onnx`` file to check; exported there first (with ``export_kwargs``) when it
            does not exist. None: checks a fresh in-memory export.
        rtol, atol: tolerances, as ``numpy.allclose``.
        reference: also run ``onnx.reference.ReferenceEvaluator`` at the first mismatch.
        export_kwargs: ``input_names``, ``dynamic_axes``, ``opset_version``... as given to export.
    Returns:
        ``VerifyResult``: ``ok``, the max abs difference per output, and ``mismatch`` (the first
        node that differs: op, module, source line, differences) when not ok.
    """
    args = args if isinstance(args, tuple) else (args,)
    ex: Exported = build(model, args, **export_kwargs)
    if path is not None and os.path.exists(path):
        proto = onnx.load(os.fspath(path))
    else:
        proto = ex.model
        if path is not None:
            onnx.save(proto, os.fspath(path))
    feed = dict(zip(ex.input_names, [_arr(a) for a in args if isinstance(a, Tensor)]))
    got = _session(proto).run(None, feed)
    was = model.training if isinstance(model, Module) else None
    if was:
        model.eval()
    try:
        with no_grad():
            out = model(*args)
    finally:
        if was:
            model.train()
    want = []
    map_aggregate(out, lambda v: want.append(_arr(v)) if isinstance(v, Tensor) else None)
    result = VerifyResult(ok=True)
    for name, g, w in zip([o.name for o in proto.graph.output], got, want):
        result.outputs[name] = _diffs(g, w)[0]
        result.ok &= _close(g, w, rtol, atol)
    if not result.ok:
        result.mismatch = _bisect(proto, ex, feed, rtol, atol, reference)
    return result


def _bisect(proto: onnx.ModelProto, ex: Exported, feed: dict, rtol, atol, reference: bool) -> Mismatch | None:
    produced = {o for n in proto.graph.node for o in n.output}
    order = [(n, v) for n, v in ex.names.items() if v in produced and isinstance(ex.traced.values.get(n), Tensor)]
    exposed = _exposed(proto, [v for _, v in order])
    outs = dict(zip([o.name for o in exposed.graph.output], _session(exposed).run(None, feed)))
    for node, value in order:
        want = _arr(ex.traced.values[node])
        got = outs[value]
        if _close(got, want, rtol, atol):
            continue
        abs_d, rel_d = _diffs(got, want)
        stack = list(node.meta.get("nn_module_stack", {}))
        mm = Mismatch(node.name, getattr(node.target, "__name__", str(node.target)), stack[-1] if stack else "",
                      node.meta.get("source", ""), value, abs_d, rel_d, tuple(want.shape))
        if reference:
            mm.reference = _reference_side(exposed, feed, value, got, want, rtol, atol)
        return mm
    return None


def _reference_side(model: onnx.ModelProto, feed: dict, value: str, ort_val, tap_val, rtol, atol) -> str:
    """Which side ``onnx.reference`` agrees with at ``value``."""
    from onnx.reference import ReferenceEvaluator
    try:
        ref = ReferenceEvaluator(model).run([value], feed)[0]
    except Exception as e:  # the reference lacks a kernel: say so rather than fail the report
        return f"none (onnx.reference failed: {type(e).__name__})"
    a, b = _close(ref, ort_val, rtol, atol), _close(ref, tap_val, rtol, atol)
    return "onnxruntime" if a and not b else "tapelab" if b and not a else "both" if a else "neither"



"""tapelab.onnx: export a model to ONNX (``torch.onnx``), check it in onnxruntime, serve it.

- ``export(model, args, f, input_names=..., dynamic_axes=..., opset_version=...)`` traces the
  model with ``fx.trace_from_tape`` in eval mode and lowers each primitive through the ``onnx=``
  field of its ``Op`` declaration; ``build`` returns the ``ModelProto`` without writing.
- ``verify(model, args, path)`` runs the file in onnxruntime and in tapelab, compares every
  output and, on a mismatch, bisects node by node to the first node that disagrees (its op,
  module and source line), with ``onnx.reference`` as the second oracle.
- ``InferenceSession`` serves an exported file on onnxruntime with tapelab or numpy inputs.

Needs the ``onnx`` extra: ``pip install tapelab[onnx]`` (onnx, onnxruntime).

>>> tapelab.onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
>>> tapelab.onnx.verify(model, (x,), "model.onnx").ok
True
"""
from __future__ import annotations

import importlib

__all__ = ["export", "build", "verify", "InferenceSession", "ExportError", "UnsupportedOperatorError",
           "VerifyResult", "Mismatch", "IR_VERSIONS", "is_in_onnx_export"]

# ``import tapelab`` must not need the optional onnx package: the names load it on first use.
_WHERE = {"export": "_export", "build": "_export", "UnsupportedOperatorError": "_export", "IR_VERSIONS": "_export",
          "ExportError": "_dims", "verify": "_verify", "VerifyResult": "_verify", "Mismatch": "_verify",
          "InferenceSession": "_session"}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'tapelab.onnx' has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{_WHERE[name]}", __name__)
    except ImportError as e:
        raise ImportError(f"tapelab.onnx.{name} needs the onnx extra: pip install 'tapelab[onnx]' "
                          f"(onnx, onnxruntime); {e}") from e
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def is_in_onnx_export() -> bool:
    """Whether an export is tracing the model now (``torch.onnx.is_in_onnx_export``)."""
    from ._dims import EXPORTING
    return bool(EXPORTING)

"""``InferenceSession``: an exported model served by onnxruntime, called like the module it was.

The production path: no tapelab in the loop, only onnxruntime's kernels. The session takes
tapelab tensors or numpy arrays positionally (in the graph's input order) or by name, and gives
tapelab tensors back (``numpy=True``: arrays), so code written against the module keeps working.
"""
from __future__ import annotations

import os

import numpy as np

from ..core.creation import tensor as _tensor
from ..core.tensor import Tensor

__all__ = ["InferenceSession"]


def _array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


class InferenceSession:
    """Serve an ONNX file (a path, bytes or a ModelProto) with onnxruntime.

    Args:
        model: the file's path, its bytes, or an ``onnx.ModelProto``.
        threads: onnxruntime's intra-op threads (None: its default).
        numpy: return numpy arrays instead of tapelab tensors.
        providers: onnxruntime's execution providers (default ``["CPUExecutionProvider"]``;
            ``["CUDAExecutionProvider", "CPUExecutionProvider"]`` with onnxruntime-gpu).

    >>> sess = tapelab.onnx.InferenceSession("model.onnx")
    >>> probs = sess(x)                       # a tapelab Tensor (a tuple for several outputs)
    """

    def __init__(self, model, threads: int | None = None, numpy: bool = False, providers: list | None = None):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        if threads is not None:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        if not isinstance(model, (str, bytes, os.PathLike)):
            model = model.SerializeToString()
        self.session = ort.InferenceSession(os.fspath(model) if isinstance(model, os.PathLike) else model, opts,
                                            providers=providers or ["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.numpy = numpy

    def run(self, output_names=None, feed: dict | None = None) -> list[np.ndarray]:
        """onnxruntime's own call: ``run(None, {"x": array})`` returns a list of arrays."""
        return self.session.run(output_names, {k: _array(v) for k, v in (feed or {}).items()})

    def __call__(self, *inputs, **named):
        if len(inputs) > len(self.input_names):
            raise TypeError(f"InferenceSession takes {len(self.input_names)} inputs {self.input_names}, "
                            f"got {len(inputs)}")
        feed = dict(zip(self.input_names, inputs), **named)
        missing = [n for n in self.input_names if n not in feed]
        if missing:
            raise TypeError(f"InferenceSession: missing inputs {missing} (the graph takes {self.input_names})")
        outs = self.run(None, feed)
        outs = outs if self.numpy else [_tensor(o) for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"InferenceSession(inputs={self.input_names}, outputs={self.output_names})"

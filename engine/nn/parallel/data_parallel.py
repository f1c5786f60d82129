"""``DataParallel`` on one device: what PyTorch's does with one GPU or none."""
from __future__ import annotations

import itertools
import warnings

from ...base import device as _devices   # below nn (tapelab.cuda builds on graphs, which build on nn)
from ...base.device import device as _device
from ...core.tensor import Tensor
from ..modules.module import Module


def _moved(obj, dev):
    """``obj`` with every tensor in it (through tuples, lists and dicts) on ``dev``."""
    if isinstance(obj, Tensor):
        return obj.to(dev)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_moved(v, dev) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_moved(v, dev) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _moved(v, dev)) for k, v in obj.items())
    return obj


def _index(dev) -> int:
    return dev if isinstance(dev, int) else _device(dev).index


class DataParallel(Module):
    """``nn.DataParallel(module)``: calls ``module`` on one device; the wrapped module is ``.module``
    and state dict keys start with ``module.``, as in PyTorch.

    Without CUDA it calls ``module`` with the inputs as given, as PyTorch does on a CPU-only
    machine. With CUDA it moves ``module`` (with one device id) and the inputs to
    ``device_ids[0]``, checks the parameters are there, calls ``module`` and returns the output on
    ``output_device``. tapelab does not split a batch across GPUs: with several device ids the
    whole batch runs on the first one (the same results, one GPU's speed), with a warning.

    Example::

        >>> model = nn.DataParallel(Net())
        >>> loss = model(x).sum()
        >>> torch.save(model.module.state_dict(), "net.safetensors")
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        if not _devices.cuda_available():
            self.device_ids = []
            return
        ids = list(range(_devices.cuda_device_count())) if device_ids is None else [_index(d) for d in device_ids]
        self.dim = dim
        self.device_ids = ids
        self.output_device = ids[0] if output_device is None else _index(output_device)
        self.src_device_obj = _device("cuda", ids[0])
        if len(ids) == 1:
            self.module.to(self.src_device_obj)
        else:
            warnings.warn(f"tapelab's DataParallel runs the whole batch on cuda:{ids[0]}, not split across "
                          f"device_ids={ids}", UserWarning, stacklevel=2)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in itertools.chain(self.module.parameters(), self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"module must have its parameters and buffers on device {self.src_device_obj} "
                                   f"(device_ids[0]) but found one of them on device: {t.device}")
        out = self.module(*_moved(inputs, self.src_device_obj), **_moved(kwargs, self.src_device_obj))
        return _moved(out, _device("cuda", self.output_device)) if self.output_device != self.device_ids[0] else out

"""``torch.nn.parallel.replicate`` on the module's own device: the module itself for each device, which
computes and takes gradients as PyTorch's replica there does (tapelab runs no model across several devices)."""
from __future__ import annotations

from typing import Sequence

from ...base.device import device as _device
from ..modules.module import Module

__all__ = ["replicate"]


def _on(dev) -> _device:
    return _device("cuda", dev) if isinstance(dev, int) else _device(dev)


def replicate(network: Module, devices: Sequence, detach: bool = False) -> list[Module]:
    """One replica of ``network`` per device in ``devices``, each the module itself: every device must be
    the GPU its parameters are on (a cpu device is refused, as PyTorch refuses it)."""
    own = {t.device for t in network.parameters()} or {_on(devices[0])}
    for dev in devices:
        if _on(dev).type == "cpu":
            raise ValueError(f"Expected a non cpu device, but got: {dev}")
        if _on(dev) not in own:
            raise NotImplementedError(f"replicate: tapelab keeps a module on its own device ({sorted(map(str, own))}), "
                                      f"not copies on {_on(dev)}")
    return [network] * len(devices)

"""``torch.utils.cpp_extension``: building C++/CUDA extensions against PyTorch's ABI, which tapelab
(numpy and cupy arrays behind its tensors) does not have. ``load`` and ``load_inline`` raise, as
a failed build does in PyTorch, so libraries that try an extension and fall back to Python
(PEFT's BOFT) take their fallback."""
from __future__ import annotations

__all__ = ["load", "load_inline", "CUDA_HOME", "ROCM_HOME"]

CUDA_HOME = None   # no toolkit to build against
ROCM_HOME = None


def _refuse(name: str):
    raise RuntimeError(f"Error building extension '{name}': tapelab has no C++ extension ABI (its tensors are "
                       f"numpy/cupy arrays); use a Python implementation")


def load(name: str, sources, *args, **kwargs):
    """Refused: tapelab cannot compile or load a PyTorch C++/CUDA extension."""
    _refuse(name)


def load_inline(name: str, cpp_sources, *args, **kwargs):
    """Refused, as ``load``."""
    _refuse(name)

"""``tapelab.backends``: PyTorch's backend switches, so scripts that set them run unchanged.

Each is a real submodule (``import tapelab.backends.cudnn as cudnn`` works). tapelab has no
cuDNN, oneDNN, TF32 or MPS: cupy's kernels and numpy's BLAS compute in the dtype asked for. The
flags are kept (scripts read back what they set) and change nothing; the availability queries
answer for tapelab (``cudnn.is_available()``, ``mkldnn.is_available()``, ``mps.is_available()`` are
False).
"""
from . import cpu, cuda, cudnn, mkldnn, mps, quantized

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "quantized"]

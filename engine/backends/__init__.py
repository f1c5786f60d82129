"""``tapelab.backends``: PyTorch's backend switches, so scripts that set them run unchanged.

Each is a real submodule (``import tapelab.backends.cudnn as cudnn`` works). tapelab has no
cuDNN, oneDNN, TF32 or MPS: cupy's kernels and numpy's BLAS compute in the dtype asked for. The
flags are kept (scripts read back what they set) and change nothing; the availability queries
answer for tapelab (``cudnn.is_available()``, ``mkldnn.is_available()``, ``mps.is_available()`` are
False).
"""
from contextlib import contextmanager

from . import cpu, cuda, cudnn, mha, mkl, mkldnn, mps, nnpack, openmp, opt_einsum, quantized

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "nnpack", "openmp", "opt_einsum", "quantized",
           "disable_global_flags", "flags_frozen"]

_allow_mutation = True   # PyTorch's __allow_nonbracketed_mutation_flag


def disable_global_flags() -> None:
    """Say that the backend flags should change only inside their ``flags()`` blocks (PyTorch's
    test suites call it); tapelab records it for ``flags_frozen`` (its flags change nothing)."""
    global _allow_mutation
    _allow_mutation = False


def flags_frozen() -> bool:
    return not _allow_mutation


@contextmanager
def __allow_nonbracketed_mutation():
    """PyTorch's private block in which the flags may be set directly, whatever
    ``disable_global_flags`` said (MONAI's ``set_determinism`` sets cudnn's flags in it)."""
    global _allow_mutation
    old, _allow_mutation = _allow_mutation, True
    try:
        yield
    finally:
        _allow_mutation = old

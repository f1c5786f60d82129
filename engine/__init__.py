"""tapelab: an eager autograd engine with PyTorch's API, built to be seen.

``import tapelab as torch`` runs ordinary PyTorch programs in the covered subset.
The engine imports no notebook package; it emits events that kernel/ and widgets/
subscribe to.
"""
from __future__ import annotations

from . import _memory  # noqa: F401  (first: the allocator policy applies to everything after it)
# the public paths kept as re-exports, loaded before the names below: importing a submodule
# sets the package attribute of its name, which ``tensor`` (the function) and ``device``
# (the class) then replace for good
from . import _backend, _dispatch_state, _dtype, _simarray, creation, device, dispatch, events, random, tensor  # noqa: F401,E501
from .base.dtype import (bfloat16, bool, cdouble, cfloat, chalf, complex32, complex64, complex128, double, dtype, finfo,
                         float, float16, float32, float64, get_default_dtype, half, iinfo, int, int8, int16, int32, int64, long,
                         promote_types, set_default_dtype, short, uint8, uint16, uint32, uint64, float8_e4m3fn,
                         float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, qint8, quint8, qint32, quint4x2, quint2x4,
                         qscheme, per_tensor_affine, per_channel_affine, per_tensor_symmetric, per_channel_symmetric,
                         per_channel_affine_float_qparams)
from .base.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                             set_grad_enabled)
from .core.creation import *  # noqa: F401,F403
from .base.device import device
from .ops import install_methods
from .ops.compare import *  # noqa: F401,F403
from .ops.convert import *  # noqa: F401,F403
from .ops.elementwise import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.movement import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.sampling import *  # noqa: F401,F403
from .ops.sort import *  # noqa: F401,F403
from .ops.conjugation import *  # noqa: F401,F403
from .ops.spectral import *  # noqa: F401,F403
from .ops.shaping import *  # noqa: F401,F403
from .ops.special import *  # noqa: F401,F403
from .ops.stats import *  # noqa: F401,F403
from .ops.sparse import *  # noqa: F401,F403
from .ops.lowrank import *  # noqa: F401,F403
from .ops.quantize import *  # noqa: F401,F403
from .base.layout import (channels_last, channels_last_3d, contiguous_format, jagged, layout,  # noqa: F401
                          memory_format, preserve_format, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr,
                          strided)
from .core.random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .random import thread_safe_generator
from .serialization import CheckpointError, PyTorchFileReader, load, save
from .tape import tape
from .core.tensor import Size, Tensor
from .core.storage import LEGACY_STORAGES as _LEGACY_STORAGES, TypedStorage, UntypedStorage
globals().update(_LEGACY_STORAGES)   # torch.FloatStorage, torch.BFloat16Storage, ... (engine/core/storage.py)
from . import storage  # noqa: E402,F401  (torch.storage)

install_methods(Tensor)

# the layers above the core (each imports only what is above it here)
from . import (accelerator, autograd, backends, cuda, distributed, linalg, multiprocessing, nn,  # noqa: E402
               optim, sparse, testing, utils)
from .base.runtime import *  # noqa: E402,F401,F403  (set_num_threads, set_default_device, ...)
from .accelerator import Event, Stream, get_device_module  # noqa: E402,F401  (device-generic names)
globals().update(linalg.TOPLEVEL)  # torch.det, torch.svd, torch.lu_unpack, ... (engine/linalg.py)
from . import amp, cpu  # noqa: E402
from . import _utils  # noqa: E402,F401  (torch._utils: lazy checkpoint loaders call its rebuild functions)
from .amp.grad_scaler import GradScaler  # noqa: E402  (torch.GradScaler: torch.amp's)
from .utils.dlpack import to_dlpack  # noqa: E402  (torch.to_dlpack)
from .amp.autocast_mode import (autocast, autocast_decrement_nesting, autocast_increment_nesting,  # noqa: E402
                                clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_dtype,
                                get_autocast_gpu_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
                                is_autocast_enabled, set_autocast_cache_enabled, set_autocast_cpu_dtype,
                                set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
                                set_autocast_gpu_dtype)
from . import debug, export, fx, graphs, onnx, profiler  # noqa: E402
from .profiler import legacy as _legacy_profiler  # noqa: E402

autograd.profiler = _legacy_profiler   # torch.autograd.profiler after `import torch`; kept in profiler/ by the layers
from ._nn_toplevel import *  # noqa: E402,F401,F403  (torch.softmax, torch.conv2d, Tensor.softmax, ...)
from ._torch_extra import *  # noqa: E402,F401,F403  (torch.exp_, torch.hann_window, torch.compile, ...)
from .distributions.gamma import sample_dirichlet as _sample_dirichlet  # noqa: E402,F401  (torch's sampling primitives)
from .distributions.gamma import standard_gamma as _standard_gamma  # noqa: E402,F401
from .distributions.reparam_ops import dirichlet_grad as _dirichlet_grad  # noqa: E402,F401
from .distributions.reparam_ops import standard_gamma_grad as _standard_gamma_grad  # noqa: E402,F401
from ._foreach import *  # noqa: E402,F401,F403  (torch._foreach_add_, torch._foreach_lerp_, ...)
from . import func  # noqa: E402  (torch.func: grad, vmap, jacrev, functional_call, ...)
from .func import vmap  # noqa: E402,F401  (torch.vmap is torch.func.vmap)
from . import jit  # noqa: E402  (torch.jit: script/trace hand back what they are given)
from .jit import ScriptFunction, ScriptModule  # noqa: E402,F401  (torch.ScriptModule: types isinstance tests name)
from . import hub  # noqa: E402,F401  (torch.hub: weights by URL, models from hubconf.py)
from . import _C  # noqa: E402,F401  (torch._C: the few names libraries probe)
from ._C import TensorType, Graph, Node, Value, Block, Type, DeviceObjType, StreamObjType  # noqa: E402,F401  (TorchScript's types)
from . import overrides  # noqa: E402,F401  (torch.overrides: the __torch_function__ protocol)
from . import distributions, fft, special  # noqa: E402,F401
from . import mps, signal, xpu  # noqa: E402,F401  (torch.mps, torch.signal.windows, torch.xpu)
from . import nested  # noqa: E402,F401  (torch.nested: nested_tensor, to_padded_tensor)
from . import masked  # noqa: E402,F401  (torch.masked: reductions that skip masked-out elements)
from .aliases import install_aliases, uninstall_aliases  # noqa: E402  (import torch / torchvision -> tapelab)

from . import version  # noqa: E402  (torch.version: the build facts libraries branch on)
from . import __config__  # noqa: E402,F401  (torch.__config__: the build description, show())
from . import futures  # noqa: E402,F401  (torch.futures: Future, collect_all, wait_all)
from . import quasirandom  # noqa: E402,F401  (torch.quasirandom: SobolEngine)
from . import return_types  # noqa: E402,F401  (torch.return_types: the named tuples ops return)
from . import types  # noqa: E402,F401  (torch.types: Number, Device, _size, ...)
from . import library  # noqa: E402,F401  (torch.library: custom ops defined in Python)
from . import _dynamo  # noqa: E402,F401  (torch._dynamo: libraries read it without importing it)
from ._dynamo import functorch as _functorch, inductor as _inductor  # noqa: E402,F401  (torch._functorch.config, set without an import)
from .version import __version__  # noqa: E402

from .base.repr import set_printoptions  # noqa: E402
import math as _math  # noqa: E402

pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan

from .base.dispatch_state import STATE as _DISPATCH  # noqa: E402  (the composites' entry check)
from .core.overrides import handle_torch_function as _handle_torch_function  # noqa: E402
from .core.overrides import has_tensor_like as _has_tensor_like  # noqa: E402


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle_torch_function(numel, (input,), input)
    return input.numel()


def result_type(*operands) -> dtype:
    return _dtype.result_type(*operands)


def is_floating_point(input: Tensor) -> bool:
    if _DISPATCH.functions is not None and _has_tensor_like((input,)):
        return _handle_torch_function(is_floating_point, (input,), input)
    return input.is_floating_point()


# the public functions PyTorch gives an out variant take ``out=`` here (the Tensor methods do not)
from .ops.out import out_variants as _out_variants  # noqa: E402

globals().update(_out_variants(globals()))
from . import functional  # noqa: E402,F401  (torch.functional: the public composites, einsum, norm, ...)
from . import ao, quantization  # noqa: E402,F401  (torch.ao: observers, fake quant, QAT; torch.quantization)
from .ao.quantized_tensor import dequantize, quantize_per_channel, quantize_per_tensor  # noqa: E402,F401

# PyTorch never warns on overflow, division by zero or invalid values: inf and nan flow silently
import numpy as _np  # noqa: E402

_np.seterr(all="ignore")

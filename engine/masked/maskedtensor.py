"""``torch.masked.MaskedTensor``, PyTorch's prototype: a tensor whose masked-out elements are absent.

A ``MaskedTensor`` holds its data (a copy, or with ``as_masked_tensor`` the given tensor itself, so
autograd reaches it) and a bool mask of the same shape. Like ``nested.NestedTensor`` it is a
tensor-like taking part in ``__torch_function__`` while it lives: elementwise ops run on the data
and keep the mask (two masked operands need equal masks, as PyTorch's), the reductions (``sum``,
``mean``, ``amin``, ``amax``, ``argmin``, ``argmax``, ``prod``, ``norm``, ``var``, ``std``) and
``softmax``/``log_softmax`` are ``torch.masked``'s over the mask, the reduced mask is whether any
element was kept. Other ops raise ``TypeError``, as PyTorch's prototype does for ops it lacks.
"""
from __future__ import annotations

import functools
import warnings

from ..base import dtype as _dtype
from ..core.overrides import taking_part_while_alive
from ..core.registry import REGISTRY
from ..core.tensor import Tensor
from . import _ops

__all__ = ["MaskedTensor", "masked_tensor", "as_masked_tensor", "is_masked_tensor"]

_SUPPORTED = (_dtype.float16, _dtype.float32, _dtype.float64, _dtype.bool, _dtype.int8, _dtype.int16, _dtype.int32,
              _dtype.int64)
_REDUCTIONS = ("sum", "mean", "amin", "amax", "argmin", "argmax", "prod", "norm", "var", "std")


def is_masked_tensor(obj) -> bool:
    return isinstance(obj, MaskedTensor)


class MaskedTensor:
    """Data and a mask of the same shape; an element is present where the mask is True."""

    def __init__(self, data: Tensor, mask: Tensor, requires_grad: bool = False) -> None:
        if not isinstance(data, Tensor):
            raise TypeError("data must be a Tensor")
        if not isinstance(mask, Tensor):
            raise TypeError("mask must be a Tensor")
        if mask.dtype != _dtype.bool:
            raise TypeError("mask must have dtype bool.")
        if data.dtype not in _SUPPORTED:
            raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
        if data.dim() != mask.dim():
            raise ValueError("data.dim() must equal mask.dim()")
        if tuple(data.shape) != tuple(mask.shape):
            raise ValueError("data.size() must equal mask.size()")
        self._masked_data = data
        self._masked_mask = mask
        taking_part_while_alive(MaskedTensor, self)

    # ---------------------------------------------------------------- what it holds
    def get_data(self) -> Tensor:
        return self._masked_data

    def get_mask(self) -> Tensor:
        return self._masked_mask

    def to_tensor(self, value) -> Tensor:
        """The data with ``value`` at the masked-out elements."""
        return self._masked_data.masked_fill(~self._masked_mask, value)

    @property
    def shape(self):
        return self._masked_data.shape

    def size(self, dim: int | None = None):
        return self._masked_data.size(dim) if dim is not None else self._masked_data.size()

    def dim(self) -> int:
        return self._masked_data.dim()

    ndim = property(dim)

    def numel(self) -> int:
        return self._masked_data.numel()

    @property
    def dtype(self):
        return self._masked_data.dtype

    @property
    def device(self):
        return self._masked_data.device

    @property
    def layout(self):
        return self._masked_data.layout

    @property
    def requires_grad(self) -> bool:
        return self._masked_data.requires_grad

    @property
    def is_leaf(self) -> bool:
        return self._masked_data.is_leaf

    @property
    def grad(self):
        g = self._masked_data.grad
        return None if g is None else MaskedTensor(g, self._masked_mask)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        if isinstance(gradient, MaskedTensor):
            gradient = gradient.get_data()
        self._masked_data.backward(gradient, retain_graph=retain_graph, create_graph=create_graph)

    def __getitem__(self, index) -> MaskedTensor:
        return MaskedTensor(self._masked_data[index], self._masked_mask[index])

    def __repr__(self) -> str:
        if self.dim() == 0:
            value = self._masked_data.item()
            text = f"{value:8.4f}" if isinstance(value, float) else str(value)
            kept = bool(self._masked_mask.item())
            return f"MaskedTensor({text if kept else '--'}, {kept})"
        body = _text(self._masked_data, self._masked_mask)
        return "MaskedTensor(\n" + "\n".join("  " + line for line in body.split("\n")) + "\n)"

    # ---------------------------------------------------------------- ops
    def _reduce(self, name: str, dim=None, keepdim: bool = False, dtype=None) -> MaskedTensor:
        fn = getattr(_ops, name)
        data, mask = self._masked_data, self._masked_mask
        if dim is None:
            return MaskedTensor(fn(data, mask=mask), mask.any())
        kept = mask
        for d in sorted((dim,) if isinstance(dim, int) else dim, reverse=True):
            kept = kept.any(dim=d, keepdim=keepdim)
        return MaskedTensor(fn(data, dim, keepdim=keepdim, dtype=dtype, mask=mask), kept)

    def softmax(self, dim: int, dtype=None) -> MaskedTensor:
        return MaskedTensor(_ops.softmax(self._masked_data, dim, dtype=dtype, mask=self._masked_mask),
                            self._masked_mask)

    def log_softmax(self, dim: int, dtype=None) -> MaskedTensor:
        return MaskedTensor(_ops.log_softmax(self._masked_data, dim, dtype=dtype, mask=self._masked_mask),
                            self._masked_mask)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _REDUCTIONS:
            return functools.partial(self._reduce, name)
        fn = getattr(Tensor, name, None)
        if not callable(fn):
            raise AttributeError(f"'MaskedTensor' object has no attribute '{name}'")
        return functools.partial(fn, self)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        op = getattr(func, "op", None) or REGISTRY.get(name)   # an op's public function (the out= wrapper) by name
        if name in _REDUCTIONS and isinstance(args[0], MaskedTensor):
            return args[0]._reduce(name, *args[1:], **kwargs)
        if name in ("softmax", "log_softmax", "_softmax", "_log_softmax") and isinstance(args[0], MaskedTensor):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return getattr(args[0], name.lstrip("_"))(dim)
        if op is not None and op.elementwise or name in ("clone", "detach", "_to_copy", "to", "contiguous"):
            return _elementwise(func, args, kwargs)
        raise TypeError(f"{name} is not implemented for MaskedTensor (torch.masked's prototype has no rule for it)")


def _elementwise(func, args, kwargs):
    """``func`` on the data; the mask of the masked operands (which must all be equal)."""
    masked = [a for a in (*args, *kwargs.values()) if isinstance(a, MaskedTensor)]
    mask = masked[0]._masked_mask
    for other in masked[1:]:
        if tuple(other._masked_mask.shape) != tuple(mask.shape) or not bool((other._masked_mask == mask).all()):
            raise ValueError("Input masks must match. If you need support for this, please open an issue on Github.")
    unwrap = lambda a: a._masked_data if isinstance(a, MaskedTensor) else a   # noqa: E731
    out = func(*map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()})
    return MaskedTensor(out, mask) if isinstance(out, Tensor) else out


def _install_operators() -> None:
    """Python operators: the op on the data under the mask (dunders skip ``__getattr__``)."""
    import operator
    for name in ("add", "sub", "mul", "truediv", "floordiv", "pow", "eq", "ne", "lt", "le", "gt", "ge", "and_",
                 "or_", "xor"):
        fn = getattr(operator, name)
        dunder = name.rstrip("_")

        def forward(self, other, fn=fn):
            return _elementwise(fn, (self, other), {})

        def reflected(self, other, fn=fn):
            return _elementwise(fn, (other, self), {})

        setattr(MaskedTensor, f"__{dunder}__", forward)
        if dunder not in ("eq", "ne", "lt", "le", "gt", "ge"):
            setattr(MaskedTensor, f"__r{dunder}__", reflected)
    for name in ("neg", "abs", "invert"):
        setattr(MaskedTensor, f"__{name}__", (lambda fn: lambda self: _elementwise(fn, (self,), {}))(
            getattr(operator, name)))
    MaskedTensor.__hash__ = object.__hash__


def _text(data: Tensor, mask: Tensor) -> str:
    """PyTorch's layout of a masked tensor's values: ``--`` for each masked-out element."""
    if data.dim() == 1:
        values = [v for v in data.tolist()]
        items = [f"{v:8.4f}" if isinstance(v, float) else str(v) for v in values]
        kept = mask.tolist()
        width = max((8 if not k else len(s)) for s, k in zip(items, kept)) if items else 0
        return "[" + ", ".join(s if k else "--".rjust(width) for s, k in zip(items, kept)) + "]"
    rows = [_text(d, m) for d, m in zip(data.unbind(0), mask.unbind(0))]
    rows = ["\n".join("  " + line for line in r.split("\n")) for r in rows]
    return "[\n" + ",\n".join(rows) + "\n]"


_install_operators()


_PROTOTYPE = ("The PyTorch API of MaskedTensors is in prototype stage and will change in the near future. Please "
              "open a Github issue for features requests and see our documentation on the torch.masked module for "
              "further information about the project.")


def _warn(data: Tensor) -> None:
    warnings.warn(_PROTOTYPE, UserWarning, stacklevel=3)
    if data.requires_grad:
        warnings.warn("It is not recommended to create a MaskedTensor with a tensor that requires_grad. To avoid "
                      "this, you can use data.detach().clone()", UserWarning, stacklevel=3)


def masked_tensor(data: Tensor, mask: Tensor, requires_grad: bool = False) -> MaskedTensor:
    """A masked tensor over a copy of ``data``: a leaf, recording its own gradient when ``requires_grad``."""
    if not isinstance(data, Tensor):
        raise TypeError("data must be a Tensor")
    _warn(data)
    copy = data.detach().clone()
    if requires_grad:
        copy.requires_grad_(True)
    return MaskedTensor(copy, mask.clone() if isinstance(mask, Tensor) else mask)


def as_masked_tensor(data: Tensor, mask: Tensor) -> MaskedTensor:
    """A masked tensor over ``data`` itself, so gradients of what is computed from it reach ``data``."""
    if not isinstance(data, Tensor):
        raise TypeError("data must be a Tensor")
    _warn(data)
    return MaskedTensor(data, mask)

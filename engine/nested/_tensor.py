"""The nested tensor: a tensor-like value over a list of component Tensors.

A ``NestedTensor`` is no ``Tensor`` subclass: it takes part in the ``__torch_function__`` protocol
as a tensor-like (``overrides.taking_part_while_alive``, for as long as the nested tensor lives, so
a program holding none keeps the dispatcher's fast path). Every op and every public composite that
reaches one hands the call to ``NestedTensor.__torch_function__``, which runs the ones defined per
component on each component (the components' autograd records as usual, so gradients reach the
tensors ``as_nested_tensor`` was given) and refuses the rest with PyTorch's error. Tensor methods
are the ``Tensor`` class's own functions called on the nested tensor, so they reach the same handler.
"""
from __future__ import annotations

import functools
import warnings

from ..base import dtype as _dtype
from ..base.grad_mode import no_grad
from ..base.layout import jagged, strided
from ..core import creation
from ..core.overrides import taking_part_while_alive
from ..core.tensor import Size, Tensor
from ..ops.movement import cat, pad, stack
from ..nn import functional as F

__all__ = ["NestedTensor", "nested_tensor", "as_nested_tensor", "to_padded_tensor", "nested_tensor_from_jagged",
           "narrow", "masked_select"]

_NO_KERNEL = ("Could not run 'aten::{}' with arguments from the 'NestedTensorCPU' backend. This could be because "
              "the operator doesn't exist for this backend, or was omitted during the selective/custom build "
              "process (if using custom build).")
_NO_SIZES = "Internal error: NestedTensorImpl doesn't support sizes. Please file an issue."


class _Ragged(int):
    """The ragged dim of a jagged nested tensor's shape: prints as PyTorch's symbolic ``j1``."""

    def __repr__(self) -> str:
        return "j1"

    __str__ = __repr__


class NestedTensor:
    """A list of tensors of one dtype, device and dimension, seen as one tensor whose dim 0 indexes
    them (``nt.size(0)``) and whose other dims are regular (one size) or irregular."""

    is_nested = True

    def __init__(self, components: list, layout=strided, leaf: bool = False, pad_len: int | None = None,
                 holes: bool = False) -> None:
        self._components = list(components)
        self._layout = layout
        self._leaf = leaf   # made by nested_tensor(): its components are its own leaves
        # a jagged tensor cut from one values buffer pads its ragged dim to max_seqlen or the buffer's
        # length, and one whose components skip parts of the buffer ("holes") cannot be padded
        self._pad_len, self._holes = pad_len, holes
        taking_part_while_alive(NestedTensor, self)

    def _like(self, components: list) -> NestedTensor:
        """A nested tensor of ``components`` with this one's layout and padding facts."""
        return NestedTensor(components, self._layout, pad_len=self._pad_len, holes=self._holes)

    # ---------------------------------------------------------------- metadata
    @property
    def layout(self):
        return self._layout

    @property
    def dtype(self):
        return self._components[0].dtype if self._components else _dtype.get_default_dtype()

    @property
    def device(self):
        return self._components[0].device if self._components else creation.empty(0).device

    @property
    def requires_grad(self) -> bool:
        return any(c.requires_grad for c in self._components)

    @property
    def is_leaf(self) -> bool:
        return self._leaf or not self.requires_grad

    @property
    def grad_fn(self):
        return None

    @property
    def grad(self):
        """The components' gradients as a nested tensor (None before any reached them)."""
        grads = [c.grad for c in self._components]
        if not grads or any(g is None for g in grads):
            return None
        return NestedTensor(grads, self._layout)

    @property
    def ndim(self) -> int:
        return self.dim()

    def dim(self) -> int:
        return self._components[0].dim() + 1 if self._components else 1

    def numel(self) -> int:
        return sum(c.numel() for c in self._components)

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def _regular(self, d: int) -> int | None:
        """The size every component has at component dim ``d``, None when they differ."""
        sizes = {c.shape[d] for c in self._components}
        return sizes.pop() if len(sizes) == 1 else None

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        n = self.dim()
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        d = dim % n
        if d == 0:
            return len(self._components)
        size = self._regular(d - 1)
        if size is None:
            if self._layout is jagged:
                return _Ragged(max(c.shape[0] for c in self._components))
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return size

    @property
    def shape(self):
        if self._layout is not jagged:
            raise RuntimeError(_NO_SIZES)
        return Size([self.size(d) for d in range(self.dim())])

    # ---------------------------------------------------------------- components
    def unbind(self, dim: int = 0) -> tuple:
        if dim != 0:
            raise RuntimeError(f"NestedTensor can only be unbound along dimension 0 got dimension {dim} instead.")
        return tuple(self._components)

    def __getitem__(self, index):
        if isinstance(index, int):
            return self._components[index]
        if isinstance(index, tuple) and index and isinstance(index[0], int):
            return self._components[index[0]][index[1:]]
        raise NotImplementedError(_NO_KERNEL.format("slice.Tensor"))

    def to_padded_tensor(self, padding: float, output_size=None) -> Tensor:
        return to_padded_tensor(self, padding, output_size)

    def values(self) -> Tensor:
        """The components' elements one after another (the nested tensor's buffer)."""
        if self._layout is jagged:
            return cat(list(self._components), 0)
        return cat([c.reshape(-1) for c in self._components])

    def offsets(self) -> Tensor:
        if self._layout is not jagged:
            raise AttributeError("'Tensor' object has no attribute 'offsets'")
        ends = [0]
        for c in self._components:
            ends.append(ends[-1] + c.shape[0])
        return creation.tensor(ends)

    # ---------------------------------------------------------------- conversions and autograd
    def _each(self, f) -> NestedTensor:
        return self._like([f(c) for c in self._components])

    def to(self, *args, **kwargs) -> NestedTensor:
        return self._each(lambda c: c.to(*args, **kwargs))

    def double(self) -> NestedTensor:
        return self._each(lambda c: c.double())

    def float(self) -> NestedTensor:
        return self._each(lambda c: c.float())

    def half(self) -> NestedTensor:
        return self._each(lambda c: c.half())

    def cpu(self) -> NestedTensor:
        return self._each(lambda c: c.cpu())

    def detach(self) -> NestedTensor:
        return self._each(lambda c: c.detach())

    def clone(self, memory_format=None) -> NestedTensor:
        return self._each(lambda c: c.clone())

    def contiguous(self, memory_format=None) -> NestedTensor:
        return self

    def requires_grad_(self, requires_grad: bool = True) -> NestedTensor:
        for c in self._components:
            c.requires_grad_(requires_grad)
        self._leaf = True
        return self

    def numpy(self, *args, **kwargs):
        raise RuntimeError(_NO_SIZES)

    def tolist(self):
        raise RuntimeError("Internal error: NestedTensorImpl doesn't support strides. Please file an issue.")

    def item(self):
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")

    def __len__(self) -> int:
        raise RuntimeError(_NO_SIZES)

    def __iter__(self):
        raise RuntimeError(_NO_SIZES)

    def __repr__(self) -> str:
        if self._layout is jagged:
            return (f"NestedTensor(size=({', '.join(str(self.size(d)) for d in range(self.dim()))}), "
                    f"offsets={self.offsets()!r}, contiguous=True)")
        body = ",\n".join("  " + repr(c).replace("\n", "\n  ") for c in self._components)
        grad = ", requires_grad=True" if self.requires_grad and self._leaf else ""
        return f"nested_tensor([\n{body}\n]{grad})"

    # every other Tensor method: the Tensor class's function on this value (its ops come back here)
    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        fn = getattr(Tensor, name, None)
        if not callable(fn):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        return functools.partial(fn, self)

    # ---------------------------------------------------------------- what PyTorch's nested kernels cover
    def softmax(self, dim, dtype=None) -> NestedTensor:
        return _map(_F_softmax, "softmax", (self, dim), {"dtype": dtype})

    def log_softmax(self, dim, dtype=None):
        raise NotImplementedError(_NO_KERNEL.format("_log_softmax"))

    def sum(self, dim=None, keepdim: bool = False, dtype=None) -> NestedTensor:
        return _reduce("sum", self, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False, dtype=None):
        raise NotImplementedError(_NO_KERNEL.format("mean.dim" if dim is not None else "mean"))

    def transpose(self, dim0: int, dim1: int) -> NestedTensor:
        return _map(Tensor.transpose, "transpose", (self, dim0, dim1), {}, dims=(1, 2))

    def reshape(self, *shape) -> NestedTensor:
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if not shape or shape[0] not in (-1, len(self._components)) or shape[0] == -1:
            raise RuntimeError("reshape: For now nested reshape cannot change or infer the implicit batch dimension")
        return self._each(lambda c: c.reshape(shape[1:]))

    def view(self, *shape) -> NestedTensor:
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if not shape or shape[0] != len(self._components):
            raise RuntimeError("view: For now nested view cannot change or infer the implicit batch dimension")
        return self._each(lambda c: c.view(shape[1:]))

    def masked_fill(self, mask, value) -> NestedTensor:
        return _map(Tensor.masked_fill, "masked_fill", (self, mask, value), {})

    # Python operators (PyTorch's nested kernels: add, sub, mul, div with a nested tensor of the same
    # component shapes, a number or a 0-d tensor; eq, gt, ge with a number)
    def __add__(self, other):
        return _binary("add", self, other)

    def __radd__(self, other):
        return _binary("add", self, other)

    def __sub__(self, other):
        return _binary("sub", self, other)

    def __rsub__(self, other):
        raise NotImplementedError(_NO_KERNEL.format("rsub.Scalar"))

    def __mul__(self, other):
        return _binary("mul", self, other)

    def __rmul__(self, other):
        return _binary("mul", self, other)

    def __truediv__(self, other):
        return _binary("div", self, other)

    def __rtruediv__(self, other):
        raise NotImplementedError(_NO_KERNEL.format("reciprocal"))

    def __pow__(self, other):
        raise NotImplementedError(_NO_KERNEL.format("pow.Tensor_Scalar" if not isinstance(other, (Tensor, NestedTensor))
                                                    else "pow.Tensor_Tensor"))

    def __matmul__(self, other):
        return _map(_matmul, "matmul", (self, other), {})

    def __neg__(self):
        return self._each(lambda c: -c)

    def __abs__(self):
        return self._each(lambda c: c.abs())

    def __eq__(self, other):
        return _binary("eq", self, other)

    def __gt__(self, other):
        return _binary("gt", self, other)

    def __ge__(self, other):
        return _binary("ge", self, other)

    def __lt__(self, other):
        return _binary("lt", self, other)

    def __le__(self, other):
        return _binary("le", self, other)

    def __ne__(self, other):
        return _binary("ne", self, other)

    __hash__ = object.__hash__

    # ---------------------------------------------------------------- the protocol
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if func is F.layer_norm:
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            bias = args[3] if len(args) > 3 else kwargs.get("bias")
            if weight is None or bias is None:
                raise ValueError("NestedTensor layer_norm requires weight and bias")
        if name in _BINARY and len(args) >= 2:
            return _binary(name, args[0], args[1])
        if name in ("sum", "mean"):
            dim = kwargs.get("dim", kwargs.get("dims", args[1] if len(args) > 1 else None))
            return getattr(args[0], name)(dim, kwargs.get("keepdim", args[2] if len(args) > 2 else False))
        if name in ("softmax", "_softmax"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return _map(_F_softmax, "softmax", (args[0], dim), {})
        if name in _PER_COMPONENT:
            return _map(func, name, args, kwargs)
        raise NotImplementedError(_NO_KERNEL.format(_ATEN_NAMES.get(name, name)))


_ATEN_NAMES = {"log_softmax": "_log_softmax", "pow": "pow.Tensor_Scalar"}


def _F_softmax(x, dim, dtype=None):
    return F.softmax(x, dim, dtype=dtype)


def _matmul(a, b):
    return a.matmul(b)


# the functions PyTorch's nested kernels run on each component (dims are the components' dims + 1)
_PER_COMPONENT = {
    "abs", "cos", "neg", "sin", "sqrt", "tanh", "relu", "isnan", "isinf", "logical_not", "sgn", "gelu", "silu",
    "softsign", "tanhshrink", "linear", "matmul", "dropout", "layer_norm", "clone", "detach", "_to_copy", "to",
    "contiguous", "masked_fill", "where", "transpose",
}
_BINARY = {"add", "sub", "mul", "div", "eq", "gt", "ge", "lt", "le", "ne"}
_COMPARE_NUMBER_ONLY = {"eq", "gt", "ge"}


def _binary(name: str, a, b):
    """``a <name> b`` for a nested ``a``, as PyTorch's nested kernels accept it (see the operators)."""
    if name in ("eq", "gt", "ge", "lt", "le", "ne"):
        if isinstance(b, NestedTensor) and name == "eq":
            raise RuntimeError("eq does not support nested tensor as other value.")
        if name not in _COMPARE_NUMBER_ONLY or isinstance(b, (Tensor, NestedTensor)):
            kind = "Tensor" if isinstance(b, (Tensor, NestedTensor)) else "Scalar"
            raise NotImplementedError(_NO_KERNEL.format(f"{name}.{kind}"))
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "eq": lambda x, y: x == y, "gt": lambda x, y: x > y,
          "ge": lambda x, y: x >= y}[name]
    if isinstance(b, NestedTensor):
        if len(b._components) != len(a._components) or any(x.shape != y.shape for x, y in
                                                            zip(a._components, b._components)):
            raise RuntimeError(f"{name} does not support broadcasting when given a NestedTensor")
        return a._like([fn(x, y) for x, y in zip(a._components, b._components)])
    if isinstance(b, Tensor) and b.dim() > 0:
        raise RuntimeError("Expected both self and other to be nested, but got a nested self and non-nested other")
    return a._each(lambda x: fn(x, b))


def _component_dim(name: str, d, nested_dim: int):
    if not isinstance(d, int) or isinstance(d, bool):
        return d
    d = d % nested_dim
    if d == 0:
        raise RuntimeError(f"Cannot apply {name} across nested dimension 0")
    return d - 1


def _map(func, name: str, args, kwargs, dims=None):
    """``func`` on each component: nested arguments give their i-th component, dim arguments (``dims``
    positions, ``dim`` keywords) count without the nested dim."""
    nested = [a for a in (*args, *kwargs.values()) if isinstance(a, NestedTensor)]
    first = nested[0]
    n = len(first._components)
    if any(len(o._components) != n for o in nested[1:]):
        raise RuntimeError(f"{name}: the nested tensors hold different numbers of tensors")
    if name == "linear":
        _check_linear(first, args[1] if len(args) > 1 else kwargs["weight"])
    if name == "matmul" and not isinstance(args[1], NestedTensor):
        raise RuntimeError("Expected both to be nested, but got a nested self and non-nested other")
    if name == "where" and not isinstance(args[2] if len(args) > 2 else kwargs.get("other"), NestedTensor):
        raise RuntimeError("other must be nested")
    if dims is None:
        dims = (1,) if name in ("softmax",) else ()
    nd = first.dim()
    kwargs = {k: _component_dim(name, v, nd) if k == "dim" else v for k, v in kwargs.items()}
    outs = []
    for i in range(n):
        call = [a._components[i] if isinstance(a, NestedTensor) else
                (_component_dim(name, a, nd) if j in dims else a) for j, a in enumerate(args)]
        outs.append(func(*call, **{k: v._components[i] if isinstance(v, NestedTensor) else v
                                   for k, v in kwargs.items()}))
    return first._like(outs)


def _check_linear(nt: NestedTensor, weight: Tensor) -> None:
    """PyTorch's checks of a nested input to ``F.linear``: one trailing size, equal to the weight's."""
    last = [c.shape[-1] for c in nt._components]
    if len(set(last)) > 1:
        listed = "".join(f" {n}\n" for n in last)
        raise RuntimeError("Expected all tensors in nested tensor to have the same trailing dimension, instead last "
                           f"dimension equals: {listed}[ {_dtype.package_name()}.LongTensor{{{len(last)}}} ]")
    if last and weight.dim() == 2 and last[0] != weight.shape[1]:
        raise RuntimeError("Shape mismatch for NestedTensor Linear: Expected input's (a nested tensor) 'last_dim' to "
                           f"equal 'weight.size(1), but got: last_dim = {last[0]}, and weight.size(1) = "
                           f"{weight.shape[1]}")


def _reduce(name: str, nt: NestedTensor, dim, keepdim: bool):
    """``sum`` over the last dim with ``keepdim=True``: PyTorch's only nested reduction."""
    if dim is None:
        raise NotImplementedError(_NO_KERNEL.format("sum"))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    if any(d % nt.dim() != nt.dim() - 1 for d in dims):
        raise RuntimeError(f"NestedTensor can only be reduced across the last dimension for now got dimension "
                           f"{dims[0]} instead.")
    if not keepdim:
        raise RuntimeError("NestedTensor always requires keepdim=True for now.")
    return nt._each(lambda c: c.sum(-1, keepdim=True))


# ---------------------------------------------------------------- construction
def _checked_layout(layout):
    layout = strided if layout is None else layout
    if layout is not strided and layout is not jagged:
        raise RuntimeError(f"Specified layout is unsupported for nested tensors: {layout}")
    return layout


def _components(tensor_list, dtype, device, copy: bool) -> list:
    items = []
    for t in tensor_list:
        if not isinstance(t, Tensor):
            t = creation.tensor(t, dtype=dtype, device=device)
        items.append(t)
    dims = {t.dim() for t in items}
    if len(dims) > 1:
        for i, t in enumerate(items):
            if t.dim() != items[0].dim():
                raise RuntimeError(f"All Tensors given to nested_tensor must have the same dimension. Found "
                                   f"dimension {t.dim()} for Tensor at index {i} and dimension {items[0].dim()} "
                                   f"for Tensor at index 0.")
    if dtype is None and items:
        dtype = items[0].dtype
    out = []
    for t in items:
        if dtype is not None or device is not None:
            t = t.to(dtype=dtype, device=device)
        out.append(t)
    return out


def _jagged_ok(comps: list) -> None:
    if comps and (comps[0].dim() == 0 or len({tuple(c.shape[1:]) for c in comps}) > 1):
        raise RuntimeError("Cannot represent given tensor list as a nested tensor with the jagged layout. Note that "
                           "the jagged layout only allows for a single ragged dimension. For example: (B, *, D_0, "
                           "D_1, ..., D_N), with ragged * dim.")


_WARNED: list = []


def _prototype_warning(layout) -> None:
    """PyTorch's once-per-process warning at the first strided nested tensor (TORCH_WARN_ONCE)."""
    if layout is strided and not _WARNED:
        _WARNED.append(True)
        warnings.warn("The PyTorch API of nested tensors is in prototype stage and will change in the near future. "
                      "We recommend specifying layout=torch.jagged when constructing a nested tensor, as this layout "
                      "receives active development, has better operator coverage, and works with torch.compile.",
                      UserWarning, stacklevel=3)


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> NestedTensor:
    """A nested tensor of copies of ``tensor_list``'s tensors (or nested lists of numbers): a leaf,
    which records its own gradient when ``requires_grad``."""
    layout = _checked_layout(layout)
    _prototype_warning(layout)
    with no_grad():
        comps = [c.clone() for c in _components(tensor_list, dtype, device, copy=True)]
    if layout is jagged:
        _jagged_ok(comps)
    for c in comps:
        c.requires_grad_(requires_grad)
    return NestedTensor(comps, layout, leaf=True)


def as_nested_tensor(ts, dtype=None, device=None, layout=None) -> NestedTensor:
    """A nested tensor over ``ts`` (a list of tensors, or a tensor whose dim 0 is the batch) that
    keeps their autograd: gradients of what is computed from it reach them."""
    layout = _checked_layout(layout)
    if isinstance(ts, NestedTensor):
        return ts if dtype is None and device is None else ts.to(dtype=dtype, device=device)
    _prototype_warning(layout)
    if isinstance(ts, Tensor):
        ts = list(ts.unbind(0))
    comps = _components(ts, dtype, device, copy=False)
    if layout is jagged:
        _jagged_ok(comps)
    return NestedTensor(comps, layout)


def to_padded_tensor(input: NestedTensor, padding: float, output_size=None, out=None) -> Tensor:
    """The components padded with ``padding`` at the end of each dim to one shape (the largest size of
    each dim, or ``output_size``) and stacked: a dense tensor, through which gradients flow back."""
    comps = input._components
    if input._holes:
        raise RuntimeError("to_padded_tensor(): not supported for nested tensors with holes")
    if not comps:
        return creation.empty(0, dtype=input.dtype)
    shape = [max(c.shape[d] for c in comps) for d in range(comps[0].dim())]
    if input._pad_len is not None and output_size is None:
        shape[0] = input._pad_len
    if output_size is not None:
        output_size = list(output_size)
        if len(output_size) != len(shape) + 1 or output_size[0] != len(comps):
            raise RuntimeError("Length of output_size does not match NestedTensor dims. Broadcasting is not "
                               "supported.")
        if any(o < s for o, s in zip(output_size[1:], shape)):
            raise RuntimeError("Value in output_size is less than NestedTensor padded size. Truncation is not "
                               "supported.")
        shape = output_size[1:]
    padded = []
    for c in comps:
        widths = []
        for d in reversed(range(c.dim())):
            widths += [0, shape[d] - c.shape[d]]
        padded.append(pad(c, widths, value=padding) if any(widths) else c)
    return stack(padded)


def nested_tensor_from_jagged(values: Tensor, offsets: Tensor | None = None, lengths: Tensor | None = None,
                              jagged_dim: int | None = None, min_seqlen: int | None = None,
                              max_seqlen: int | None = None) -> NestedTensor:
    """A jagged nested tensor over ``values`` cut at ``offsets`` (or after ``lengths``) along
    ``jagged_dim`` (1 by default, the values' first dim); the components are views of ``values``.
    Given both, component i is ``lengths[i]`` long from ``offsets[i]``: a tensor with holes."""
    holes = offsets is not None and lengths is not None
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): At least one of offsets or lengths is required.")
        starts = [0]
        for n in lengths.tolist():
            starts.append(starts[-1] + n)
    else:
        starts = offsets.tolist()
    ends = [a + n for a, n in zip(starts, lengths.tolist())] if holes else starts[1:]
    d = 0 if jagged_dim is None else jagged_dim - 1
    comps = [values.narrow(d, a, b - a) for a, b in zip(starts, ends)]
    pad = (max_seqlen if max_seqlen is not None else values.shape[d]) if d == 0 else None
    return NestedTensor(comps, jagged, pad_len=pad, holes=holes)


def narrow(tensor: Tensor, dim: int, start, length, layout=strided) -> NestedTensor:
    """The rows of ``tensor`` (dim 0 is the batch), each narrowed along ``dim`` from its own ``start``
    for its own ``length`` (tensors of one entry per row; the jagged layout), or all alike."""
    if layout is strided:
        if isinstance(start, Tensor) or isinstance(length, Tensor):
            raise RuntimeError("start and length must be integers for the strided layout NT impl")
        _prototype_warning(layout)
        rows = list(tensor.unbind(0))
        if dim != 0:
            raise RuntimeError(f"narrow(): only dim=0 supported for nested tensors, but got: {dim}")
        return NestedTensor(rows[start:start + length], strided)
    if layout is not jagged:
        raise RuntimeError(f"Specified layout is unsupported for nested tensors: {layout}")
    n = tensor.shape[0]
    starts = start.tolist() if isinstance(start, Tensor) else [start] * n
    lengths = length.tolist() if isinstance(length, Tensor) else [length] * n
    return NestedTensor([row.narrow(dim - 1, a, k) for row, a, k in zip(tensor.unbind(0), starts, lengths)], jagged,
                        holes=True)


def masked_select(tensor: Tensor, mask: Tensor) -> NestedTensor:
    """The elements ``mask`` keeps, one jagged row per row of the last dim (the leading dims flattened)."""
    last = tensor.shape[-1]
    rows = zip(tensor.reshape(-1, last).unbind(0), mask.expand(tensor.shape).reshape(-1, last).unbind(0))
    comps = [row[keep] for row, keep in rows]
    return NestedTensor(comps, jagged, pad_len=sum(c.shape[0] for c in comps))

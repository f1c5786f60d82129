"""``torch.distributed._functional_collectives``: collectives that return a new tensor instead of writing
their argument. tapelab's complete before returning, so ``wait_tensor`` hands its argument back;
``all_to_all_single_autograd`` is differentiable (its backward is the all-to-all with the splits swapped)."""
from __future__ import annotations

from .._c10d import ReduceOp, get_world_size
from .._c10d import all_gather_into_tensor as _all_gather_into_tensor
from .._c10d import all_reduce as _all_reduce
from .._c10d import all_to_all_single as _all_to_all_single
from .._c10d import reduce_scatter_tensor as _reduce_scatter_tensor
from ..autograd.function import Function
from ..core.creation import empty
from ..core.tensor import Tensor
from ..ops.shaping import cat

__all__ = ["wait_tensor", "all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
           "all_to_all_single_autograd"]

_OPS = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "product": ReduceOp.PRODUCT, "min": ReduceOp.MIN,
        "max": ReduceOp.MAX}


def _group(group):
    """A process group from what PyTorch's functional collectives accept: a group, a 1-d DeviceMesh, (mesh, dim)."""
    from .device_mesh import DeviceMesh
    if isinstance(group, DeviceMesh):
        return group.get_group()
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, list):
        raise NotImplementedError("functional collectives over a list of ranks: pass the group from new_group(ranks)")
    return group


def _op(reduceOp) -> ReduceOp:
    return _OPS[reduceOp.lower()] if isinstance(reduceOp, str) else reduceOp


def wait_tensor(tensor: Tensor) -> Tensor:
    """``tensor``: the collective that made it has already completed."""
    return tensor


def all_reduce(self: Tensor, reduceOp: str, group, tag: str = "") -> Tensor:
    out = self.detach().clone()
    _all_reduce(out, _op(reduceOp), group=_group(group))
    return out


def all_gather_tensor(self: Tensor, gather_dim: int, group, tag: str = "") -> Tensor:
    g = _group(group)
    n = get_world_size(g)
    out = empty((n * self.shape[0], *self.shape[1:]), dtype=self.dtype, device=self.device)
    _all_gather_into_tensor(out, self.detach().contiguous(), group=g)
    return out if gather_dim == 0 else cat(out.chunk(n, dim=0), dim=gather_dim)


def reduce_scatter_tensor(self: Tensor, reduceOp: str, scatter_dim: int, group, tag: str = "") -> Tensor:
    g = _group(group)
    n = get_world_size(g)
    src = self if scatter_dim == 0 else cat(self.chunk(n, dim=scatter_dim), dim=0)
    out = empty((src.shape[0] // n, *src.shape[1:]), dtype=self.dtype, device=self.device)
    _reduce_scatter_tensor(out, src.detach().contiguous(), _op(reduceOp), group=g)
    return out   # this rank's chunk of scatter_dim (src stacks the chunks along dim 0)


def all_to_all_single(self: Tensor, output_split_sizes, input_split_sizes, group, tag: str = "") -> Tensor:
    rows = sum(output_split_sizes) if output_split_sizes is not None else self.shape[0]
    if output_split_sizes is None and input_split_sizes is not None:
        raise ValueError("all_to_all_single: give output_split_sizes with input_split_sizes")
    out = empty((rows, *self.shape[1:]), dtype=self.dtype, device=self.device)
    _all_to_all_single(out, self.detach().contiguous(), output_split_sizes, input_split_sizes, group=_group(group))
    return out


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, input, output_split_sizes, input_split_sizes, group):
        ctx.splits, ctx.group = (output_split_sizes, input_split_sizes), group
        return all_to_all_single(input, output_split_sizes, input_split_sizes, group)

    @staticmethod
    def backward(ctx, grad):
        output_split_sizes, input_split_sizes = ctx.splits
        return all_to_all_single(grad.contiguous(), input_split_sizes, output_split_sizes, ctx.group), None, None, None


def all_to_all_single_autograd(self: Tensor, output_split_sizes, input_split_sizes, group, tag: str = "") -> Tensor:
    """``all_to_all_single`` whose gradient flows back to ``self`` (the reverse all-to-all)."""
    return _AllToAllSingle.apply(self, output_split_sizes, input_split_sizes, group)

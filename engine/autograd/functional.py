"""``torch.autograd.functional``: Jacobians, Hessians and their products for a function of tensors.

Everything is reverse mode on the ordinary graph: a Jacobian is one ``grad`` per output element,
a Jacobian-vector product the double-backward trick (the vjp's graph differentiated w.r.t. the
cotangent), a Hessian the Jacobian of the gradient. Inputs are re-made as fresh leaves, so the
results are detached unless ``create_graph`` (then they stay on the caller's graph). Only Tensor
methods build new tensors here (this layer sits below the ops' public functions).
"""
from __future__ import annotations

import warnings

from ..base.grad_mode import enable_grad
from ..core import batching
from ..core.tensor import Tensor
from .engine import grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x, arg: str, fn: str) -> tuple[bool, tuple]:
    """(whether ``x`` was a tuple or list, its tensors as a tuple)."""
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            where = f"{arg} at index {i}" if is_tuple else arg
            raise TypeError(f"The {where} given to {fn} must be either a Tensor or a tuple of Tensors but the "
                            f"value at index {i} has type {type(t)}.")
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh leaves to differentiate with respect to (on the caller's graph with ``create_graph``)."""
    if create_graph:
        return tuple(t.view_as(t) if t.requires_grad else t.detach().requires_grad_(True) for t in inputs)
    return tuple(t.detach().requires_grad_(True) for t in inputs)


def _call(func, inputs: tuple, fn: str) -> tuple[bool, tuple]:
    with enable_grad():
        out = func(*inputs)
    return _as_tuple(out, "outputs of the user-provided function", fn)


def _grads(outputs, inputs, grad_outputs, create_graph: bool) -> tuple:
    """``grad`` with zeros for inputs the outputs do not reach (``strict=False``)."""
    return _grad(outputs, inputs, grad_outputs, retain_graph=True, create_graph=create_graph, materialize_grads=True)


def _finish(xs: tuple, create_graph: bool) -> tuple:
    return xs if create_graph else tuple(x.detach() for x in xs)


def _check_v(v, like: tuple, what: str, fn: str) -> tuple:
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the {what} a single Tensor with a single element.")
        return (like[0].new_ones(like[0].shape),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} but got {tuple(a.shape)}.")
    return vs


def _shape_like(is_tuple: bool, xs: tuple):
    return xs if is_tuple else xs[0]


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ J)``."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "vjp")
    vs = _check_v(v, outputs, "user-provided function returns", "vjp")
    res = _grads(outputs, inputs, vs, create_graph)
    return _shape_like(out_tuple, _finish(outputs, create_graph)), _shape_like(in_tuple, _finish(res, create_graph))


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)``, by differentiating the vjp w.r.t. its cotangent."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    inputs = _prepare(inputs, create_graph)
    vs = _check_v(v, inputs, "input to the user-provided function is", "jvp")
    out_tuple, outputs = _call(func, inputs, "jvp")
    with enable_grad():
        us = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        g = _grads(outputs, inputs, us, True)
        res = _grads(g, us, vs, create_graph)
    return _shape_like(out_tuple, _finish(outputs, create_graph)), _shape_like(out_tuple, _finish(res, create_graph))


def _batched_rows(flat: Tensor, inputs: tuple, create_graph: bool, lead: int = 0) -> list:
    """Every row of d flat / d inputs in one backward pass, as ``torch.func.jacrev`` vmaps its vjp: the
    cotangents are the rows of an identity, batched by a vmap level (``core/batching.py``), so each vjp
    of the graph runs once for all rows. ``flat`` is ``[*lead dims, n]``: its ``lead`` leading dims are
    independent slices (a running vmap's levels, ``func.jacrev`` inside ``vmap``), each slice's rows
    taken together; a block is ``[*lead dims, n, *input's own dims]``."""
    n = flat.shape[-1]
    batch = tuple(flat.shape[:-1])
    mode = batching.BatchMode(next(batching.LEVELS), n, "error")
    eye = flat.detach().new_ones((n,)).diag()
    if lead:
        eye = eye.reshape(n, *(1,) * lead, n).expand(n, *batch, n)
    cot = batching.wrap(eye, mode.level)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "There is a performance drop", UserWarning)
        with mode:
            gs = _grads((flat,), inputs, (cot,), create_graph)
    mode._seen.clear()
    blocks = [g._phys if isinstance(g, batching.BatchedTensor) and g._level == mode.level
              else g.expand(n, *g.shape) for g in gs]
    return [b.movedim(0, lead) if lead else b for b in blocks]


def _jacobian_rows(outputs: tuple, inputs: tuple, create_graph: bool, lead: int = 0) -> tuple:
    """For each output, per input: d out / d in of shape ``out.shape + in.shape`` (one batched backward
    pass per output; one pass per element where the batched pass fails). With ``lead``, outputs and
    inputs share that many leading dims of independent slices: the blocks are
    ``lead dims + out's own dims + in's own dims``."""
    jac = []
    for out in outputs:
        batch = tuple(out.shape[:lead])
        flat = out.reshape(*batch, -1)
        n = flat.shape[-1]
        try:
            blocks = _batched_rows(flat, inputs, create_graph, lead) if n > 1 else None
        except Exception:   # an op the batching cannot take: the element-by-element passes below
            blocks = None
        if blocks is None:
            blocks = [inp.new_zeros(batch + (n,) + tuple(inp.shape[lead:])) for inp in inputs]
            for i in range(n):
                if lead:
                    onehot = flat.detach().new_zeros(flat.shape)
                    onehot[..., i] = 1
                    grads = _grads((flat,), inputs, (onehot,), create_graph)
                else:
                    grads = _grads((flat[i],), inputs, None, create_graph)
                for block, g in zip(blocks, grads):
                    block[(slice(None),) * lead + (i,)] = g
        jac.append(tuple(b.reshape(tuple(out.shape) + tuple(inp.shape[lead:])) for b, inp in zip(blocks, inputs)))
    return tuple(jac)


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: a Tensor ``out.shape + in.shape`` for one output and
    one input, else tuples (per output, then per input) as ``torch.autograd.functional.jacobian``."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                         'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                         'Otherwise, prefer to use "reverse-mode".')
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "jacobian")
    with enable_grad():
        jac = _jacobian_rows(outputs, inputs, create_graph)
    jac = tuple(_finish(row, create_graph) for row in jac)
    if out_tuple:
        return tuple(_shape_like(in_tuple, row) for row in jac)
    return _shape_like(in_tuple, jac[0])


def hessian(func, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func``: the Jacobian of its gradient."""
    in_tuple, tuple_inputs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out_tuple, out = _call(func, xs, "hessian")
        if out_tuple or out[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element.")
        return _grads(out, xs, None, True)
    res = jacobian(gradient, tuple_inputs, create_graph=create_graph, strategy=outer_jacobian_strategy)
    return res if in_tuple else res[0][0]


def _scalar_grad(func, inputs: tuple, fn: str):
    out_tuple, out = _call(func, inputs, fn)
    if out_tuple or out[0].numel() != 1:
        raise RuntimeError("The function given to hvp should return a single Tensor with a single element.")
    return out[0], _grads(out, inputs, None, True)


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ H)``."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
    inputs = _prepare(inputs, create_graph)
    vs = _check_v(v, inputs, "input to the user-provided function is", "vhp")
    with enable_grad():
        out, g = _scalar_grad(func, inputs, "vhp")
        res = _grads(g, inputs, vs, create_graph)
    return _finish((out,), create_graph)[0], _shape_like(in_tuple, _finish(res, create_graph))


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H v)``: equal to ``vhp`` for the symmetric Hessian of a twice-differentiable function."""
    return vhp(func, inputs, v, create_graph, strict)

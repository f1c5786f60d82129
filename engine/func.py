"""``torch.func``: function transforms (``grad``, ``vmap``, ``jacrev``, ``hessian``, ...) and
``functional_call``, as per-sample-gradient, meta-learning and ensembling programs use them.

tapelab runs them eagerly on its one tape: ``grad`` re-makes its inputs as fresh leaves (or, when
an outer transform differentiates through it, as views on the outer graph with ``create_graph``),
so transforms compose (``vmap(grad(f))``, ``jacrev(jacrev(f))``). ``vmap`` batches as PyTorch's: it
enters a ``core.batching.BatchMode`` level and hands the function ``BatchedTensor``s, so each op runs
once for the whole batch (an op without a batching rule a slice at a time); ``grad`` and ``vjp`` inside
it differentiate leaves carrying a dim per vmap level in one backward pass (per-sample gradients), and
``vmap(vjp_fn)`` runs the backward itself batched. ``torch.vmap`` is this ``vmap``.
"""
from __future__ import annotations

import functools
from typing import Callable

from .autograd.engine import grad as _autograd_grad
from .core.node import AccumulateGrad
from .base.grad_mode import enable_grad, is_grad_enabled
from .core import batching as _batching
from .core.tensor import Tensor
from .nn.utils.stateless import _functional_call
from .ops.movement import cat, stack
from .utils._pytree import tree_flatten, tree_unflatten

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian", "vmap", "functional_call",
           "stack_module_state", "functionalize", "replace_all_batch_norm_modules_"]


# ---------------------------------------------------------------- pytrees (utils/_pytree.py)
def _flatten(tree) -> tuple[list, Callable]:
    """The leaves of ``tree`` in order, and a function rebuilding the tree from new leaves."""
    leaves, spec = tree_flatten(tree)
    return leaves, lambda new: tree_unflatten(new, spec)


def _at_caller_level(tree, outer: bool):
    """``tree`` with its tensors cut from this transform's graph, unless an outer transform (or the
    caller) differentiates through them: PyTorch hands outputs and ``aux`` back at the caller's level."""
    if outer:
        return tree
    leaves, build = _flatten(tree)
    return build([t.detach() if isinstance(t, Tensor) else t for t in leaves])


# The nesting depth of the running transforms, and the depth each transform's fresh leaves were made at:
# a leaf of an enclosing transform (made shallower) is one the caller differentiates through; a leaf of
# a transform that ran inside this one and finished (made deeper) is not.
_DEPTH = [0]


def _own_leaf(t: Tensor) -> Tensor:
    t._transform_depth = _DEPTH[0]
    return t


def _nested(fn: Callable) -> Callable:
    """``fn`` (a transform's call) one level deeper."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        _DEPTH[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
    return run


def _reaches_outside(outputs, own) -> bool:
    """Whether the graph of ``outputs`` reaches a leaf that is not one of the transform's ``own`` fresh
    leaves: a tensor the caller may differentiate through (a module's parameters the function reads,
    an outer transform's input in a closure). PyTorch's transforms then hand results back on the
    caller's graph (``vmap(jacrev(model))(x)`` backpropagates into ``model``)."""
    own, depth = {id(t) for t in own}, _DEPTH[0]

    def outside(v) -> bool:
        return v is not None and id(v) not in own and getattr(v, "_transform_depth", 0) < depth
    stack, seen = [], set()
    for t in outputs:
        if isinstance(t, Tensor) and t.requires_grad:
            if t.grad_fn is None:
                if outside(t):
                    return True
            else:
                stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if outside(node.variable):
                return True
            continue
        stack.extend(e[0] for e in node.edges if e is not None and e[0] is not None)
    return False


def _outer(caller_grad: bool, inputs, outputs, own) -> bool:
    """Whether this transform's results stay on the caller's graph (``create_graph`` for its passes)."""
    if not caller_grad:
        return False
    return any(isinstance(t, Tensor) and t.requires_grad for t in inputs) or _reaches_outside(outputs, own)


# ---------------------------------------------------------------- grad
def _leaves_for(x: Tensor) -> Tensor:
    """A tensor to differentiate with respect to: a fresh leaf, or on the outer graph when some
    outer transform (or the caller) differentiates through ``x``."""
    if x.requires_grad and is_grad_enabled():
        return x.view_as(x)
    return _own_leaf(x.detach().requires_grad_(True))


def _argnums(argnums, n: int, name: str) -> tuple:
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got: {type(a)}")
        if not -n <= a < n:
            raise RuntimeError(f"Got argnums={a}, but only {n} positional inputs")
    return tuple(a % n for a in nums)


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``f(*args) -> (gradient w.r.t. args[argnums], value)`` (``((gradient, value), aux)`` ... as
    ``torch.func.grad_and_value``: with ``has_aux`` the function returns ``(value, aux)``)."""
    @_nested
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad_and_value")
        levels = _batching.active_levels()
        if levels:
            return _batched_grad_and_value(func, args, kwargs, nums, argnums, has_aux, levels)
        caller_grad = is_grad_enabled()
        given = [t for i in nums for t in _flatten(args[i])[0]]
        args = list(args)
        trees = []
        for i in nums:
            leaves, build = _flatten(args[i])
            leaves = [_leaves_for(t) if isinstance(t, Tensor) else t for t in leaves]
            trees.append((leaves, build))
            args[i] = build(leaves)
        with enable_grad():
            out = func(*args, **kwargs)
            value, aux = (out if has_aux else (out, None))
            _check_scalar(value)
            leaves = [t for ls, _ in trees for t in ls if isinstance(t, Tensor)]
            outer = _outer(caller_grad, given, (value,), leaves)
            gs = iter(_autograd_grad((value,), leaves, create_graph=outer, materialize_grads=True))
        grads = [build([next(gs) if isinstance(t, Tensor) else t for t in ls]) for ls, build in trees]
        g = grads[0] if not isinstance(argnums, tuple) else tuple(grads)
        value, aux = _at_caller_level((value, aux), outer)
        return ((g, (value, aux)) if has_aux else (g, value))
    return wrapper


def _check_scalar(value) -> None:
    """``grad``'s function must return a one-element tensor (PyTorch's message otherwise)."""
    if not isinstance(value, Tensor) or value.numel() != 1:
        raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                           f"tensor with {value.dim() if isinstance(value, Tensor) else '?'} dims. Maybe "
                           "you wanted to use the vjp or jacrev APIs instead?")


def _per_slice(fn, args: tuple):
    """``fn(*args)`` a slice at a time over the innermost vmap level that batches some argument (where a
    transform has no batched form): the results stacked and batched again at that level."""
    leaves, build = _flatten(args)
    lv = max(t._level for t in leaves if isinstance(t, _batching.BatchedTensor))
    mode = next(m for m in _batching.modes() if m.level == lv)
    with mode.aside():
        results = []
        for i in range(mode.size):
            results.append(fn(*build([t._phys.select(0, i) if isinstance(t, _batching.BatchedTensor)
                                      and t._level == lv else t for t in leaves])))
        flat0, rebuild = _flatten(results[0])
        per = [_flatten(r)[0] for r in results]
        outs = [_batching.rewrap(stack([p[k] for p in per]), [(lv, mode.size)]) if isinstance(v, Tensor) else v
                for k, v in enumerate(flat0)]
    return rebuild(outs)


def _batched_leaf(x: Tensor, levels: list) -> tuple:
    """Inside vmap: ``(leaf, batched leaf)`` for differentiating w.r.t. ``x`` per slice. The leaf is a plain
    tensor with a dim for every vmap level (an unbatched ``x`` expanded), so each slice has its own copy
    and the gradient of the summed batch w.r.t. it is every slice's own gradient."""
    plain, have = _batching.unwrap_all(x)
    leaf = _leaves_for(_batching.align(plain, have, levels))
    return leaf, _batching.rewrap(leaf, levels)


def _batched_grad_and_value(func, args, kwargs, nums, argnums, has_aux, levels):
    """``grad_and_value`` inside vmap: the function runs once on the batched leaves and one backward pass of
    the physical value gives the per-slice gradients (PyTorch batches the backward of each slice)."""
    caller_grad = is_grad_enabled()
    given = [t for i in nums for t in _flatten(args[i])[0]]
    args = list(args)
    trees = []
    for i in nums:
        leaves, build = _flatten(args[i])
        pairs = [_batched_leaf(t, levels) if isinstance(t, Tensor) else (t, t) for t in leaves]
        trees.append(([p for p, _ in pairs], build))
        args[i] = build([b for _, b in pairs])
    with enable_grad():
        out = func(*args, **kwargs)
        value, aux = (out if has_aux else (out, None))
        _check_scalar(value)
        plain, have = _batching.unwrap_all(value)
        leaves = [t for ls, _ in trees for t in ls if isinstance(t, Tensor)]
        outer = _outer(caller_grad, given, (plain,), leaves)
        gs = iter(_autograd_grad((plain,), leaves, (plain.new_ones(plain.shape),), create_graph=outer,
                                 materialize_grads=True))
    grads = [build([_batching.rewrap(next(gs), levels) if isinstance(t, Tensor) else t for t in ls])
             for ls, build in trees]
    g = grads[0] if not isinstance(argnums, tuple) else tuple(grads)
    value, aux = _at_caller_level((value, aux), outer)
    return ((g, (value, aux)) if has_aux else (g, value))


def _batched_vjp(func, primals, has_aux, levels):
    """``vjp`` inside vmap: the function runs once on leaves with a dim per vmap level, and ``vjp_fn`` runs
    one backward pass whose cotangents carry those dims (a cotangent batched by a vmap entered later, as
    ``vmap(vjp_fn)`` is, is taken a slice at a time)."""
    flat, build = _flatten(primals)
    outer = is_grad_enabled() and any(p.requires_grad for p in flat)
    pairs = [_batched_leaf(p, levels) for p in flat]
    leaves = [p for p, _ in pairs]
    with enable_grad():
        out = func(*build([b for _, b in pairs]))
    out, aux = (out if has_aux else (out, None))
    known = {lv for lv, _ in levels}

    def vjp_fn(cotangents):
        outs, _ = _flatten(out)
        cots, _ = _flatten(cotangents)
        if _batching.has_levels(cots, known):
            return _per_slice(vjp_fn, (cotangents,))
        plain_outs = [_batching.align(*_batching.unwrap_all(o), levels) for o in outs]
        plain_cots = [_batching.align(*_batching.unwrap_all(c), levels) for c in cots]
        gs = _autograd_grad(plain_outs, leaves, plain_cots, retain_graph=True,
                            create_graph=outer or _differentiated(plain_cots), materialize_grads=True)
        return build([_batching.rewrap(g, levels) for g in gs])
    result, aux = _at_caller_level((out, aux), outer)
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def _differentiated(cotangents: list) -> bool:
    """Whether something differentiates ``vjp_fn`` w.r.t. its cotangents: the vjp is linear in them, and
    PyTorch's ``vjp_fn`` output stays on their graph (a transform over ``vjp_fn``, as torchopt's
    implicit differentiation takes the vjp of a vjp to transpose its linear system, or a caller's
    ``backward`` through it), so the backward pass then records itself (``create_graph``)."""
    return is_grad_enabled() and any(isinstance(c, Tensor) and c.requires_grad for c in cotangents)


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``f(*args) -> gradient of the scalar f w.r.t. args[argnums]`` (a pytree like the argument)."""
    inner = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


@_nested
def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)`` where ``vjp_fn(cotangents)`` returns one gradient per primal,
    each shaped like its primal's pytree (a dict of parameters gives a dict of gradients)."""
    levels = _batching.active_levels()
    if levels:
        return _batched_vjp(func, primals, has_aux, levels)
    flat, build = _flatten(primals)
    leaves = [_leaves_for(p) for p in flat]
    with enable_grad():
        out = func(*build(leaves))
    out, aux = (out if has_aux else (out, None))
    outer = _outer(is_grad_enabled(), flat, _flatten(out)[0], leaves)

    def vjp_fn(cotangents):
        outs, _ = _flatten(out)
        cots, _ = _flatten(cotangents)
        return build(list(_autograd_grad(outs, leaves, cots, retain_graph=True,
                                         create_graph=outer or _differentiated(cots), materialize_grads=True)))
    result, aux = _at_caller_level((out, aux), outer)
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


@_nested
def jvp(func: Callable, primals: tuple, tangents: tuple, *, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``, by differentiating the vjp w.r.t. its cotangent; with
    ``has_aux``, ``func`` returns ``(output, aux)`` and ``aux`` comes back third, as ``grad``'s and ``vjp``'s.
    Primals, tangents and the output may be pytrees (a tuple or dict of parameters), as PyTorch's."""
    from .autograd.functional import _call, _check_v, _finish, _grads, _prepare
    flat_primals, primal_spec = tree_flatten(tuple(primals))
    flat_tangents, tangent_spec = tree_flatten(tuple(tangents))
    if tangent_spec != primal_spec:
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {primal_spec} and tangents with structure {tangent_spec}")
    levels = _batching.active_levels()
    if levels:
        return _batched_jvp(func, flat_primals, primal_spec, flat_tangents, has_aux, levels)
    aux, out_spec = [], []

    def output_of(*xs):
        out = func(*tree_unflatten(list(xs), primal_spec))
        if has_aux:
            out, extra = out
            aux.append(extra)
        flat, spec = tree_flatten(out)
        out_spec.append(spec)
        return tuple(flat)
    caller_grad = is_grad_enabled()
    inputs = tuple(t if t.grad_fn is not None else _own_leaf(t) for t in _prepare(tuple(flat_primals), caller_grad))
    vs = _check_v(tuple(flat_tangents), inputs, "input to the user-provided function is", "jvp")
    _, outputs = _call(output_of, inputs, "jvp")
    outer = _outer(caller_grad, (*flat_primals, *flat_tangents), outputs, inputs)
    with enable_grad():   # J v as the derivative of the vjp u -> u^T J w.r.t. u
        us = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        product = _grads(_grads(outputs, inputs, us, True), us, vs, outer)
    value, product = _finish(outputs, outer), _finish(product, outer)
    value, product = tree_unflatten(list(value), out_spec[0]), tree_unflatten(list(product), out_spec[0])
    return (value, product, _at_caller_level(aux[0], outer)) if has_aux else (value, product)


def _batched_jvp(func, flat_primals, primal_spec, flat_tangents, has_aux, levels):
    """``jvp`` inside vmap: the function runs once on leaves with a dim per vmap level and the product is
    the double-backward trick on the physical values (each slice's Jacobian acts on its own tangent)."""
    from .autograd.functional import _check_v, _grads
    caller_grad = is_grad_enabled()
    _check_v(tuple(flat_tangents), tuple(flat_primals), "input to the user-provided function is", "jvp")
    pairs = [_batched_leaf(p, levels) for p in flat_primals]
    leaves = [p for p, _ in pairs]
    vs = tuple(_batching.align(*_batching.unwrap_all(t), levels) for t in flat_tangents)
    with enable_grad():
        out = func(*tree_unflatten([b for _, b in pairs], primal_spec))
        out, aux = (out if has_aux else (out, None))
        outs, out_spec = tree_flatten(out)
        plain = tuple(_batching.align(*_batching.unwrap_all(o), levels) for o in outs)
        outer = _outer(caller_grad, (*flat_primals, *flat_tangents), plain, leaves)
        us = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in plain)
        product = _grads(_grads(plain, leaves, us, True), us, vs, outer)
    if not outer:
        product = tuple(p.detach() for p in product)
    product = [_batching.rewrap(p, levels) for p in product]
    value, product = _at_caller_level(out, outer), tree_unflatten(product, out_spec)
    return (value, product, _at_caller_level(aux, outer)) if has_aux else (value, product)


def linearize(func: Callable, *primals) -> tuple:
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is ``jvp``'s product at ``primals`` (PyTorch
    traces the product once; here each call differentiates ``func`` again, with the same results).
    Tangents must match the primals' pytree, shapes and dtypes, as PyTorch checks."""
    output = func(*primals)
    flat_primals, primal_spec = tree_flatten(primals)

    def jvp_fn(*tangents):
        flat_tangents, tangent_spec = tree_flatten(tangents)
        if tangent_spec != primal_spec:
            raise RuntimeError(f"Expected the tangents {tangent_spec} to have the same argspec as the primals "
                               f"{primal_spec}")
        for i, (t, p) in enumerate(zip(flat_tangents, flat_primals)):
            for what in ("shape", "dtype"):
                if getattr(t, what) != getattr(p, what):
                    raise RuntimeError(f"tangent:{i} with {what} {getattr(t, what)} in flattened pytree doesn't "
                                       f"match the {what} {getattr(p, what)} of the corresponding primal.")
        return jvp(func, primals, tangents)[1]
    return output, jvp_fn


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of ``func`` w.r.t. ``args[argnums]``: for each output leaf (``func`` may return a
    pytree), a pytree like the argument (a tuple of them for tuple argnums) whose leaves are
    ``out.shape + leaf.shape``, as ``torch.func.jacrev`` (a dict of parameters gives a dict of
    Jacobians). One reverse pass per output leaf, its cotangents the rows of an identity batched by a
    vmap level (``autograd/functional._batched_rows``), as PyTorch's vmap over its vjp; any
    ``chunk_size`` (which bounds PyTorch's batched passes) and ``_preallocate_and_copy`` (how PyTorch
    gathers the chunks; pypose passes it) give the same result."""
    from .autograd.functional import _call, _finish, _jacobian_rows, _prepare
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @_nested
    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacrev")
        levels = _batching.active_levels()
        if levels:
            return _batched_jacrev(func, args, nums, argnums, has_aux, levels)
        trees = [_flatten(args[i]) for i in nums]
        counts = [len(leaves) for leaves, _ in trees]
        aux_box, out_box = [], []

        def of(*flat):
            full, at = list(args), 0
            for i, (leaves, build), n in zip(nums, trees, counts):
                full[i], at = build(list(flat[at:at + n])), at + n
            out = func(*full)
            if has_aux:
                out, aux = out
                aux_box.append(aux)
            outs, spec = tree_flatten(out)
            out_box.append(spec)
            return tuple(outs)
        flat = [t for leaves, _ in trees for t in leaves]
        caller_grad = is_grad_enabled()
        inputs = tuple(t if t.grad_fn is not None else _own_leaf(t) for t in _prepare(tuple(flat), caller_grad))
        out_tuple, outputs = _call(of, inputs, "jacobian")
        outer = _outer(caller_grad, flat, outputs, inputs)
        with enable_grad():
            jac = [_finish(row, outer) for row in _jacobian_rows(outputs, inputs, outer)]
        rows = []
        for row in jac:
            per_arg, at = [], 0
            for (_, build), n in zip(trees, counts):
                per_arg.append(build(list(row[at:at + n])))
                at += n
            rows.append(tuple(per_arg) if isinstance(argnums, tuple) else per_arg[0])
        jac = tree_unflatten(rows, out_box[0])
        return (jac, _at_caller_level(aux_box[0], outer)) if has_aux else jac
    return wrapper


def _batched_jacrev(func, args, nums, argnums, has_aux, levels):
    """``jacrev`` inside vmap: the function runs once on leaves with a dim per vmap level (as ``grad``'s
    batched form), and each output's rows come from one backward pass whose identity cotangents are
    batched by a new level and broadcast over the vmap dims (``autograd/functional._jacobian_rows`` with
    ``lead``): every slice's Jacobian at once, as torch's vmap over jacrev's vmapped vjp."""
    from .autograd.functional import _finish, _jacobian_rows
    caller_grad = is_grad_enabled()
    args = list(args)
    trees, given = [], []
    for i in nums:
        leaves, build = _flatten(args[i])
        given.extend(leaves)
        pairs = [_batched_leaf(t, levels) if isinstance(t, Tensor) else (t, t) for t in leaves]
        trees.append(([p for p, _ in pairs], build))
        args[i] = build([b for _, b in pairs])
    with enable_grad():
        out = func(*args)
        out, aux = (out if has_aux else (out, None))
        outs, spec = tree_flatten(out)
        plain = [_batching.align(*_batching.unwrap_all(o), levels) for o in outs]
        leaves = [t for ls, _ in trees for t in ls if isinstance(t, Tensor)]
        outer = _outer(caller_grad, given, plain, leaves)
        jac = [_finish(row, outer) for row in _jacobian_rows(tuple(plain), tuple(leaves), outer, len(levels))]
    rows = []
    for row in jac:
        it = iter(_batching.rewrap(b, levels) for b in row)
        per_arg = [build([next(it) if isinstance(t, Tensor) else t for t in ls]) for ls, build in trees]
        rows.append(tuple(per_arg) if isinstance(argnums, tuple) else per_arg[0])
    jac = tree_unflatten(rows, spec)
    return (jac, _at_caller_level(aux, outer)) if has_aux else jac


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """``torch.func.jacfwd``'s signature (``has_aux`` may be positional); the same values as
    ``jacrev``, which computes them in reverse mode."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums=0) -> Callable:
    """``jacfwd(jacrev(func))``."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---------------------------------------------------------------- vmap
def _dims_for(dims, tree) -> list:
    """One mapped dim per leaf of ``tree``: ``dims`` an int or None for all its leaves, or a
    tuple/list/dict of the tree's own structure."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(dims, dict) and isinstance(tree, dict):
        return [x for k in tree for x in _dims_for(dims[k], tree[k])]
    if isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list)) and len(dims) == len(tree):
        return [x for d, t in zip(dims, tree) for x in _dims_for(d, t)]
    raise ValueError(f"vmap(...): in_dims is not compatible with the structure of `inputs`. in_dims has "
                     f"structure {dims} but inputs has structure {type(tree).__name__} of "
                     f"{len(tree) if hasattr(tree, '__len__') else 1} elements")


def _in_dims(name: str, in_dims, args: tuple, leaves: list) -> tuple[list, int]:
    """Each leaf's mapped dim (wrapped) and the batch size, with PyTorch's checks and texts."""
    where = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                         f"structure of inputs, got: {type(in_dims)}.")
    try:
        dims = _dims_for(in_dims, args)
    except ValueError:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                         f"{tree_flatten(in_dims)[1]} but inputs has structure {tree_flatten(args)[1]}.") from None
    out, sizes = [], []
    for t, d in zip(leaves, dims):
        if d is None:
            out.append(None)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"{where}: in_dim must be int or None, got {type(d)}")
        if not isinstance(t, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type {type(t)}. We cannot "
                             "vmap over non-Tensor arguments, please use None as the respective in_dim")
        nd = t.dim()
        if not -nd <= d < nd:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                             f"dimensionality {nd} so expected in_dim to satisfy -{nd} <= in_dim < {nd}.")
        out.append(d % nd)
        sizes.append(t.shape[d])
    if not sizes:
        raise ValueError(f"{where}: at least one input must be a Tensor mapped over a dim (all inputs had "
                         "in_dim=None or were not Tensors)")
    if len(set(sizes)) != 1:
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sorted(set(sizes))} for the mapped dimension")
    return out, sizes[0]


def _outputs(name: str, out_dims, result, size: int, level: int | None):
    """``result``'s leaves with the batch moved to ``out_dims`` (unbatched tensors expanded), as PyTorch's."""
    flat, rebuild = _flatten(result)
    dims = _dims_for(out_dims, result)
    done = []
    for v, d in zip(flat, dims):
        batched = isinstance(v, _batching.BatchedTensor) and v._level == level
        if d is None:
            if batched:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            done.append(v)
            continue
        if not isinstance(v, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(v)}. Did you "
                             "mean to set out_dims= to None for output?")
        p = v._phys if batched else v.expand(size, *v.shape)
        done.append(p if d == 0 else p.movedim(0, d))
    return rebuild(done)


def _stacked(name: str, func, args, kwargs, leaves, dims, build, size, out_dims):
    """The per-slice loop: ``func`` on each slice, the results stacked (a call the batching cannot take)."""
    results = [func(*build([t.select(d, i) if d is not None else t for t, d in zip(leaves, dims)]), **kwargs)
               for i in range(size)]
    outs = _dims_for(out_dims, results[0])
    per = [_flatten(r)[0] for r in results]
    return _flatten(results[0])[1]([stack([p[k] for p in per], o) if o is not None else per[0][k]
                                    for k, o in enumerate(outs)])


def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None) -> Callable:
    """``func`` mapped over a dim of its (nested) tensor arguments, as ``torch.func.vmap``: each op runs once
    for the whole batch (``core/batching.py``: a ``BatchMode`` level, ``BatchedTensor`` arguments), the
    results' batch moved to ``out_dims``; ``chunk_size`` runs that many slices at a time; ``randomness``
    ``'error'`` refuses random ops, ``'different'`` draws per slice, ``'same'`` once for all."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = getattr(func, "__name__", type(func).__name__)

    @functools.wraps(func)
    def mapped(*args, **kwargs):
        leaves, build = _flatten(args)
        dims, size = _in_dims(name, in_dims, args, leaves)
        if chunk_size is None or chunk_size >= size:
            return _run(leaves, dims, build, size, args, kwargs)
        parts = []
        for start in range(0, size, chunk_size):
            n = min(chunk_size, size - start)
            part = [t.narrow(d, start, n) if d is not None else t for t, d in zip(leaves, dims)]
            parts.append(_run(part, dims, build, n, args, kwargs))
        flat0, rebuild = _flatten(parts[0])
        outs = _dims_for(out_dims, parts[0])
        per = [_flatten(p)[0] for p in parts]
        return rebuild([cat([p[k] for p in per], o) if o is not None else per[0][k] for k, o in enumerate(outs)])

    def _run(leaves, dims, build, size, args, kwargs):
        level = next(_batching.LEVELS)   # unique and increasing with nesting, even past a level set aside
        mode = _batching.BatchMode(level, size, randomness)
        inputs = []
        for t, d in zip(leaves, dims):
            if d is None:
                inputs.append(t)
                continue
            bt = _batching.wrap(t if d == 0 else t.movedim(d, 0), level)
            mode._seen[id(bt._data)] = bt
            inputs.append(bt)
        try:
            with mode:
                result = func(*build(inputs), **kwargs)
            return _outputs(name, out_dims, result, size, level)
        except _batching.FallBack:
            return _stacked(name, func, args, kwargs, leaves, dims, build, size, out_dims)
        finally:
            mode._seen.clear()
    return mapped


# ---------------------------------------------------------------- modules as functions
def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """``module(*args, **kwargs)`` with its parameters and buffers taken from the given dict(s)."""
    return _functional_call(module, parameter_and_buffer_dicts, args, kwargs, tie_weights=tie_weights, strict=strict)


def stack_module_state(models) -> tuple[dict, dict]:
    """The parameters and buffers of same-shaped ``models`` stacked along a new leading dim (for
    ``vmap`` over an ensemble); the stacked parameters are leaves that require grad."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    params = {n: stack([dict(m.named_parameters())[n].detach() for m in models]).requires_grad_(p.requires_grad)
              for n, p in models[0].named_parameters()}
    buffers = {n: stack([dict(m.named_buffers())[n] for m in models]) for n, _ in models[0].named_buffers()}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """Stop every batch norm in ``root`` tracking running statistics (their buffers become None), as
    PyTorch's does before ``vmap`` over a model (MAML's per-task batch statistics); returns ``root``."""
    from .nn.modules.batchnorm import _BatchNorm
    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = module.running_var = module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` itself: tapelab's eager tensors need no mutation removal (``torch.func.functionalize``
    exists for tracing backends)."""
    return func

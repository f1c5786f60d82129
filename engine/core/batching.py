"""``vmap``'s batching, as ``torch.func`` batches: a ``Mode`` that runs each op once for the whole batch.

Inside ``vmap`` a mapped value is a ``BatchedTensor``: a Tensor whose ``_phys`` holds the values of
every slice, the vmapped dim first, and whose own metadata (``shape``, ``dtype``, ``stride``; its
``_data`` is a view of the first slice) are the logical tensor's, so the public functions check and
canonicalise their arguments against the shapes the function sees. ``BatchMode`` (one per vmap level,
entered by ``tapelab.func.vmap``) receives every op; an op with a batched operand of its level runs
once on the physical tensors, by a rule derived from the op's declaration (``Op.elementwise``, its
``dim``/``dims`` params, views) or a family rule below (matmul, linear, convolution, the losses,
random draws), the mode off the stack, so the physical ops reach the modes below (an outer vmap
level, capture, the tape) and record autograd on the physical tensors. An op without a rule runs once
per slice and the slices are stacked (PyTorch's slow fallback, with its warning). Nested vmaps are
nested levels: a level's physical tensor may itself be a ``BatchedTensor`` of an outer level.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from ..base.dispatch_state import LOCAL
from ..base.dtype import int64 as _int64, result_type
from .dispatch import Mode, apply
from .overrides import _disabled_torch_function_impl
from .registry import REGISTRY
from .tensor import Tensor

__all__ = ["BatchedTensor", "BatchMode", "FallBack", "LEVELS", "rebind", "active_levels", "wrap", "unwrap_all", "align",
           "rewrap", "has_levels", "modes"]

_new = object.__new__
LEVELS = itertools.count(1)   # vmap levels: each call a new one, so nested levels increase inward


class FallBack(Exception):
    """A batched run met something it cannot batch (an in-place write it cannot place): vmap reruns
    the call a slice at a time."""


class BatchedTensor(Tensor):
    """A Tensor inside ``vmap``: ``_phys`` is the value of every slice (the vmapped dim of level
    ``_level`` first); the Tensor's own metadata are those of one slice."""

    __slots__ = ("_phys", "_level")
    # not a subclass that takes part in ``__torch_function__``: its ops go to the dispatcher's modes only
    __torch_function__ = _disabled_torch_function_impl

    def __repr__(self) -> str:
        return f"BatchedTensor(lvl={self._level}, bdim=0, value=\n    {self._phys!r}\n)"


def wrap(phys: Tensor, level: int) -> BatchedTensor:
    """The batched view of ``phys`` (its dim 0 mapped at ``level``)."""
    t = _new(BatchedTensor)
    d = phys._data
    t._data = d[0, ...] if d.shape[0] else np.zeros(d.shape[1:], d.dtype)
    t._phys, t._level = phys, level
    t.requires_grad = phys.requires_grad
    t.grad_fn, t._out_nr = phys.grad_fn, phys._out_nr
    t._vc, t._device, t._grad = phys._vc, phys._device, None
    return t


def rebind(target: BatchedTensor, out: BatchedTensor) -> None:
    """``target`` becomes ``out``'s value (an in-place op or in-place view inside vmap): its physical
    tensor and slice array, the latter re-registered with its level's mode."""
    mode = next((m for m in modes() if m.level == target._level), None)
    if mode is not None:
        mode._seen.pop(id(target._data), None)   # the old slice array may go, and its id with it
        mode._seen[id(out._data)] = target
    target._phys, target._data, target._level = out._phys, out._data, out._level


def modes() -> list:
    return [m for m in LOCAL.modes if isinstance(m, BatchMode)]


def active_levels() -> list:
    """``[(level, size)]`` of the vmaps running in this thread, outermost first."""
    return [(m.level, m.size) for m in LOCAL.modes if isinstance(m, BatchMode)]


def unwrap_all(t: Tensor) -> tuple:
    """``(plain physical tensor, [levels])``: the batch dims of the levels, lowest first, then the logical dims."""
    levels = []
    while t.__class__ is BatchedTensor:
        levels.append(t._level)
        t = t._phys
    return t, levels[::-1]


def has_levels(tree_leaves, known: set) -> bool:
    """Whether some leaf is batched at a level outside ``known``."""
    for t in tree_leaves:
        while t.__class__ is BatchedTensor:
            if t._level not in known:
                return True
            t = t._phys
    return False


def align(plain: Tensor, have: list, levels: list) -> Tensor:
    """``plain`` (batch dims ``have``, lowest level first) with a dim for each of ``levels``
    (``[(level, size)]``), expanded where it had none."""
    if have == [lv for lv, _ in levels]:
        return plain
    logical = tuple(plain.shape[len(have):])
    pos = {lv: i for i, lv in enumerate(have)}
    missing = [lv for lv, _ in levels if lv not in pos]
    order = [lv for lv in have] + missing
    x = plain.reshape(tuple(plain.shape[:len(have)]) + (1,) * len(missing) + logical) if missing else plain
    perm = [order.index(lv) for lv, _ in levels]
    if perm != list(range(len(perm))):
        x = x.permute((*perm, *range(len(perm), x.dim())))
    return x.expand(*[n for _, n in levels], *logical)


def rewrap(plain: Tensor, levels: list) -> Tensor:
    """``plain`` (batch dims of ``levels`` first, lowest first) wrapped level by level."""
    by_level = {m.level: m for m in modes()}
    t = plain
    for lv, _ in levels:
        t = wrap(t, lv)
        m = by_level.get(lv)
        if m is not None:
            m._seen[id(t._data)] = t
    return t


def _stack(xs) -> Tensor:
    return apply(REGISTRY["stack"], *xs, dim=0)


# ---------------------------------------------------------------- PyTorch's texts
_RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                 "'different' randomness flags on vmap or perform the randomness operation out of vmap")
_SAME_BATCHED = ("Vmap does not currently support same randomness with a batched tensor input. Please file an issue "
                 "with functorch")
_DIFFERENT_INPLACE = ("vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will appear like "
                      "same randomness. If this is necessary for your usage, please file an issue with functorch.")
_HOST = {
    "item": "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a "
            "Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere "
            "inside PyTorch internals, please file a bug report.",
    "bool": "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't "
            "support that yet, please file an issue at https://github.com/pytorch/pytorch/issues .",
    "tolist": "Cannot access data pointer of Tensor that doesn't have storage",
    "numpy": "Cannot access data pointer of Tensor that doesn't have storage",
}

_BOOL_MASK = ("vmap: We do not support batching operators that can support dynamic shape. Attempting to batch over "
              "indexing with a boolean mask.")
# PyTorch's aten names where the dynamic-shape refusal names another op than the declared one
_DYNAMIC_NAMES = {"unique": "_unique2"}


# the in-place method PyTorch names where tapelab's declared op is a narrower one (``clamp_(min=t)``)
_INPLACE_NAMES = {"clamp_min": "clamp", "clamp_max": "clamp"}


def _inplace_refusal(op, args, params, size: int, target, level_pos: int) -> str:
    """PyTorch's text for an in-place op on an unbatched tensor with a batched operand: ``add_``'s
    broadcast error, its 'inplace arithmetic' rule's text, or the fallback's naming the op."""
    name = op.name
    if name == "add":
        return f"output with shape {list(target.shape)} doesn't match the broadcast shape {[size, *target.shape]}"
    if name in ("sub", "mul", "div", "copy") or (name == "masked_fill" and isinstance(args[1], Tensor)
                                                  and args[1]._data.dtype.kind == "b") or \
            (name == "index_put" and params.get("template") is None):
        what = "inplace arithmetic"
    elif name in ("fill", "index_fill", "scatter_add") or name == "index_put":
        what = ("index_add_" if params.get("accumulate") else "index_put_") if name == "index_put" else f"{name}_"
    else:
        what = f"aten::{_INPLACE_NAMES.get(name, name)}_"
    where = f"at level {level_pos}" if what.startswith("aten::") else "in a vmap"
    return (f"vmap: {what}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args "
            f"that has more elements than `self`. This happened due to `other` being vmapped over but `self` not "
            f"being vmapped over {where}. Please try to use out-of-place operators instead of {what}. If said "
            f"operator is being called inside the PyTorch framework, please file a bug report instead.")


# ---------------------------------------------------------------- rule tables (by the ops' declared names)
# maps of their inputs' values alone, besides the ops declared elementwise
_ELEMENTWISE = frozenset(("clone", "copy", "fill", "masked_fill", "detach", "gelu", "gelu_backward", "silu",
                          "silu_backward", "hardsigmoid", "hardsigmoid_backward", "hardswish", "hardswish_backward",
                          "log_sigmoid", "log_sigmoid_backward", "softplus", "softplus_backward", "elu", "elu_backward",
                          "mish", "mish_backward", "isclose", "to_device", "real", "imag", "one_hot"))
# reductions whose ``dims=None`` means every dim
_REDUCTIONS = frozenset(("sum", "mean", "amax", "amin", "any", "all", "var", "std", "norm", "logsumexp",
                         "count_nonzero"))
# ops whose ``dim``/``dims``/``dim1``/``dim2`` params name logical dims: shifted past the batch dim
_DIM_OPS = _REDUCTIONS | frozenset((
    "softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "cumsum", "cumprod", "argmax", "argmin",
    "argsort", "sort", "topk", "max", "min", "median", "mode", "kthvalue", "gather", "take_along", "cat", "stack",
    "flip", "roll", "diagonal", "prod", "layer_norm", "scatter", "scatter_reduce", "prod_others", "cummax_indices",
    "mode_index", "batch_norm_backward", "fft_c2c", "fft_r2c", "fft_c2r"))
# ops over their trailing dims that take any leading ones as a batch
# ops over their trailing dims whose operands broadcast any leading ones (numpy's stacked linalg, attention)
_TRAILING = frozenset(("tril", "triu", "linalg_det", "linalg_slogdet", "linalg_matrix_exp", "cholesky",
                       "linalg_eigh", "linalg_svd", "qr", "linalg_lu_factor_ex", "solve_triangular", "lu_permutation",
                       "scaled_dot_product_attention", "scaled_dot_product_attention_backward", "linalg_eig",
                       "view_as_real", "view_as_complex"))
_DIM_KEYS = ("dim", "dim1", "dim2")
# random ops that read their tensor operand for its shape only
_SHAPE_ONLY = frozenset(("normal_", "uniform_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_"))


def _batched_at(a, level: int) -> bool:
    return a.__class__ is BatchedTensor and a._level == level


class BatchMode(Mode):
    """One vmap level: batches the ops whose operands include its ``BatchedTensor``s."""

    def __init__(self, level: int, size: int, randomness: str):
        self.level, self.size, self.randomness = level, size, randomness
        self._seen = {}   # id(a batched tensor's slice array) -> the tensor: in-place writes and re-wrapped arrays
        self._warned = set()

    # ------------------------------------------------------------ hooks
    def dispatch(self, op, args: tuple, params: dict):
        level, batched = self.level, False
        seen = self._seen
        for i, a in enumerate(args):
            c = a.__class__
            if c is BatchedTensor:
                if a._level == level:
                    batched = True
            elif c is Tensor and seen and id(a._data) in seen:   # a plain tensor over a batched slice (in-place ops)
                args = args[:i] + (seen[id(a._data)],) + args[i + 1:]
                batched = True
        if op.kind == "random":
            return self._random(op, args, params, batched)
        # off the stack while the op runs on the physical values (``Mode.aside``, inline: once per op)
        stack = LOCAL.modes
        on_top = stack[-1] is self
        at = len(stack) - 1 if on_top else stack.index(self)
        del stack[at]
        try:
            if not batched:
                return apply(op, *args, **params)
            if op.data_dependent is not None or op.name in ("nonzero", "unique"):
                raise RuntimeError("vmap: We do not support batching operators that can output dynamic shape. "
                                   f"Attempted to vmap over aten::{_DYNAMIC_NAMES.get(op.name, op.name)}. "
                                   "Please file an issue at "
                                   "https://github.com/pytorch/pytorch/issues if you need this feature.")
            if len(args) <= 2 and (op.elementwise or op.name in _ELEMENTWISE):
                out = self._one_batched(op, args, params)
                if out is None:
                    out = self._elementwise(op, args, params)
            else:
                out = self._rule(op, args, params)
            if out is None:
                out = self._loop(op, args, params)
        finally:
            stack.insert(at, self)
        return self._wrap_out(out)

    def _one_batched(self, op, args, params):
        """An elementwise op whose one tensor operand is batched (``x.sin()``, ``x * 2``): the op on the
        physical value as it is (a Python number promotes alike against any number of dims)."""
        a = args[0]
        if a.__class__ is not BatchedTensor or a._level != self.level:
            return None
        if len(args) == 1:
            return apply(op, a._phys, **params)
        b = args[1]
        if isinstance(b, Tensor) or op.name.endswith("_backward"):
            return None
        return apply(op, a._phys, b, **params)

    def host_read(self, tensor, what: str) -> None:
        if what in _HOST and (tensor.__class__ is BatchedTensor or id(tensor._data) in self._seen):
            raise RuntimeError(_HOST[what])

    def write(self, target, src) -> None:
        t, s = self._seen.get(id(target)), self._seen.get(id(src))
        if t is None:
            if s is not None:
                raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape "
                                   f"{[self.size, *src.shape]}")
            return
        tp, tl = unwrap_all(t)
        if s is not None:
            sp, sl = unwrap_all(s)
            if not set(sl) <= set(tl):
                raise FallBack
            sp = align(sp, sl, [(lv, tp.shape[i]) for i, lv in enumerate(tl)])
            src_data = sp._data
        else:
            src_data = src
        if not tp._data.flags.writeable:
            raise FallBack
        tp._data[...] = src_data   # the caller then writes the first slice again and counts the version

    def inplace(self, op, target, args: tuple, params: dict):
        """``target.op_(*args)`` with a batched operand: computed out of place for the whole batch, written
        into every slice of the target's memory, and (under autograd) the target takes the result's
        history, so gradients flow through in-place ops (``nn.ReLU(inplace=True)``) inside vmap."""
        level, seen = self.level, self._seen
        if target.__class__ is Tensor and id(target._data) in seen:
            target = seen[id(target._data)]
        if not _batched_at(target, level):
            if any(_batched_at(a, level) for a in args):
                pos = [m.level for m in modes()].index(level) + 1
                raise RuntimeError(_inplace_refusal(op, args, params, self.size, target, pos))
            return None
        out = apply(op, target, *args, **params)
        if isinstance(out, tuple):
            out = out[0]
        if out._data.dtype != target._data.dtype:
            out = out.to(target.dtype)
        tp, tl = unwrap_all(target)
        op_, ol = unwrap_all(out)
        src = align(op_, ol, [(lv, tp.shape[i]) for i, lv in enumerate(tl)]) if set(ol) <= set(tl) else None
        if src is None or tuple(src.shape) != tuple(tp.shape):
            raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape "
                               f"{list(out.shape)} (in-place {op.name}_)")
        if tp._data.flags.writeable:
            tp._data[...] = src._data
        tp._vc[0] += 1
        if out.requires_grad and out.__class__ is BatchedTensor and out._level == level:
            # the target now carries the result's history (its physical value is the result's)
            rebind(target, out)
            target.requires_grad, target.grad_fn, target._out_nr = True, out.grad_fn, out._out_nr
        return target

    # ------------------------------------------------------------ results
    def _wrap_out(self, out):
        level, seen = self.level, self._seen
        if isinstance(out, Tensor):
            t = wrap(out, level)
            seen[id(t._data)] = t
            return t
        if isinstance(out, tuple):
            return tuple(self._wrap_out(o) if isinstance(o, Tensor) else o for o in out)
        return out

    def _phys(self, a, ndim: int | None = None):
        """The physical tensor of operand ``a``, its logical dims padded to ``ndim`` with ones (or
        ``a`` itself when it is not batched at this level)."""
        if not _batched_at(a, self.level):
            return a
        p = a._phys
        if ndim is not None and ndim > a._data.ndim:
            shape = p.shape
            p = p.reshape((shape[0],) + (1,) * (ndim - a._data.ndim) + tuple(shape[1:]))
        return p

    def _all(self, a):
        """``a``'s physical tensor, expanded over the batch when ``a`` is not batched."""
        if _batched_at(a, self.level):
            return a._phys
        if isinstance(a, Tensor):
            return a.expand(self.size, *a.shape)
        return a

    # ------------------------------------------------------------ rules
    def _rule(self, op, args, params):
        name = op.name
        if op.elementwise or name in _ELEMENTWISE:
            return self._elementwise(op, args, params)
        if name in _DIM_OPS:
            return self._dims(op, args, params)
        rule = _FAMILY.get(name)
        if rule is not None:
            return rule(self, op, args, params)
        if name in _TRAILING:
            nd = max(a._data.ndim for a in args if isinstance(a, Tensor))
            return apply(op, *[self._phys(a, nd) for a in args], **params)
        return None

    def _elementwise(self, op, args, params):
        tensors = [a for a in args if isinstance(a, Tensor)]
        nd = max(a._data.ndim for a in tensors)
        if op.promote is not None and len({a._data.dtype for a in tensors}) > 1 and \
                any(a._data.ndim == 0 and _batched_at(a, self.level) for a in tensors):
            # a batched 0-d operand promotes as a 0-d tensor, its physical one would not: the operands
            # cast to the logical result type first (a binary op), else slice by slice
            if len(args) != 2:
                return None
            to = result_type(*args)
            return apply(op, *[self._phys(a, nd).to(to) if isinstance(a, Tensor) else a for a in args], **params)
        if op.name.endswith("_backward"):
            # a backward op's own vjp takes its operands as equal shapes (it does not sum a broadcast
            # back): the unbatched ones are expanded, whose vjp sums (a graph recorded under vmap)
            return apply(op, *[self._all(a) if isinstance(a, Tensor) and a._data.ndim == nd else self._phys(a, nd)
                               for a in args], **params)
        return apply(op, *[self._phys(a, nd) for a in args], **params)

    def _dims(self, op, args, params):
        first = next(a for a in args if isinstance(a, Tensor))
        nd = first._data.ndim
        B = self.size
        if op.name in _REDUCTIONS and nd == 0 and len(args) == 1:   # a 0-d value: its one element reduced
            params = dict(params, dims=(1,), keepdim=False)
            return apply(op, args[0]._phys.reshape(B, 1), **params)
        if op.name in ("argmax", "argmin", "prod") and params.get("dim") is None and not params.get("keepdim"):
            return apply(op, args[0]._phys.reshape(B, -1), **dict(params, dim=1))
        if nd == 0 and op.name != "stack":
            return None
        params = dict(params)
        for key in _DIM_KEYS:
            if key in params:
                d = params[key]
                if not isinstance(d, int) or d < 0:
                    return None
                params[key] = d + 1
        if "dims" in params:
            d = params["dims"]
            if d is None:
                if op.name not in _REDUCTIONS:
                    return None
                params["dims"] = tuple(range(1, nd + 1))
            elif isinstance(d, tuple) and all(isinstance(i, int) and i >= 0 for i in d):
                params["dims"] = tuple(i + 1 for i in d)
            else:
                return None
        if op.name == "layer_norm":   # the affine parameters broadcast over the batch as they are
            x = self._all(args[0])
            if not any(_batched_at(a, self.level) for a in args[1:]):
                return apply(op, x, *args[1:], **params)
            # batched affine parameters (a model's per-sample or per-member weights): normalised, then scaled
            # and shifted by the parameters' physical values (torch's rule)
            out = apply(op, x, **dict(params, has_weight=False))
            affine = list(args[1:])
            if params.get("has_weight"):
                out = out * self._phys(affine.pop(0), nd)
            if affine:
                out = out + self._phys(affine[0], nd)
            return out
        return apply(op, *[self._all(a) for a in args], **params)

    def _random(self, op, args, params, batched):
        if self.randomness == "error":
            raise RuntimeError(_RANDOM_ERROR)
        with self.aside():
            if self.randomness == "same":
                if not batched:
                    return apply(op, *args, **params)
                if op.name in _SHAPE_ONLY or (op.name in ("bernoulli", "bernoulli_") and params.get("p") is not None):
                    one = [a._phys.select(0, 0) if _batched_at(a, self.level) else a for a in args]
                    return apply(op, *one, **params)
                raise RuntimeError(_SAME_BATCHED)
            tensors = [a for a in args if isinstance(a, Tensor)]
            if op.name.endswith("_") and tensors and not _batched_at(args[0], self.level):
                raise RuntimeError(_DIFFERENT_INPLACE)
            if "size" in params:
                params = dict(params, size=(self.size, *params["size"]))
            elif not tensors:   # randperm: one draw per slice
                return self._wrap_out(_stack([apply(op, **params) for _ in range(self.size)]))
            out = apply(op, *[self._all(a) for a in args], **params)
        return self._wrap_out(out)

    def _loop(self, op, args, params):
        """PyTorch's slow fallback: the op on each slice, the results stacked."""
        if op.name not in self._warned:
            self._warned.add(op.name)
            warnings.warn(f"There is a performance drop because we have not yet implemented the batching rule for "
                          f"aten::{op.name}. Please file us an issue on GitHub so that we can prioritize its "
                          f"implementation.", UserWarning, stacklevel=4)
        level = self.level
        outs = [apply(op, *[a._phys.select(0, i) if _batched_at(a, level) else a for a in args], **params)
                for i in range(self.size)]
        if isinstance(outs[0], tuple):
            return tuple(_stack([o[k] for o in outs]) if isinstance(outs[0][k], Tensor) else outs[0][k]
                         for k in range(len(outs[0])))
        return _stack(outs)


# ---------------------------------------------------------------- family rules
def _views(mode, op, args, params):
    x = args[0]
    p = x._phys
    name = op.name
    if name == "reshape":
        return apply(op, p, shape=(p.shape[0], *params["shape"]))
    if name == "permute":
        return apply(op, p, dims=(0, *(d + 1 for d in params["dims"])))
    if name == "expand":
        shape = params["shape"]
        return apply(op, mode._phys(x, len(shape)), shape=(p.shape[0], *shape))
    if name == "slice":
        key = params["key"]
        if not all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key):
            return None
        return apply(op, p, key=(slice(None), *key))
    if name in ("pad", "pad_backward"):
        return apply(op, p, **dict(params, pads=((0, 0), *params["pads"])))
    if name == "slice_backward":
        key = params["key"]
        if not all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in key):
            return None
        return apply(op, p, shape=(p.shape[0], *params["shape"]), key=(slice(None), *key))
    return None


def _matmul(mode, op, args, params):
    a, b = args
    level = mode.level
    ba, bb = _batched_at(a, level), _batched_at(b, level)
    ra, rb = a._data.ndim, b._data.ndim
    if ra == 0 or rb == 0:
        return None
    if ra >= 2 and rb >= 2:
        r = max(ra, rb)
        return apply(op, mode._phys(a, r), mode._phys(b, r))
    if ra == 1 and rb == 1:
        if ba and bb:
            pa, pb = a._phys, b._phys
            return apply(op, pa.unsqueeze(1), pb.unsqueeze(2)).reshape(pa.shape[0])
        return apply(op, mode._phys(a), mode._phys(b)) if ba else apply(op, b._phys, a)
    if ra == 1:   # vector @ (batch of) matrices
        if not ba:
            return apply(op, a, b._phys)
        pa = a._phys
        pa = pa.reshape((pa.shape[0],) + (1,) * (rb - 1) + (pa.shape[1],))
        out = apply(op, pa, mode._phys(b, rb))   # [B, ..., 1, m]
        return out.squeeze(-2)
    # matrices @ vector
    if not bb:
        return apply(op, a._phys, b)
    pb = b._phys
    pb = pb.reshape((pb.shape[0],) + (1,) * (ra - 2) + (pb.shape[1], 1))
    out = apply(op, mode._phys(a, ra), pb)   # [B, ..., n, 1]
    return out.squeeze(-1)


def _linear(mode, op, args, params):
    x, w, *b = args
    level = mode.level
    if not _batched_at(w, level) and not any(_batched_at(t, level) for t in b):
        return apply(op, x._phys, w, *b)
    if w._data.ndim != 2:
        return None
    lead = tuple(x._data.shape[:-1])
    xin = x._data.shape[-1]
    m = int(np.prod(lead)) if lead else 1
    xp = x._phys.reshape(mode.size, m, xin) if _batched_at(x, level) else x.reshape(1, m, xin)
    wt = w._phys.transpose(1, 2) if _batched_at(w, level) else w.t()
    y = apply(REGISTRY["matmul"], xp, wt)   # [B, m, out]
    if b:
        bias = b[0]
        y = y + (bias._phys.unsqueeze(1) if _batched_at(bias, level) else bias)
    if y.shape[0] != mode.size:
        y = y.expand(mode.size, *y.shape[1:])
    return y.reshape(mode.size, *lead, y.shape[-1])


def _linear_backward(mode, op, args, params):
    """linear's backward for a batched gradient (``vmap`` over a vjp): per-slice GEMMs, a gradient
    that is not needed left None."""
    g, x, w = args
    needs, level, B = params["needs"], mode.level, mode.size
    n_out, n_in = w._data.shape
    G = g._phys.reshape(B, -1, n_out) if _batched_at(g, level) else g.reshape(1, -1, n_out).expand(B, -1, n_out)
    wb, xb = _batched_at(w, level), _batched_at(x, level)
    gx = gw = gb = None
    if needs[0]:
        gx = apply(REGISTRY["matmul"], G, w._phys if wb else w).reshape(B, *x._data.shape)
    if needs[1]:
        X = x._phys.reshape(B, -1, n_in) if xb else x.reshape(-1, n_in)
        gw = apply(REGISTRY["matmul"], G.transpose(1, 2), X)
    if needs[2]:
        gb = G.sum(1)
    return gx, gw, gb


def _convolution(mode, op, args, params):
    x, w, *b = args
    level = mode.level
    B = mode.size
    if not _batched_at(w, level) and not any(_batched_at(t, level) for t in b):
        p = x._phys
        n = p.shape[1]
        out = apply(op, p.reshape(B * n, *p.shape[2:]), w, *b, **params)
        return out.reshape(B, n, *out.shape[1:])
    # batched weights: one grouped convolution, the batch folded into the channels
    if op.name == "convolution_transpose" and b:
        return None
    groups = params["groups"]
    px = mode._all(x)                       # [B, N, C, *]
    n, c = px.shape[1], px.shape[2]
    xs = px.movedim(0, 1).reshape(n, B * c, *px.shape[3:])
    pw = mode._all(w)                       # [B, O, C/g, *k]
    ws = pw.reshape(B * pw.shape[1], *pw.shape[2:])
    bs = [mode._all(t).reshape(B * pw.shape[1]) for t in b]
    out = apply(op, xs, ws, *bs, **dict(params, groups=groups * B))   # [N, B*O, *]
    return out.reshape(n, B, -1, *out.shape[2:]).movedim(1, 0)


def _convolution_weight(mode, op, args, params):
    """The weight gradient of a convolution (``vmap`` over its vjp): input and output gradient with the
    batch folded into their channels, one grouped correlation (``groups * B``), ``[B, O, C/g, *k]``."""
    x, gy = args
    B = mode.size
    px, pg = mode._all(x), mode._all(gy)
    n = px.shape[1]
    xs = px.movedim(0, 1).reshape(n, B * px.shape[2], *px.shape[3:])
    gs = pg.movedim(0, 1).reshape(n, B * pg.shape[2], *pg.shape[3:])
    out = apply(op, xs, gs, **dict(params, groups=params["groups"] * B))
    return out.reshape(B, out.shape[0] // B, *out.shape[1:])


def _convolution_backward(mode, op, args, params):
    """A convolution's two gradients for a batched gradient: the input's as ``convolution_transpose``'s
    rule, the weight's as ``convolution_weight``'s."""
    g, x, w = args
    in_size = tuple(mode._all(x).shape[3:])
    gx = _convolution(mode, REGISTRY["convolution_transpose"], (g, w), dict(params, in_size=in_size))
    gw = _convolution_weight(mode, REGISTRY["convolution_weight"], (x, g), dict(params, kernel=tuple(w.shape[-len(in_size):])))
    return None if gx is None else (gx, gw)


def _embedding_backward(mode, op, args, params):
    """The table's gradient per slice: the indices offset into a table of every slice's rows."""
    g, idx = args
    if params.get("padding_idx") is not None:
        return None
    from .factories import ARANGE
    B, v = mode.size, params["num"]
    pg, pi = mode._all(g), mode._all(idx)
    offsets = apply(ARANGE, start=0, end=B * v, step=v, dtype=pi.dtype, device=pi.device)
    flat = pi + offsets.reshape(B, *(1,) * (pi.dim() - 1))
    out = apply(op, pg, flat, **dict(params, num=B * v))
    return out.reshape(B, v, *out.shape[1:])


def _views_backward(mode, op, args, params):
    """The pieces of ``unbind``/``split``/``chunk`` written back: each key behind the batch's slice."""
    return apply(op, *[mode._all(a) for a in args], shape=(mode.size, *params["shape"]),
                 keys=tuple((slice(None), *k) for k in params["keys"]))


def _per_sample(mode, loss_none, reduction, logical_ndim, counts=None):
    """A loss of reduction ``'none'`` (physical ``[B, ...]``) reduced per sample as ``reduction`` says."""
    if reduction == "none":
        return loss_none
    dims = tuple(range(1, loss_none.dim()))
    total = loss_none.sum(dims) if dims else loss_none
    if reduction == "sum":
        return total
    if counts is not None:
        return total / counts
    return total / max(int(np.prod(loss_none.shape[1:])), 1) if dims else total


def _class_loss(mode, op, args, params):
    """cross_entropy and nll_loss: the batch folded into the loss's own batch dim, reduced per sample."""
    x, t, *w = args
    if any(_batched_at(a, mode.level) for a in w) or params.get("cdim") not in (0, 1):
        return None
    B = mode.size
    px, pt = mode._all(x), mode._all(t)
    nd = x._data.ndim
    reduction = params["reduction"]
    if nd == 1:
        out = apply(op, px, pt, *w, **dict(params, reduction="none", cdim=1))   # [B]
        lead = ()
    else:
        n = px.shape[1]
        xs = px.reshape(B * n, *px.shape[2:])
        ts = pt.reshape(B * pt.shape[1], *pt.shape[2:])
        out = apply(op, xs, ts, *w, **dict(params, reduction="none"))
        out = out.reshape(B, n, *out.shape[1:])
        lead = out.shape[1:]
    if reduction != "mean" or (t._data.dtype.kind == "f" and not w):
        return _per_sample(mode, out, reduction, nd)
    if t._data.dtype.kind == "f":   # class probabilities with weights: the mean over the samples
        return _per_sample(mode, out, reduction, nd)
    # the mean divides by the weight of the targets that count (ignore_index's count none), per slice
    valid = (pt != params.get("ignore_index", -100))
    counts = valid.to(out.dtype)
    if w:
        counts = counts * w[0][pt.masked_fill(valid.logical_not(), 0)]
    counts = counts.sum(tuple(range(1, counts.dim()))) if lead else counts
    return _per_sample(mode, out, reduction, nd, counts)


def _pointwise_loss(mode, op, args, params):
    """mse_loss, huber_loss, smooth_l1_loss and the binary cross-entropies: elementwise with reduction
    ``'none'``, reduced per sample."""
    nd = max(a._data.ndim for a in args if isinstance(a, Tensor))
    return _per_sample(mode, _elementwise_physical(mode, op, args, dict(params, reduction="none"), nd),
                       params["reduction"], nd)


def _elementwise_physical(mode, op, args, params, nd):
    """``op`` of elementwise operands on their physical values, the batch in front of ``nd`` logical dims."""
    out = apply(op, *[mode._phys(a, nd) if _batched_at(a, mode.level) else a for a in args], **params)
    if out.shape[0] != mode.size or out.dim() != nd + 1:
        out = out.expand(mode.size, *out.shape[out.dim() - nd:])
    return out


def _pointwise_loss_backward(mode, op, args, params):
    """huber_loss_backward and smooth_l1_loss_backward of a loss of reduction ``'none'`` (``_pointwise_loss``
    makes one): elementwise in the gradient, input and target; a reduced one runs per slice."""
    if params["reduction"] != "none":
        return None
    return _elementwise_physical(mode, op, args, params, max(a._data.ndim for a in args if isinstance(a, Tensor)))


def _fold_samples(mode, op, args, params):
    """An op over each entry of its inputs' dim 0 alike (pooling): the batch folded into that dim."""
    B = mode.size
    ps = [mode._all(a) for a in args]
    if any(p._data.ndim < 2 for p in ps if isinstance(p, Tensor)):
        return None
    out = apply(op, *[p.reshape(B * p.shape[1], *p.shape[2:]) if isinstance(p, Tensor) else p for p in ps], **params)
    if isinstance(out, tuple):
        return tuple(o.reshape(B, o.shape[0] // B, *o.shape[1:]) if isinstance(o, Tensor) else o for o in out)
    return out.reshape(B, out.shape[0] // B, *out.shape[1:])


def _batch_norm_eval(mode, op, args, params):
    """Batch norm with running statistics: the batch folded into the samples, the statistics as they are."""
    x, *rest = args
    if any(_batched_at(a, mode.level) for a in rest) or x._data.ndim < 2:
        return None
    p = x._phys
    out = apply(op, p.reshape(mode.size * p.shape[1], *p.shape[2:]), *rest, **params)
    return out.reshape(p.shape)


def _int_indices(mode, idx, template):
    """The index arrays and template with each unbatched bool mask replaced by its nonzero positions (one
    integer array per dim it covers), as numpy reads a mask; a batched mask refuses (PyTorch's text: each
    slice would select a different number of elements)."""
    if not any(i._data.dtype.kind == "b" for i in idx):
        return list(idx), tuple(template)
    new_idx, new_template = [], []
    for t in template:
        if t is None:
            new_template.append(None)
            continue
        i = idx[t]
        if i._data.dtype.kind != "b":
            new_template.append(len(new_idx))
            new_idx.append(i)
            continue
        if i.__class__ is BatchedTensor:
            raise RuntimeError(_BOOL_MASK)
        cols = apply(REGISTRY["nonzero"], i)   # [n, mask dims]
        for d in range(i._data.ndim):
            new_template.append(len(new_idx))
            new_idx.append(cols.select(1, d))
    return new_idx, tuple(new_template)


def _batch_key(mode, idx, template):
    """The physical key of an advanced index: the batch's positions as one more index array in front
    (numpy broadcasts it with the others), and ``(template, number of broadcast index dims, where the
    logical result puts them)``; None when the logical index arrays are not one block (numpy then puts
    their dims first, as it does for the physical key)."""
    from .factories import ARANGE
    at = [p for p, t in enumerate(template) if t is not None]
    if not at:
        return None
    B, level = mode.size, mode.level
    nd = max(i._data.ndim for i in idx)
    device = idx[0].device
    batch = apply(ARANGE, start=0, end=B, step=1, dtype=_int64, device=device).reshape(B, *(1,) * nd)
    phys = [mode._phys(i, nd) if _batched_at(i, level) else i for i in idx]
    adjacent = at == list(range(at[0], at[0] + len(at)))
    return [batch, *phys], (0, *(None if t is None else t + 1 for t in template)), nd, (at[0] if adjacent else 0)


def _index(mode, op, args, params):
    """Advanced indexing ``x[..., idx, ...]``: one more index array, the batch position, in front of the
    key (numpy broadcasts it with the others); the indexed dims moved back where the logical result has them.
    An unbatched bool mask indexes as its nonzero positions."""
    x, *idx = args
    idx, template = _int_indices(mode, idx, params["template"])
    key = _batch_key(mode, idx, template)
    if key is None:
        return None
    phys, template, nd, first = key
    out = apply(op, mode._all(x), *phys, template=template,
                unique=params["unique"])   # [B, *broadcast, dims before the block, dims after]
    if first == 0:
        return out
    perm = [0, *range(1 + nd, 1 + nd + first), *range(1, 1 + nd), *range(1 + nd + first, out.dim())]
    return out.permute(tuple(perm))


def _index_put(mode, op, args, params):
    """``x[basic][key] = v`` (and index_add/index_copy/index_fill, which are this op): the batch's slice in
    front of the basic key, its positions in front of the advanced one; ``v`` laid out as the physical
    indexing result (its batch dim first, the index block where numpy puts it)."""
    x, v, *idx = args
    basic, template = params["basic"], params["template"]
    px = mode._all(x)
    if basic is not None:
        basic = (slice(None), *basic)
    view = px[basic] if basic is not None else px   # the physical target of the key (a view, for its shape)
    if template is None:
        pv = mode._phys(v, view.dim() - 1) if _batched_at(v, mode.level) else v
        return apply(op, px, pv, basic=basic, template=None, accumulate=params["accumulate"])
    idx, template = _int_indices(mode, idx, template)
    key = _batch_key(mode, idx, template)
    if key is None:
        return None
    phys, template, nd, first = key
    batched_v = _batched_at(v, mode.level)
    if batched_v or (first and isinstance(v, Tensor) and v._data.ndim):
        # v as the physical indexing result: [B, broadcast index dims, the other dims of the view]
        at = [p for p, t in enumerate(template[1:]) if t is not None]
        lshape = tuple(view.shape[1:])
        bshape = tuple(np.broadcast_shapes(*[tuple(i.shape) for i in idx]))
        if first:
            logical = lshape[:first] + bshape + lshape[first + len(at):]
        else:
            logical = bshape + tuple(d for k, d in enumerate(lshape) if k not in at)
        pv = (mode._phys(v, len(logical)) if batched_v else v).expand(mode.size, *logical)
        if first:
            nb = len(bshape)
            pv = pv.permute(0, *range(1 + first, 1 + first + nb), *range(1, 1 + first),
                            *range(1 + first + nb, pv.dim()))
        v = pv
    return apply(op, px, v, *phys, basic=basic, template=template, accumulate=params["accumulate"])


def _embedding(mode, op, args, params):
    """Rows of the table: the indices' batch as it is; a batched table (an ensemble's, or per-sample
    weights under grad) as one table of every slice's rows, the indices offset into their slice's."""
    w, idx = args
    if not _batched_at(w, mode.level):
        return apply(op, w, idx._phys, **params)
    if params.get("padding_idx") is not None or params.get("scale_grad_by_freq") or params.get("sparse"):
        return None
    from .factories import ARANGE
    B = mode.size
    pw = w._phys                                   # [B, V, D]
    v = pw.shape[1]
    pi = mode._all(idx)                            # [B, *]
    offsets = apply(ARANGE, start=0, end=B * v, step=v, dtype=pi.dtype, device=pi.device)
    flat = pi + offsets.reshape(B, *(1,) * (pi.dim() - 1))
    return apply(op, pw.reshape(B * v, *pw.shape[2:]), flat, **params)


def _batch_norm_train(mode, op, args, params):
    """Batch statistics per slice: the batch folded into the channels (``[N, B*C, *]``), the per-channel
    parameters (batched or not) one per slice's channel, the statistics ``[B, C]``."""
    x, *affine = args
    if x._data.ndim < 2:
        return None
    B = mode.size
    px = mode._all(x)                                          # [B, N, C, *]
    n, c = px.shape[1], px.shape[2]
    xs = px.movedim(0, 1).reshape(n, B * c, *px.shape[3:])
    ps = [mode._all(a).reshape(B * c) for a in affine]
    out, *stats = apply(op, xs, *ps, **params)
    out = out.reshape(n, B, c, *out.shape[2:]).movedim(1, 0)
    return (out, *(t.reshape(B, c) for t in stats))


def _einsum(mode, op, args, params):
    """One more label, the batch's, in front of each batched operand's labels and the output's."""
    eq = params["eq"]
    ins, out = eq.split("->")
    letter = next(ch for ch in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if ch not in eq)
    labels = [(letter + lab) if _batched_at(a, mode.level) else lab for lab, a in zip(ins.split(","), args)]
    return apply(op, *[mode._phys(a) for a in args], eq=",".join(labels) + "->" + letter + out)


def _searchsorted(mode, op, args, params):
    """Each slice's values in its own sorted rows: a batched sequence takes the values as rows of their own
    (the batch a leading dim of both); an unbatched 1-d sequence takes the physical values as they are."""
    seq, values = args
    if not _batched_at(seq, mode.level):
        if seq._data.ndim == 1:
            return apply(op, seq, values._phys, **params)
        return apply(op, seq.expand(mode.size, *seq.shape), values._phys, **params)
    if seq._data.ndim == 1 and values._data.ndim > 1:
        pv = mode._all(values)
        return apply(op, seq._phys.reshape(mode.size, 1, -1).expand(mode.size, int(np.prod(values._data.shape[:-1])),
                                                                   seq._data.shape[0]),
                     pv.reshape(mode.size, -1, values._data.shape[-1]), **params).reshape(pv.shape)
    return apply(op, seq._phys, mode._all(values), **params)


def _repeat(mode, op, args, params):
    reps = params["reps"]
    return apply(op, mode._phys(args[0], len(reps)), reps=(1, *reps))


def _diag_embed(mode, op, args, params):
    d1, d2 = params["dim1"], params["dim2"]
    if len(args) != 1 or d1 < 0 or d2 < 0:
        return None
    return apply(op, args[0]._phys, **dict(params, shape=(mode.size, *params["shape"]), dim1=d1 + 1, dim2=d2 + 1))


_FAMILY = {"reshape": _views, "permute": _views, "expand": _views, "slice": _views, "pad": _views,
           "slice_backward": _views, "pad_backward": _views, "linear_backward": _linear_backward,
           "matmul": _matmul, "linear": _linear, "convolution": _convolution,
           "cross_entropy": _class_loss, "nll_loss": _class_loss,
           "mse_loss": _pointwise_loss, "binary_cross_entropy": _pointwise_loss,
           "binary_cross_entropy_with_logits": _pointwise_loss, "huber_loss": _pointwise_loss,
           "smooth_l1_loss": _pointwise_loss, "huber_loss_backward": _pointwise_loss_backward,
           "smooth_l1_loss_backward": _pointwise_loss_backward, "embedding": _embedding,
           "max_pool_blocks": _fold_samples, "max_pool_indices": _fold_samples, "max_pool": _fold_samples,
           "avg_pool": _fold_samples, "batch_norm_eval": _batch_norm_eval, "index": _index,
           "index_put": _index_put, "batch_norm_normalize": _batch_norm_train, "einsum": _einsum, "repeat": _repeat,
           "diag_embed": _diag_embed, "im2col": _fold_samples, "col2im": _fold_samples,
           "convolution_transpose": _convolution, "convolution_weight": _convolution_weight,
           "convolution_backward": _convolution_backward,
           "embedding_backward": _embedding_backward, "searchsorted": _searchsorted, "views_backward": _views_backward,
           "max_pool_blocks_backward": _fold_samples, "max_pool_blocks_take": _fold_samples,
           "max_pool_backward": _fold_samples, "avg_pool_backward": _fold_samples}

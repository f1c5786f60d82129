"""The captured program: straight-line Python over preallocated arrays.

A capture's steps become one generated function (``Program.source`` shows it): each op
is its forward called on the arrays it read at capture, written into its output buffers
(``ufunc(..., out=buf)`` where the op is exactly a ufunc, ``fwd_out(..., out=(buf, ...))``
where it declares one, as a compiled kernel does, else ``copyto``); in-place writes are
``copyto``. No dispatch, no Tensor, no autograd bookkeeping at replay.

An intermediate that nobody outside the graph can see (no tensor the user still holds
reads its memory, ``private``) and that its op cannot write in place (no ufunc ``out=``, no
``fwd_out``) is a local of the replay function on the cpu: its producer's result is taken as
it comes, with no copy into the pool buffer and no read back from it.
Only that buffer's contents differ (it keeps its capture-time values), and nothing reads
them. On the MLP step this removed six full passes over the gradients (bench/README.md).
A stream capture (cuda) keeps every step writing its buffer: a CUDA graph replays fixed
addresses.

On the cpu a training step's bookkeeping replays in fewer passes, each the same floats as the
recorded ops: a ``fill`` writes its value into its buffer (no array made) and, where the next
reader is ``add(buf, x, out=buf)`` (``zero_grad(set_to_none=False)``, then the backward's
accumulation), folds into that add as a constant; SGD's momentum update (three recorded steps a
parameter) is one fused pass, which also takes such a folded accumulation when nothing reads the
gradient in between (``_fills``, ``_zero_folds``, ``_momentum_updates``, ``_moved_accumulations``).
Each step's entry in ``nodes`` also names the module path it ran in (``module``, "" outside
any module) and the user's line that ran it (``where``), for views.
"""
from __future__ import annotations

import numpy as np

from ..optim._foreach import fused_momentum, momentum_update, momentum_update_from
from ._capture import CaptureError, _is_array, root_key


class Program:
    """The compiled steps of one capture (see the module docstring)."""

    def __init__(self, mode, private: frozenset = frozenset()):
        self.ns: dict = {}
        self._names: dict[int, str] = {}
        self.nodes: list[dict] = []       # one entry per step, for views and the capture event
        self.where: list[str] = []
        self.guards: list[tuple] = []
        self.step_lines: list[list[str]] = []    # the lines of each step (one per node)
        copyto = None
        locals_ = _locals(mode, private)
        fills = _fills(mode.steps)
        momenta = _momentum_updates(mode.steps, set(fills))
        touches = [{root_key(a) for a in _step_arrays(step)} for step in mode.steps] if fills or momenta else []
        folds = _zero_folds(mode.steps, fills, touches, momenta)     # add step -> the fill step it absorbs
        moved = _moved_accumulations(mode.steps, folds, momenta, touches)   # momentum step -> add step
        absorbed = {k for j in momenta for k in (j + 1, j + 2)} | set(moved.values())
        fed = _fed_updates(mode.steps, momenta, touches, locals_, set(fills) | set(folds) | absorbed | set(momenta))
        defer: dict[int, dict] = {}      # op step -> {id(gradient buffer): the local its result is bound to}
        for j, (k, d) in fed.items():
            defer.setdefault(k, {})[id(d)] = f"_g{j}"
        run_lines: list[str] = []
        for root, snap in mode.reinit.values():
            self.step_lines.append([f"_copyto({self._name(root)}, {self._name(snap)})"])
            run_lines += self.step_lines[-1]
            self.nodes.append({"kind": "reinit", "op": "copy", "inputs": [self._name(snap)],
                               "outputs": [self._name(root)], "where": "", "module": ""})
        for j, step in enumerate(mode.steps):
            kind = step[0]
            module = mode.scopes.get(j, "")
            if kind == "op":
                _, op, fwd, xp, arrays, params, dsts, r, ufunc, where = step
                copyto = copyto or xp.copyto
                if j in fed:      # the replay's line also copies the gradient; the step's own reads it
                    lines, run = [self._momentum(momenta[j], None, mode.steps, fills, folds)], [
                        self._fed_momentum(momenta[j], f"_g{j}")]
                elif j in momenta or j in absorbed:
                    lines = [self._momentum(momenta[j], moved.get(j), mode.steps, fills, folds)] if j in momenta else []
                    run = lines
                else:
                    lines, run = self._op_step(j, step, locals_, fills, folds, defer.get(j, {}))
                self.step_lines.append(lines)
                run_lines += run
                self.nodes.append({"kind": "op", "op": op.name,
                                   "inputs": [self._name(a) if _is_array(a) else repr(a) for a in arrays],
                                   "outputs": [self._name(d) for d in dsts if d is not None], "where": where,
                                   "module": module})
            elif kind == "copy":
                _, dst, src, why = step
                self.step_lines.append([f"_copyto({self._name(dst)}, {self._name(src)}, casting='unsafe')"])
                run_lines += self.step_lines[-1]
                self.nodes.append({"kind": why, "op": "copy", "inputs": [self._name(src)],
                                   "outputs": [self._name(dst)], "where": "", "module": module})
            else:
                _, arr, value, what, internal, where = step
                self.guards.append((value, what, internal, where))
                self.step_lines.append([f"_guard({self._name(arr)}, {self._name(value, 'k')}, {len(self.guards) - 1})"])
                run_lines += self.step_lines[-1]
                self.nodes.append({"kind": "guard", "op": what, "inputs": [self._name(arr)], "outputs": [],
                                   "where": where, "module": module})
        self.ns.update(_copyto=copyto or np.copyto, _guard=self._guard, _shape_error=self._shape_error,
                       _np_shape=np.shape)
        self.source = "def _replay():\n" + "".join(f"    {ln}\n" for ln in run_lines or ["pass"])
        code = compile(self.source, "<tapelab captured graph>", "exec")
        exec(code, self.ns)
        self.run = self.ns["_replay"]
        self.buffers = {id(b.arr): b.arr for b in mode.bufs.values() if b.kind == "inter"}

    def step_functions(self, substitute=None) -> list:
        """One function per step (the replay split at every node), for a stream capture
        (``_cuda.StreamGraph``), which may run some steps outside a CUDA graph. ``substitute(name,
        value)`` replaces what the steps' names refer to (the array module, its ``matmul``) there."""
        ns = self.ns if substitute is None else {k: substitute(k, v) for k, v in self.ns.items()}
        source = "".join(f"def _step_{i}():\n" + "".join(f"    {ln}\n" for ln in lines or ["pass"])
                         for i, lines in enumerate(self.step_lines))
        exec(compile(source, "<tapelab captured graph steps>", "exec"), ns)
        return [ns[f"_step_{i}"] for i in range(len(self.step_lines))]

    def _name(self, obj, prefix: str = "b") -> str:
        n = self._names.get(id(obj))
        if n is None:
            n = self._names[id(obj)] = f"{prefix}{len(self._names)}"
            self.ns[n] = obj
        return n

    def _constant(self, value) -> str:
        """A new name for ``value`` (kept alive by the namespace: ``_name`` keys by ``id``)."""
        n = f"k{len(self._names)}"
        self._names[n] = n
        self.ns[n] = value
        return n

    def _arg(self, a) -> str:
        if a is None or type(a) is bool:
            return repr(a)
        return self._name(a, "b" if _is_array(a) else "k")

    def _op_step(self, j, step, locals_, fills, folds, defer: dict) -> tuple[list[str], list[str]]:
        """The lines of op step ``j``: as ``step_lines`` keeps them, and as the replay runs them (where
        ``defer`` names outputs whose copy into their buffer a later fused update makes, ``_fed_updates``,
        their results bound to those locals instead)."""
        _, op, fwd, xp, arrays, params, dsts, r, ufunc, _where = step
        i = len(self.nodes)
        if j in fills:
            lines = [] if j in folds.values() else [
                f"_copyto({self._name(dsts[0])}, {self._arg(fills[j])}, casting='unsafe')"]
            return lines, lines
        if j in folds:
            d = dsts[0]
            filled = self._constant(xp.full((), fills[folds[j]], dtype=d.dtype))
            lines = [f"{self._name(ufunc, 'u')}({filled}, {self._arg(arrays[1])}, out={self._name(d)})"]
            return lines, lines
        lines = self._op(i, op, fwd, xp, arrays, params, dsts, r, ufunc)
        # a step that writes its buffer in place (ufunc out=, fwd_out) keeps it: no copy to save,
        # and a fresh result each replay would allocate (a large one page-faults anew)
        if any(d is not None and id(d) in locals_ for d in dsts) and any(ln.startswith("_copyto(") for ln in lines):
            return lines, self._op_locals(i, op, fwd, xp, arrays, params, dsts, r, locals_, defer)
        return lines, self._op(i, op, fwd, xp, arrays, params, dsts, r, ufunc, defer) if defer else lines

    def _momentum(self, update: tuple, add: int | None, steps: list, fills: dict, folds: dict) -> str:
        """The line of one fused momentum update (``_momentum_updates``), with the accumulation into its
        gradient when that moved here (step ``add``, ``_moved_accumulations``)."""
        p, g, buf, momentum, alpha = update
        scalars = f"{self._constant(momentum)}, {self._constant(alpha)}"
        if add is None:
            return f"{self._name(momentum_update, 'f')}({', '.join(self._name(a) for a in (p, g, buf))}, {scalars})"
        args = ", ".join(self._name(a) for a in (p, steps[add][4][1], g, buf))
        filled = self._constant(fills[folds[add]])
        return f"{self._name(momentum_update_from, 'f')}({args}, {filled}, {scalars})"

    def _fed_momentum(self, update: tuple, result: str) -> str:
        """The line of one fused momentum update that also copies its gradient from the backward's
        ``result`` (a local, ``_fed_updates``) into the gradient's buffer."""
        p, g, buf, momentum, alpha = update
        return (f"{self._name(momentum_update_from, 'f')}({self._name(p)}, {result}, {self._name(g)}, "
                f"{self._name(buf)}, None, {self._constant(momentum)}, {self._constant(alpha)})")

    def _op(self, i, op, fwd, xp, arrays, params, dsts, r, ufunc, defer: dict | None = None) -> list[str]:
        defer = defer or {}
        args = ", ".join(self._arg(a) for a in arrays)
        if ufunc is not None:
            return [f"{self._name(ufunc, 'u')}({args}, out={self._name(dsts[0])})"]
        kw = "".join(f", {k}={self._arg(v)}" for k, v in params.items())
        if op.fwd_out is not None and _writable_outputs(arrays, dsts, r if op.n_extra else (r,), op.elementwise):
            outs = "".join(f"{self._name(d)}, " for d in dsts)
            return [f"{self._name(op.fwd_out, 'f')}({self._name(xp, 'x')}, {args}{kw}, out=({outs}))"]
        call = f"_r = {self._name(fwd, 'f')}({self._name(xp, 'x')}, {args}{kw})"
        if len(dsts) == 1:
            d = self._name(dsts[0])
            shape = "_r.shape" if hasattr(r, "shape") else "_np_shape(_r)"
            put = f"{defer[id(dsts[0])]} = _r" if id(dsts[0]) in defer else f"_copyto({d}, _r)"
            return [call, f"if {shape} != {d}.shape: _shape_error({i}, _r)", put]
        return [call] + [f"{defer[id(d)]} = _r[{j}]" if id(d) in defer else f"_copyto({self._name(d)}, _r[{j}])"
                         for j, d in enumerate(dsts) if d is not None]

    def _op_locals(self, i, op, fwd, xp, arrays, params, dsts, r, locals_, defer: dict) -> list[str]:
        """The step with its private outputs bound as locals (``_locals``): the forward's
        result itself, its shape checked against the capture's; the other outputs copied."""
        args = ", ".join(self._arg(a) for a in arrays)
        kw = "".join(f", {k}={self._arg(v)}" for k, v in params.items())
        lines = [f"_r = {self._name(fwd, 'f')}({self._name(xp, 'x')}, {args}{kw})"]
        if len(dsts) == 1:
            d = dsts[0]
            return lines + [f"if _np_shape(_r) != {self._constant(d.shape)}: _shape_error({i}, _r)",
                            f"{self._name(d)} = _r"]
        return lines + [f"{self._name(d)} = _r[{j}]" if id(d) in locals_ else
                        f"{defer[id(d)]} = _r[{j}]" if id(d) in defer else f"_copyto({self._name(d)}, _r[{j}])"
                        for j, d in enumerate(dsts) if d is not None]

    def _guard(self, arr, expected, i: int) -> None:
        value, what, internal, where = self.guards[i]
        got = arr.reshape(()).item() if what == "item" else arr.tolist()
        if got == expected or (got != got and expected != expected):
            return
        raise CaptureError(f"captured graph: a value read on the host during capture changed: {internal} read "
                           f"{expected!r} at capture (from {where}) and now sees {got!r}. The graph replays the "
                           f"capture-time decision; capture again (or keep this value fixed)")

    def _shape_error(self, i: int, r) -> None:
        node = self.nodes[i]
        raise CaptureError(f"captured graph: op {node['op']} (captured at {node['where']}) now produces shape "
                           f"{list(getattr(r, 'shape', ()))} instead of the captured one; its output shape depends "
                           f"on the data, which a graph cannot replay")

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.buffers.values())


def _writable_outputs(arrays, dsts, results, elementwise: bool = False) -> bool:
    """Whether an op's ``fwd_out`` may write into ``dsts``, checked once here for every replay: each is a
    C-contiguous array like the forward's result at capture (shape, dtype), sharing no memory with an
    input (a kernel writing through raw pointers may read and write in any order), except, for an
    elementwise op, an input that is that output array itself (each element read before it is written)."""
    same = {id(d) for d in dsts} if elementwise else set()
    reads = {root_key(a) for a in arrays if _is_array(a) and id(a) not in same}
    return len(dsts) == len(results) and all(
        d is not None and d.shape == r.shape and d.dtype == r.dtype and d.flags.c_contiguous
        and root_key(d) not in reads for d, r in zip(dsts, results))


def _fills(steps: list) -> dict:
    """Op step index -> value, for the cpu ``fill`` steps the replay writes as one copy into their
    buffer. ``fill``'s result reads only its input's shape and dtype, which a replay never changes
    (``full_like`` is ``copyto(empty_like(a), value, casting='unsafe')``), so no array need be made:
    ``zero_grad(set_to_none=False)`` of the MLP's 784x512 gradient took 155 us for the new array and
    107 for the copy into ``.grad`` (bench/README.md, session 27)."""
    out = {}
    for j, step in enumerate(steps):
        if step[0] != "op" or step[1].name != "fill" or step[3] is not np:
            continue
        arrays, dsts = step[4], step[6]
        if (len(arrays) == 2 and len(dsts) == 1 and dsts[0] is not None and type(dsts[0]) is np.ndarray
                and dsts[0].shape == arrays[0].shape and dsts[0].dtype == arrays[0].dtype
                and (type(arrays[1]) in (int, float, bool) or type(arrays[1]) is np.ndarray and arrays[1].ndim == 0)):
            out[j] = arrays[1]
    return out


def _zero_folds(steps: list, fills: dict, touches: list, momenta: dict) -> dict:
    """Add step index -> fill step index, where a fill's next reader is ``add(buf, x, out=buf)`` (a
    gradient accumulated into a ``.grad`` that ``zero_grad(set_to_none=False)`` filled): the add
    then reads the filled value as a 0-d constant, ``add(v, x, out=buf)``, and the fill's pass goes.
    Each element is ``v + x`` either way, the same float. The value must be a number (a 0-d
    tensor's may change between replays), ``x`` a float32/float64 array of ``buf``'s shape and dtype
    over other memory, and no step between them may touch ``buf``'s memory (``touches``: each step's
    root keys); an add that is part of a momentum update (``momenta``) stays as it is."""
    inside = {k for j in momenta for k in (j, j + 1, j + 2)}
    out = {}
    for j, value in fills.items():
        buf = steps[j][6][0]
        if type(value) not in (int, float, bool) or buf.dtype not in _FOLD_DTYPES:
            continue
        key = root_key(buf)
        for k in range(j + 1, len(steps)):
            step = steps[k]
            if key not in touches[k]:
                continue
            if (k not in inside and step[0] == "op" and step[8] is np.add and _only(step[6], buf)
                    and len(step[4]) == 2 and step[4][0] is buf and type(step[4][1]) is np.ndarray
                    and step[4][1].shape == buf.shape and step[4][1].dtype == buf.dtype
                    and root_key(step[4][1]) != key):
                out[k] = j
            break
    return out


_FOLD_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _momentum_updates(steps: list, taken: set) -> dict:
    """First step index -> ``(p, g, buf, momentum, alpha)`` for each run of three steps that is SGD's
    momentum update as a capture records it, ``buf.mul_(momentum)``, ``buf.add_(g)``, ``p.add_(buf,
    alpha=alpha)`` (three passes), where ``optim._foreach.momentum_update`` takes the arrays: the
    replay runs it, the one pass eager SGD runs, the same float32 operations in the same order."""
    out = {}
    for j in range(len(steps) - 2):
        run = steps[j:j + 3]
        if any(s[0] != "op" or s[3] is not np for s in run) or taken & {j, j + 1, j + 2}:
            continue
        mul, add, apply = run
        buf = mul[6][0]
        if not (buf is not None and _only(mul[6], buf) and mul[8] is np.multiply and len(mul[4]) == 2
                and mul[4][0] is buf and _number(mul[4][1])
                and add[8] is np.add and _only(add[6], buf) and len(add[4]) == 2 and add[4][0] is buf
                and apply[1].name == "add" and apply[8] is None and len(apply[4]) == 2 and apply[4][1] is buf
                and _only(apply[6], apply[4][0]) and set(apply[5]) == {"alpha"} and _number(apply[5]["alpha"])):
            continue
        p, g = apply[4][0], add[4][1]
        if _is_array(g) and fused_momentum(p, g, buf):
            out[j] = (p, g, buf, mul[4][1], apply[5]["alpha"])
    return out


def _moved_accumulations(steps: list, folds: dict, momenta: dict, touches: list) -> dict:
    """Momentum update step -> the folded accumulation step (``add(v, x, out=g)``) that made its
    gradient ``g``, where that add may run inside the update's pass
    (``optim._foreach.momentum_update_from``): no step between them touches ``g``'s or ``x``'s
    memory, and ``x`` is an array the fused loop takes. One pass where two read and wrote ``g``
    (``zero_grad(set_to_none=False)``, backward, ``SGD(momentum=...).step()``)."""
    made = {id(steps[k][6][0]): k for k in folds}
    out = {}
    for j, (p, g, buf, _m, _a) in momenta.items():
        k = made.get(id(g))
        if k is None or k > j:
            continue
        x = steps[k][4][1]
        span = (root_key(g), root_key(x))
        if fused_momentum(p, x, buf) and not any(key in touches[i] for i in range(k + 1, j) for key in span):
            out[j] = k
    return out


def _fed_updates(steps: list, momenta: dict, touches: list, locals_: set, taken: set) -> dict:
    """Momentum update step -> ``(k, g)``: op step ``k`` made the update's gradient ``g`` and copies its
    result into ``g``'s buffer (a ``.grad`` the backward set, held by the user), and no step between them
    touches that memory: the update's pass makes the copy too (``optim._foreach.momentum_update_from``),
    reading the forward's result itself. One pass where two read and wrote ``g``."""
    made: dict[int, int] = {}      # id(array) -> the last op step writing it
    for k, step in enumerate(steps):
        if step[0] == "op":
            for d in step[6]:
                if d is not None:
                    made[id(d)] = k
    out = {}
    for j, (_p, g, _buf, _m, _a) in momenta.items():
        k = made.get(id(g))
        if k is None or k > j or k in taken or id(g) in locals_ or _copies_into(steps[k], g) is None:
            continue
        if not any(root_key(g) in touches[i] for i in range(k + 1, j)):
            out[j] = (k, g)
    return out


def _copies_into(step: tuple, g):
    """The forward's result at capture that op ``step`` copies into its output ``g`` at every replay (no
    ufunc ``out=``, no ``fwd_out`` writing it), when it is an array of ``g``'s shape and dtype; else None."""
    _, op, _fwd, _xp, arrays, _params, dsts, r, ufunc, _where = step
    results = r if len(dsts) > 1 else (r,)
    if ufunc is not None or (op.fwd_out is not None and _writable_outputs(
            arrays, dsts, r if op.n_extra else (r,), op.elementwise)) or len(results) != len(dsts):
        return None
    res = results[[i for i, d in enumerate(dsts) if d is g][0]]
    return res if _is_array(res) and res.shape == g.shape and res.dtype == g.dtype else None


def _only(dsts: tuple, arr) -> bool:
    """Whether a step's outputs are ``arr`` alone (by identity: ``==`` on arrays compares values)."""
    return len(dsts) == 1 and dsts[0] is arr


def _number(v) -> bool:
    return type(v) in (int, float)


def _step_arrays(step: tuple) -> list:
    """Every array a step reads or writes."""
    if step[0] == "op":
        return [a for a in (*step[4], *step[6]) if a is not None and _is_array(a)]
    if step[0] == "copy":
        return [step[1], step[2]]
    return [step[1]]


def _locals(mode, private: frozenset) -> set:
    """``id``s of the op outputs the cpu replay keeps as locals: an intermediate in ``private``
    memory (no tensor the user holds reads it), written once, by the op that made it (its
    first mention), and read only as that same array (no view of it is named): each replay's
    fresh result then stands for it. The forward's result at capture must have been an array
    (a number would reach the readers as a number)."""
    if not private:
        return set()
    seen: dict[int, int] = {}      # root key -> id of the one array naming that memory
    writes: dict[int, int] = {}    # id(array) -> how many steps write it
    first: dict[int, str] = {}     # id(array) -> how the program first mentions it
    out: set = set()

    def mention(a, how: str) -> None:
        if not _is_array(a):
            return
        k = root_key(a)
        if seen.setdefault(k, id(a)) != id(a):
            seen[k] = -1           # two arrays over one memory: a view is named
        first.setdefault(id(a), how)
    for root, snap in mode.reinit.values():
        mention(root, "write"), mention(snap, "read")
    for step in mode.steps:
        if step[0] == "op":
            _, op, fwd, xp, arrays, params, dsts, r, ufunc, where = step
            for a in arrays:
                mention(a, "read")
            results = r if len(dsts) > 1 else (r,)
            for d, res in zip(dsts, results):
                if d is None:
                    continue
                mention(d, "made" if type(res) is type(d) and res.shape == d.shape and res.dtype == d.dtype
                        else "write")
                writes[id(d)] = writes.get(id(d), 0) + 1
        elif step[0] == "copy":
            _, dst, src, _why = step
            mention(src, "read"), mention(dst, "write")
            writes[id(dst)] = writes.get(id(dst), 0) + 1
        else:
            mention(step[1], "read")
    for step in mode.steps:
        if step[0] == "op":
            for d in step[6]:
                if (d is not None and first.get(id(d)) == "made" and writes.get(id(d)) == 1
                        and root_key(d) in private and seen.get(root_key(d)) == id(d)):
                    out.add(id(d))
    return out


__all__ = ["Program"]

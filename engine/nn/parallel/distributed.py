"""``DistributedDataParallel``: one model replica per rank, gradients averaged across ranks.

Each parameter gets a gradient hook (``Tensor.register_hook``). When a parameter's gradient is
ready during backward, DDP puts its accumulated value (``.grad`` plus the new gradient) in its
bucket; a full bucket is flattened and handed to the communication hook (all-reduce and
average by default), which runs on the group's communication thread while backward goes on
computing the next gradients. Buckets are launched in bucket order on every rank (the ranks
must meet in the same collectives), parameters in reverse registration order, about the order
backward produces them. When the last gradient arrives, DDP waits for every bucket and writes
the reduced values into ``.grad``.

DDP is a ``Joinable``: under ``Join`` (``model.join()``), a rank out of batches shadows the others'
iterations (``_JoinHook``): the sync flag, the buffer broadcasts, every bucket's reduction (zeros,
through the comm hook) and the used-parameter flags, in the order a training rank makes them.
"""
from __future__ import annotations

import contextlib
import itertools

from ... import _c10d
from ..._c10d.group import resolve
from ..._c10d.join import Join, JoinHook, Joinable
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...base.dtype import int64
from ...core import creation
from ...core.node import graph_leaves
from ...core.tensor import Tensor
from ...ops.movement import cat
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024   # PyTorch's: a small first bucket starts communication early


def _allreduce_mean(group, bucket, divisor: int | None = None) -> "_c10d.Future":
    """The default hook (what ``allreduce_hook`` does): average ``bucket.buffer()`` across the group
    (or divide the sum by ``divisor``: the ranks still training, under ``Join``)."""
    g = resolve(group)
    buf = bucket.buffer()
    buf.div_(divisor or g.size())
    return _c10d.all_reduce(buf, group=g, async_op=True).get_future().then(lambda fut: fut.value()[0])


class _Bucket:
    __slots__ = ("index", "params", "slots", "pending", "future")

    def __init__(self, index: int, params: list) -> None:
        self.index, self.params = index, params
        self.slots: list = [None] * len(params)
        self.pending, self.future = len(params), None


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)


class DistributedDataParallel(Module, Joinable):
    """``nn.parallel.DistributedDataParallel(module)``: wraps ``module`` so backward averages its
    gradients over the process group.

    Args:
        module: the replica; rank 0's parameters and buffers are broadcast to all at construction.
        process_group: the group (default: the default group).
        bucket_cap_mb: bucket size in MiB (default 25; the first bucket is 1 MiB).
        find_unused_parameters: let parameters the forward did not use count as ready
            (they contribute zeros; ``.grad`` stays None for those no rank used): each
            iteration searches the graph from the outputs and all-reduces the used flags.
        broadcast_buffers: copy rank 0's buffers to every rank before each forward.
        gradient_as_bucket_view: each ``.grad`` is a view of its reduced bucket (no copy; the
            parameters of a bucket share its memory); False (PyTorch's default): its own copy.
        static_graph: the graph is the same every iteration: unused parameters are found (and
            their flags all-reduced) in the first iteration only, with or without
            ``find_unused_parameters``, and taken as found in the later ones.

    ``device_ids``/``output_device`` are accepted and change nothing (one device per rank).

    Example::

        >>> dist.init_process_group("gloo")
        >>> model = DistributedDataParallel(Net())
        >>> model(x).sum().backward()          # .grad is the mean over ranks
        >>> with model.no_sync():               # accumulate locally, reduce at the next synced backward
        ...     model(x2).sum().backward()
        >>> with model.join():                  # ranks may have different numbers of batches
        ...     for x in my_batches:
        ...         model(x).sum().backward()
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, init_sync: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs):
        super().__init__()
        Joinable.__init__(self)
        group = resolve(process_group)
        self.module = module
        self.process_group = group
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view, self.static_graph = gradient_as_bucket_view, static_graph
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._index = {id(p): i for i, p in enumerate(self._params)}
        root = group.ranks[0]
        if init_sync:
            for t in itertools.chain(module.parameters(), module.buffers()):
                _c10d.broadcast(t, src=root, group=group)
        self._buckets_of = self._plan_buckets()
        self._comm = (None, _allreduce_mean)
        self._hook_set = False
        self._iter: dict | None = None
        self._static_used: set | None = None       # static_graph: the first iteration's used parameters
        self._static_global: list | None = None    # ... and its all-reduced used flags
        self._join_count = None                    # the Work counting the ranks still training (Join)
        self._divide_by_initial_world_size = True
        self._handles = [p.register_hook(self._make_hook(p)) for p in self._params]

    # ------------------------------------------------------------------ buckets
    def _plan_buckets(self) -> list[list[int]]:
        """Parameter indices per bucket: reverse order, split at the byte cap and at dtype changes."""
        buckets, cur, size, cap, dtype = [], [], 0, min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap), None
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            nbytes = p.numel() * p.element_size()
            if cur and (size + nbytes > cap or p.dtype != dtype):
                buckets.append(cur)
                cur, size, cap = [], 0, self.bucket_bytes_cap
            cur.append(i)
            size += nbytes
            dtype = p.dtype
        if cur:
            buckets.append(cur)
        return buckets

    def _start_iteration(self, sync: bool, used: set[int] | None) -> dict:
        buckets = [_Bucket(b, [self._params[i] for i in idx]) for b, idx in enumerate(self._buckets_of)]
        where = {}
        for b, idx in zip(buckets, self._buckets_of):
            for slot, i in enumerate(idx):
                where[i] = (b, slot)
        it = {"sync": sync, "buckets": buckets, "where": where, "next": 0, "ready": 0, "used": set(range(len(
            self._params)))}
        self._iter = it
        if sync and used is not None:   # unused parameters are ready now: zeros (or their .grad) go in their slots
            for i, p in enumerate(self._params):
                if id(p) not in used:
                    it["used"].discard(i)
                    self._ready(it, i, p.grad.detach() if p.grad is not None else creation.zeros_like(p))
        return it

    def _make_hook(self, p: Tensor):
        index = self._index[id(p)]

        def hook(grad: Tensor):
            it = self._iter
            if it is None or it.get("done"):
                it = self._start_iteration(self.require_backward_grad_sync, None)
            if not it["sync"]:
                return None
            it["fired"] = True
            value = grad.detach() if p.grad is None else p.grad.detach() + grad.detach()
            if self._ready(it, index, value):
                return self._finish(it, index)
            return None
        return hook

    def _ready(self, it: dict, i: int, value: Tensor) -> bool:
        """Put parameter i's gradient in its slot, launch the buckets now complete (in order);
        True when it was the last gradient of the iteration."""
        b, slot = it["where"][i]
        if b.slots[slot] is not None:
            raise RuntimeError(f"DistributedDataParallel: parameter {i} got its gradient twice in one backward; "
                               "reentrant backward or a parameter used outside the wrapped module's forward is not "
                               "supported")
        b.slots[slot] = value
        b.pending -= 1
        it["ready"] += 1
        buckets = it["buckets"]
        while it["next"] < len(buckets) and buckets[it["next"]].pending == 0:
            self._launch(buckets[it["next"]], it["next"] == len(buckets) - 1)
            it["next"] += 1
        return it["ready"] == len(self._params)

    def _launch(self, b: _Bucket, last: bool) -> None:
        with no_grad():
            flat = cat([g.reshape(-1).to(b.params[0].dtype) for g in b.slots])
        b.future = self._reduce_bucket(_c10d.GradBucket(b.index, flat, b.params, last))

    def _reduce_bucket(self, bucket) -> "_c10d.Future":
        state, hook = self._comm
        if self._hook_set:
            return hook(state, bucket)
        divisor = None
        if self._join_count is not None and not self._divide_by_initial_world_size:
            divisor = int(self._join_count.result()[0].item())    # the ranks still training
        return hook(self.process_group, bucket, divisor)

    def _finish(self, it: dict, current: int) -> Tensor:
        """Wait for every bucket and make each ``.grad`` its view of the reduced bucket (as PyTorch's
        ``gradient_as_bucket_view``); returns parameter ``current``'s, which backward accumulates
        into its (emptied) ``.grad`` right after this hook."""
        it["done"] = True
        globally_used = None
        if self.find_unused_parameters or self.static_graph:
            globally_used = self._static_global if self._static_global is not None else self._globally_used(it)
            if self.static_graph:
                self._static_global = globally_used
        out = None
        with no_grad():
            for b in it["buckets"]:
                flat = b.future.wait()
                at = 0
                for p in b.params:
                    n = p.numel()
                    g = flat[at:at + n].view(p.shape).to(p.dtype)   # a view of the bucket: no copy
                    if not self.gradient_as_bucket_view:
                        g = g.clone()
                    at += n
                    i = self._index[id(p)]
                    if globally_used is not None and not globally_used[i]:
                        continue
                    if i == current:
                        p.grad, out = None, g
                    else:
                        p.grad = g
        return out

    def _globally_used(self, it: dict) -> list[bool]:
        flags = creation.tensor([1 if i in it["used"] else 0 for i in range(len(self._params))])
        _c10d.all_reduce(flags, group=self.process_group)
        return [bool(v) for v in flags.tolist()]

    # ------------------------------------------------------------------ the module
    def forward(self, *inputs, **kwargs):
        it = self._iter
        if it is not None and not it.get("done") and it.get("fired"):
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`")
        self._iter = None
        self._join_count = Join.notify_join_context(self)
        if self._join_config.enable:
            self._sync_flag(self.require_backward_grad_sync)
        self._sync_buffers()
        out = self.module(*inputs, **kwargs)
        if is_grad_enabled():
            used = None
            if (self.find_unused_parameters or self.static_graph) and self.require_backward_grad_sync:
                used = self._static_used if self._static_used is not None else {id(t) for t in graph_leaves(_tensors(out))}
                if self.static_graph:
                    self._static_used = used
            self._start_iteration(self.require_backward_grad_sync, used)
        return out

    def _sync_buffers(self) -> None:
        if self.broadcast_buffers:
            for buf in self.module.buffers():
                _c10d.broadcast(buf, src=self.process_group.ranks[0], group=self.process_group)

    def _sync_flag(self, mine: bool) -> bool:
        """Under ``Join``: whether any rank still training syncs gradients this iteration."""
        flag = creation.tensor([1 if mine else 0])
        _c10d.all_reduce(flag, group=self.process_group)
        return bool(flag.item())

    # ------------------------------------------------------------------ Join
    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False) -> Join:
        """``Join([self], ...)``: the training loop may run a different number of iterations per rank.
        Gradients are divided by the world size (joined ranks add zeros), or with
        ``divide_by_initial_world_size=False`` by the number of ranks still training."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs) -> JoinHook:
        return _JoinHook(self, kwargs.get("divide_by_initial_world_size", True))

    @property
    def join_device(self):
        return next(iter(self._params)).device if self._params else creation.tensor(0).device

    @property
    def join_process_group(self):
        return self.process_group

    def _shadow_iteration(self) -> None:
        """A joined rank's side of one training iteration of the others (see the module docstring)."""
        sync = self._sync_flag(False)
        self._sync_buffers()
        if not sync:
            return
        with no_grad():
            for b, idx in enumerate(self._buckets_of):
                params = [self._params[i] for i in idx]
                flat = creation.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
                self._reduce_bucket(_c10d.GradBucket(b, flat, params, b == len(self._buckets_of) - 1)).wait()
        if (self.find_unused_parameters or self.static_graph) and self._static_global is None:
            _c10d.all_reduce(creation.zeros(len(self._params), dtype=int64), group=self.process_group)

    def _sync_final_model(self, is_last_joiner: bool) -> None:
        """Every rank takes the parameters and buffers of a rank that joined last (the others
        skipped their optimizer steps while shadowing)."""
        g = self.process_group
        who = creation.tensor([g.rank() if is_last_joiner else -1])
        _c10d.all_reduce(who, op=_c10d.ReduceOp.MAX, group=g)
        src = g.ranks[int(who.item())]
        for t in itertools.chain(self.module.parameters(), self.module.buffers()):
            _c10d.broadcast(t, src=src, group=g)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside this block accumulates gradients locally; the first synced backward after
        it reduces the accumulated sum."""
        prev, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = prev

    def register_comm_hook(self, state, hook) -> None:
        """Reduce buckets with ``hook(state, bucket) -> Future[Tensor]`` instead of all-reduce (once, before training)."""
        if self._hook_set:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got {type(hook).__name__}")
        self._comm, self._hook_set = (state, hook), True

    def _get_ddp_logging_data(self) -> dict:
        return {"world_size": self.process_group.size(), "num_buckets": len(self._buckets_of),
                "bucket_cap_bytes": self.bucket_bytes_cap, "has_comm_hook": self._hook_set}


class _JoinHook(JoinHook):
    """DDP's join hook: shadow each iteration of the ranks still training, then sync the model."""

    def __init__(self, ddp: DistributedDataParallel, divide_by_initial_world_size: bool) -> None:
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self) -> None:
        self.ddp._shadow_iteration()

    def post_hook(self, is_last_joiner: bool) -> None:
        self.ddp._sync_final_model(is_last_joiner)

"""``make_graphed_callables``: a module or function whose forward and backward are each a graph."""
from __future__ import annotations

from ..autograd.engine import grad as _grad
from ..autograd.function import Function
from ..core.creation import ones_like, zeros_like
from ..core.tensor import Tensor
from .graph import Graph, graph, graph_pool_handle

__all__ = ["make_graphed_callables"]


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool=None, *, device=None):
    """Graphed versions of ``callables`` (``torch.cuda.make_graphed_callables``).

    Each callable (an ``nn.Module`` or a function of tensors) is run ``num_warmup_iters``
    times, then its forward is captured into one graph and its backward (gradients with
    respect to the inputs that require grad and the module's parameters) into another,
    sharing one pool. The result is autograd-aware: calling it copies the arguments into
    the static inputs and replays the forward graph; backward replays the backward graph
    and hands the gradients to autograd, so parameters' ``.grad`` accumulate as usual.
    A module keeps its other attributes; its graphed forward runs only in the training
    mode it was captured in (the eager forward otherwise).

    Args:
        callables: a callable or a tuple of callables.
        sample_args: a tuple of tensors per callable (a tuple of such tuples for several);
            their shapes, dtypes and ``requires_grad`` must match the real arguments.
        num_warmup_iters: eager iterations before capture (optimizer-free warm-up).
        allow_unused_input: allow inputs that the outputs do not depend on.
        pool: a pool to capture into (default: a new one shared by all the graphs).
    Returns:
        The graphed callable, or a tuple of them.

    >>> model = tapelab.nn.Linear(4, 2)
    >>> gmodel = tapelab.graphs.make_graphed_callables(model, (tapelab.randn(8, 4),))
    >>> gmodel(x).sum().backward()     # model.weight.grad filled by the replayed backward
    """
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"make_graphed_callables: {len(callables)} callables but {len(sample_args)} sample_args")
    pool = pool if pool is not None else graph_pool_handle()
    out = tuple(_graph_one(fn, tuple(args), num_warmup_iters, allow_unused_input, pool, device)
                for fn, args in zip(callables, sample_args))
    return out[0] if just_one else out


def _flat(out):
    if isinstance(out, Tensor):
        return (out,), None
    if isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
        return tuple(out), type(out)
    raise TypeError(f"make_graphed_callables: a callable must return a Tensor or a tuple of Tensors, "
                    f"got {type(out).__name__}")


def _graph_one(fn, args, warmup, allow_unused, pool, device):
    from ..nn.modules.module import Module
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"make_graphed_callables: sample_args[{i}] is a {type(a).__name__}; only Tensor "
                            f"arguments can be static inputs")
    module = fn if isinstance(fn, Module) else None
    named = [(n, p) for n, p in module.named_parameters() if p.requires_grad] if module is not None else []
    params = tuple(p for _, p in named)
    diff = tuple(a for a in args if a.requires_grad) + params
    device = device or (args[0].device if args else "cpu")
    call = type(fn).forward.__get__(fn) if module is not None else fn
    for _ in range(warmup):
        outs, _ = _flat(call(*args))
        req = [o for o in outs if o.requires_grad]
        if req and diff:
            _grad(req, diff, grad_outputs=[ones_like(o) for o in req], allow_unused=allow_unused)
    del outs
    names = {id(a): f"sample_args[{i}]" for i, a in enumerate(args)}
    names.update({id(p): f"parameter '{n}'" for n, p in named})
    fwd = Graph(device)
    fwd._names = names
    with graph(fwd, pool=pool):
        static_out, kind = _flat(call(*args))
    req_out = [o for o in static_out if o.requires_grad]
    static_gout = [zeros_like(o) for o in req_out]
    bwd = Graph(device)
    bwd._names = names
    static_gin: tuple = (None,) * len(diff)
    if req_out and diff:
        with graph(bwd, pool=pool):
            static_gin = _grad(req_out, diff, grad_outputs=static_gout, allow_unused=allow_unused)
    needs = [a.requires_grad for a in args] + [True] * len(params)
    req_mask = [o.requires_grad for o in static_out]

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, x in zip(args, inputs):
                if x is not static and x._data is not static._data:
                    static.copy_(x)
            fwd.replay()
            return tuple(o.detach() for o in static_out)

        @staticmethod
        def backward(ctx, *grads):
            for g, sg in zip((g for g, r in zip(grads, req_mask) if r), static_gout):
                if g is None:
                    sg.zero_()
                elif g._data is not sg._data:
                    sg.copy_(g)
            if bwd.captured:
                bwd.replay()
            it = iter(static_gin)
            return tuple((None if (gi := next(it)) is None else gi.detach()) if n else None for n in needs)

    def graphed(*user_args):
        if len(user_args) != len(args):
            raise TypeError(f"graphed callable takes {len(args)} arguments (as sample_args), got {len(user_args)}")
        for i, (a, s) in enumerate(zip(user_args, args)):
            if not isinstance(a, Tensor) or a.shape != s.shape or a.dtype != s.dtype or a.device != s.device:
                got = f"{a.dtype.name}{list(a.shape)} on {a.device}" if isinstance(a, Tensor) else type(a).__name__
                raise RuntimeError(f"graphed callable: argument {i} is {got}, but the graph was captured for "
                                   f"{s.dtype.name}{list(s.shape)} on {s.device} (sample_args[{i}])")
            if a.requires_grad != s.requires_grad:
                raise RuntimeError(f"graphed callable: argument {i} has requires_grad={a.requires_grad}, but "
                                   f"sample_args[{i}] had requires_grad={s.requires_grad}")
        outs = Graphed.apply(*user_args, *params)
        return outs[0] if kind is None else kind(outs)

    graphed.fwd_graph, graphed.bwd_graph = fwd, bwd
    if module is None:
        return graphed
    training = module.training

    def forward(*user_args):
        return graphed(*user_args) if module.training == training else type(module).forward(module, *user_args)
    module.forward = forward
    module.fwd_graph, module.bwd_graph = fwd, bwd
    return module

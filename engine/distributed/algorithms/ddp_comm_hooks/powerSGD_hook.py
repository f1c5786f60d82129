"""PowerSGD (Vogels et al., 2019): all-reduce a rank-r approximation of each gradient matrix.

For an n x m gradient M, each rank computes P = M Q (Q: m x r, kept between steps: warm
start), all-reduces P, orthogonalizes it, computes Q = M^T P and all-reduces Q; P Q^T / world
is the averaged gradient, with r (n + m) numbers sent instead of n m. What the approximation
missed is added back to the next step's gradient (error feedback), so training still converges.
Vectors and matrices too small to gain ``min_compression_rate`` are all-reduced as they are.
Before ``start_powerSGD_iter`` steps the hook is a plain all-reduce.

tapelab runs the two rounds of a bucket back to back from the hook (the ranks wait for both
before backward goes on), where PyTorch chains them as futures.
"""
from __future__ import annotations

from .... import _c10d
from ...._c10d.group import resolve
from ....autograd.grad_mode import no_grad
from ....core import creation
from ....core.random import Generator
from ....ops.movement import cat
from .default_hooks import allreduce_hook

__all__ = ["PowerSGDState", "powerSGD_hook"]


class PowerSGDState:
    """The hook's state: the options, per-bucket error and Q memories, and the step count."""

    def __init__(self, process_group, matrix_approximation_rank: int = 1, start_powerSGD_iter: int = 1_000,
                 min_compression_rate: float = 2, use_error_feedback: bool = True, warm_start: bool = True,
                 orthogonalization_epsilon: float = 0, random_seed: int = 0,
                 compression_stats_logging_frequency: int = 10_000, batch_tensors_with_same_shape: bool = False):
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback, self.warm_start = use_error_feedback, warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = Generator().manual_seed(random_seed)
        self.error_dict: dict = {}
        self.p_memory_dict: dict = {}
        self.q_memory_dict: dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = compression_stats_logging_frequency
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def maybe_increase_iter(self, bucket) -> None:
        if bucket.is_last():
            self.iter += 1

    def compression_stats(self) -> tuple[float, int, int]:
        """(compression rate, numel before, numel after) over the compressed steps so far."""
        after = self.total_numel_after_compression
        return (self.total_numel_before_compression / after if after else 0.0,
                self.total_numel_before_compression, after)


def _orthogonalize(p, eps: float):
    """Gram-Schmidt over the columns of ``p``, in place."""
    for i in range(p.shape[1]):
        col = p[:, i]
        col.div_(col.norm() + eps if eps else col.norm())
        if i + 1 < p.shape[1]:
            rest = p[:, i + 1:]
            rest.sub_(col.unsqueeze(1) * (col @ rest).unsqueeze(0))


def powerSGD_hook(state: PowerSGDState, bucket: _c10d.GradBucket) -> _c10d.Future:
    """Average the bucket's gradients through rank-``matrix_approximation_rank`` approximations."""
    group = resolve(state.process_group)
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return allreduce_hook(state.process_group, bucket)
    n, rank, key = group.size(), state.matrix_approximation_rank, bucket.index()
    with no_grad():
        buf = bucket.buffer()
        if state.use_error_feedback:
            if key in state.error_dict:
                buf.add_(state.error_dict[key])
            before = buf.clone()
        grads = bucket.gradients()
        plain, matrices = [], []
        for g in grads:
            if g.dim() <= 1:
                plain.append(g)
                continue
            mat = g.reshape(g.shape[0], -1)
            rows, cols = mat.shape
            r = min(rows, cols, rank)
            if rows * cols < state.min_compression_rate * r * (rows + cols):
                plain.append(g)
            else:
                matrices.append((g, mat, r))
        state.total_numel_before_compression += sum(g.numel() for g in grads)
        state.total_numel_after_compression += sum(g.numel() for g in plain) + sum(
            r * (m.shape[0] + m.shape[1]) for _, m, r in matrices)
        if plain:   # the tensors PowerSGD leaves alone: one flat all-reduce
            flat = cat([g.reshape(-1) for g in plain])
            _c10d.all_reduce(flat, group=group)
            at = 0
            for g in plain:
                g.copy_(flat[at:at + g.numel()].view(g.shape) / n)
                at += g.numel()
        if matrices:
            qs = []
            for j, (_, mat, r) in enumerate(matrices):
                q = state.q_memory_dict.get((key, j)) if state.warm_start else None
                if q is None:
                    q = creation.randn(mat.shape[1], r, generator=state.rng, dtype=mat.dtype)
                    _orthogonalize(q, state.orthogonalization_epsilon)
                qs.append(q)
            ps = [mat @ q for (_, mat, _), q in zip(matrices, qs)]
            flat_p = cat([p.reshape(-1) for p in ps])
            _c10d.all_reduce(flat_p, group=group)
            at = 0
            for p in ps:
                p.copy_(flat_p[at:at + p.numel()].view(p.shape))
                at += p.numel()
                _orthogonalize(p, state.orthogonalization_epsilon)
            qs = [mat.t() @ p for (_, mat, _), p in zip(matrices, ps)]
            flat_q = cat([q.reshape(-1) for q in qs])
            _c10d.all_reduce(flat_q, group=group)
            at = 0
            for j, ((g, mat, _), p, q) in enumerate(zip(matrices, ps, qs)):
                q = flat_q[at:at + q.numel()].view(q.shape).clone()
                at += q.numel()
                if state.warm_start:
                    state.q_memory_dict[(key, j)] = q
                g.copy_((p @ q.t() / n).view(g.shape))
        if state.use_error_feedback:
            state.error_dict[key] = before - buf   # what this rank had minus the average all agreed on
    state.maybe_increase_iter(bucket)
    fut = _c10d.Future()
    fut.set_result(buf)
    return fut

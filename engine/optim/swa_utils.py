"""``torch.optim.swa_utils``: stochastic weight averaging and exponential moving averages of a
model's weights, the SWA learning-rate schedule, and recomputing BatchNorm statistics."""
from __future__ import annotations

import copy
import itertools
import math
import warnings

from ..base import dtype as _dtype
from ..base.grad_mode import no_grad
from ..core.creation import tensor
from ..nn.modules.module import Module
from ..nn.modules.batchnorm import _BatchNorm
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn"]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_avg_fn(decay: float = 0.999):
    """``avg(ema, current, n) = decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """``avg(mean, current, n) = mean + (current - mean) / (n + 1)``: the running mean."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def get_ema_multi_avg_fn(decay: float = 0.999):
    """The in-place, list-at-a-time form of ``get_ema_avg_fn``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_params, current_params, num_averaged) -> None:
        for e, c in zip(ema_params, current_params):
            if e.is_floating_point():
                e.lerp_(c, 1 - decay)
            else:
                e.copy_((e * decay + c * (1 - decay)).to(e.dtype))
    return ema_update


def get_swa_multi_avg_fn():
    """The in-place, list-at-a-time form of ``get_swa_avg_fn``."""
    @no_grad()
    def swa_update(averaged_params, current_params, num_averaged) -> None:
        n = num_averaged.item() if hasattr(num_averaged, "item") else num_averaged
        for a, c in zip(averaged_params, current_params):
            if a.is_floating_point():
                a.lerp_(c, 1 / (n + 1))
            else:   # integer buffers (num_batches_tracked): PyTorch's integer addcdiv truncates
                a.add_((c - a).div(n + 1, rounding_mode="trunc"))
    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters (and buffers, with ``use_buffers``) are the running
    average (SWA, the default) or any ``avg_fn`` / ``multi_avg_fn`` (e.g. EMA) of the models passed
    to ``update_parameters``; ``n_averaged`` counts them."""

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=_dtype.int64, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average (the first call copies them)."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        mine = [p.detach() for p in mine]
        theirs = [p.detach().to(a.device) for p, a in zip(theirs, mine)]
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:
                for a, p in zip(mine, theirs):
                    a.copy_(p)
            elif self.avg_fn is not None:
                for a, p in zip(mine, theirs):
                    a.copy_(self.avg_fn(a, p, self.n_averaged))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(mine, theirs, self.n_averaged)
            if not self.use_buffers:
                # the copy's buffers (BatchNorm statistics) follow the latest model, as in PyTorch
                for b_mine, b_model in zip(self.module.buffers(), model.buffers()):
                    b_mine.detach().copy_(b_model.detach().to(b_mine.device))
            self.n_averaged.add_(1)


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the BatchNorm running statistics of ``model`` with one pass over ``loader`` (a
    cumulative average: momentum None), then restore the momenta and the training flag."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate from its value to ``swa_lr`` over ``anneal_epochs`` (cosine or
    linear), then hold it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1):
        rates = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(optimizer.param_groups)
        if len(rates) != len(optimizer.param_groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: "
                             f"swa_lr has {len(rates)}, optimizer.param_groups has {len(optimizer.param_groups)}")
        for rate, group in zip(rates, optimizer.param_groups):
            group["swa_lr"] = rate
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The rate before annealing that, mixed with ``swa_lr`` by ``alpha``, gave ``lr``."""
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev = [self._initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev)]

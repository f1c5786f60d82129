"""Optimizers and learning-rate schedulers (torch.optim)."""
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "lr_scheduler"]

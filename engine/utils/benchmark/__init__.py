"""``torch.utils.benchmark``: time statements as PyTorch's benchmark utilities do (``Timer``,
``Measurement``, ``Compare``), with the same statistics and printed text."""
from .common import Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads, trim_sigfig, unit_to_english
from .compare import Colorize, Compare
from .timer import Language, Timer, timer

__all__ = ["Timer", "timer", "Language", "Measurement", "TaskSpec", "Compare", "Colorize", "select_unit",
           "unit_to_english", "trim_sigfig", "ordered_unique", "set_torch_threads"]

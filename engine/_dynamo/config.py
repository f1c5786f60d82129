"""``torch._dynamo.config``: the compiler's settings object (``tapelab.compiler.config``) is this module,
so ``import torch._dynamo.config`` and ``torch._dynamo.config.cache_size_limit = 64`` reach the compiler."""
import sys

from ..compiler import config

sys.modules[__name__] = config

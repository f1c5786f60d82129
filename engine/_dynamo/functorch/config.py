"""``torch._functorch.config``: AOTAutograd's settings that programs set, with PyTorch's defaults; tapelab
caches compiled calls by its own guards and reads none of them."""
from ...utils._config_module import install_config_module

enable_autograd_cache = True
donated_buffer = True
functionalize_rng_ops = False
activation_memory_budget = 1.0

install_config_module(__name__, "torch._functorch.config")

"""Utilities (torch.utils)."""
from . import checkpoint, data, dlpack, hooks  # noqa: F401  (torch.utils.checkpoint, .hooks work after `import tapelab`)

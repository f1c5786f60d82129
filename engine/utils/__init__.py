"""Utilities (torch.utils)."""
from . import checkpoint, data  # noqa: F401  (torch.utils.checkpoint works after `import tapelab`)

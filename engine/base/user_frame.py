"""Warnings at the program's line: PyTorch gives its C++ warnings (``TORCH_WARN``, ``TORCH_WARN_ONCE``)
from inside the op, and Python shows them at the user's frame; tapelab's ops are Python, so the frame is
found by walking out of the package (Python 3.11 has no ``warnings.warn(skip_file_prefixes=)``)."""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["PACKAGE", "warn_at_user"]

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # the tapelab package's folder


def warn_at_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` shown at the first frame outside the tapelab package."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)

"""Where tapelab keeps what it compiles (``TAPELAB_CACHE_DIR``, else ``~/.cache/tapelab/compile``) and
how a file gets there: the compiler's kernels and timings and the kernels' generated region twins
share one directory, so one variable moves or clears them all."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "write_atomically"]


def cache_dir() -> Path:
    root = os.environ.get("TAPELAB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tapelab",
                                                                "compile")
    return Path(root)


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary and a rename: another process may read it meanwhile."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)

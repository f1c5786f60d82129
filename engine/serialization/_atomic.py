"""Atomic, durable replacement of a file, the way careful databases write: a checkpoint on disk
is always either the old one or the new one, complete.

1. the path is resolved through symlinks, so saving to a link writes the link's target (the
   link stays a link, as ``open(path, "wb")`` and ``torch.save`` do);
2. a unique temporary file is created beside the target (``tempfile.mkstemp``, so two threads
   or processes saving the same path never share one), named ``.tapelab-save-<pid>-*.tmp``;
3. it gets the existing file's permission bits (a 0600 checkpoint stays 0600), or for a new file
   what ``open`` would give (0666 less the umask);
4. the data is written, flushed and ``fsync``-ed; the temporary file is renamed over the target
   (``os.replace``, atomic on POSIX), then the directory is ``fsync``-ed so the rename survives a
   power cut;
5. temporary files that a killed save left behind (their pid no longer runs) are removed by the
   next save into the same directory.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from typing import BinaryIO, Callable

__all__ = ["atomic_write", "TMP_PREFIX", "stale_temp_files"]

TMP_PREFIX = ".tapelab-save-"
_TMP_NAME = re.compile(re.escape(TMP_PREFIX) + r"(\d+)-.*\.tmp$")


def atomic_write(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Replace the file at ``path`` with what ``write(out)`` writes, atomically and durably."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    _remove_stale(folder, os.path.basename(target))
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            if hasattr(os, "fchmod"):
                os.fchmod(out.fileno(), mode)
            write(out)
            out.flush()
            os.fsync(out.fileno())
        if not hasattr(os, "fchmod"):
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(folder)


def stale_temp_files(folder: str, basename: str | None = None) -> list[str]:
    """Temporary files in ``folder`` left by saves whose process is gone (the next save removes them).

    Also matches ``<basename>.tmp<pid>``, the names earlier tapelab versions used.
    """
    old = re.compile(re.escape(basename) + r"\.tmp(\d+)$") if basename else None
    stale = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = _TMP_NAME.match(name) or (old.match(name) if old else None)
        if m and not _alive(int(m.group(1))):
            stale.append(os.path.join(folder, name))
    return stale


def _remove_stale(folder: str, basename: str) -> None:
    for p in stale_temp_files(folder, basename):
        try:
            os.remove(p)
        except OSError:   # another saver removed it first, or it is not ours to remove
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True   # this process's own temp files belong to saves in flight (other threads)
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # it runs, under another user
    except OSError:
        return True   # cannot tell (no signals on this platform): keep the file
    return True


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` would race other threads)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _fsync_dir(folder: str) -> None:
    if not hasattr(os, "O_DIRECTORY"):
        return   # Windows: a directory cannot be opened for fsync
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)

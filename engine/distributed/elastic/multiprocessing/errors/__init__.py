"""``torch.distributed.elastic.multiprocessing.errors``: a worker's uncaught exception, written where
its launcher reads it.

``@record`` runs the decorated entry point; when it raises, the exception, its traceback and the
time go as JSON to the file named by ``TORCHELASTIC_ERROR_FILE`` (torchrun sets it per worker; no
file when it is unset) and the exception propagates. ``sys.exit(0)`` inside counts as success
(the wrapper returns None). A ``ChildFailedError`` (a launcher whose child failed) copies the
child's error file to this process's instead, so the root cause travels up unchanged.
"""
from __future__ import annotations

import datetime
import functools
import json
import os
import signal
import time
from dataclasses import dataclass, field
from string import Template
from typing import Any

from .error_handler import ErrorHandler
from .handlers import get_error_handler

__all__ = ["ProcessFailure", "ChildFailedError", "record", "ErrorHandler", "get_error_handler"]

_NOT_AVAILABLE = "<N/A>"


@dataclass
class ProcessFailure:
    """A failed worker: its rank, pid and exit code, and the message and time read from its error
    file (a signal's name, or a pointer to ``@record``, when it left none)."""
    local_rank: int
    pid: int
    exitcode: int
    error_file: str
    error_file_data: dict[str, Any] = field(init=False)
    message: str = field(init=False)
    timestamp: int = field(init=False)

    def __post_init__(self) -> None:
        self.error_file_data = {"message": "<NONE>"}
        self.message = ""
        if os.path.isfile(self.error_file):
            with open(self.error_file) as fp:
                self.error_file_data = json.load(fp)
            message = self.error_file_data["message"]
            self.message = message
            self.timestamp = int(self.error_file_data.get("timestamp", 0) if isinstance(message, str)
                                 else message["extraInfo"]["timestamp"])
        else:
            self.error_file = _NOT_AVAILABLE
            self.timestamp = int(time.time())
        if not self.message:
            if self.exitcode < 0:
                self.message = f"Signal {-self.exitcode} ({self.signal_name()}) received by PID {self.pid}"
            else:
                self.error_file_data["errorTraits"] = {"category": "system_terminated_error",
                                                       "retryability": "False"}
                self.message = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"

    def signal_name(self) -> str:
        if self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return _NOT_AVAILABLE
        return _NOT_AVAILABLE

    def timestamp_isoformat(self) -> str:
        """The failure's time as ``YYYY-MM-DDTHH:MM:SS`` with ``_`` for ``T``."""
        return datetime.datetime.fromtimestamp(self.timestamp).isoformat(sep="_")


_FAILURE = Template("""[${idx}]:
  time      : ${time}
  host      : ${hostname}
  rank      : ${rank} (local_rank: ${local_rank})
  exitcode  : ${exitcode} (pid: ${pid}) ${signal_name}
  error_file: ${error_file}
  traceback : ${message}""")


class ChildFailedError(Exception):
    """Raised by a launcher whose children (``failures``: global rank -> ``ProcessFailure``) failed;
    ``@record`` propagates the first failure's error file as this process's own."""

    def __init__(self, name: str, failures: dict[int, ProcessFailure]) -> None:
        self.name = name
        self.failures = failures
        if not self.failures:
            raise AssertionError
        super().__init__(self.format_msg())

    def get_first_failure(self) -> tuple[int, ProcessFailure]:
        rank = min(self.failures, key=lambda r: self.failures[r].timestamp)
        return rank, self.failures[rank]

    def format_msg(self, boarder_delim: str = "=", section_delim: str = "-") -> str:
        import socket
        title = f"{self.name} FAILED"
        root_rank, _ = self.get_first_failure()
        root, others, width = "", [], len(title)
        for idx, (rank, failure) in enumerate(self.failures.items()):
            msg = failure.message
            if isinstance(msg, dict):
                msg = msg.get("extraInfo", {}).get("py_callstack", msg.get("message", "<N/A>")).replace("\n", "\n  ")
            name = failure.signal_name()
            text = _FAILURE.substitute(idx=idx, time=failure.timestamp_isoformat(), hostname=socket.getfqdn(),
                                       rank=rank, local_rank=failure.local_rank, exitcode=failure.exitcode,
                                       pid=failure.pid, signal_name=f" ({name})" if name != _NOT_AVAILABLE else "",
                                       error_file=failure.error_file, message=msg)
            width = max(width, *(len(line) for line in text.split("\n")))
            if rank == root_rank:
                root = text
            else:
                others.append(text)
        width = min(width, 60)
        return "\n".join(["", boarder_delim * width, title, section_delim * width, "Failures:",
                          "\n".join(others or ["  <NO_OTHER_FAILURES>"]), section_delim * width,
                          "Root Cause (first observed failure):", root, boarder_delim * width])


def record(fn, error_handler: ErrorHandler | None = None):
    """``fn`` wrapped to write its uncaught exception to the worker's error file (see the module)."""
    handler = error_handler or get_error_handler()

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        handler.initialize()
        try:
            return fn(*args, **kwargs)
        except SystemExit as exc:
            if exc.code == 0:
                return None
            raise
        except ChildFailedError as exc:
            _, failure = exc.get_first_failure()
            if failure.error_file != _NOT_AVAILABLE:
                handler.dump_error_file(failure.error_file, failure.exitcode)
            raise
        except Exception as exc:
            handler.record_exception(exc)
            raise

    return wrapper

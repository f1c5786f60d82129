"""``ErrorHandler``: writes an exception as JSON to ``TORCHELASTIC_ERROR_FILE``."""
from __future__ import annotations

import faulthandler
import json
import os
import time
import traceback
import warnings

__all__ = ["ErrorHandler"]


class ErrorHandler:
    """Writes the exception a worker dies of (its type and text, the Python stack, the time) to the
    file ``TORCHELASTIC_ERROR_FILE`` names, in the JSON layout torchelastic's agent reads; nothing is
    written when the variable is unset. Subclasses override ``initialize`` and ``record_exception``."""

    def _get_error_file_path(self) -> str | None:
        return os.environ.get("TORCHELASTIC_ERROR_FILE", None)

    def initialize(self) -> None:
        """Dump every thread's stack on a fatal signal (``faulthandler``), as PyTorch's handler does."""
        try:
            faulthandler.enable(all_threads=True)
        except Exception as e:   # no usable stderr (a notebook's), as PyTorch: warn and go on
            warnings.warn(f"Unable to enable fault handler. {type(e).__name__}: {e}", stacklevel=2)

    def record_exception(self, e: BaseException) -> None:
        """Write ``e`` (called inside the ``except`` block: the traceback is the one being handled)."""
        file = self._get_error_file_path()
        if file:
            data = {"message": {"message": f"{type(e).__name__}: {e}",
                                "extraInfo": {"py_callstack": traceback.format_exc(),
                                              "timestamp": str(int(time.time()))}}}
            with open(file, "w") as fp:
                json.dump(data, fp)

    def dump_error_file(self, rootcause_error_file: str, error_code: int = 0) -> None:
        """Copy a child's error file to this process's, with ``errorCode`` set to the child's exit code."""
        with open(rootcause_error_file) as fp:
            rootcause = json.load(fp)
        if error_code and isinstance(rootcause.get("message"), dict):
            rootcause["message"]["errorCode"] = error_code
        mine = self._get_error_file_path()
        if mine:
            if os.path.isfile(mine):
                os.remove(mine)
            try:
                with open(mine, "w") as fp:
                    fp.write(json.dumps(rootcause))
            except Exception as e:
                warnings.warn(f"Unable to write error to file. {type(e).__name__}: {e}", stacklevel=2)

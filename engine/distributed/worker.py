"""One rank of ``python -m tapelab.distributed.run``: sets torchrun's environment from MPI's rank,
runs the script, and leaves its fate in the launcher's status folder (``rank<r>.pid`` at start,
``.done`` at a clean end, ``.error`` with the traceback) so the launcher can say which rank
failed and why. Started as ``python -m mpi4py -m tapelab.distributed.worker script.py args``."""
from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path


def _rank() -> int:
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if os.environ.get(name):
            return int(os.environ[name])
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank()


def _script_traceback(e: BaseException) -> str:
    """The traceback from the script's frames on (this module's and runpy's frames left out)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__)
            or tb.tb_frame.f_code.co_filename.startswith("<frozen")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb))


def main(argv: list[str]) -> None:
    rank = _rank()
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
    status = Path(os.environ.get("TAPELAB_RUN_STATUS", "."))
    (status / f"rank{rank}.pid").write_text(str(os.getpid()))
    module = argv[:1] == ["-m"]
    target, args = (argv[1], argv[2:]) if module else (argv[0], argv[1:])
    sys.argv = [target, *args]
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, str(Path(target).resolve().parent))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            (status / f"rank{rank}.error").write_text(f"SystemExit({e.code!r})")
            raise
    except BaseException as e:
        (status / f"rank{rank}.error").write_text(_script_traceback(e))
        raise   # python -m mpi4py aborts the job: the other ranks do not wait for this one
    (status / f"rank{rank}.done").write_text("")


if __name__ == "__main__":
    main(sys.argv[1:])

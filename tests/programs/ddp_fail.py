"""A job in which one rank fails while the others wait in a collective: ``raise`` (an exception),
``kill`` (SIGKILL, no traceback) or ``hang`` (sleeps past the timeout). The launcher must end the
job and name the rank."""
import os
import signal
import sys
import time

import tapelab as torch

dist = torch.distributed


def main(how: str, bad: int) -> None:
    dist.init_process_group("gloo")
    if dist.get_rank() == bad:
        if how == "raise":
            raise ValueError(f"rank {bad} found a bad batch")
        if how == "hang":
            time.sleep(600)
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(4)
    dist.all_reduce(t)      # the healthy ranks wait here for the failed one
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

"""``torch.distributed.rpc.constants``: the defaults the agent and ``init_rpc``'s options use, at
PyTorch's module path (libraries read ``rpc.constants.UNSET_RPC_TIMEOUT`` as a default argument)."""
from datetime import timedelta

__all__ = ["UNSET_RPC_TIMEOUT", "DEFAULT_RPC_TIMEOUT_SEC", "DEFAULT_NUM_WORKER_THREADS", "DEFAULT_INIT_METHOD",
           "DEFAULT_SHUTDOWN_TIMEOUT", "DEFAULT_PROCESS_GROUP_TIMEOUT"]

UNSET_RPC_TIMEOUT = -1.0           # "use the agent's timeout"
DEFAULT_RPC_TIMEOUT_SEC = 60.0
DEFAULT_NUM_WORKER_THREADS = 16
DEFAULT_INIT_METHOD = "env://"
DEFAULT_SHUTDOWN_TIMEOUT = 0
DEFAULT_PROCESS_GROUP_TIMEOUT = timedelta(milliseconds=2 ** 31 - 1)

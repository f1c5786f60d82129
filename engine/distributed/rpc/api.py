"""``torch.distributed.rpc.api``: the calls of the RPC API at PyTorch's module path (torchopt's
pytree module reads ``rpc.api.UNSET_RPC_TIMEOUT`` as a default argument); they live in ``agent``."""
from .agent import RRef, WorkerInfo, get_worker_info, remote, rpc_async, rpc_sync, shutdown
from .constants import DEFAULT_SHUTDOWN_TIMEOUT, UNSET_RPC_TIMEOUT

__all__ = ["shutdown", "get_worker_info", "remote", "rpc_sync", "rpc_async", "RRef", "WorkerInfo",
           "UNSET_RPC_TIMEOUT", "DEFAULT_SHUTDOWN_TIMEOUT"]

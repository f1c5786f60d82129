"""``torch.distributed.rpc`` basics over MPI: ``init_rpc``, ``rpc_sync``, ``rpc_async``, ``remote``,
``RRef``, ``get_worker_info``, ``shutdown``.

Every rank runs an agent (``agent.py``): a thread that receives requests on the agent's own MPI
communicator, runs each on a thread of its own and sends the (pickled) result or exception back.
Functions travel by reference (pickle), so they must be importable on the callee: module-level
functions of the script all ranks run, or library functions. ``distributed.nn.RemoteModule``
carries gradients back to its owner itself (into ``.grad``, or into a ``distributed.autograd``
context); plain calls carry no autograd edges.
"""
# ``api`` and ``constants`` are PyTorch's submodules (importing them makes them the package's attributes)
from .agent import TensorPipeRpcBackendOptions, init_rpc, is_available
from .api import RRef, WorkerInfo, get_worker_info, remote, rpc_async, rpc_sync, shutdown
from .constants import DEFAULT_RPC_TIMEOUT_SEC, UNSET_RPC_TIMEOUT

__all__ = ["init_rpc", "rpc_sync", "rpc_async", "remote", "RRef", "WorkerInfo", "get_worker_info", "shutdown",
           "is_available", "TensorPipeRpcBackendOptions", "UNSET_RPC_TIMEOUT", "DEFAULT_RPC_TIMEOUT_SEC"]

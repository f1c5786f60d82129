"""Driving a real IPython kernel from tests (jupyter_client): start one with tapelab.kernel
loaded, execute cells, collect what the kernel published."""
from __future__ import annotations

import contextlib
import time


def drain(kc, done, timeout: float = 30) -> list[dict]:
    """iopub messages until ``done(msg)`` (or the timeout), each stamped with its arrival time ``_t``."""
    msgs, deadline = [], time.time() + timeout
    while time.time() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=1)
        except Exception:
            continue
        m["_t"] = time.perf_counter()
        msgs.append(m)
        if done(m):
            break
    return msgs


def run(kc, code: str, timeout: float = 60):
    """Execute ``code``; return (execute reply, iopub messages until the kernel is idle again)."""
    msg_id = kc.execute(code)
    msgs = drain(kc, lambda m: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status"
                 and m["content"]["execution_state"] == "idle", timeout)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply, msgs


def stdout(msgs) -> str:
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def comm_data(msgs, comm_id) -> list[dict]:
    return [m["content"]["data"] for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]


@contextlib.contextmanager
def tapelab_kernel(*setup: str):
    """A python3 kernel with ``%load_ext tapelab.kernel`` and the ``setup`` cells run; yields (km, kc)."""
    import jupyter_client
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        for cell in ("%load_ext tapelab.kernel",) + setup:
            reply, _ = run(kc, cell)
            assert reply["content"]["status"] == "ok", reply["content"]
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

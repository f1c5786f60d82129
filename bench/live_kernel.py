"""`%tape on` in a real kernel with the panel connected: what recording costs per training step.

Starts a kernel (jupyter_client), loads tapelab.kernel, opens a comm to the ``tapelab`` target
and says hello as the JupyterLab side panel does (so the bridge streams to it), then runs N
training steps of a 2-layer Transformer classifier with AdamW, as one cell looping over them and
as one cell per step, each without recording and under ``%tape on``. The client drains every
message, as a frontend would. Prints ms per step: the kernel process's CPU time for the step
(mean; all its threads, so a loaded machine does not count) and the client's wall time per
step (cells: run, hooks, messages), and the overhead. Run by hand (not a test); set
OPENBLAS_NUM_THREADS=1 on a shared machine (BLAS threads spinning inflate CPU time):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/live_kernel.py [--steps 20] [--warmup 3] [--d-model 64]
"""
from __future__ import annotations

import argparse
import statistics
import time
import uuid

from jupyter_client import KernelManager

SETUP = """
%load_ext tapelab.kernel
import time
import tapelab as torch
from tapelab import nn
torch.manual_seed(0)
class Classifier(nn.Module):
    def __init__(self, d, heads, classes=10):
        super().__init__()
        self.embed = nn.Linear(16, d)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(d, classes)
    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(1))
model = Classifier({d}, {heads})
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
xb, yb = torch.randn({batch}, {seq}, 16), torch.randint(0, 10, ({batch},))
_times = []
"""

STEP = """
_t0 = time.process_time()
opt.zero_grad()
loss = nn.functional.cross_entropy(model(xb), yb)
loss.backward()
opt.step()
_times.append(time.process_time() - _t0)
"""


class Client:
    """A kernel client that waits for each cell and keeps every message the kernel sends."""

    def __init__(self):
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.comm_msgs = 0
        self.comm_bytes = 0
        self.text = ""

    def run(self, code: str, timeout: float = 120.0) -> dict:
        msg_id = self.kc.execute(code, store_history=False)
        result = {}
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            kind = msg["msg_type"]
            if kind == "comm_msg":
                self.comm_msgs += 1
                self.comm_bytes += len(str(msg["content"]))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if kind == "error":
                raise RuntimeError("\n".join(msg["content"]["traceback"]))
            if kind == "execute_result":
                result = msg["content"]["data"]
            if kind == "stream":
                self.text += msg["content"]["text"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                return result

    def open_panel_comm(self) -> None:
        """What the side panel does: open a comm to the ``tapelab`` target and say hello."""
        cid = uuid.uuid4().hex
        s = self.kc.session
        self.kc.shell_channel.send(s.msg("comm_open", {"comm_id": cid, "target_name": "tapelab", "data": {}}))
        self.kc.shell_channel.send(s.msg("comm_msg", {"comm_id": cid, "data": {"type": "hello"}}))
        self.run("pass")

    def value(self, expr: str):
        return eval(self.run(expr)["text/plain"])

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def measure(c: Client, steps: int, warmup: int, loop: bool) -> tuple[float, float]:
    """(mean CPU ms per step in the kernel process, wall ms per step at the client): ``loop`` runs the
    steps in one cell (a training loop), else one cell per step."""
    body = "for _ in range(%d):\n" + "".join("    " + line + "\n" for line in STEP.strip().splitlines())
    if loop:
        c.run(body % warmup)
    else:
        for _ in range(warmup):
            c.run(STEP)
    c.run("_times.clear()")
    t0 = time.perf_counter()
    if loop:
        c.run(body % steps)
    else:
        for _ in range(steps):
            c.run(STEP)
    wall = (time.perf_counter() - t0) / steps
    return statistics.fmean(c.value("_times")) * 1e3, wall * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=32)
    args = ap.parse_args()
    c = Client()
    try:
        c.run(SETUP.format(d=args.d_model, heads=args.heads, batch=args.batch, seq=args.seq))
        c.open_panel_comm()
        print(f"2-layer Transformer classifier (d={args.d_model}, heads={args.heads}, batch {args.batch}x{args.seq}), "
              f"AdamW, {args.steps} steps; ms per step")
        print(f"{'':34s}{'kernel CPU':>16s}{'client wall':>16s}")
        for loop in (True, False):
            how = f"one cell, {args.steps} steps" if loop else "one cell per step"
            off = measure(c, args.steps, args.warmup, loop)
            c.run("%tape on")
            msgs0 = c.comm_msgs
            on = measure(c, args.steps, args.warmup, loop)
            c.run("%tape off")
            per_step = (c.comm_msgs - msgs0) / (args.steps + args.warmup)
            print(f"{how + ', plain':34s}{off[0]:13.2f} ms{off[1]:13.2f} ms")
            print(f"{how + ', %tape on + panel':34s}{on[0]:13.2f} ms{on[1]:13.2f} ms")
            print(f"{'  overhead':34s}{(on[0] / off[0] - 1) * 100:+14.1f} %{(on[1] / off[1] - 1) * 100:+14.1f} %"
                  f"   ({per_step:.1f} panel messages per step)")
        c.run("%tape status")
        print(f"{c.comm_bytes / 1024:.0f} KB sent to the panel in all; {c.text.strip()}")
    finally:
        c.close()


if __name__ == "__main__":
    main()

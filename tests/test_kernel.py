"""A real ipykernel driven with jupyter_client: the magics, the comm messages the bridge sends
while a cell trains a small model, behaviour with no frontend, the kernelspec, and a restart."""
from __future__ import annotations

import json
import re
import sys
import time
import uuid

import pytest
from kernel_session import comm_data, run, stdout, tapelab_kernel

pytest.importorskip("ipykernel")
jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("anywidget")

TRAIN = """
import tapelab as torch
from tapelab import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 4)
for step in range({steps}):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print("loss", round(loss.item(), 4))
"""


_PANELS: list = []     # (client, comm id) of the panels a test opened: closed after it (order-free tests)


def open_panel(kc, close: bool = True) -> str:
    """Act as the JupyterLab panel: open a comm to target "tapelab" (closed when the test ends)."""
    comm_id = uuid.uuid4().hex
    msg = kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "tapelab", "data": {"type": "hello"}})
    kc.shell_channel.send(msg)
    if close:
        _PANELS.append((kc, comm_id))
    return comm_id


@pytest.fixture(autouse=True)
def _close_panels():
    yield
    while _PANELS:
        kc, comm_id = _PANELS.pop()
        kc.shell_channel.send(kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))


def panel_send(kc, comm_id, data):
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))


@pytest.fixture(scope="module")
def kernel():
    with tapelab_kernel() as km_kc:
        yield km_kc


def test_no_frontend_cells_run_and_nothing_streams(kernel):
    km, kc = kernel
    # the comm the bridge opened at load time counts as listened to for a while (a frontend's
    # answer waits behind queued cells); with no answer, streaming stops by itself
    run(kc, "import tapelab.kernel.bridge as b; b.PROVISIONAL_S = 0.3")
    time.sleep(0.5)
    reply, msgs = run(kc, "%tape status")       # earlier tests (any order) may have sent messages
    sent_before = re.search(r"(\d+) messages sent", stdout(msgs)).group(1)
    reply, msgs = run(kc, "%tape on\n")
    assert reply["content"]["status"] == "ok"
    reply, msgs = run(kc, TRAIN.format(steps=3))
    assert reply["content"]["status"] == "ok", reply["content"]
    assert "loss" in stdout(msgs)
    assert not [m for m in msgs if m["msg_type"] in ("comm_msg", "comm_open")]
    reply, msgs = run(kc, "%tape status")
    assert "panel not connected" in stdout(msgs) and f" {sent_before} messages sent" in stdout(msgs)
    run(kc, "%tape off")


def test_no_answer_yet_streams_provisionally(kernel):
    """Right after loading (a "run all": the frontend's hello is queued behind the cells), the
    bridge streams on the comm it opened; a close from the frontend stops it."""
    km, kc = kernel
    reply, msgs = run(kc, "import tapelab.kernel.bridge as b; b.PROVISIONAL_S = 60\n%reload_ext tapelab.kernel")
    opened = [m for m in msgs if m["msg_type"] == "comm_open" and m["content"]["target_name"] == "tapelab"]
    assert opened, [m["msg_type"] for m in msgs]
    comm_id = opened[0]["content"]["comm_id"]
    reply, msgs = run(kc, "%tape on")
    reply, msgs = run(kc, TRAIN.format(steps=1))
    kinds = [d["type"] for d in comm_data(msgs, comm_id)]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    kc.shell_channel.send(kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))
    reply, msgs = run(kc, TRAIN.format(steps=1))
    assert not comm_data(msgs, comm_id)
    run(kc, "%tape off")


def test_tape_cell_magic_shows_a_tape_view(kernel):
    km, kc = kernel
    reply, msgs = run(kc, "%%tape mlp\n" + TRAIN.format(steps=1))
    assert reply["content"]["status"] == "ok", reply["content"]
    assert "loss" in stdout(msgs)
    displays = [m for m in msgs if m["msg_type"] in ("display_data", "update_display_data")]
    assert displays and all("application/vnd.jupyter.widget-view+json" in m["content"]["data"] for m in displays)
    final = [m for m in displays if m["msg_type"] == "update_display_data"][-1]["content"]["data"]
    graph = final["application/vnd.tapelab.graph+json"]
    assert graph["schema"] == "tapelab.graph" and graph["version"] == 1
    ops = [n["op"] for n in graph["nodes"] if n["kind"] == "forward"]
    assert "linear" in ops and "relu" in ops
    assert {g["path"] for g in graph["groups"]} >= {"0", "1", "2"}
    assert any(n["kind"] == "backward" for n in graph["nodes"])
    # the widget got its deltas as custom messages on its own comm
    custom = [m for m in msgs if m["msg_type"] == "comm_msg"
              and m["content"]["data"].get("method") == "custom"]
    assert any(m["content"]["data"]["content"].get("type") == "delta" for m in custom)
    reply, msgs = run(kc, "print(type(_tape).__name__, len(_tape.graph()['nodes']))")
    assert stdout(msgs).startswith("LiveTape")


def test_rich_display_of_tensor_and_grad_fn(kernel):
    km, kc = kernel
    reply, msgs = run(kc, "import tapelab as torch\nw = torch.ones(3, 4, requires_grad=True)\nw")
    data = next(m for m in msgs if m["msg_type"] == "execute_result")["content"]["data"]
    assert "(3, 4)" in data["text/html"] and "float32" in data["text/html"]
    reply, msgs = run(kc, "(w * 2).sum().grad_fn")
    data = next(m for m in msgs if m["msg_type"] == "execute_result")["content"]["data"]
    g = data["application/vnd.tapelab.graph+json"]
    assert [n["op"] for n in g["nodes"]][:2] == ["SumBackward0", "MulBackward0"]


def test_bridge_streams_deltas_to_a_panel_while_a_cell_trains(kernel):
    km, kc = kernel
    comm_id = open_panel(kc)
    reply, msgs = run(kc, "%tape on")
    hello = comm_data(msgs, comm_id)
    assert hello and hello[0]["type"] == "hello"
    code = TRAIN.format(steps=40).replace("opt.step()", "opt.step(); time.sleep(0.01)")
    reply, msgs = run(kc, "import time\n" + code)
    assert reply["content"]["status"] == "ok", reply["content"]
    got = [(m["_t"], m["content"]["data"]) for m in msgs
           if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]
    kinds = [d["type"] for _, d in got]
    assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("delta") >= 3, kinds
    deltas = [(t, d) for t, d in got if d["type"] == "delta"]
    # deltas arrive while the cell runs, not all at the end: before its printed loss (message order,
    # not clocks; the rate limit itself is test_live_tape_sends_at_most_rate_deltas_a_second)
    first = next(i for i, m in enumerate(msgs) if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
                 and m["content"]["data"]["type"] == "delta")
    printed = next(i for i, m in enumerate(msgs) if m["msg_type"] == "stream" and "loss" in m["content"]["text"])
    assert first < printed
    nodes = [n for _, d in deltas for n in d["nodes"]]
    assert {n["module"] for n in nodes if n["kind"] == "forward"} >= {"0", "1", "2", ""}
    assert any(n["kind"] == "backward" for n in nodes)
    ids = [n["id"] for n in nodes]
    assert len(ids) == len(set(ids)), "deltas repeat nodes"
    end = got[-1][1]
    assert end["meta"]["forward"] > 0 and end["meta"]["backward"] > 0
    # the 40 identical steps fold into the first: one step's nodes, counted 40 times
    assert (end["meta"]["steps"], end["meta"]["folded"]) == (40, 39)
    # a big tape is capped: 40 steps x ~40 records stays under the cap here, so counts match
    assert len(nodes) <= 5000
    # the panel's commands: toggle recording off, clear
    panel_send(kc, comm_id, {"type": "set", "recording": False})
    reply, msgs = run(kc, "%tape status")
    assert "streaming off" in stdout(msgs)
    assert {"type": "state", "recording": False} in comm_data(msgs, comm_id)
    reply, msgs = run(kc, "x = 1 + 1")   # recording off: nothing streams
    assert not comm_data(msgs, comm_id)


def test_tape_clear_forgets_the_tape_and_clears_the_panel(kernel):
    km, kc = kernel
    comm_id = open_panel(kc)
    run(kc, "%tape off")                        # (else every cell's tape becomes _tape)
    reply, msgs = run(kc, "%%tape kept\n" + TRAIN.format(steps=1))
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, msgs = run(kc, "%tape clear")
    assert {"type": "clear"} in comm_data(msgs, comm_id)
    reply, msgs = run(kc, "print('_tape' in globals())")
    assert stdout(msgs).strip() == "False"


def test_live_tape_sends_at_most_rate_deltas_a_second(monkeypatch):
    """The bridge's throttle, on a clock the test moves: no delta while the clock stands still
    (after the first), one per interval when it moves; the final flush sends what is left."""
    import tapelab as T
    from tapelab.widgets import live

    now = [100.0]
    monkeypatch.setattr(live.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(live.time, "thread_time", lambda: 0.0)   # (recording's CPU share: none here)
    sent: list = []
    w = T.ones(3, requires_grad=True)
    with live.LiveTape([sent.append], rate=10) as rec:
        for _ in range(20):
            (w * 2).sum().backward()
        assert len(sent) == 1                     # the first op's delta; the clock has not moved
        for k in range(5):
            now[0] += 0.25                        # past one interval per step; each step has new nodes
            (T.ones(k + 4, requires_grad=True) * 3).sum().backward()
        assert len(sent) == 6
    assert len(sent) == rec.sent <= 7 and sent[-1]["meta"]["steps"] == 25


def test_huge_tape_is_capped(kernel):
    km, kc = kernel
    comm_id = open_panel(kc)
    run(kc, "import tapelab.kernel.bridge as b; b.MAX_NODES = 300\n%tape on")
    # every step a different batch size: no step repeats the first, so none folds
    reply, msgs = run(kc, TRAIN.format(steps=45).replace("model(x) - y", "model(x[:step + 2]) - y[:step + 2]"))
    data = comm_data(msgs, comm_id)
    nodes = sum(len(d["nodes"]) for d in data if d["type"] == "delta")
    assert nodes == 300, nodes
    assert data[-1]["meta"]["folded"] == 0
    assert data[-1]["type"] == "end" and data[-1]["meta"]["truncated"] and data[-1]["meta"]["total"] > 1000
    run(kc, "b.MAX_NODES = 5000\n%tape off")


def test_kernelspec_loads_the_extension_and_survives_restart(tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager
    import subprocess

    out = subprocess.run([sys.executable, "-m", "tapelab.kernel", "install", "--prefix", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "tapelab"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["display_name"] == "Python 3 (tapelab)" and "--ext=tapelab.kernel" in spec["argv"]
    ksm = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)])
    km = jupyter_client.KernelManager(kernel_name="tapelab", kernel_spec_manager=ksm)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply, msgs = run(kc, "%tape status")     # no %load_ext: the kernelspec loaded it
        assert "tape streaming off" in stdout(msgs), msgs
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=60)
        comm_id = open_panel(kc, close=False)      # what the panel does after a restart (its kernel ends here)
        reply, msgs = run(kc, "%tape on")
        assert comm_data(msgs, comm_id)[0]["type"] == "hello"
        reply, msgs = run(kc, TRAIN.format(steps=1))
        kinds = [d["type"] for d in comm_data(msgs, comm_id)]
        assert kinds[0] == "begin" and "delta" in kinds and kinds[-1] == "end"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

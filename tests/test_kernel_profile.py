"""``%%profile`` through a real ipykernel (jupyter_client): the cell's ProfileView output, the
profile streamed to a panel on the bridge's comm (also for a plain ``with profile():``), and a
Monitor whose points reach the frontend while the cell still runs."""
from __future__ import annotations

import uuid

import pytest
from kernel_session import comm_data, run, stdout, tapelab_kernel

pytest.importorskip("ipykernel")
jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("anywidget")

PROFILE_MIME = "application/vnd.tapelab.profile+json"

SETUP = """
import tapelab as torch
from tapelab import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 8), torch.randn(32, 4)
def step():
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss
"""


@pytest.fixture(scope="module")
def kernel():
    with tapelab_kernel(SETUP) as km_kc:
        yield km_kc


def test_profile_magic_shows_a_profile_view(kernel):
    km, kc = kernel
    reply, msgs = run(kc, "%%profile --table --rows 12 train step\nwith torch.profiler.record_function('train_step'):\n"
                          "    loss = step()\nprint('loss', round(loss.item(), 4))")
    assert reply["content"]["status"] == "ok", reply["content"]
    out = stdout(msgs)
    assert "loss" in out and "Self CPU" in out and "train_step" in out
    shown = [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"]
    assert shown and "application/vnd.jupyter.widget-view+json" in shown[-1]
    p = shown[-1][PROFILE_MIME]
    assert p["title"] == "train step" and p["version"] == 1
    names = {e["name"] for e in p["events"]}
    assert {"aten::linear", "aten::relu", "train_step"} <= names and any(e["kind"] == "backward" for e in p["events"])
    assert {t["group"] for t in p["tracks"]} == {"ranges", "forward", "backward", "modules"}
    assert p["memory"] and p["peak_bytes"] > 0 and {"0", "1", "2"} <= {c["path"] for c in p["module_tree"]["children"]}
    assert "train step" in shown[-1]["text/html"]
    reply, msgs = run(kc, "print(type(_prof).__name__, len(_prof.events()) > 10)")
    assert stdout(msgs).strip() == "profile True"
    reply, msgs = run(kc, "%%profile --bogus\npass")
    assert "usage: %%profile" in stdout(msgs)


def test_profiles_stream_to_the_panel(kernel):
    km, kc = kernel
    comm_id = uuid.uuid4().hex
    kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "tapelab",
                                                       "data": {"type": "hello"}}))
    reply, msgs = run(kc, "%%profile panel step\nstep()")
    assert reply["content"]["status"] == "ok"
    profiles = [d for d in comm_data(msgs, comm_id) if d.get("type") == "profile"]
    assert len(profiles) == 1 and profiles[0]["profile"]["title"] == "panel step"
    assert any(e["name"] == "aten::linear" for e in profiles[0]["profile"]["events"])
    # a plain `with profile()` in a cell reaches the panel too
    reply, msgs = run(kc, "with torch.profiler.profile() as p:\n    step()")
    profiles = [d for d in comm_data(msgs, comm_id) if d.get("type") == "profile"]
    assert len(profiles) == 1 and profiles[0]["profile"]["totals"]["ops"] > 5
    reply, msgs = run(kc, "from tapelab.kernel import get_bridge; print(get_bridge().profiles.sent)")
    assert int(stdout(msgs)) >= 2
    kc.shell_channel.send(kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))


def test_monitor_points_arrive_while_the_cell_runs(kernel):
    km, kc = kernel
    reply, msgs = run(kc, "from tapelab.widgets import Monitor\nimport time\nmon = Monitor(title='mlp', rate=20)\n"
                          "display(mon)\nfor i in range(40):\n    mon.log(i, loss=step().item())\n    time.sleep(0.01)\n"
                          "time.sleep(0.3)\nprint('done')")
    assert reply["content"]["status"] == "ok", reply["content"]
    done = next(i for i, m in enumerate(msgs) if m["msg_type"] == "stream" and "done" in m["content"]["text"])
    custom = [i for i, m in enumerate(msgs) if m["msg_type"] == "comm_msg"
              and m["content"]["data"].get("method") == "custom" and m["content"]["data"]["content"].get("type") == "points"]
    assert custom and custom[0] < done              # points arrive while the cell runs (message order, not clocks)
    updates = [m for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"
               and "data" in m["content"]["data"].get("state", {})]
    final = updates[-1]["content"]["data"]["state"]["data"]
    assert final["steps"] == list(range(40)) and len(final["series"]["loss"]) == 40


def test_profile_flags_reach_the_profiler(kernel):
    """``--no-memory``, ``--no-shapes`` and ``--stack`` set the profiler's options, and its events show it."""
    km, kc = kernel
    probe = ("m = [e for e in {p}.events() if e.name == 'aten::linear'][0]\n"
             "print({p}.record_shapes, {p}.profile_memory, {p}.with_stack, bool(m.input_shapes), bool(m.stack), "
             "m.cpu_memory_usage > 0)")
    reply, msgs = run(kc, "%%profile --no-memory --no-shapes --stack -o flagged flags\nstep()")
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, msgs = run(kc, probe.format(p="flagged") + "\nprint(flagged is _prof)")
    assert stdout(msgs).split() == ["False", "False", "True", "False", "True", "False", "True"]
    run(kc, "%%profile plain\nstep()")
    reply, msgs = run(kc, probe.format(p="_prof"))
    assert stdout(msgs).split() == ["True", "True", "False", "True", "False", "True"]


def test_debug_backward_retain_graph(kernel):
    """``%debug_backward --retain-graph``: after running the paused pass to the end, the graph can
    run backward again (without the flag its buffers are freed, as PyTorch's)."""
    km, kc = kernel
    reply, msgs = run(kc, "w = torch.ones(3, requires_grad=True)\nloss = (w.exp() * w).sum()\n"
                          "%debug_backward --retain-graph -o dbg loss")
    assert reply["content"]["status"] == "ok", reply["content"]
    reply, msgs = run(kc, "dbg.finish()\ng1 = w.grad.clone()\nloss.backward()\nprint((w.grad / g1).tolist())")
    assert reply["content"]["status"] == "ok", reply["content"]
    assert stdout(msgs).strip() == "[2.0, 2.0, 2.0]"
    reply, msgs = run(kc, "w.grad = None\nloss = (w.exp() * w).sum()\n%debug_backward -o dbg2 loss\n"
                          "dbg2.finish()\ntry:\n    loss.backward()\nexcept RuntimeError as e:\n    print('freed', 'second time' in str(e))")
    assert stdout(msgs).strip() == "freed True"

"""tapelab.profiler: counts against the tape, nesting, schedules against torch.profiler,
exports, bounded buffers, memory and FLOP estimates, device time from scripted CUDA events.
No timing assertions on real clocks."""
from __future__ import annotations

import collections
import gc
import gzip
import json
import os
import warnings
import weakref

import numpy as np
import pytest
import torch as pt

import tapelab as torch
from tapelab import events, nn
from tapelab._backend import simulated_cuda
from tapelab.dispatch import STATE
from tapelab.profiler import (ProfileReady, ProfilerAction, ProfilerActivity, profile, record_function,
                              schedule, tensorboard_trace_handler)
from tapelab.profiler import names, recorder
from tapelab.profiler.export import chrome_trace
from tapelab.profiler.recorder import RECORDING

CPU_CUDA = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def make_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


def data():
    rng = np.random.default_rng(0)
    return (torch.tensor(rng.standard_normal((4, 8)).astype(np.float32)),
            torch.tensor(rng.standard_normal((4, 1)).astype(np.float32)))


def ops_named(prof, name):
    return [e for e in prof.events() if e.name == name]


def _outermost(n) -> list:
    """The profiler's outermost events for a tape record ``n`` (their PyTorch names, in place or not)."""
    if n.op.endswith("Backward0") or n.op == "AccumulateGrad":
        return [names.node_names(n.op)[0]]
    return [c[0].rstrip("_") for c in names.calls(n.op, n.input_shapes) if c[1] == 0]


def test_mlp_step_counts_match_the_tape():
    model = make_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()
    train_step(model, opt, x, y)
    with torch.tape() as t, profile() as prof:
        train_step(model, opt, x, y)
    want = collections.Counter(name for n in t.nodes for name in _outermost(n))
    # each tape record is one outermost event (depth 0) of its PyTorch call tree; factories are not on the tape
    got = collections.Counter(e.name.rstrip("_") for e in prof.events()
                              if e.depth == 0 and (e.kind == "backward" or e.kind == "op" and e.seq >= 0))
    assert got == want
    rows = {r.key: r for r in prof.key_averages()}
    for name in ("aten::linear", "aten::addmm", "aten::t", "aten::mm", "aten::relu", "aten::mean", "AddmmBackward0",
                 "ReluBackward0", "torch::autograd::AccumulateGrad", "aten::add_", "Optimizer.step#SGD.step",
                 "autograd::engine::evaluate_function: AddmmBackward0", "Optimizer.zero_grad#SGD.zero_grad"):
        assert name in rows, name
    # forward: one linear (t, addmm) per layer; backward: each AddmmBackward0 runs t, mm, t, mm, sum
    assert rows["aten::linear"].count == 2 and rows["aten::addmm"].count == 2 and rows["aten::mm"].count == 4
    assert rows["aten::relu"].count == 1 and rows["ReluBackward0"].count == 1
    assert rows["torch::autograd::AccumulateGrad"].count == 4 and rows["aten::add_"].count == 4
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=100)
    header = table.splitlines()[1]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert col in header
    assert "Input Shapes" not in header
    assert table.splitlines()[-1].startswith("Self CPU time total: ")
    for name in ("aten::linear", "aten::relu", "AddmmBackward0"):
        assert any(line.split()[0] == name for line in table.splitlines()[3:]), name
    assert len(prof.key_averages().table(row_limit=3).splitlines()) == 3 + 3 + 2


def test_backward_ops_are_attributed_to_their_nodes():
    model = make_mlp()
    x, y = data()
    with profile() as prof:
        ((model(x) - y) ** 2).mean().backward()
    evs = prof.events()
    fwd_mm = [e for e in evs if e.name == "aten::linear" and e.phase == "forward"]
    bwd_mm = [e for e in evs if e.name == "aten::mm" and e.phase == "backward"]
    assert len(fwd_mm) == 2 and len(bwd_mm) == 4
    for e in bwd_mm:
        assert e.parent is not None and e.parent.name == "AddmmBackward0"
    for e in evs:
        if e.kind == "backward":
            assert e.phase == "backward" and e.seq >= 0 or "torch::autograd::AccumulateGrad" in e.name
            assert sum(c.duration_ns for c in e.children) <= e.duration_ns


def test_record_function_nests_and_self_le_total():
    model = make_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data()

    @record_function("decorated")
    def fwd():
        return model(x)

    with profile() as prof:
        with record_function("outer"):
            with record_function("forward"):
                out = fwd()
            with record_function("backward"):
                ((out - y) ** 2).mean().backward()
            opt.step()
        fwd()
    evs = prof.events()
    by = collections.defaultdict(list)
    for e in evs:
        by[e.name].append(e)
    outer, forward, backward = by["outer"][0], by["forward"][0], by["backward"][0]
    assert forward.parent is outer and backward.parent is outer
    assert len(by["decorated"]) == 2
    assert by["decorated"][0].parent is forward and by["decorated"][1].parent is None
    for e in evs:
        assert 0 <= e.self_ns <= e.duration_ns
        if e.kind != "module":
            kids = sum(c.duration_ns for c in e.children)
            assert e.self_ns == max(e.duration_ns - kids, 0)
            for c in e.children:
                assert e.start_ns <= c.start_ns and c.end_ns <= e.end_ns and c.tid == e.tid
    assert all(e.parent is not None for e in evs if e.kind == "op" and e.phase == "backward")
    # every op of the first forward sits under the decorated range
    def under(e, name):
        while e is not None:
            if e.name == name:
                return True
            e = e.parent
        return False
    assert sum(under(e, "decorated") and e.kind == "op" for e in evs) == 2 * sum(
        under(e, "forward") and e.kind == "op" for e in evs)
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["outer"].self_cpu_time_total <= rows["outer"].cpu_time_total
    assert rows["decorated"].count == 2
    assert rows["outer"].is_user_annotation


def test_recursive_decorator_ranges_nest():
    @record_function("fib")
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    with profile() as prof:
        fib(4)
    ranges = [e for e in prof.events() if e.name == "fib"]
    assert len(ranges) == 9
    assert sum(e.parent is None for e in ranges) == 1
    assert max(_depth(e) for e in ranges) == 3


def _depth(e):
    d = 0
    while e.parent is not None:
        e, d = e.parent, d + 1
    return d


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.block(x) + x)


def test_with_modules_groups_by_module_path():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 8)
    with profile(with_modules=True) as prof:
        for _ in range(2):
            net(x).sum().backward()
    evs = prof.events()
    spans = collections.Counter(e.name for e in evs if e.kind == "module")
    assert spans == {"nn.Module: <root>": 2, "nn.Module: block": 2, "nn.Module: block.fc": 2,
                     "nn.Module: head": 2}
    mods = [e for e in evs if e.kind == "module"]
    for m in mods:
        if m.module == "block.fc":
            assert m.parent.module == "block" and m.parent.parent.module == ""
        inside = [e for e in evs if e.kind == "op" and e.depth == 0 and e.phase == "forward"
                  and m.start_ns <= e.start_ns < m.end_ns
                  and (e.module == m.module or e.module.startswith(m.module + ".") or m.module == "")]
        assert inside and all(e.end_ns <= m.end_ns for e in inside)
        assert sum(e.duration_ns for e in inside) <= m.duration_ns
    fwd = {e.module for e in evs if e.kind == "op" and e.phase == "forward"}
    assert {"block.fc", "block", "head", ""} <= fwd
    # backward nodes carry the module of the forward op they differentiate
    bwd = collections.Counter((e.module, e.name) for e in evs if e.kind == "backward")
    assert bwd[("block", "ReluBackward0")] == 2
    assert bwd[("head", "AddmmBackward0")] == 2
    rows = {r.key: r for r in prof.key_averages(group_by_module=True)}
    assert rows["nn.Module: block.fc"].count == 2
    # a module's rows hold its forward ops and the ops its backward nodes ran
    assert rows["block.fc: aten::linear"].count == 2 and rows["block.fc: aten::mm"].count == 4
    assert rows["head: aten::linear"].count == 2 and rows["head: aten::mm"].count == 4
    assert rows["block.fc: aten::linear"].phases == {"forward"}
    assert rows["block.fc: aten::mm"].phases == {"backward"}
    assert rows["block: aten::relu"].count == 2
    assert "nn.Module: block" not in {r.key for r in prof.key_averages()}
    # without with_modules no module is kept
    with profile() as prof2:
        net(x)
    assert all(e.module == "" and e.kind != "module" for e in prof2.events())


def test_record_shapes_groups_by_input_shape_and_keeps_no_tensor():
    model = make_mlp()
    x, y = data()
    with profile(record_shapes=True, profile_memory=True, with_stack=True, with_flops=True) as prof:
        h = x * 3.0
        ref = weakref.ref(h)
        ((model(h) - y) ** 2).mean().backward()
    del h
    gc.collect()
    assert ref() is None, "the profile kept a tensor alive"
    rows = prof.key_averages(group_by_input_shape=True)
    mm = {str(r.input_shapes): r.count for r in rows if r.key == "aten::linear"}
    assert mm["[[4, 8], [16, 8], [16]]"] == 1 and mm["[[4, 16], [1, 16], [1]]"] == 1
    assert sum(mm.values()) == 2
    table = rows.table(sort_by="self_cpu_time_total")
    assert "Input Shapes" in table.splitlines()[1] and "[[4, 8], [16, 8], [16]]" in table
    assert "Source Location" not in table
    by_stack = prof.key_averages(group_by_stack_n=3)
    assert sum(r.count for r in by_stack if r.key == "aten::linear") == 2
    table = by_stack.table(sort_by="cpu_time_total")
    assert "Source Location" in table.splitlines()[1] and "test_record_shapes_groups" in table
    # no tensor or array anywhere in the records
    for e in prof.events():
        assert all(type(s) is tuple and all(type(d) is int for d in s) for s in e.input_shapes)
        assert all(type(d) is int for d in e.shape) and all(type(s) is str for s in e.stack)


def test_flops_estimates_match_torch():
    import tapelab.nn.functional as F
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    xi, w = rng.standard_normal((2, 3, 9, 9)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    with profile(with_flops=True) as prof:
        torch.tensor(a) @ torch.tensor(b)
        F.conv2d(torch.tensor(xi), torch.tensor(w), stride=2)
    with pt.profiler.profile(activities=[pt.profiler.ProfilerActivity.CPU], with_flops=True) as ref:
        pt.tensor(a) @ pt.tensor(b)
        pt.nn.functional.conv2d(pt.tensor(xi), pt.tensor(w), stride=2)
    want = {e.key: e.flops for e in ref.key_averages() if e.flops}
    got = {e.key: e.flops for e in prof.key_averages()}
    assert got["aten::mm"] == want["aten::mm"] == 2 * 5 * 3 * 7 and got["aten::matmul"] == 0
    assert got["aten::conv2d"] == want["aten::conv2d"] and got["aten::convolution"] == 0
    assert "Total " in prof.key_averages().table().splitlines()[1]


def test_memory_estimate_follows_output_blocks():
    x = torch.ones(100)
    with profile(profile_memory=True) as prof:
        y = x * 2            # +400
        z = y.reshape(10, 10)  # a view: nothing new
        w = y + 1            # +400
        del y                # z still uses the block
        del z                # -400
        del w                # -400
    mem = [(m.name, m.bytes) for m in prof.trace.memory]
    assert mem == [("aten::mul", 400), ("aten::add", 400), ("aten::mul", -400), ("aten::add", -400)]
    assert [m.allocated for m in prof.trace.memory] == [400, 800, 400, 0]
    assert prof.trace.peak_bytes == 800
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::mul"].self_cpu_memory_usage == 400 and rows["aten::view"].self_cpu_memory_usage == 0
    table = prof.key_averages().table()
    assert "CPU Mem" in table and "Self CPU Mem" in table and "Peak memory" in table


def test_memory_blocks_alive_after_the_profile_are_not_tracked():
    with profile(profile_memory=True) as prof:
        y = torch.ones(10) * 2
    n = len(prof.trace.memory)
    del y
    gc.collect()
    assert len(prof.trace.memory) == n


def test_chrome_trace_is_well_formed(tmp_path):
    model = make_mlp()
    x, y = data()
    with profile(record_shapes=True, profile_memory=True, with_modules=True, with_flops=True) as prof:
        with record_function("train_step"):
            ((model(x) - y) ** 2).mean().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    evs = doc["traceEvents"]
    complete = [e for e in evs if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0
    cats = collections.Counter(e["cat"] for e in complete)
    assert cats["cpu_op"] and cats["backward_op"] and cats["backward"] and cats["module"]
    assert cats["user_annotation"] == 1
    assert any(e["args"].get("Input Dims") == [[4, 8], [16, 8], [16]] for e in complete if e["name"] == "aten::linear")
    # spans on one lane nest (Perfetto requires it): each either contains or misses the next
    for tid in {e["tid"] for e in complete}:
        lane = sorted((e for e in complete if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in lane:
            end = e["ts"] + e["dur"]
            while stack and e["ts"] >= stack[-1] - 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, e
            stack.append(end)
    step = next(e for e in complete if e["name"] == "train_step")
    inside = [e for e in complete if e["tid"] == step["tid"] and e is not step]
    assert all(step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-3 for e in inside)
    assert any(e["ph"] == "C" for e in evs)
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in evs)
    gz = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(gz))
    assert json.loads(gzip.open(gz).read())["traceEvents"] == evs


def test_to_dict_is_the_widget_model():
    model = make_mlp()
    x, y = data()
    with profile(profile_memory=True, with_modules=True) as prof:
        with record_function("step"):
            ((model(x) - y) ** 2).mean().backward()
    d = json.loads(json.dumps(prof.to_dict()))
    assert d["version"] == 1 and d["kind"] == "tapelab.profile"
    ids = {e["id"] for e in d["events"]}
    for e in d["events"]:
        assert e["parent"] is None or e["parent"] in ids
        assert 0 <= e["self_us"] <= e["dur_us"] + 1e-9
        assert e["kind"] in {"op", "backward", "range", "step", "module"}
    assert {r["name"] for r in d["averages"]} >= {"aten::linear", "step", "AddmmBackward0"}
    assert {r["name"] for r in d["modules"]} == {"nn.Module: <root>", "nn.Module: 0", "nn.Module: 1",
                                                 "nn.Module: 2"}
    assert d["peak_bytes"] > 0 and d["memory"] and d["dropped"]["total"] == 0


def test_schedule_matches_torch():
    for kw in (dict(wait=1, warmup=1, active=2), dict(wait=1, warmup=1, active=2, repeat=2),
               dict(wait=0, warmup=2, active=1, repeat=3, skip_first=2),
               dict(wait=2, warmup=1, active=3, repeat=1, skip_first=1, skip_first_wait=1)):
        ours, theirs = schedule(**kw), pt.profiler.schedule(**kw)
        assert [ours(i).name for i in range(40)] == [theirs(i).name for i in range(40)], kw


def _run_schedule(lib, prof_mod, kw, steps):
    calls = []
    x = lib.ones(3)
    with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CPU], schedule=prof_mod.schedule(**kw),
                          on_trace_ready=lambda p: calls.append(p.step_num)) as p:
        for _ in range(steps):
            with prof_mod.record_function("work"):
                (x * 2).sum()
            p.step()
    return calls, p


@pytest.mark.parametrize("kw,steps", [
    (dict(wait=1, warmup=1, active=2, repeat=2), 12),
    (dict(wait=1, warmup=1, active=2), 9),       # repeat=0: cycles until the end, a partial cycle saved
    (dict(wait=0, warmup=1, active=1, repeat=3, skip_first=2), 10),
])
@pytest.mark.filterwarnings("ignore:.*clears events at the end of each cycle")
def test_on_trace_ready_calls_match_torch(kw, steps):
    want, _ = _run_schedule(pt, pt.profiler, kw, steps)
    ready = []
    with events.subscribe("profile_ready", ready.append):
        got, prof = _run_schedule(torch, torch.profiler, kw, steps)
    assert got == want
    assert len(ready) == len(got) and all(isinstance(r, ProfileReady) for r in ready)
    assert [r.step_num for r in ready] == got


def test_schedule_records_only_active_steps():
    seen = []

    def on_ready(p):
        names = sorted(e.name for e in p.events() if e.kind == "step")
        work = sum(e.name == "work" for e in p.events())
        seen.append((names, work, p.key_averages()))

    slow = []
    x = torch.ones(3)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=on_ready) as p:
        for _ in range(6):
            slow.append(STATE.slow)
            with record_function("work"):
                (x * 2).sum()
            p.step()
    assert slow == [False, False, True, True, False, False]
    assert seen[0][0] == ["ProfilerStep#2", "ProfilerStep#3"] and seen[0][1] == 2
    rows = {r.key: r.count for r in seen[0][2]}
    assert rows["aten::mul"] == 2 and rows["ProfilerStep#2"] == 1


def test_acc_events_keeps_events_across_cycles():
    x = torch.ones(3)
    counts = []
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=3), acc_events=True,
                 on_trace_ready=lambda p: counts.append(sum(e.name == "aten::mul" for e in p.events()))) as p:
        for _ in range(6):
            x * 2
            p.step()
    assert counts == [1, 2, 3]


def test_bounded_buffer_drops_and_reports(tmp_path):
    x = torch.ones(3)
    with pytest.warns(UserWarning, match="dropped"):
        with profile(max_events=10, profile_memory=True) as prof:
            for _ in range(20):
                x = x + 1
    assert len(prof.trace.events) == 10
    assert prof.trace.dropped["op"] == 10
    assert len(prof.trace.memory) <= 10
    table = prof.key_averages().table()
    assert "WARNING: " in table and "dropped" in table and "max_events=10" in table
    assert prof.to_dict()["dropped"]["total"] >= 10
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    assert any("dropped" in e["name"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "i")


def test_profiling_off_leaves_the_fast_path():
    assert not STATE.slow
    with record_function("no profiler"):
        torch.ones(2) * 2
    assert not STATE.slow and not RECORDING
    with profile() as prof:
        assert STATE.slow
        torch.ones(2) * 2
    assert not STATE.slow and not RECORDING
    assert not events.has_subscribers("op") and not events.has_subscribers("backward_step")
    with pytest.raises(ZeroDivisionError):
        with profile():
            1 / 0
    assert not STATE.slow and not RECORDING
    with profile(schedule=schedule(wait=5, warmup=1, active=1)) as p:
        assert not STATE.slow
        p.step()
    assert not STATE.slow
    assert [e.name for e in prof.events()] == ["aten::ones", "aten::empty", "aten::fill_", "aten::mul"]
    assert not events.has_subscribers("made")


def test_activities_and_api_names():
    import tapelab.profiler as tp
    for name in pt.profiler.__all__:
        if name != "ExecutionTraceObserver":
            assert hasattr(tp, name), name
    assert {a.name for a in ProfilerAction} >= {"NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            torch.ones(2) + 1
    assert [r.key for r in prof.key_averages()] == ["aten::ones", "aten::empty", "aten::fill_", "aten::add"]
    with pytest.raises(RuntimeError, match="didn't finish"):
        profile().key_averages()


def test_exports(tmp_path):
    model = make_mlp()
    x, y = data()
    with profile(profile_memory=True, with_stack=True,
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")) as prof:
        ((model(x) - y) ** 2).mean().backward()
    files = list((tmp_path / "tb").iterdir())
    assert len(files) == 1 and files[0].name.startswith("w.") and files[0].name.endswith(".pt.trace.json")
    json.loads(files[0].read_text())
    prof.export_memory_timeline(str(tmp_path / "mem.json"))
    tl = json.loads((tmp_path / "mem.json").read_text())
    assert len(tl["ts_us"]) == len(tl["allocated"]) and max(tl["allocated"]) == tl["peak_bytes"]
    prof.export_memory_timeline(str(tmp_path / "mem.html"))
    assert "<svg" in (tmp_path / "mem.html").read_text()
    prof.export_stacks(str(tmp_path / "stacks.txt"))
    lines = (tmp_path / "stacks.txt").read_text().split("\n")
    assert any("test_exports" in line and line.split(";")[-1].startswith("aten::linear ") for line in lines)


def test_nested_profiles_each_record_their_scope():
    x = torch.ones(3)
    with profile() as outer:
        x + 1
        with profile() as inner:
            x * 2
        x - 1
    assert [e.name for e in inner.events()] == ["aten::mul"]
    assert sorted(e.name for e in outer.events()) == ["aten::add", "aten::mul", "aten::sub"]
    assert not STATE.slow


# ---------------------------------------------------------------- device time (CUDA activity)
class FakeClock:
    """Stands in for CUDA events: the n-th event made reads ``times[n]`` ms (event 0 is the
    profile's reference), ``elapsed_time`` subtracts, ``synchronize`` is counted."""

    def __init__(self):
        self.times: list = []
        self.made: list = []
        self.syncs = 0

    def event(self, dev):
        e = _FakeEvent(self, self.times[len(self.made)])
        self.made.append(e)
        return e


class _FakeEvent:
    def __init__(self, clock, ms):
        self.clock, self.ms = clock, ms

    def synchronize(self):
        self.clock.syncs += 1

    def elapsed_time(self, end):
        return end.ms - self.ms


@pytest.fixture
def cuda_clock(monkeypatch):
    """The simulated cuda:0 with CUDA activity allowed and scripted event timestamps."""
    clock = FakeClock()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(recorder, "device_event", clock.event)
    with simulated_cuda(0):
        yield clock


def test_device_time_is_the_gap_between_events(cuda_clock):
    cuda_clock.times = [10.0, 11.5, 14.0, 14.25]   # reference, then after matmul, add, sum
    a = torch.ones(4, 4, device="cuda")
    with profile(activities=CPU_CUDA) as prof:
        with record_function("step"):
            (a @ a + 1).sum()
        assert cuda_clock.syncs == 0    # recording never waits for the GPU
    assert cuda_clock.syncs == 1 and len(cuda_clock.made) == 4
    rows = {r.key: r for r in prof.key_averages()}
    for name, us in (("aten::mm", 1500.0), ("aten::add", 2500.0), ("aten::sum", 250.0)):
        assert rows[name].self_device_time_total == pytest.approx(us)
        assert rows[name].device_time_total == rows[name].cuda_time_total == pytest.approx(us)
    assert rows["step"].self_device_time_total == 0
    assert rows["step"].device_time_total == pytest.approx(4250.0)
    lines = prof.key_averages().table(sort_by="self_cuda_time_total").splitlines()
    for col in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"):
        assert col in lines[1]
    assert [line.split()[0] for line in lines[3:7]] == ["aten::add", "aten::mm", "aten::sum", "step"]
    assert lines[-1] == "Self CUDA time total: 4.250ms"
    d = prof.to_dict()                  # the widgets' data model carries them too
    avg = {r["name"]: r for r in d["averages"]}
    assert avg["aten::add"]["self_device_time_total_us"] == 2500.0 and avg["step"]["device_time_total_us"] == 4250.0
    ev = {e["name"]: e for e in d["events"]}
    assert (ev["aten::mm"]["device"], ev["aten::mm"]["device_us"]) == ("cuda:0", 1500.0)
    assert ev["step"]["device_us"] == 0 and ev["step"]["device_total_us"] == 4250.0


def test_chrome_trace_puts_device_spans_on_a_gpu_track(cuda_clock):
    cuda_clock.times = [10.0, 11.5, 14.0, 14.25]
    a = torch.ones(4, 4, device="cuda")
    with profile(activities=CPU_CUDA) as prof:
        (a @ a + 1).sum()
    evs = chrome_trace(prof.trace)["traceEvents"]
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    assert [(k["name"], k["dur"]) for k in kernels] == [("aten::mm", 1500.0), ("aten::add", 2500.0),
                                                       ("aten::sum", 250.0)]
    assert {(k["pid"], k["tid"]) for k in kernels} == {(0, 0)}
    assert {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}} in evs
    cpu = {e["name"]: e for e in evs if e.get("cat") == "cpu_op"}
    assert all(e["pid"] == os.getpid() != 0 for e in cpu.values())
    # device spans follow each other from the reference, which was recorded before the first op
    assert 0 <= kernels[0]["ts"] <= cpu["aten::matmul"]["ts"]
    assert kernels[1]["ts"] == pytest.approx(kernels[0]["ts"] + 1500.0)
    assert kernels[2]["ts"] == pytest.approx(kernels[1]["ts"] + 2500.0)


def test_backward_nodes_are_timed_and_total_their_ops(cuda_clock):
    cuda_clock.times = [float(n * n) for n in range(100)]   # the k-th gap is 2k-1 ms
    x = torch.ones(4, 4, device="cuda", requires_grad=True)
    with profile(activities=CPU_CUDA) as prof:
        (x * 2).sum().backward()
    evs = prof.events()
    timed = sorted((e for e in evs if e.device), key=lambda e: e.device_start_ns)   # in recording order
    # each op and node is timed once, on the event that carries its numbers (a node's inner event);
    # factories (the backward's seed) and the nodes' evaluate_function events are not
    assert len(timed) == len(cuda_clock.made) - 1 and cuda_clock.syncs == 1
    assert set(timed) == {e for e in evs if e.kind == "op" and e.seq >= 0 or e.kind == "backward" and e.depth == 1}
    assert {e.device for e in timed} == {"cuda:0"} and {e.kind for e in timed} == {"op", "backward"}
    assert [e.device_ns for e in timed] == [(2 * k - 1) * 1_000_000 for k in range(1, len(timed) + 1)]
    assert [e.device_start_ns - timed[0].device_start_ns for e in timed] == \
        [k * k * 1_000_000 for k in range(len(timed))]
    nodes = [e for e in evs if e.kind == "backward"]
    assert {e.name for e in nodes} >= {"SumBackward0", "MulBackward0", "torch::autograd::AccumulateGrad"}
    for e in nodes:
        assert e.device_total_ns == e.device_ns + sum(c.device_total_ns for c in e.children)
    assert any(e.children and e.device_total_ns > e.device_ns for e in nodes)


def test_cpu_profiles_and_cpu_ops_make_no_device_events(cuda_clock):
    cuda_clock.times = [0.0, 1.0]
    a, b = torch.ones(4, 4, device="cuda"), torch.ones(4, 4)
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        a @ a
    assert cuda_clock.made == []
    with profile(activities=CPU_CUDA) as cpu_ops:
        b @ b
    assert len(cuda_clock.made) == 1    # the reference only
    for prof in (cpu_only, cpu_ops):
        assert [e.name for e in prof.events()] == ["aten::matmul", "aten::mm"] and not prof.events()[1].device
        assert prof.key_averages()[0].device_time_total == 0
        assert "CUDA" not in prof.key_averages().table()
        evs = chrome_trace(prof.trace)["traceEvents"]
        assert all(e.get("cat") != "kernel" and e["pid"] == os.getpid() for e in evs)


def test_cuda_activity_without_cuda_events_skips_device_time(monkeypatch):
    def no_cuda():
        raise RuntimeError("tapelab.cuda needs cupy and a CUDA device: (none in this test)")
    monkeypatch.setattr(torch.cuda, "require_cuda", no_cuda)    # as on a machine without a GPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with simulated_cuda(0):
        a = torch.ones(4, 4, device="cuda")
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with profile(activities=CPU_CUDA) as prof:
                a @ a
        assert [e.name for e in prof.events()] == ["aten::matmul", "aten::mm"]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)   # CUDA allowed, but no events
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        with pytest.warns(UserWarning, match="device times are not recorded"):
            with profile(activities=CPU_CUDA) as prof:
                a @ a
        assert [e.name for e in prof.events()] == ["aten::matmul", "aten::mm"] and not prof.events()[1].device
        assert not STATE.slow

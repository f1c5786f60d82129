"""The profile view model (tracks, nesting depth, module tree, totals, caps), ProfileView's
selection and saved output, the Monitor's throttling and thinning, and the matplotlib helpers."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import tapelab as torch
from tapelab import nn
from tapelab.profiler import profile, record_function
from tapelab.widgets.profileview import PROFILE_MIME, profile_html, profile_model

EPS = 2e-3


def _step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 16), nn.Tanh()), nn.Linear(16, 4))
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    with profile(record_shapes=True, profile_memory=True, with_modules=True, with_flops=True) as prof:
        with record_function("train_step"):
            with record_function("forward"):
                loss = ((model(x) - y) ** 2).mean()
            with record_function("backward"):
                loss.backward()
    return prof


@pytest.fixture(scope="module")
def prof():
    _step()          # warm: a kernel's first call in a process loads it (numba), which is not what the views show
    return _step()


@pytest.fixture(scope="module")
def model(prof):
    return profile_model(prof, title="mlp")


def _end(e):
    return e["start_us"] + e["dur_us"]


def test_model_is_json_and_carries_the_engine_timeline(model, prof):
    json.dumps(model)
    raw = prof.to_dict()
    assert model["version"] == 1 and model["schema"] == "tapelab.profile-view" and model["title"] == "mlp"
    assert len(model["events"]) == len(raw["events"]) and not model["meta"]["truncated"]
    assert [t["group"] for t in model["tracks"]] == ["ranges", "forward", "backward", "modules"]


def test_children_lie_inside_their_parents(model):
    ev = model["events"]
    for e in ev:
        if e["parent"] is not None:
            p = ev[e["parent"]]
            assert p["start_us"] - EPS <= e["start_us"] and _end(e) <= _end(p) + EPS, (e["name"], p["name"])


def test_depth_nests_within_each_track(model):
    ev = model["events"]
    for e in ev:
        assert 0 <= e["depth"] < model["tracks"][e["track"]]["depth"]
        if e["depth"]:
            outer = [o for o in ev if o["track"] == e["track"] and o["depth"] == e["depth"] - 1
                     and o["start_us"] - EPS <= e["start_us"] and _end(e) <= _end(o) + EPS]
            assert outer, e["name"]
    # events at the same depth of a track never overlap
    for t in model["tracks"]:
        for d in range(t["depth"]):
            row = sorted((e for e in ev if e["track"] == t["id"] and e["depth"] == d), key=lambda e: e["start_us"])
            for a, b in zip(row, row[1:]):
                assert _end(a) <= b["start_us"] + EPS, (a["name"], b["name"])


def test_ranges_nest_and_lanes_split_forward_from_backward(model):
    ev = model["events"]
    by = {e["name"]: e for e in ev if e["kind"] == "range"}
    assert by["train_step"]["depth"] == 0 and by["forward"]["depth"] == 1 and by["backward"]["depth"] == 1
    groups = {e["id"]: model["tracks"][e["track"]]["group"] for e in ev}
    assert all(groups[e["id"]] == "forward" for e in ev if e["kind"] == "op" and e["phase"] == "forward")
    assert all(groups[e["id"]] == "backward" for e in ev if e["kind"] == "backward" or e["phase"] == "backward")
    # a backward node's ops sit one row below it
    node = next(e for e in ev if e["name"] == "AddmmBackward0")
    kids = [e for e in ev if e["parent"] == node["id"]]
    assert kids and all(k["depth"] == node["depth"] + 1 for k in kids)


def test_totals_add_up(model):
    ev = model["events"]
    t = model["totals"]
    ops = [e for e in ev if e["kind"] == "op"]
    assert t["ops"] == len(ops) and t["backward_nodes"] == sum(e["kind"] == "backward" for e in ev)
    assert math.isclose(t["op_self_us"], sum(e["self_us"] for e in ops), abs_tol=1e-2)
    assert t["forward_us"] + sum(e["self_us"] for e in ops if e["phase"] == "backward") == pytest.approx(t["op_self_us"], abs=1e-2)
    assert t["backward_us"] <= t["wall_us"] and t["op_self_us"] <= t["wall_us"]
    # a parent's time is its self time plus its children's
    for e in ev:
        kids = [k for k in ev if k["parent"] == e["id"]]
        if kids and e["kind"] != "module":
            assert e["dur_us"] == pytest.approx(e["self_us"] + sum(k["dur_us"] for k in kids), abs=1e-2)
    names = {r["name"] for r in model["averages"]}
    assert {"aten::linear", "aten::relu", "aten::tanh", "train_step", "forward"} <= names
    assert {r["kind"] for r in model["averages"]} >= {"op", "backward", "range"}


def test_module_tree(model):
    root = model["module_tree"]
    paths = {}

    def walk(n):
        paths[n["path"]] = n
        for c in n["children"]:
            assert c["path"].startswith(n["path"])
            walk(c)
    walk(root)
    assert {"0", "1", "2", "2.0", "2.1", "3"} <= set(paths)
    assert paths["2"]["children"][0]["path"] in ("2.0", "2.1")
    assert sum(c["forward_us"] for c in paths["2"]["children"]) <= paths["2"]["forward_us"] + EPS
    bwd = sum(e["dur_us"] for e in model["events"] if e["kind"] == "backward")
    assert root["backward_us"] == pytest.approx(bwd, abs=1e-2)
    assert "aten::linear" in {o["name"] for o in paths["0"]["ops"]}
    assert all(n["total_us"] == pytest.approx(n["forward_us"] + n["backward_us"], abs=1e-2) for n in paths.values())


def test_memory_and_top_allocations(model):
    mem = model["memory"]
    assert mem and max(p["allocated"] for p in mem) == model["peak_bytes"]
    top = model["top_alloc"]
    assert top and top == sorted(top, key=lambda a: -a["bytes"])
    assert all(model["events"][a["id"]]["name"] == a["name"] for a in top)


def test_cap_keeps_the_longest_events_and_their_parents(prof):
    m = profile_model(prof, max_events=10)
    ev = m["events"]
    assert m["meta"]["truncated"] and m["meta"]["events_total"] > 10 and len(ev) >= 10
    assert [e["id"] for e in ev] == list(range(len(ev)))
    assert all(e["parent"] is None or 0 <= e["parent"] < len(ev) for e in ev)
    assert any(e["name"] == "train_step" for e in ev)


def test_static_html_escapes_user_strings():
    with profile() as p:
        with record_function("<img src=x onerror=alert(1)>"):
            torch.ones(3) + 1
    h = profile_html(profile_model(p))
    assert "<img" not in h and "&lt;img" in h


def test_profile_view_selection_links_tape_views(prof):
    pytest.importorskip("anywidget")
    from tapelab.widgets import ProfileView

    v = ProfileView(prof, title="step")
    got, sent = [], []

    class FakeTape:
        def send(self, msg):
            sent.append(msg)
    v.on_select(got.append)
    v.link(FakeTape())
    op = next(e for e in v.profile["events"] if e["name"] == "aten::linear")
    v._on_frontend(v, {"type": "select", "id": op["id"], "seq": op["seq"], "name": "aten::linear", "kind": "op",
                       "phase": "forward", "module": op["module"]}, [])
    assert v.selected["seq"] == op["seq"] and got[0]["name"] == "aten::linear"
    assert sent == [{"type": "select", "seq": op["seq"], "phase": "forward"}]
    data = v._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data[PROFILE_MIME]["events"] and "aten::linear" in data["text/html"]
    assert type(v).__name__ == "ProfileView"


def test_monitor_throttles_and_thins(monkeypatch):
    pytest.importorskip("anywidget")
    from tapelab.widgets import Monitor

    mon = Monitor(rate=1e-3, max_points=100)          # at most one send per 1000 s
    sends = []
    monkeypatch.setattr(mon, "send", lambda msg: sends.append(msg))
    for i in range(1000):
        mon.log(i, loss=1.0 / (i + 1), acc=torch.tensor(0.25), bad=float("nan"))
    assert len(sends) <= 1 and mon.logged == 1000
    h = mon.history()
    assert 50 <= len(h["steps"]) <= 100 and h["steps"] == sorted(h["steps"])
    assert h["series"]["acc"][-1] == 0.25 and all(v is None for v in h["series"]["bad"])
    assert all(t is None or t >= 0 for t in h["step_ms"])
    mon.flush()
    assert mon.data["steps"] == h["steps"]
    json.dumps(mon.data)
    # a metric that appears later is padded with None
    mon2 = Monitor(rate=1e9)
    monkeypatch.setattr(mon2, "send", lambda msg: sends.append(msg))
    mon2.log(loss=1.0)
    mon2.log(loss=0.5, acc=0.9)
    assert mon2.history()["series"]["acc"] == [None, 0.9] and mon2.history()["steps"] == [0, 1]


def test_importing_tapelab_widgets_never_imports_matplotlib():
    code = ("import sys, tapelab, tapelab.widgets, tapelab.widgets.profileview; "
            "from tapelab.widgets import plots; assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_matplotlib_figures(prof, tmp_path):
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    from tapelab.widgets import plots

    ax = plots.op_times(prof, top=5)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 5 and "aten::addmm" in labels   # linear's time is its addmm's
    ax = plots.memory_timeline(prof)
    assert ax.lines and "peak" in ax.get_title()
    ax = plots.module_times(prof)
    assert {t.get_text() for t in ax.get_yticklabels()} == {"0", "1", "2", "3"}
    fig = plots.profile_figure(prof)
    fig.savefig(tmp_path / "profile.png")
    assert (tmp_path / "profile.png").stat().st_size > 1000
    pytest.importorskip("anywidget")
    from tapelab.widgets import Monitor
    mon = Monitor()
    for i in range(20):
        mon.log(i, loss=1 / (i + 1))
    axes = plots.monitor_curves(mon)
    assert len(axes) == 2 and axes[0].get_title() == "loss"
    import matplotlib.pyplot as plt
    plt.close("all")

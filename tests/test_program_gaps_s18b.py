"""Gaps found in session 18 (helper H2) running researchers' programs on libraries not run before
under ``install_aliases()``: TensorBoard logging (SummaryWriter, the profiler's trace handler),
MONAI, detection code on ``torchvision.ops``, DataLoader pipelines; each checked against real torch."""
import glob
import json
import os

import numpy as np
import pytest
import torch

import tapelab


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- DataLoader
@pytest.mark.parametrize("attr", ["batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                  "persistent_workers"])
def test_dataloader_refuses_changing_what_decides_batches_after_init(attr):
    """PyTorch's DataLoader raises at ``loader.batch_size = 4`` after construction (its batch sampler
    was made from the old value); tapelab's took it silently and went on with the old batches."""
    msgs = []
    for m in (torch, tapelab):
        dl = m.utils.data.DataLoader(list(range(6)), batch_size=2)
        with pytest.raises(ValueError) as e:
            setattr(dl, attr, getattr(dl, attr))
        msgs.append(str(e.value))
        dl.num_workers = 0          # the other attributes stay settable
        dl.collate_fn = dl.collate_fn
    assert msgs[0] == msgs[1] == f"{attr} attribute should not be set after DataLoader is initialized"


# ---------------------------------------------------------------- TensorBoard
tb = pytest.importorskip("tensorboard")


def _hparams_of(m, hp, metrics, discrete=None):
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    summaries = m.utils.tensorboard.summary.hparams(hp, metrics, discrete)
    return [(v.tag, HParamsPluginData.FromString(v.metadata.plugin_data.content), v.HasField("tensor"))
            for s in summaries for v in s.value]


def test_hparams_summaries_are_pytorchs():
    """``add_hparams`` wrote TensorBoard's own ``hparams_pb`` (untyped infos, bools as bools, a group
    name and start time, no session end, the summaries as empty tensors); PyTorch writes typed
    infos (numbers and bools FLOAT64, strings STRING, a Tensor's first element), the discrete
    domains, a SUCCESS session end, and no tensor."""
    import torch.utils.tensorboard.summary  # noqa: F401
    import tapelab.utils.tensorboard.summary  # noqa: F401
    hp = {"lr": 0.1, "bs": 6, "opt": "sgd", "bn": True, "none": None, "t": torch.tensor([0.5, 2.0])}
    ours = dict(hp, t=tapelab.tensor([0.5, 2.0]))
    discrete = {"opt": ["sgd", "adam"], "bs": [6, 8]}
    assert _hparams_of(tapelab, ours, {"acc": 1}, discrete) == _hparams_of(torch, hp, {"acc": 1}, discrete)
    for bad, discrete in (({"x": np.float32(1.0)}, None), ({"x": [1]}, None), ({"x": 1.0}, {"x": [1]}),
                          ({"x": 1.0}, {"y": [1.0]}), ({"x": 1.0}, ["x"])):
        errs = []
        for m in (torch, tapelab):
            with pytest.raises((ValueError, TypeError)) as e:
                m.utils.tensorboard.summary.hparams(bad, {}, discrete)
            errs.append((type(e.value), str(e.value)))
        assert errs[0] == errs[1]


def _graph_run(m, log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.Dropout(0.5), m.nn.Linear(4, 2))
    x = m.randn(5, 3)
    with m.utils.tensorboard.SummaryWriter(log_dir) as w:
        w.add_graph(model, x)
    ea = EventAccumulator(log_dir)
    ea.Reload()
    return (model.training, _np(model[1].running_mean), model[1].num_batches_tracked.item(),
            _np(m.rand(3)), ea.Tags()["run_metadata"], ea.RunMetadata("step1").step_stats.dev_stats[0].device)


def test_add_graph_traces_in_eval_mode_and_writes_step_stats(tmp_path):
    """PyTorch traces the graph with the model in eval mode: batch norm's running statistics are
    left alone and dropout draws nothing, so the seeded draws after ``add_graph`` are the same
    (tapelab's run it in training mode: the statistics moved and the random stream advanced); the
    graph event is followed by the "step1" run metadata PyTorch writes."""
    import torch.utils.tensorboard  # noqa: F401
    import tapelab.utils.tensorboard  # noqa: F401
    a = _graph_run(torch, str(tmp_path / "a"))
    b = _graph_run(tapelab, str(tmp_path / "b"))
    assert a[0] is b[0] is True
    np.testing.assert_array_equal(b[1], a[1])
    assert a[2] == b[2] == 0
    np.testing.assert_array_equal(b[3], a[3])
    assert a[4] == b[4] == ["step1"] and a[5] == b[5] == "/device:CPU:0"


def _profiled_steps(m, log_dir):
    m.manual_seed(0)
    model = m.nn.Linear(4, 2)
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    sched = m.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with m.profiler.profile(activities=[m.profiler.ProfilerActivity.CPU], schedule=sched,
                            on_trace_ready=m.profiler.tensorboard_trace_handler(log_dir, worker_name="w0")) as prof:
        for _ in range(5):
            model(m.randn(3, 4)).sum().backward()
            opt.step()
            prof.step()
    (path,) = glob.glob(os.path.join(log_dir, "w0.*.pt.trace.json"))
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return sorted((e["name"], e["cat"]) for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))


def test_profiler_steps_in_the_tensorboard_trace_are_user_annotations(tmp_path):
    """TensorBoard's profiler plugin finds a trace's steps as ``user_annotation`` spans named
    ``ProfilerStep#N`` (PyTorch's category); tapelab's spans had the category ``step``, so the
    plugin saw one step over the whole trace."""
    assert _profiled_steps(tapelab, str(tmp_path / "b")) == _profiled_steps(torch, str(tmp_path / "a")) == \
        [("ProfilerStep#2", "user_annotation"), ("ProfilerStep#3", "user_annotation")]

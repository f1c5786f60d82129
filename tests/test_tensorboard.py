"""SummaryWriter writes real TensorBoard event files: the same calls made through PyTorch's
writer and tapelab's, read back with tensorboard's EventAccumulator, give the same scalars,
histograms, image pixels, text and run layout; the graph holds the model's ops by module."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from PIL import Image  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch.utils.tensorboard import SummaryWriter as TorchWriter  # noqa: E402

import tapelab  # noqa: E402
import torch  # noqa: E402
from tapelab.utils.tensorboard import SummaryWriter  # noqa: E402

RNG = np.random.default_rng(3)
WEIGHTS = RNG.standard_normal((16, 8)).astype(np.float32)
IMG = RNG.random((3, 6, 5)).astype(np.float32)
IMGS = RNG.random((10, 1, 4, 3)).astype(np.float32)
HWC = (RNG.random((4, 7, 3)) * 255).astype(np.uint8)


def _log(m, writer_cls, log_dir):
    with writer_cls(log_dir) as w:
        for step in range(4):
            w.add_scalar("loss", m.tensor(1.0 / (step + 1)), step)
            w.add_scalar("lr", 0.1 * step, step)
        w.add_histogram("weights", m.tensor(WEIGHTS), 0)
        w.add_histogram("weights", m.tensor(WEIGHTS) * 2, 1)
        w.add_histogram("few", m.tensor(WEIGHTS), 0, bins=10)
        w.add_image("img", m.tensor(IMG), 0)
        w.add_image("hwc", m.tensor(HWC), 0, dataformats="HWC")
        w.add_image("gray", m.tensor(IMG[0]), 0, dataformats="HW")
        w.add_images("batch", m.tensor(IMGS), 0)
        w.add_text("note", "hello **tensorboard**", 2)
        w.add_scalars("run", {"train": 1.0, "val": 2.0}, 0)
        w.add_scalars("run", {"train": 0.5, "val": 1.5}, 1)


def _read(path):
    ea = EventAccumulator(str(path), size_guidance={"images": 0, "histograms": 0, "scalars": 0, "tensors": 0})
    ea.Reload()
    return ea


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    ours, theirs = tmp_path_factory.mktemp("tapelab"), tmp_path_factory.mktemp("torch")
    _log(tapelab, SummaryWriter, str(ours))
    _log(torch, TorchWriter, str(theirs))
    return ours, theirs


def test_same_tags(logs):
    ours, theirs = map(_read, logs)
    assert ours.Tags() == theirs.Tags()


def test_scalars_match_torch(logs):
    ours, theirs = map(_read, logs)
    for tag in ("loss", "lr"):
        assert [(s.step, s.value) for s in ours.Scalars(tag)] == [(s.step, s.value) for s in theirs.Scalars(tag)]
    assert [s.value for s in ours.Scalars("loss")] == pytest.approx([1.0, 0.5, 1 / 3, 0.25])


def test_histograms_match_torch(logs):
    ours, theirs = map(_read, logs)
    for tag in ("weights", "few"):
        a, b = ours.Histograms(tag), theirs.Histograms(tag)
        assert [h.step for h in a] == [h.step for h in b]
        for x, y in zip(a, b):
            assert x.histogram_value == y.histogram_value
    h = ours.Histograms("weights")[0].histogram_value
    assert (h.num, h.min, h.max) == (WEIGHTS.size, pytest.approx(WEIGHTS.min()), pytest.approx(WEIGHTS.max()))
    assert sum(h.bucket) == WEIGHTS.size


def _pixels(ea, tag):
    ev = ea.Images(tag)[0]
    return ev.width, ev.height, np.asarray(Image.open(io.BytesIO(ev.encoded_image_string)))


@pytest.mark.parametrize("tag", ["img", "hwc", "gray", "batch"])
def test_images_decode_to_torchs_pixels(logs, tag):
    ours, theirs = map(_read, logs)
    (w, h, a), (tw, th, b) = _pixels(ours, tag), _pixels(theirs, tag)
    assert (w, h) == (tw, th)
    np.testing.assert_array_equal(a, b)


def test_image_pixels_are_the_input():
    ours = _read_fresh(lambda w: w.add_image("hwc", tapelab.tensor(HWC), 0, dataformats="HWC"))
    np.testing.assert_array_equal(_pixels(ours, "hwc")[2], HWC)


def _read_fresh(write, tmp=None):
    import tempfile
    d = tmp or tempfile.mkdtemp()
    with SummaryWriter(d) as w:
        write(w)
    return _read(d)


def test_text_matches_torch(logs):
    ours, theirs = map(_read, logs)
    a, b = ours.Tensors("note/text_summary"), theirs.Tensors("note/text_summary")
    assert [(e.step, e.tensor_proto) for e in a] == [(e.step, e.tensor_proto) for e in b]
    assert a[0].tensor_proto.string_val == [b"hello **tensorboard**"]
    assert ours.SummaryMetadata("note/text_summary").plugin_data.plugin_name == "text"


def test_add_scalars_writes_one_run_per_series_like_torch(logs):
    ours, theirs = logs
    runs = [sorted(p.name for p in root.iterdir() if p.is_dir()) for root in (ours, theirs)]
    assert runs[0] == runs[1] == ["run_train", "run_val"]
    for run in ("run_train", "run_val"):
        a, b = _read(ours / run), _read(theirs / run)
        assert [(s.step, s.value) for s in a.Scalars("run")] == [(s.step, s.value) for s in b.Scalars("run")]


def test_graph_holds_the_models_ops_by_module(tmp_path):
    class Net(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = tapelab.nn.Linear(3, 4)
            self.act = tapelab.nn.ReLU()
            self.fc2 = tapelab.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    with SummaryWriter(str(tmp_path)) as w:
        w.add_graph(Net(), tapelab.randn(5, 3))
    graph = _read(tmp_path).Graph()
    nodes = {n.name: n for n in graph.node}
    assert "input/input.0" in nodes and "output/output.0" in nodes
    assert {"Net/Linear[fc1]/weight", "Net/Linear[fc1]/bias", "Net/Linear[fc2]/weight"} <= set(nodes)
    relu = [n for n in graph.node if n.op == "relu"]
    assert len(relu) == 1 and relu[0].name.startswith("Net/ReLU[act]/")
    linears = [n for n in graph.node if n.op == "linear"]
    assert len(linears) == 2 and linears[0].input[0] == "input/input.0"
    out = nodes["output/output.0"]
    assert nodes[out.input[0]].name.startswith("Net/Linear[fc2]/")
    shape = [d.size for d in out.attr["_output_shapes"].list.shape[0].dim]
    assert shape == [5, 2]


def test_hparams_write_a_trial(tmp_path):
    """The trial's three HParams summaries are PyTorch's: the experiment (names, types: a bool is a
    float64 as ``isinstance(v, int)`` says), the session's start and its end, no tensors."""
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    hp = {"lr": 0.01, "optimizer": "adam", "layers": 3, "bn": True, "skip": None}
    contents = []
    for writer, d in ((SummaryWriter, tmp_path / "ours"), (TorchWriter, tmp_path / "theirs")):
        with writer(str(d)) as w:
            w.add_hparams(hp, {"hparam/accuracy": 0.875}, run_name="trial1", global_step=3)
        ea = _read(d / "trial1")
        assert [(s.step, s.value) for s in ea.Scalars("hparam/accuracy")] == [(3, 0.875)]
        assert ea.Tags()["tensors"] == []
        contents.append({k: HParamsPluginData.FromString(v) for k, v in ea.PluginTagToContent("hparams").items()})
    assert contents[0] == contents[1]
    assert sorted(contents[0]) == ["_hparams_/experiment", "_hparams_/session_end_info", "_hparams_/session_start_info"]


def test_default_log_dir_and_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    w.add_scalar("x", 1.0, 0)
    w.close()
    runs = os.listdir(tmp_path / "runs")
    assert len(runs) == 1 and runs[0].endswith("_exp") and w.get_logdir() == os.path.join("runs", runs[0])
    assert [s.value for s in _read(tmp_path / "runs" / runs[0]).Scalars("x")] == [1.0]


def test_flush_makes_events_readable_before_close(tmp_path):
    w = SummaryWriter(str(tmp_path), flush_secs=3600)
    w.add_scalar("x", 2.0, 7)
    w.flush()
    assert [(s.step, s.value) for s in _read(tmp_path).Scalars("x")] == [(7, 2.0)]
    w.close()


def test_bad_input_errors():
    with pytest.raises(ValueError, match="scalar"):
        _read_fresh(lambda w: w.add_scalar("x", tapelab.ones(2), 0))
    with pytest.raises(ValueError, match="channels"):
        _read_fresh(lambda w: w.add_image("x", tapelab.ones(2, 3, 3), 0))


def test_tapelab_imports_without_tensorboard_and_the_module_says_what_to_install():
    code = ("import sys; sys.modules['tensorboard'] = None\n"
            "import tapelab\n"
            "assert 'tapelab.utils.tensorboard' not in sys.modules\n"
            "try:\n    import tapelab.utils.tensorboard\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install tensorboard" in out


def test_close_twice_flush_after_close_and_reuse_after_close(tmp_path):
    """Lightning's TensorBoardLogger flushes after finalize() closed the writer; PyTorch's writer
    ignores that, and adding after close() opens a new event file."""
    w = SummaryWriter(str(tmp_path))
    w.add_scalar("a", 1.0, 0)
    w.close()
    w.flush()
    w.close()
    w.add_scalar("a", 2.0, 1)
    w.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2

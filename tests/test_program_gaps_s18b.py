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


# ---------------------------------------------------------------- MONAI
def test_collate_module_has_pytorchs_names():
    """``torch.utils.data._utils.collate``'s helpers by PyTorch's names: MONAI's image readers import
    ``np_str_obj_array_pattern`` (``import monai`` failed), libraries extend the collate map with
    ``collate_tensor_fn`` and its siblings."""
    from torch.utils.data._utils import collate as theirs
    from tapelab.utils.data import _collate as ours
    names = ["np_str_obj_array_pattern", "default_collate_err_msg_format", "collate_tensor_fn",
             "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
             "collate_str_fn"]
    for name in names:
        assert hasattr(ours, name), name
    assert ours.np_str_obj_array_pattern.pattern == theirs.np_str_obj_array_pattern.pattern
    assert ours.default_collate_err_msg_format == theirs.default_collate_err_msg_format
    assert ours.default_collate_fn_map[tapelab.Tensor] is ours.collate_tensor_fn
    for m, c in ((torch, theirs), (tapelab, ours)):
        batch = [m.tensor([1.0, 2.0]), m.tensor([3.0, 4.0])]
        assert c.collate_tensor_fn(batch).tolist() == [[1.0, 2.0], [3.0, 4.0]]
        assert c.collate([{"a": np.float32(1)}, {"a": np.float32(2)}],
                         collate_fn_map={np.generic: c.collate_numpy_scalar_fn})["a"].tolist() == [1.0, 2.0]


def test_model_zoo_and_backends_private_names_under_aliases():
    """``from torch.utils import model_zoo`` (MONAI's EfficientNet, old model files) gives ``load_url``,
    tapelab's hub; ``torch.backends.__allow_nonbracketed_mutation()`` (MONAI's ``set_determinism``),
    ``disable_global_flags`` and ``flags_frozen`` are there as in PyTorch."""
    import subprocess
    import sys
    code = ("import tapelab; tapelab.install_aliases()\n"
            "from torch.utils import model_zoo\n"
            "import torch, torch.utils.model_zoo as mz, tapelab.hub\n"
            "assert mz is model_zoo and model_zoo.load_url is tapelab.hub.load_state_dict_from_url\n"
            "import torch.backends as b\n"
            "assert not b.flags_frozen()\n"
            "b.disable_global_flags()\n"
            "assert b.flags_frozen()\n"
            "with getattr(b, '__allow_nonbracketed_mutation')():\n"
            "    assert not b.flags_frozen()\n"
            "    torch.backends.cudnn.deterministic = True\n"
            "assert b.flags_frozen() and torch.backends.cudnn.deterministic\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sum_and_mean_of_a_permuted_layout_run_over_memory_as_aten(dtype):
    """ATen sums all elements of a dense permuted tensor (``rot90``'s transposed copy, ``x.t()``) in
    memory order, its TensorIterator having sorted and merged the dims;
    tapelab summed the logical order, so MONAI's NormalizeIntensity after RandRotate90 (a mean of
    ``rot90(x)``) differed from torch in the last bits."""
    rng = np.random.default_rng(0)
    a = rng.random((1, 12, 12, 12)).astype(dtype)
    b = rng.standard_normal((4, 6, 7, 5)).astype(dtype)
    for m in (torch, tapelab):
        x, y = m.tensor(a), m.tensor(b)
        got = [m.rot90(x, 1, (1, 2)).sum(), m.rot90(x, 3, (2, 3)).mean(), y.permute(0, 2, 3, 1).sum(),
               y.reshape(24, 35).t().mean(),
               y.permute(3, 1, 0, 2).sum(dim=(0, 1, 2, 3))]
        if m is torch:
            want = [_np(g) for g in got]
        else:
            for g, w in zip(got, want):
                np.testing.assert_array_equal(_np(g), w)


# ---------------------------------------------------------------- open_clip
def test_tensor_type_is_torchscripts_tensor_type():
    """``from torch import TensorType`` (open_clip's text tower annotates with it) failed to import;
    tapelab's answers PyTorch's ``get``/``create_from_tensor`` queries the same."""
    got = []
    for m in (torch, tapelab):
        t = m.randn(2, 3, dtype=m.float64)
        full, plain = m.TensorType.create_from_tensor(t), m.TensorType.get()
        got.append((full.str(), full.scalarType(), full.sizes(), full.strides(), str(full.device()),
                    full.requires_grad(), full.dim(), full.kind(), repr(full), str(full), plain.str(),
                    plain.annotation_str, plain.sizes(), plain.dim(), plain == m.TensorType.get(),
                    m.TensorType.create_from_tensor(m.zeros(1, dtype=m.int64)).scalarType()))
    assert got[0] == got[1]


# ---------------------------------------------------------------- detection
def _torchvision_order_regression_head(in_ch, num_anchors, fcos):
    """torchvision's RetinaNet/FCOS regression heads, written out in torch: the tower's convs made,
    the output convs made and drawn N(0, 0.01), and only then the tower's convs drawn."""
    nn = torch.nn
    if fcos:
        tower = nn.Sequential(*[m for _ in range(4) for m in (nn.Conv2d(in_ch, in_ch, 3, 1, 1), nn.GroupNorm(4, in_ch),
                                                              nn.ReLU())])
    else:
        tower = nn.Sequential(*[nn.Sequential(nn.Conv2d(in_ch, in_ch, 3, 1, 1, bias=False), nn.BatchNorm2d(in_ch),
                                              nn.ReLU()) for _ in range(4)])
    outs = [nn.Conv2d(in_ch, num_anchors * 4, 3, 1, 1)] + ([nn.Conv2d(in_ch, num_anchors, 3, 1, 1)] if fcos else [])
    for layer in outs:
        nn.init.normal_(layer.weight, std=0.01)
        nn.init.zeros_(layer.bias)
    for layer in tower.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return [p for p in tower.parameters()] + [p for o in outs for p in o.parameters()]


@pytest.mark.parametrize("fcos", [False, True])
def test_detection_regression_heads_draw_their_weights_in_torchvisions_order(fcos):
    """torchvision's RetinaNet and FCOS regression heads draw the output convs' N(0, 0.01) weights
    before the tower's; tapelab drew the tower's first, so a seeded RetinaNet/FCOS started from other
    box weights and its bbox_regression loss differed from the first step (0.624 vs 0.662)."""
    from functools import partial
    from tapelab.vision.models.detection.fcos import FCOSRegressionHead
    from tapelab.vision.models.detection.retinanet import RetinaNetRegressionHead
    torch.manual_seed(0)
    want = _torchvision_order_regression_head(8, 3, fcos)
    tapelab.manual_seed(0)
    head = FCOSRegressionHead(8, 3, norm_layer=partial(tapelab.nn.GroupNorm, 4)) if fcos else \
        RetinaNetRegressionHead(8, 3, norm_layer=tapelab.nn.BatchNorm2d)
    got = [head.conv.parameters(), head.bbox_reg.parameters()] + ([head.bbox_ctrness.parameters()] if fcos else [])
    got = [p for ps in got for p in ps]
    assert [tuple(p.shape) for p in got] == [tuple(p.shape) for p in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_np(g), _np(w))


def test_add_scalar_new_style_writes_a_scalars_plugin_tensor(tmp_path):
    """``add_scalar(new_style=True)`` writes a one-element tensor for the scalars plugin (float64 with
    ``double_precision``), as PyTorch's; tapelab ignored the option and wrote a simple value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    import torch.utils.tensorboard  # noqa: F401
    import tapelab.utils.tensorboard  # noqa: F401
    seen = []
    for m in (torch, tapelab):
        d = str(tmp_path / m.__name__)
        with m.utils.tensorboard.SummaryWriter(d) as w:
            w.add_scalar("a", 0.1, 1, new_style=True)
            w.add_scalar("b", m.tensor(0.25, dtype=m.float64), 2, new_style=True, double_precision=True)
            w.add_scalar("c", 0.5, 3)
        ea = EventAccumulator(d)
        ea.Reload()
        seen.append((ea.Tags()["tensors"], ea.Tags()["scalars"],
                     [(e.step, str(e.tensor_proto)) for t in ("a", "b") for e in ea.Tensors(t)],
                     ea.SummaryMetadata("a").plugin_data.plugin_name))
    assert seen[0] == seen[1]


def test_purge_step_restarts_the_session_as_pytorchs(tmp_path):
    """``SummaryWriter(purge_step=k)`` starts its event file with a session restart at step k, so
    TensorBoard drops a crashed run's events from k on (tapelab ignored it: the old steps stayed)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    import torch.utils.tensorboard  # noqa: F401
    import tapelab.utils.tensorboard  # noqa: F401
    seen = []
    for m in (torch, tapelab):
        d = str(tmp_path / m.__name__)
        with m.utils.tensorboard.SummaryWriter(d) as w:
            for step in range(6):
                w.add_scalar("loss", float(step), step)
        w = m.utils.tensorboard.SummaryWriter(d, purge_step=3)
        assert w.purge_step is None
        w.add_scalar("loss", 30.0, 3)
        w.close()
        ea = EventAccumulator(d)
        ea.Reload()
        seen.append([(e.step, e.value) for e in ea.Scalars("loss")])
    assert seen[0] == seen[1] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 30.0)]


@pytest.mark.parametrize("kw", [dict(num_workers=0, multiprocessing_context="spawn"),
                                dict(num_workers=2, multiprocessing_context="bogus"),
                                dict(num_workers=2, multiprocessing_context=5),
                                dict(num_workers=2, multiprocessing_context="fork")])
def test_dataloader_multiprocessing_context_is_checked_and_made_a_context(kw):
    """PyTorch's DataLoader refuses a start method without workers (ValueError), an unknown one
    (ValueError) or a non-context (TypeError), and turns a name into its context object; tapelab kept
    whatever it got (the string, or failed later in the workers with an AttributeError)."""
    out = []
    for m in (torch, tapelab):
        try:
            dl = m.utils.data.DataLoader(range(4), **kw)
            out.append(("ok", type(dl.multiprocessing_context).__name__))
        except (ValueError, TypeError) as e:
            out.append((type(e).__name__, str(e)))
    assert out[0] == out[1]


def _tagged_class(m):
    class Tagged(m.Tensor):
        """MONAI's MetaTensor pattern: ``__new__`` takes the data, ``new_empty`` keeps the type,
        the metadata lives in the instance ``__dict__``."""
        @staticmethod
        def __new__(cls, x, meta=None):
            return m.as_tensor(x).as_subclass(cls)

        def __init__(self, x, meta=None):
            self.meta = dict(meta or {})

        def new_empty(self, size, dtype=None, device=None, requires_grad=False):
            return Tagged(m.empty(size, dtype=dtype or self.dtype), meta={})
    return Tagged


def test_deepcopy_of_a_subclass_with_its_own_new_copies_its_attributes_deeply():
    """deepcopy of a Tensor subclass whose ``__new__`` takes arguments built it through ``new_empty``
    in PyTorch (tapelab called ``__new__`` bare: TypeError, so MONAI's CacheDataset failed), and its
    attributes are deep-copied (a transform writing the copy's metadata leaves the cached original's)."""
    import copy
    seen = []
    for m in (torch, tapelab):
        Tagged = _tagged_class(m)
        t = Tagged(m.arange(4.0), meta={"affine": [1, 2], "name": "a"})
        c, pair = copy.deepcopy(t), copy.deepcopy([t, t])
        c.meta["affine"].append(3)
        c.add_(1)
        seen.append((type(c).__name__, c.tolist(), t.tolist(), t.meta, c.meta, pair[0] is pair[1], type(pair[0]).__name__))
    assert seen[0] == seen[1]
    assert seen[1][3] == {"affine": [1, 2], "name": "a"}

"""Gaps found by running researchers' programs unchanged under ``install_aliases()`` (diffusers
UNet/VAE training and sampling, CleanRL-style PPO and DQN, a VAE and a RealNVP flow), each
checked against real torch: ``Tensor.to(None)``, ``Generator.device``, the factories'
``layout=``/``pin_memory=`` keywords, ``torch.empty_strided`` and ``torch.Stream``/``torch.Event``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- Tensor.to(None)
@BOTH
def test_to_none_keeps_device_and_dtype(m):
    """diffusers' ``set_timesteps(device=None)`` calls ``.to(None)``."""
    x = m.arange(3)
    assert x.to(None) is x
    y = x.to(None, m.float64)
    assert y.dtype == m.float64 and y.tolist() == [0.0, 1.0, 2.0]
    assert x.to(None, None).dtype == m.int64
    with pytest.raises(TypeError):
        x.to(None, None, None)


@BOTH
def test_integer_device_needs_an_accelerator(m):
    if m.cuda.is_available():
        pytest.skip("a GPU is present: device(0) is cuda:0")
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        m.device(0)
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        m.zeros(2).to(0)


# ---------------------------------------------------------------- Generator.device
@BOTH
def test_generator_device_is_a_device(m):
    """diffusers' ``randn_tensor`` reads ``generator.device.type``."""
    for g in (m.Generator(), m.Generator("cpu"), m.Generator(device=m.device("cpu"))):
        assert isinstance(g.device, m.device) and g.device.type == "cpu" and g.device == m.device("cpu")


# ---------------------------------------------------------------- factories' layout= and pin_memory=
def _factories(m, x):
    return {
        "zeros": lambda **k: m.zeros(2, 3, **k), "ones": lambda **k: m.ones(2, 3, **k),
        "full": lambda **k: m.full((2,), 1.5, **k), "scalar_tensor": lambda **k: m.scalar_tensor(4, **k),
        "arange": lambda **k: m.arange(4, **k), "linspace": lambda **k: m.linspace(0, 1, 5, **k),
        "logspace": lambda **k: m.logspace(0, 1, 3, **k), "eye": lambda **k: m.eye(3, **k),
        "zeros_like": lambda **k: m.zeros_like(x, **k), "ones_like": lambda **k: m.ones_like(x, **k),
        "full_like": lambda **k: m.full_like(x, 2.0, **k),
        "new_zeros": lambda **k: x.new_zeros(2, **k), "new_ones": lambda **k: x.new_ones(2, **k),
        "new_full": lambda **k: x.new_full((2,), 3.0, **k),
        "hann_window": lambda **k: m.hann_window(5, **k), "kaiser_window": lambda **k: m.kaiser_window(5, **k),
        "tril_indices": lambda **k: m.tril_indices(3, 3, **k),
    }


@pytest.mark.parametrize("name", sorted(_factories(torch, None)))
def test_factories_take_layout_and_pin_memory(name):
    """``torch.randn(shape, generator=g, layout=torch.strided, ...)`` as diffusers' ``randn_tensor`` calls it."""
    got = {}
    for m in (torch, tapelab):
        f = _factories(m, m.arange(6.0).reshape(2, 3))[name]
        out = f(layout=m.strided, pin_memory=False)
        assert out.layout == m.strided
        got[m] = out
    np.testing.assert_allclose(got[tapelab].numpy(), got[torch].numpy(), rtol=1e-6)
    assert str(got[tapelab].dtype).split(".")[1] == str(got[torch].dtype).split(".")[1]


@BOTH
@pytest.mark.parametrize("name", ["rand", "randn", "randint", "randperm", "rand_like", "randn_like",
                                  "randint_like", "normal", "new_empty", "empty_strided"])
def test_random_and_empty_factories_take_layout(m, name):
    x = m.zeros(2, 3)
    f = {"rand": lambda **k: m.rand(2, 3, **k), "randn": lambda **k: m.randn(2, 3, generator=m.Generator(), **k),
         "randint": lambda **k: m.randint(0, 5, (2, 3), **k), "randperm": lambda **k: m.randperm(6, **k).reshape(2, 3),
         "rand_like": lambda **k: m.rand_like(x, **k), "randn_like": lambda **k: m.randn_like(x, **k),
         "randint_like": lambda **k: m.randint_like(x, 5, **k), "normal": lambda **k: m.normal(0.0, 1.0, (2, 3), **k),
         "new_empty": lambda **k: x.new_empty(2, 3, **k),
         "empty_strided": lambda **k: m.empty_strided((2, 3), (3, 1), **k)}[name]
    out = f(layout=m.strided, pin_memory=False)
    assert out.shape == (2, 3) and out.layout == m.strided
    if name.endswith("_like"):
        assert f(layout=m.strided, memory_format=m.preserve_format).shape == (2, 3)
    if name == "randperm":
        assert sorted(out.flatten().tolist()) == list(range(6))


def test_empty_strided_dtype_device_and_grad_match_torch():
    for m in (torch, tapelab):
        t = m.empty_strided((4, 2), (2, 1), dtype=m.float64, requires_grad=True)
        assert (tuple(t.shape), t.dtype, t.device.type, t.requires_grad) == ((4, 2), m.float64, "cpu", True)
        n = torch.zeros(3, 2).new_empty_strided((3,), (1,)) if m is torch else tapelab.zeros(3, 2).new_empty_strided((3,), (1,))
        assert tuple(n.shape) == (3,) and n.dtype == m.float32


def test_a_sparse_layout_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"zeros\(layout=torch.sparse_coo\)|zeros\(layout=.*sparse"):
        tapelab.zeros(2, 2, layout=tapelab.sparse_coo)


# ---------------------------------------------------------------- torch.Stream / torch.Event
@BOTH
def test_generic_stream_and_event_on_the_cpu(m):
    """diffusers annotates ``stream: torch.cuda.Stream | torch.Stream | None`` at import."""
    if m.cuda.is_available():
        pytest.skip("a GPU is present: the generic stream is a cuda stream")
    assert isinstance(m.cuda.Stream | m.Stream | None, object)
    s, e = m.Stream(), m.Event()
    assert (s.device, s.device_type, s.device_index, s.stream_id) == (m.device("cpu"), 0, -1, 0)
    assert repr(s) == "torch.Stream device_type=cpu, device_index=-1, stream_id=0"
    assert repr(m.Event(enable_timing=True)) == \
        "torch.Event device_type=cpu, device_index=-1, event_flag=1, event_id=0"
    assert s.query() and s.synchronize() is None and s.wait_event(e) is None and s == m.Stream()
    assert e.query() and e.synchronize() is None and e.wait() is None and e.device == m.device("cpu")
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
        s.record_event()
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
        s.wait_stream(m.Stream())
    with pytest.raises(RuntimeError, match="cpu backend doesn't support events."):
        e.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        e.elapsed_time(e)


# ---------------------------------------------------------------- torch.distributed.fsdp's FSDP1 configuration
_FSDP_RECORDS = ["BackwardPrefetch", "CPUOffload", "MixedPrecision", "StateDictConfig", "FullStateDictConfig",
                 "ShardedStateDictConfig", "LocalStateDictConfig", "OptimStateDictConfig", "FullOptimStateDictConfig",
                 "ShardedOptimStateDictConfig", "LocalOptimStateDictConfig", "StateDictSettings", "OptimStateKeyType",
                 "ShardingStrategy", "StateDictType"]


@pytest.mark.parametrize("name", _FSDP_RECORDS)
def test_fsdp1_configuration_records_match_torch(name):
    """diffusers' training_utils imports ``CPUOffload, ShardingStrategy`` at module level."""
    import dataclasses
    import enum
    import torch.distributed.fsdp as tf
    import tapelab.distributed.fsdp as lf
    t, l = getattr(tf, name), getattr(lf, name)
    if issubclass(t, enum.Enum):
        assert [(m.name, m.value) for m in l] == [(m.name, m.value) for m in t]
        return
    public = [(f.name, f.default) for f in dataclasses.fields(t) if not f.name.startswith("_")]
    assert [(f.name, f.default) for f in dataclasses.fields(l)] == public
    assert [b.__name__ for b in l.__mro__[1:-1]] == [b.__name__ for b in t.__mro__[1:-1]]


def _wrap_decisions(m, policy_of):
    model = m.nn.Sequential(m.nn.Linear(4, 300), m.nn.ModuleList([m.nn.Linear(300, 2)]),
                            m.nn.MultiheadAttention(8, 2), m.nn.TransformerEncoderLayer(8, 2, 16))
    policy = policy_of(m)
    return [(type(mod).__name__, policy(module=mod, recurse=r, nonwrapped_numel=n))
            for mod in model.modules() for r in (True, False) for n in (10, 1000)]


@pytest.mark.parametrize("kind", ["transformer", "size", "lambda", "module", "always"])
def test_fsdp_auto_wrap_policies_match_torch(kind):
    import functools
    import importlib

    def policy_of(m):
        w = importlib.import_module(f"{m.__name__}.distributed.fsdp.wrap")
        return {"transformer": functools.partial(w.transformer_auto_wrap_policy,
                                                 transformer_layer_cls={m.nn.TransformerEncoderLayer}),
                "size": functools.partial(w.size_based_auto_wrap_policy, min_num_params=100),
                "lambda": functools.partial(w.lambda_auto_wrap_policy,
                                            lambda_fn=lambda mod: isinstance(mod, m.nn.Linear)),
                "module": w.ModuleWrapPolicy({m.nn.Linear}),
                "always": w.always_wrap_policy}[kind]
    assert _wrap_decisions(tapelab, policy_of) == _wrap_decisions(torch, policy_of)


def test_fsdp_wrap_outside_enable_wrap_is_the_module_and_inside_uses_the_wrapper():
    from tapelab.distributed.fsdp import FullyShardedDataParallel
    from tapelab.distributed.fsdp.wrap import enable_wrap, wrap
    lin = tapelab.nn.Linear(2, 2)
    assert wrap(lin) is lin
    with enable_wrap(wrapper_cls=lambda mod, **kw: (mod, kw), flag=1):
        assert wrap(lin, other=2) == (lin, {"flag": 1, "other": 2})
    with enable_wrap(wrapper_cls=FullyShardedDataParallel), pytest.raises(NotImplementedError, match="FSDP"):
        wrap(lin)


# ---------------------------------------------------------------- distributions: Beta/Dirichlet mode, constraint registries
@pytest.mark.parametrize("c1,c0", [(0.5, 1.5), (1.5, 0.5), (0.5, 0.5), (1.0, 1.0), (1.0, 3.0), (3.0, 1.0), (2.0, 5.0)])
def test_beta_mode_matches_torch_at_the_boundaries(c1, c0):
    got = tapelab.distributions.Beta(tapelab.tensor([c1]), tapelab.tensor([c0])).mode.numpy()
    want = torch.distributions.Beta(torch.tensor([c1]), torch.tensor([c0])).mode.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("conc", [[0.5, 0.5, 0.5], [0.5, 0.2, 2.0], [3.0, 2.0, 1.5], [[0.3, 0.9], [2.0, 4.0]]])
def test_dirichlet_mode_matches_torch(conc):
    got = tapelab.distributions.Dirichlet(tapelab.tensor(conc)).mode.numpy()
    want = torch.distributions.Dirichlet(torch.tensor(conc)).mode.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _registered(m, registry: str, name: str):
    C = m.distributions.constraints
    c = {"corr_cholesky": C.corr_cholesky, "positive_definite": C.positive_definite,
         "positive_semidefinite": C.positive_semidefinite, "lower_cholesky": C.lower_cholesky,
         "cat": C.cat([C.positive, C.interval(0.0, 2.0)], 0, [2, 1]),
         "stack": C.stack([C.positive, C.real, C.unit_interval], 0)}[name]
    return getattr(m.distributions, registry)(c)


@pytest.mark.parametrize("registry,name,x", [
    ("biject_to", "corr_cholesky", [0.3, -1.2, 0.5]), ("transform_to", "corr_cholesky", [0.3, -1.2, 0.5]),
    ("transform_to", "positive_definite", [[0.3, 0.1], [-1.2, 2.0]]),
    ("transform_to", "positive_semidefinite", [[0.3, 0.1], [-1.2, 2.0]]),
    ("transform_to", "lower_cholesky", [[0.3, 0.1], [-1.2, 2.0]]),
    ("biject_to", "cat", [0.3, -1.2, 0.5]), ("transform_to", "cat", [0.3, -1.2, 0.5]),
    ("biject_to", "stack", [0.3, -1.2, 0.5]), ("transform_to", "stack", [0.3, -1.2, 0.5])])
def test_constraint_registries_match_torch(registry, name, x):
    want_t = _registered(torch, registry, name)
    got_t = _registered(tapelab, registry, name)
    assert type(got_t).__name__ == type(want_t).__name__
    want, got = want_t(torch.tensor(x)), got_t(tapelab.tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    if name not in ("positive_definite", "positive_semidefinite", "lower_cholesky"):
        np.testing.assert_allclose(got_t.log_abs_det_jacobian(tapelab.tensor(x), got).numpy(),
                                   want_t.log_abs_det_jacobian(torch.tensor(x), want).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_t.inv(got).numpy(), np.array(x), rtol=1e-5, atol=1e-5)


@BOTH
def test_lower_cholesky_has_no_bijection(m):
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        m.distributions.biject_to(m.distributions.constraints.lower_cholesky)


# ---------------------------------------------------------------- SummaryWriter: the rest of PyTorch's methods
def _events(log_dir) -> list:
    """(step, summary values) of every event file under ``log_dir``, wall times left out."""
    import os
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    out = []
    for root, _, files in sorted(os.walk(log_dir)):
        for f in sorted(files):
            if "tfevents" in f:
                for ev in LegacyEventFileLoader(os.path.join(root, f)).Load():
                    if ev.HasField("summary"):
                        out.append((os.path.relpath(root, log_dir), ev.step, list(ev.summary.value)))
    return out


def _png_pixels(data: bytes) -> np.ndarray:
    import io
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _log_everything(m, log_dir):
    from importlib import import_module
    w = import_module(f"{m.__name__}.utils.tensorboard").SummaryWriter(str(log_dir))
    rs = np.random.RandomState(0)
    w.add_tensor("t/float", m.tensor([[1.5, 2.0], [3.0, -4.25]]), 1)
    w.add_tensor("t/int", m.tensor([1, 2, 3]), 1)
    w.add_tensor("t/bool", m.tensor([True, False]), 1)
    w.add_histogram_raw("hraw", 0.0, 3.0, 4, 6.0, 14.0, [1.0, 2.0, 3.0], [1, 2, 1], 2)
    w.add_pr_curve("pr", m.tensor(rs.randint(0, 2, 50)), m.tensor(rs.rand(50)), 3)
    w.add_pr_curve("pr_weighted", rs.randint(0, 2, 20), rs.rand(20), 3, num_thresholds=200, weights=rs.rand(20))
    w.add_pr_curve_raw("prraw", [5, 3, 0], [4, 1, 0], [0, 3, 4], [0, 2, 5], [0.55, 0.75, 1.0], [1.0, 0.6, 0.0], 4,
                       num_thresholds=3)
    w.add_custom_scalars({"losses": {"both": ["Multiline", ["loss/train", "loss/val"]],
                                     "band": ["Margin", ["acc", "acc_lo", "acc_hi"]]}})
    w.add_custom_scalars_multilinechart(["a", "b"], category="cat", title="t")
    w.add_custom_scalars_marginchart(["v", "lo", "hi"])
    w.add_audio("audio", m.tensor(np.sin(np.linspace(0, 20, 400)).astype(np.float32)), 5, sample_rate=8000)
    w.add_image_with_boxes("boxes", m.tensor(rs.rand(3, 40, 50).astype(np.float32)),
                           m.tensor([[2.0, 3.0, 30.0, 35.0], [10.0, 5.0, 45.0, 20.0]]), 7, labels=["cat", "dog"])
    w.add_image_with_boxes("boxes_gray", m.tensor((rs.rand(40, 50) * 255).astype(np.uint8)),
                           m.tensor([[2.0, 3.0, 30.0, 35.0]]), 7, dataformats="HW", rescale=2, labels="one")
    w.add_image_with_boxes("boxes_unlabelled", m.tensor(rs.rand(3, 20, 20).astype(np.float32)),
                           m.tensor([[1.0, 1.0, 9.0, 9.0]]), 7, labels=["a", "b"])
    verts = m.tensor(rs.rand(1, 4, 3).astype(np.float32))
    w.add_mesh("mesh", verts, colors=m.tensor([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [9, 9, 9]]], dtype=m.uint8),
               faces=m.tensor([[[0, 1, 2], [1, 2, 3]]]), config_dict={"camera": {"fov": 75}}, global_step=8)
    w.add_mesh("cloud", verts, global_step=8)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 1), dpi=20)
    plt.plot([0, 1, 2], [1, 0, 1])
    w.add_figure("fig", fig, 6)
    figs = [plt.figure(figsize=(1, 1), dpi=16) for _ in range(2)]
    figs[1].gca().bar([0, 1], [2, 1])
    w.add_figure("figs", figs, 6)
    assert plt.get_fignums() == []   # closed after drawing (close=True)
    w.close()


def test_summary_writer_methods_write_what_torch_writes(tmp_path):
    _log_everything(torch, tmp_path / "torch")
    _log_everything(tapelab, tmp_path / "tapelab")
    want, got = _events(tmp_path / "torch"), _events(tmp_path / "tapelab")
    assert [(d, s, [v.tag for v in vals]) for d, s, vals in got] == [(d, s, [v.tag for v in vals]) for d, s, vals in want]
    for (_, _, gv), (_, _, wv) in zip(got, want):
        for g, w in zip(gv, wv):
            if w.HasField("image"):
                assert (g.image.height, g.image.width, g.image.colorspace) == \
                    (w.image.height, w.image.width, w.image.colorspace)
                np.testing.assert_array_equal(_png_pixels(g.image.encoded_image_string),
                                              _png_pixels(w.image.encoded_image_string))
            elif w.tensor.float_val:
                np.testing.assert_allclose(g.tensor.float_val, w.tensor.float_val, rtol=1e-6)
                assert g.tensor.tensor_shape == w.tensor.tensor_shape and g.metadata == w.metadata
            else:
                assert g == w


def test_add_embedding_writes_the_projector_files_torch_writes(tmp_path):
    import os
    rs = np.random.RandomState(0)
    mat, imgs = rs.randn(5, 3).astype(np.float32), rs.rand(5, 3, 4, 4).astype(np.float32)
    for m in (torch, tapelab):
        from importlib import import_module
        w = import_module(f"{m.__name__}.utils.tensorboard").SummaryWriter(str(tmp_path / m.__name__))
        w.add_embedding(m.tensor(mat), metadata=list("abcde"), label_img=m.tensor(imgs), global_step=3, tag="my/emb")
        w.add_embedding(m.tensor(mat[:2]), metadata=[["x", 1], ["y", 2]], metadata_header=["name", "n"])
        w.close()
    want_root, got_root = tmp_path / "torch", tmp_path / "tapelab"
    assert (got_root / "projector_config.pbtxt").read_text() == (want_root / "projector_config.pbtxt").read_text()
    for sub in ("00003/my%2femb", "00000/default"):
        assert sorted(os.listdir(got_root / sub)) == sorted(os.listdir(want_root / sub))
        for name in ("tensors.tsv", "metadata.tsv"):
            assert (got_root / sub / name).read_text() == (want_root / sub / name).read_text()
    sprite = "00003/my%2femb/sprite.png"
    np.testing.assert_array_equal(_png_pixels((got_root / sprite).read_bytes()),
                                  _png_pixels((want_root / sprite).read_bytes()))


def test_add_histogram_raw_refuses_mismatched_buckets(tmp_path):
    from tapelab.utils.tensorboard import SummaryWriter
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(ValueError, match=r"len\(bucket_limits\) != len\(bucket_counts\)"):
        w.add_histogram_raw("h", 0, 1, 2, 1, 1, [1.0, 2.0], [1])


# ---------------------------------------------------------------- checkpoint: three or more segments sharing inputs
def _checkpointed_chain(m, n_blocks: int, use_reentrant: bool):
    """diffusers' UNet with enable_gradient_checkpointing(): every resnet block is a checkpointed
    segment reading the same weights and the same time embedding."""
    from importlib import import_module
    ckpt = import_module(f"{m.__name__}.utils.checkpoint").checkpoint
    rs = np.random.RandomState(0)
    W = m.tensor(rs.randn(4, 4) * 0.3, requires_grad=True)     # float64: the sums agree to rounding
    x = m.tensor(rs.randn(2, 4), requires_grad=True)
    t_in = m.tensor(rs.randn(2, 4), requires_grad=True)
    temb = m.nn.functional.silu(t_in) * 2

    def block(h, e):
        return m.tanh(h @ W + e) + h
    h = x
    for _ in range(n_blocks):
        h = ckpt(block, h, temb, use_reentrant=use_reentrant)
    h.pow(2).sum().backward()
    return [t.grad.numpy() for t in (x, W, t_in)]


@pytest.mark.parametrize("n_blocks", [2, 3, 5])
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpointed_segments_sharing_weights_match_torch(n_blocks, use_reentrant):
    for got, want in zip(_checkpointed_chain(tapelab, n_blocks, use_reentrant),
                         _checkpointed_chain(torch, n_blocks, use_reentrant)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- torch.get_device_module
@BOTH
def test_get_device_module(m):
    """diffusers' ``empty_device_cache`` (after from_pretrained) calls ``torch.get_device_module(device.type)``."""
    assert m.get_device_module("cpu") is m.cpu and m.get_device_module(m.device("cpu")) is m.cpu
    assert m.get_device_module("cuda:0") is m.cuda
    if not m.cuda.is_available():
        assert m.get_device_module() is m.cpu
    with pytest.raises(RuntimeError, match="Device 'meta' does not have a corresponding module registered as 'torch.meta'"):
        m.get_device_module("meta")
    with pytest.raises(RuntimeError, match="Invalid value of device '3', expect torch.device, str, or None"):
        m.get_device_module(3)


@pytest.mark.parametrize("batch,dtype", [(1, "float32"), (3, "float32"), (4, "uint8"), (6, "float32")])
def test_add_video_frames_are_torch_s_grid(tmp_path, batch, dtype):
    """torch lays the batch out with ``_prepare_video`` and needs moviepy to encode; tapelab encodes
    the same frames as a GIF with Pillow (values 0 and 1 only, so the GIF palette is exact)."""
    import io
    from PIL import Image, ImageSequence
    from torch.utils.tensorboard._utils import _prepare_video
    from tapelab.utils.tensorboard import SummaryWriter
    rs = np.random.RandomState(batch)
    clips = (rs.rand(batch, 5, 3, 6, 8) > 0.5).astype(np.float32)
    if dtype == "uint8":
        clips = (clips * 255).astype(np.uint8)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_video("clip", tapelab.tensor(clips), 3, fps=10)
    (_, step, (value,)), = _events(tmp_path)
    want = (_prepare_video(clips) * 255).round().astype(np.uint8)
    gif = Image.open(io.BytesIO(value.image.encoded_image_string))
    got = np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)])
    assert step == 3 and (value.image.height, value.image.width, value.image.colorspace) == want.shape[1:]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- numpy ufuncs of tensors
_NUMPY_CALLS = {
    "log": lambda m: np.log(m.tensor([1.0, 2.0])), "maximum": lambda m: np.maximum(m.tensor([0.5, 2.0]), 1e-10),
    "exp_0d": lambda m: np.exp(m.tensor(1.0)), "log_int": lambda m: np.log(m.tensor([1, 2])),
    "isfinite": lambda m: np.isfinite(m.tensor([1.0, float("inf")])), "add": lambda m: np.add(m.tensor([1.0]), 2),
    "maximum_array": lambda m: np.maximum(np.ones(2) * 1.5, m.tensor([1.0, 2.0])),
    "sqrt_transposed": lambda m: np.sqrt(m.arange(6.0).reshape(2, 3).t()),
    "clip": lambda m: np.clip(m.tensor([1.0, 2.0]), 0, 1.5), "round": lambda m: np.round(m.tensor([1.4, 2.6])),
    "cumsum": lambda m: np.cumsum(m.tensor([1.0, 2.0])), "argmax": lambda m: np.argmax(m.tensor([1.0, 3.0, 2.0])),
    "scalar_times": lambda m: np.float64(2.0) * m.tensor([1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(_NUMPY_CALLS))
def test_numpy_functions_of_tensors_give_tensors_as_torch(name):
    """diffusers' DEIS and KDPM2 schedulers call ``np.log(np.maximum(sigma, 1e-10))`` on tensors."""
    want, got = _NUMPY_CALLS[name](torch), _NUMPY_CALLS[name](tapelab)
    assert isinstance(want, torch.Tensor) and isinstance(got, tapelab.Tensor)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- shape methods' keyword forms
_KEYWORD_FORMS = {
    "reshape": lambda m, x: x.reshape(shape=(3, 2)), "torch.reshape": lambda m, x: m.reshape(x, shape=(3, 2)),
    "view": lambda m, x: x.view(size=(3, 2)), "permute": lambda m, x: x.permute(dims=(1, 0)),
    "torch.permute": lambda m, x: m.permute(x, dims=(1, 0)), "expand": lambda m, x: x[:1].expand(size=(4, 3)),
    "repeat": lambda m, x: x.repeat(repeats=(2, 1)), "flip": lambda m, x: x.flip(dims=(0,)),
    "split": lambda m, x: x.split(split_size=1)[1], "new_zeros": lambda m, x: x.new_zeros(size=(2,)),
    "new_ones": lambda m, x: x.new_ones(size=(2, 1)), "new_empty": lambda m, x: x.new_empty(size=(2,)).shape,
}


@pytest.mark.parametrize("name", sorted(_KEYWORD_FORMS))
def test_shape_methods_take_their_keyword_forms(name):
    """diffusers' DiT unpatchifies with ``hidden_states.reshape(shape=(...))``."""
    got = _KEYWORD_FORMS[name](tapelab, tapelab.arange(6.0).reshape(2, 3))
    want = _KEYWORD_FORMS[name](torch, torch.arange(6.0).reshape(2, 3))
    if name == "new_empty":
        assert tuple(got) == tuple(want)
    else:
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_view_as_another_dtype_matches_torch():
    """``Tensor.view(dtype)``: the same bytes read as another dtype, the last dim scaled by the element
    sizes, sharing memory, not differentiable; the refusals as PyTorch's."""
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    for to in ("int32", "float16", "uint8", "float64", "bfloat16"):
        got = tapelab.tensor(data, requires_grad=True).view(getattr(tapelab, to))
        want = torch.tensor(data, requires_grad=True).view(getattr(torch, to))
        assert tuple(got.shape) == tuple(want.shape) and not got.requires_grad and not want.requires_grad
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    x = tapelab.tensor(data)
    x.view(dtype=tapelab.int32)[0, 0] = 1065353216          # the bits of 1.0
    assert x[0, 0].item() == 1.0
    for build in (lambda m: m.zeros(3, 5).view(m.float64), lambda m: m.zeros(4, 3).t().view(m.float16),
                  lambda m: m.tensor(1.0).view(m.float16)):
        with pytest.raises(RuntimeError) as want:
            build(torch)
        with pytest.raises(RuntimeError) as got:
            build(tapelab)
        assert str(got.value) == str(want.value)


def test_equality_with_a_numpy_array_is_elementwise_as_torch():
    """``t == a`` and ``a == t`` compare elementwise as PyTorch's; its ``!=`` falls back to identity
    (True) and ``<`` refuses an array."""
    a = np.array([1.0, 5.0, 3.0])
    for expr in ("t == a", "a == t"):
        got = eval(expr, {"t": tapelab.tensor([1.0, 2.0, 3.0]), "a": a})
        want = eval(expr, {"t": torch.tensor([1.0, 2.0, 3.0]), "a": a})
        assert got.dtype == tapelab.bool and got.tolist() == want.tolist()
    assert (tapelab.tensor([1.0]) != a) is (torch.tensor([1.0]) != a) is True
    with pytest.raises(TypeError):
        tapelab.tensor([1.0]) < a

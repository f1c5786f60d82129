"""Gaps found in session 23 (helper B) running ultralytics (YOLOv8 build, loss, train, export), open_clip, sentence-transformers, neuraloperator, nflows, torchcde, torchdyn, lightly, einx and transformers' Whisper/CLIP/T5/Wav2Vec2 under tapelab, each pattern written directly and checked against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab


def _outcome(fn, lib):
    """``fn(lib)``'s dtype and values, or its exception type."""
    try:
        r = fn(lib)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__
    return str(r.dtype).split(".")[-1], r.tolist()


# ---------------------------------------------------------------- arange's keyword overloads
# ultralytics' TaskAlignedAssigner writes ``torch.arange(end=self.bs, dtype=torch.int64)``: PyTorch's
# ``(Number end)`` overload takes ``end`` by keyword; tapelab required ``start``.
_ARANGE = {
    "end_kw": lambda L: L.arange(end=5),
    "end_kw_dtype": lambda L: L.arange(end=4, dtype=L.int64),
    "end_kw_float": lambda L: L.arange(end=2.5),
    "start_end_kw": lambda L: L.arange(start=1, end=5),
    "start_pos_end_kw": lambda L: L.arange(1, end=4),
    "start_end_step_kw": lambda L: L.arange(1, 7, step=3),
    "three": lambda L: L.arange(1, 7, 2),
    "one": lambda L: L.arange(3),
    "end_step_kw": lambda L: L.arange(end=5, step=2),       # a step needs start: TypeError
    "one_step_kw": lambda L: L.arange(5, step=2),
    "none": lambda L: L.arange(),
}


@pytest.mark.parametrize("case", sorted(_ARANGE))
def test_arange_keyword_overloads(case):
    assert _outcome(_ARANGE[case], tapelab) == _outcome(_ARANGE[case], torch)


# ---------------------------------------------------------------- nn.modules' class hierarchy
# thop (under ultralytics' ``model.info()``) maps ``nn.modules.padding._ReflectionPadNd``,
# ``batchnorm._NormBase``, ``dropout._DropoutNd`` ... to FLOP counters and walks each module's MRO;
# tapelab lacked some bases and derived siblings from each other (``Hardsigmoid`` was a ``Hardswish``,
# ``InstanceNorm2d`` a ``_BatchNorm``), which ``isinstance`` checks in libraries see.
def _nn_classes(lib) -> dict:
    import importlib
    import inspect
    import pkgutil
    real = torch.nn.modules
    out = {}
    for info in pkgutil.iter_modules(real.__path__):
        mod = importlib.import_module(f"torch.nn.modules.{info.name}")
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and cls.__module__ == mod.__name__ and issubclass(cls, torch.nn.Module):
                out[f"{info.name}.{name}"] = cls
    return out


# tapelab's lazy modules derive from the eager class they become (``cls_to_become``); PyTorch's from a
# ``_LazyNormBase`` / ``_ConvTransposeMixin``
_LAZY = ("Lazy", "_LazyNormBase", "_ConvTransposeMixin")


def test_nn_module_bases_match_torch():
    import importlib
    wrong = {}
    for key, real in _nn_classes(torch).items():
        mod, name = key.split(".")
        if name.startswith(_LAZY):
            continue
        ours = getattr(importlib.import_module(f"tapelab.nn.modules.{mod}"), name, None)
        if ours is None:
            wrong[key] = "missing"
            continue
        want = {c.__name__ for c in real.__mro__ if issubclass(c, torch.nn.Module)}
        have = {c.__name__ for c in ours.__mro__ if issubclass(c, tapelab.nn.Module)}
        public_extra = {n for n in have - want if not n.startswith("_")}
        if want - have or public_extra:
            wrong[key] = (sorted(want - have), sorted(public_extra))
    assert wrong == {}


@pytest.mark.parametrize("make, base", [
    ("Hardsigmoid()", "Hardswish"), ("Hardshrink()", "Softshrink"), ("CrossMapLRN2d(3)", "LocalResponseNorm"),
    ("InstanceNorm2d(3)", "modules.batchnorm._BatchNorm"), ("InstanceNorm2d(3)", "modules.batchnorm._NormBase"),
    ("BatchNorm2d(3)", "modules.batchnorm._NormBase"), ("Dropout()", "modules.dropout._DropoutNd"),
    ("AvgPool1d(2)", "modules.pooling._AvgPoolNd"), ("ConvTranspose2d(2, 2, 3)", "modules.conv._ConvTransposeNd"),
    ("ConvTranspose2d(2, 2, 3)", "modules.conv._ConvNd"), ("ReflectionPad2d(1)", "modules.padding._ReflectionPadNd"),
    ("ReplicationPad1d(1)", "modules.padding._ReplicationPadNd"), ("CircularPad3d(1)", "modules.padding._CircularPadNd"),
    ("ZeroPad2d(1)", "modules.padding._ConstantPadNd"), ("LinearCrossEntropyLoss(4, 3)", "modules.loss._WeightedLoss"),
])
def test_nn_isinstance_as_torch(make, base):
    def check(lib):
        cls = lib.nn
        for part in base.split("."):
            cls = getattr(cls, part)
        return isinstance(eval(f"lib.nn.{make}"), cls)
    assert check(tapelab) == check(torch)


def test_update_bn_leaves_instance_norm_stats():
    """``swa_utils.update_bn`` resets and re-estimates only ``_BatchNorm`` statistics; an instance norm that
    tracks running stats keeps its momentum and accumulates on top of what it had."""
    def run(lib):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3),
                                lib.nn.InstanceNorm2d(3, track_running_stats=True))
        with lib.no_grad():
            net[2].running_mean.fill_(0.5)
        data = [lib.tensor(np.linspace(-1, 1, 2 * 2 * 6 * 6, dtype=np.float32).reshape(2, 2, 6, 6) * (i + 1))
                for i in range(3)]
        lib.optim.swa_utils.update_bn(data, net)
        return [np.round(t.detach().numpy().astype(np.float64), 5).tolist()
                for t in (net[1].running_mean, net[1].running_var, net[2].running_mean, net[2].running_var)] \
            + [net[2].momentum, net[1].momentum]
    assert run(tapelab) == run(torch)


def test_linear_cross_entropy_loss_module_state_and_checks():
    def run(lib):
        out = []
        m = lib.nn.LinearCrossEntropyLoss(4, 3, bias=True, weight=lib.ones(3))
        out.append((list(m.state_dict()), [k for k, _ in m.named_buffers()], repr(m)))
        for kw in (dict(weight=lib.ones(2)), dict(label_smoothing=1.5), dict(label_smoothing=-0.1)):
            try:
                lib.nn.LinearCrossEntropyLoss(4, 3, **kw)
                out.append("ok")
            except Exception as e:  # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        return out
    assert run(tapelab) == run(torch)


# ---------------------------------------------------------------- the thread count is read at import
# ``import ultralytics`` sets OMP_NUM_THREADS=1 after ``import torch``: PyTorch's OpenMP runtime read the
# variable when torch loaded and keeps its count; tapelab read it at its first parallel op, so it ran
# one thread where PyTorch ran several and its split sums differed from PyTorch's in the last bit.
@pytest.mark.parametrize("lib", ["torch", "tapelab"])
def test_omp_num_threads_read_at_import(lib):
    import os
    import subprocess
    import sys
    code = (f"import os, {lib} as L; os.environ['OMP_NUM_THREADS'] = '2'; "
            "print(L.get_num_threads())")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "1", out.stderr[-2000:]


# ---------------------------------------------------------------- var / std backward in PyTorch's order
# nflows' BatchNorm transform normalises with ``inputs.var(0)``: tapelab's gradient, 2 * g * (x - mean) / dof,
# rounded differently from PyTorch's (2 / dof) * g * (x - mean), so a parameter whose gradient cancels
# to 0.0 in PyTorch got 1e-8 and Adam moved it by lr; std's is g / (2 std) (0 where std is 0), then var's.
_VAR_CASES = {
    "var0": lambda L, x: x.var(0), "std0": lambda L, x: x.std(0), "var_all": lambda L, x: x.var(),
    "std_all": lambda L, x: x.std(), "var1_keep": lambda L, x: x.var(1, keepdim=True),
    "std_c0": lambda L, x: x.std(0, correction=0), "var_mean": lambda L, x: L.var_mean(x, 0)[0],
    "std_mean": lambda L, x: L.std_mean(x, 1)[0], "var_c5": lambda L, x: x[:2, :3].var(1, correction=5),
    "var_dof0": lambda L, x: x[:2, :3].var(1, correction=3), "std_const": lambda L, x: (x * 0 + 1).std(0),
}


@pytest.mark.parametrize("case", sorted(_VAR_CASES))
def test_var_std_backward_bits(case):
    rs = np.random.RandomState(0)
    data, gdata = rs.randn(64, 4).astype(np.float32), rs.randn(64, 4).astype(np.float32)

    def run(lib):
        x = lib.tensor(data, requires_grad=True)
        y = _VAR_CASES[case](lib, x)
        w = lib.tensor(gdata.ravel()[:y.numel()].reshape(tuple(y.shape)))
        (g,) = lib.autograd.grad((y * w).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.pow(2).sum(), x)
        return g.detach().numpy(), gg.numpy()

    with np.errstate(all="ignore"):
        for ours, real in zip(run(tapelab), run(torch)):
            np.testing.assert_array_equal(ours, real)


def test_var_backward_complex():
    rs = np.random.RandomState(1)
    data = (rs.randn(5, 3) + 1j * rs.randn(5, 3)).astype(np.complex64)

    def run(lib):
        x = lib.tensor(data, requires_grad=True)
        x.var(0).sum().backward()
        return x.grad.numpy()
    np.testing.assert_allclose(run(tapelab), run(torch), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- torchvision's ViT conv stem
# lightly's masked-autoencoder module imports ``torchvision.models.vision_transformer.ConvStemConfig``;
# tapelab.vision had neither it nor ``VisionTransformer(conv_stem_configs=...)``, and raised ValueError
# where torchvision's ``torch._assert`` raises AssertionError.
_STEM_KEYS = [  # torchvision 0.28's state dict for the model below
    ("conv_proj.conv_bn_relu_0.0.weight", (8, 3, 3, 3)), ("conv_proj.conv_bn_relu_0.1.weight", (8,)),
    ("conv_proj.conv_bn_relu_0.1.bias", (8,)), ("conv_proj.conv_bn_relu_0.1.running_mean", (8,)),
    ("conv_proj.conv_bn_relu_0.1.running_var", (8,)), ("conv_proj.conv_bn_relu_0.1.num_batches_tracked", ()),
    ("conv_proj.conv_bn_relu_1.0.weight", (16, 8, 3, 3)), ("conv_proj.conv_bn_relu_1.1.weight", (16,)),
    ("conv_proj.conv_bn_relu_1.1.bias", (16,)), ("conv_proj.conv_bn_relu_1.1.running_mean", (16,)),
    ("conv_proj.conv_bn_relu_1.1.running_var", (16,)), ("conv_proj.conv_bn_relu_1.1.num_batches_tracked", ()),
    ("conv_proj.conv_last.weight", (8, 16, 1, 1)), ("conv_proj.conv_last.bias", (8,))]


def test_vit_conv_stem():
    from tapelab.vision.models.vision_transformer import ConvStemConfig, VisionTransformer
    nn = tapelab.nn
    cfg = [ConvStemConfig(8, 3, 2), ConvStemConfig(16, 3, 2, activation_layer=nn.Hardswish)]
    m = VisionTransformer(16, 4, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16, num_classes=3,
                          conv_stem_configs=cfg)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items() if k.startswith("conv_proj")] == _STEM_KEYS
    assert sum(p.numel() for p in m.parameters()) == 2339
    assert isinstance(m.conv_proj.conv_bn_relu_1[2], nn.Hardswish)
    assert ConvStemConfig(4, 3, 1).norm_layer is nn.BatchNorm2d and ConvStemConfig(4, 3, 1).activation_layer is nn.ReLU
    # the stem computes what the same layers compute in PyTorch
    ref = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 16, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.Hardswish(),
                              torch.nn.Conv2d(16, 8, 1))
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in zip(ref.state_dict(), m.conv_proj.state_dict().values())})
    x = np.random.RandomState(0).rand(2, 3, 16, 16).astype(np.float32)
    m.eval(), ref.eval()
    np.testing.assert_allclose(m.conv_proj(tapelab.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert m(tapelab.tensor(x)).shape == (2, 3)
    with pytest.raises(AssertionError, match="Input shape indivisible by patch size!"):
        VisionTransformer(15, 4, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=16)


# ---------------------------------------------------------------- torch.utils.deterministic
# ultralytics' ``init_seeds(deterministic=True)`` sets ``torch.utils.deterministic.fill_uninitialized_memory``
# (tapelab had no such module); PyTorch fills ``empty`` memory with NaN / an integer dtype's maximum while
# deterministic algorithms are on, unless that flag is off.
_EMPTY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
                 "complex64", "complex128"]


def _filled_empties(lib, fill):
    out = []
    lib.use_deterministic_algorithms(True)
    try:
        lib.utils.deterministic.fill_uninitialized_memory = fill
        for name in _EMPTY_DTYPES:
            dt = getattr(lib, name)
            for t in (lib.empty(2, 3, dtype=dt), lib.empty_like(lib.ones(3, dtype=dt)),
                      lib.ones(1, dtype=dt).new_empty(2), lib.empty_strided((2, 2), (1, 2), dtype=dt)):
                out.append((str(t.dtype).split(".")[-1], tuple(t.shape),
                            t.to(lib.float64 if not dt.is_complex else dt).tolist() if fill else None))
    finally:
        lib.utils.deterministic.fill_uninitialized_memory = True
        lib.use_deterministic_algorithms(False)
    return out


@pytest.mark.parametrize("fill", [True, False])
def test_deterministic_fill_uninitialized_memory(fill):
    got, want = _filled_empties(tapelab, fill), _filled_empties(torch, fill)
    assert repr(got) == repr(want)    # repr: NaN == NaN


def test_deterministic_module_flag():
    def run(lib):
        mod = lib.utils.deterministic
        out = [mod.fill_uninitialized_memory]
        try:
            mod.fill_uninitialized_memory = 1
        except Exception as e:  # noqa: BLE001
            out.append((type(e).__name__, str(e)))
        mod.fill_uninitialized_memory = False
        out.append(mod.fill_uninitialized_memory)
        mod.fill_uninitialized_memory = True
        return out
    assert run(tapelab) == run(torch)


# ---------------------------------------------------------------- DataLoader._get_iterator
# ultralytics' InfiniteDataLoader overrides ``__iter__``, swaps in a batch sampler that repeats forever
# (``object.__setattr__`` past the loader's guard) and keeps ``self._get_iterator()`` across epochs;
# tapelab's loader built its iterator inside ``__iter__`` and had no ``_get_iterator``.
def _infinite_loader_batches(lib):
    data = lib.utils.data

    class Repeat:
        def __init__(self, sampler):
            self.sampler = sampler

        def __iter__(self):
            while True:
                yield from iter(self.sampler)

    class Infinite(data.DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "batch_sampler", Repeat(self.batch_sampler))
            self.iterator = None

        def __len__(self):
            return len(self.batch_sampler.sampler)

        def __iter__(self):
            if self.iterator is None:
                self.iterator = self._get_iterator()
            for _ in range(len(self)):
                yield next(self.iterator)

    lib.manual_seed(0)
    ds = data.TensorDataset(lib.arange(10.0))
    loader = Infinite(ds, batch_size=4, shuffle=True)
    epochs = [[b[0].tolist() for b in loader] for _ in range(3)]
    return len(loader), epochs, type(loader.iterator).__name__


def test_dataloader_get_iterator_across_epochs():
    assert _infinite_loader_batches(tapelab) == _infinite_loader_batches(torch)


# ---------------------------------------------------------------- jit.trace's module, save's extra files
# ultralytics' TorchScript export: ``ts = torch.jit.trace(model, im); ts.save(f, _extra_files={...})`` and,
# on load, ``torch.jit.load(f, _extra_files=extra)`` fills ``extra``. tapelab's trace handed the model back,
# whose own ``save`` attribute (a list of layer indices) shadowed the method; extra files were dropped.
def _traced_round_trip(lib, path):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Dropout(0.5)).eval()
    m.save = [1, 2]                      # a plain attribute named like the method (ultralytics' models)
    m.register_buffer("b", lib.ones(3))
    ts = lib.jit.trace(m, lib.ones(1, 2))
    out = [isinstance(ts, lib.jit.ScriptModule), list(ts.state_dict()), getattr(ts, "0").weight is m[0].weight,
           [n for n, _ in ts.named_modules()], ts(lib.ones(2, 2)).tolist(), hasattr(ts, "in_features")]
    ts.save(str(path), _extra_files={"config.txt": '{"a": 1}', "raw": b"\x00x"})
    import zipfile
    with zipfile.ZipFile(str(path)) as zf:   # where tools read them (ultralytics' metadata reader)
        out.append(sorted(zf.read(n) for n in zf.namelist() if n.split("/", 1)[1].startswith("extra/")))
    extra = {"config.txt": "", "missing": ""}
    back = lib.jit.load(str(path), _extra_files=extra)
    out += [extra, isinstance(back, lib.jit.ScriptModule), back(lib.ones(1, 2)).tolist(), list(back.state_dict())]
    lib.jit.save(ts, str(path))
    extra = {"x": ""}
    lib.jit.load(str(path), _extra_files=extra)
    return out + [extra]


def test_jit_trace_module_save_extra_files(tmp_path):
    assert _traced_round_trip(tapelab, tmp_path / "a.pt") == _traced_round_trip(torch, tmp_path / "b.pt")

"""The Module API against PyTorch: registration, traversal, state_dict and its errors, hooks,
repr, dtype conversion, containers, tape module names, nn.utils."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_layers import arr, close, pair


def build_model(nn):
    """A composite with every container kind, nested names and buffers."""
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(c)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.act(self.bn(self.conv(x))) + x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.GELU())
            self.blocks = nn.ModuleList([Block(4) for _ in range(2)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "aux": nn.Linear(4, 1)})
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.drop = nn.Dropout(0.1)
            self.scale = nn.Parameter(torch.ones(1) if nn is torch.nn else tl.ones(1))
            self.register_buffer("step", (torch if nn is torch.nn else tl).zeros(1), persistent=False)

        def forward(self, x):
            x = self.stem(x)
            for b in self.blocks:
                x = b(x)
            x = self.pool(x).flatten(1)
            return self.heads["cls"](self.drop(x)) * self.scale

    return Net()


def test_names_and_state_dict_keys_match_torch():
    tm, lm = build_model(torch.nn), build_model(tl.nn)
    assert [n for n, _ in lm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in lm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [n for n, _ in lm.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in lm.named_children()] == [n for n, _ in tm.named_children()]
    assert list(lm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in lm.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in tm.named_parameters(prefix="m", recurse=False)]
    assert len(list(lm.modules())) == len(list(tm.modules()))
    assert not lm.state_dict()["stem.0.weight"].requires_grad
    assert lm.state_dict(keep_vars=True)["stem.0.weight"] is lm.stem[0].weight


def test_repr_matches_torch():
    tm, lm = build_model(torch.nn), build_model(tl.nn)
    assert repr(lm) == repr(tm)
    seq = [lambda nn: nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Tanh())),
           lambda nn: nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)]),
           lambda nn: nn.ModuleList(), lambda nn: nn.ModuleDict({"a": nn.ReLU(), "b": nn.LeakyReLU(0.2, True)})]
    for build in seq:
        assert repr(build(tl.nn)) == repr(build(torch.nn))


_LAYERS = [
    lambda nn: nn.Conv2d(3, 8, 3, stride=2, padding=1, dilation=2, padding_mode="reflect"),
    lambda nn: nn.ConvTranspose2d(4, 2, (3, 2), output_padding=1, stride=2), lambda nn: nn.Conv1d(2, 4, 5, padding="same"),
    lambda nn: nn.BatchNorm2d(8, momentum=None, affine=False), lambda nn: nn.LayerNorm((4, 5), eps=1e-6, elementwise_affine=False),
    lambda nn: nn.GroupNorm(2, 8), lambda nn: nn.InstanceNorm1d(4, affine=True), lambda nn: nn.Dropout(0.25, inplace=True),
    lambda nn: nn.GELU(approximate="tanh"), lambda nn: nn.Softplus(beta=2, threshold=10), lambda nn: nn.Threshold(0.1, 20),
    lambda nn: nn.MaxPool2d(2, stride=1, return_indices=True), lambda nn: nn.AvgPool2d(3, ceil_mode=True, count_include_pad=False),
    lambda nn: nn.AdaptiveAvgPool2d((1, None)), lambda nn: nn.Embedding(10, 3, padding_idx=0, max_norm=2.0),
    lambda nn: nn.EmbeddingBag(10, 3, mode="max"), lambda nn: nn.LSTM(4, 8, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True),
    lambda nn: nn.MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=4),
    lambda nn: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True),
    lambda nn: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), lambda nn: nn.Unflatten(1, (2, 3)),
    lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=3), lambda nn: nn.ZeroPad2d((1, 2, 0, 1)),
    lambda nn: nn.Fold((4, 4), 2), lambda nn: nn.Unfold(2, stride=2), lambda nn: nn.RMSNorm(4), lambda nn: nn.LazyLinear(3),
    lambda nn: nn.MaxUnpool1d(2), lambda nn: nn.MaxUnpool2d((2, 3), padding=1), lambda nn: nn.MaxUnpool3d(2, 1),
]


@pytest.mark.parametrize("build", _LAYERS, ids=range(len(_LAYERS)))
def test_layer_reprs_match_torch(build):
    """What ``print(model)`` shows of each layer's settings (MaxUnpool holds its sizes as tuples)."""
    assert repr(build(tl.nn)) == repr(build(torch.nn))


def test_model_forward_backward_matches_torch():
    tm, lm = pair(build_model)
    tm.drop.p = lm.drop.p = 0.0
    x = arr(2, 3, 9, 9)
    tx, lx = torch.tensor(x, requires_grad=True), tl.tensor(x, requires_grad=True)
    to, lo = tm(tx), lm(lx)
    close(lo, to)
    to.sum().backward()
    lo.sum().backward()
    close(lx.grad, tx.grad)
    tp = dict(tm.named_parameters())
    for n, p in lm.named_parameters():
        if tp[n].grad is None:
            assert p.grad is None
        else:
            close(p.grad, tp[n].grad, what=n)


def test_load_state_dict_errors_match_torch():
    tm, lm = build_model(torch.nn), build_model(tl.nn)
    tsd = tm.state_dict()
    del tsd["heads.cls.bias"]
    tsd["extra.weight"] = torch.ones(1)
    tsd["stem.0.weight"] = torch.ones(2, 3)
    lsd = {k: tl.tensor(v.numpy()) for k, v in tsd.items()}
    with pytest.raises(RuntimeError) as te:
        tm.load_state_dict(tsd)
    with pytest.raises(RuntimeError) as le:
        lm.load_state_dict(lsd)
    assert str(le.value) == str(te.value).replace("torch.Size", "tapelab.Size")
    del tsd["stem.0.weight"], lsd["stem.0.weight"]
    assert repr(lm.load_state_dict(lsd, strict=False)) == repr(tm.load_state_dict(tsd, strict=False))
    full = {k: tl.tensor(v.numpy()) for k, v in tm.state_dict().items()}
    res = lm.load_state_dict(full)
    assert repr(res) == "<All keys matched successfully>" and res.missing_keys == []


def test_load_state_dict_copies_in_place():
    lin = tl.nn.Linear(2, 2)
    w = lin.weight
    lin.load_state_dict({"weight": tl.ones(2, 2), "bias": tl.zeros(2)})
    assert lin.weight is w and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(), 1)
    lin.load_state_dict({"weight": tl.full((2, 2), 3.0), "bias": tl.zeros(2)}, assign=True)
    assert lin.weight is not w and isinstance(lin.weight, tl.nn.Parameter)


def test_batchnorm_loads_checkpoints_without_num_batches_tracked():
    bn = tl.nn.BatchNorm1d(2)
    sd = bn.state_dict()
    del sd["num_batches_tracked"]
    assert repr(bn.load_state_dict(sd)) == "<All keys matched successfully>"


def test_setattr_registration_and_errors_match_torch():
    for nn, T in ((tl.nn, tl), (torch.nn, torch)):
        m = nn.Module()
        m.w = nn.Parameter(T.ones(2))
        m.sub = nn.Linear(1, 1)
        m.register_buffer("buf", T.zeros(1))
        m.plain = 3
        assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and list(m._buffers) == ["buf"]
        m.buf = T.ones(1)
        assert "buf" in m._buffers
        m.w = None
        assert m._parameters["w"] is None
        del m.sub
        assert "sub" not in m._modules
    checks = [
        (lambda nn, T: setattr(_with_param(nn, T), "w", T.ones(2)), TypeError,
         "cannot assign '{} as parameter 'w' (torch.nn.Parameter or None expected)"),
        (lambda nn, T: setattr(_with_child(nn), "c", 3), TypeError,
         "cannot assign 'int' as child module 'c' (torch.nn.Module or None expected)"),
        (lambda nn, T: nn.Module().register_buffer("a.b", T.ones(1)), KeyError, 'buffer name can\'t contain "."'),
        (lambda nn, T: nn.Module().register_buffer("x", 3), TypeError,
         "cannot assign 'int' object to buffer 'x' (torch Tensor or None required)"),
        (lambda nn, T: _with_child(nn).register_parameter("c", None), KeyError, "attribute 'c' already exists"),
        (lambda nn, T: nn.Module().missing, AttributeError, "'Module' object has no attribute 'missing'"),
        (lambda nn, T: nn.Module().train("yes"), ValueError, "training mode is expected to be boolean"),
        (lambda nn, T: nn.Module()(1), NotImplementedError,
         'Module [Module] is missing the required "forward" function'),
    ]
    for fn, exc, msg in checks:
        for nn, T in ((tl.nn, tl), (torch.nn, torch)):
            with pytest.raises(exc) as e:
                fn(nn, T)
            text = str(e.value.args[0]).replace("torch.FloatTensor", "{}").replace("tapelab.FloatTensor", "{}")
            assert msg.split("{}")[-1] in text, (nn, text)


def _with_param(nn, T):
    m = nn.Module()
    m.w = nn.Parameter(T.ones(2))
    return m


def _with_child(nn):
    m = nn.Module()
    m.c = nn.ReLU()
    return m


def test_non_persistent_buffer_and_buffer_class():
    m = tl.nn.Module()
    m.register_buffer("a", tl.ones(1), persistent=False)
    m.b = tl.nn.Buffer(tl.zeros(2))
    assert list(m.state_dict()) == ["b"] and [n for n, _ in m.named_buffers()] == ["a", "b"]
    assert type(m.b) is tl.Tensor


def test_parameter_repr_and_semantics():
    p = tl.nn.Parameter(tl.ones(2))
    assert repr(p) == repr(torch.nn.Parameter(torch.ones(2))).replace("torch.", "tapelab.")
    assert repr(tl.nn.Parameter(tl.ones(2), requires_grad=False)) == "Parameter containing:\ntensor([1., 1.])"
    assert p.is_leaf and p.requires_grad and type(p * 2) is tl.Tensor and type(p.detach()) is tl.Tensor
    assert type(copy.deepcopy(p)) is tl.nn.Parameter
    assert isinstance(p, tl.Tensor)


def test_train_eval_apply_requires_grad_zero_grad():
    m = build_model(tl.nn)
    assert m.training and m.blocks[0].bn.training
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Net" and "Conv2d" in seen
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_(True)
    m(tl.randn(1, 3, 7, 7)).sum().backward()
    assert all(p.grad is not None for p in m.stem.parameters())
    m.zero_grad(set_to_none=False)
    assert all(not p.grad.numpy().any() for p in m.stem.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_to_and_dtype_conversions():
    m = build_model(tl.nn)
    w = m.stem[0].weight
    assert m.double() is m and w.dtype == tl.float64 and m.stem[0].weight is w
    assert m.blocks[0].bn.num_batches_tracked.dtype == tl.int64
    m.to(tl.float32)
    assert w.dtype == tl.float32 and m.blocks[0].bn.running_mean.dtype == tl.float32
    m.to("cpu", dtype=tl.float64)
    assert w.dtype == tl.float64
    m.to(tl.zeros(1))
    assert w.dtype == tl.float32
    assert m.half().stem[0].weight.dtype == tl.float16
    assert m.float().cpu().stem[0].weight.dtype == tl.float32
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        m.to(tl.int64)


def test_forward_hooks_match_torch():
    calls = {}
    for lib in (tl, torch):
        log = calls[lib.__name__] = []
        lin = lib.nn.Linear(2, 2)
        h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        lin.register_forward_pre_hook(lambda m, args, kw: log.append(("kw", sorted(kw))), with_kwargs=True)
        lin.register_forward_hook(lambda m, args, out: out * 0 + 1)
        lin.register_forward_hook(lambda m, args, out: log.append(("post", tuple(out.shape))), prepend=True)
        out = lin(lib.ones(3, 2))
        log.append(("out", out.sum().item()))
        h1.remove()
        with lin.register_forward_hook(lambda m, a, kw, o: log.append(("k", kw)), with_kwargs=True):
            lin(lib.ones(1, 2))
        lin(lib.ones(1, 2))
    assert calls["tapelab"] == calls["torch"]


def test_full_backward_hook_matches_torch():
    got = {}
    for lib in (tl, torch):
        log = got[lib.__name__] = []
        torch.manual_seed(0)
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]))

        def hook(m, gin, gout):
            log.append(([None if g is None else g.tolist() for g in gin], [g.tolist() for g in gout]))
            return None if gin[0] is None else (gin[0] * 10,)

        lin.register_full_backward_hook(hook)
        lin.register_full_backward_pre_hook(lambda m, gout: (gout[0] * 2,))
        x = lib.ones(1, 3, requires_grad=True)
        lin(x).sum().backward()
        log.append(x.grad.tolist())
        log.append(lin.weight.grad.tolist())
        y = lib.ones(1, 3)          # no input needs grad: the hook still sees grad_output
        lin(y).sum().backward()
    assert got["tapelab"] == got["torch"]


def test_sequential_and_list_api():
    seq = tl.nn.Sequential(tl.nn.Linear(2, 3), tl.nn.ReLU(), tl.nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], tl.nn.Linear)
    sub = seq[1:]
    assert isinstance(sub, tl.nn.Sequential) and list(sub._modules) == ["1", "2"]
    seq.append(tl.nn.Sigmoid())
    assert len(seq) == 4 and [type(m).__name__ for m in seq][-1] == "Sigmoid"
    assert seq(tl.randn(5, 2)).shape == (5, 1)
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"]
    with pytest.raises(IndexError, match="index 7 is out of range"):
        seq[7]
    from collections import OrderedDict
    named = tl.nn.Sequential(OrderedDict([("fc", tl.nn.Linear(1, 1)), ("act", tl.nn.Tanh())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"] and named.fc is named[0]
    ml = tl.nn.ModuleList([tl.nn.ReLU()])
    ml.append(tl.nn.Tanh())
    ml.extend([tl.nn.Sigmoid()])
    ml.insert(0, tl.nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "ReLU", "Tanh", "Sigmoid"]
    assert isinstance(ml[1:3], tl.nn.ModuleList) and len(ml[1:3]) == 2
    md = tl.nn.ModuleDict({"a": tl.nn.ReLU()})
    md["b"] = tl.nn.Tanh()
    assert list(md.keys()) == ["a", "b"] and "a" in md and len(md) == 2
    assert md.pop("a").__class__.__name__ == "ReLU" and list(md) == ["b"]


def test_parameter_containers_match_torch():
    for lib in (tl, torch):
        pl = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, 3)), lib.zeros(4)])
        pd = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2))})
        pd["b"] = lib.zeros(3)
        m = lib.nn.Module()
        m.pl, m.pd = pl, pd
        names = [n for n, _ in m.named_parameters()]
        assert names == ["pl.0", "pl.1", "pd.a", "pd.b"]
        assert isinstance(pl[1], lib.nn.Parameter) and len(pl) == 2 and list(pd) == ["a", "b"]
    assert repr(tl.nn.ParameterList([tl.nn.Parameter(tl.ones(2, 3))])) == \
        repr(torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3))])).replace("torch.", "tapelab.")


def test_get_submodule_and_parameter():
    m = build_model(tl.nn)
    assert m.get_submodule("blocks.1.bn") is m.blocks[1].bn
    assert m.get_parameter("heads.cls.weight") is m.heads["cls"].weight
    with pytest.raises(AttributeError):
        m.get_submodule("blocks.9")


def test_deepcopy_module():
    m = build_model(tl.nn)
    c = copy.deepcopy(m)
    assert c.stem[0].weight is not m.stem[0].weight
    np.testing.assert_array_equal(c.stem[0].weight.detach().numpy(), m.stem[0].weight.detach().numpy())
    assert isinstance(c.stem[0].weight, tl.nn.Parameter)


def test_ops_recorded_inside_a_module_know_its_path():
    m = build_model(tl.nn)
    m.eval()
    with tl.tape():
        out = m(tl.randn(1, 3, 7, 7))
    node = out.grad_fn
    assert node.module == ""            # the final multiply by `scale` runs in the root forward
    paths = set()
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        paths.add(getattr(n, "module", None))
        stack.extend(e[0] for e in n.next_functions)
    assert {"heads.cls", "blocks.1.bn", "blocks.0.conv", "stem.0", "stem.1"} <= paths


def test_module_call_is_cheap_without_watchers():
    lin = tl.nn.Linear(2, 2)
    out = lin(tl.randn(1, 2))
    assert out.grad_fn.module == "" and "_tape_name" not in lin.__dict__


# ---------------------------------------------------------------- nn.utils
@pytest.mark.parametrize("foreach", [None, False])       # the 2-norm on arrays, and the Tensor path
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf")])
def test_clip_grad_norm_matches_torch(norm_type, foreach):
    tm, lm = pair(lambda nn: nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2)))
    x = arr(5, 4)
    tm(torch.tensor(x)).pow(2).sum().backward()
    lm(tl.tensor(x)).pow(2).sum().backward()
    tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.5, norm_type)
    versions = [p.grad._version for p in lm.parameters()]
    ln = tl.nn.utils.clip_grad_norm_(lm.parameters(), 0.5, norm_type, foreach=foreach)
    close(ln, tn)
    assert str(ln.dtype).split(".")[1] == str(tn.dtype).split(".")[1] and ln.shape == ()
    for (n, p), q, v in zip(lm.named_parameters(), tm.parameters(), versions):
        close(p.grad, q.grad, what=n)
        assert p.grad._version > v


def test_clip_grad_errors_and_value():
    p = tl.nn.Parameter(tl.ones(3))
    p.grad = tl.tensor([float("nan"), 1.0, -5.0])
    for foreach in (None, False):
        with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
            tl.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True, foreach=foreach)
    p.grad = tl.tensor([0.1, 3.0, -5.0])
    tl.nn.utils.clip_grad_value_(p, 1.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.1, 1.0, -1.0])
    assert tl.nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_parameters_vector_roundtrip():
    m = tl.nn.Sequential(tl.nn.Linear(3, 2), tl.nn.Linear(2, 1))
    v = tl.nn.utils.parameters_to_vector(m.parameters())
    assert v.shape == (11,) and v.requires_grad
    tl.nn.utils.vector_to_parameters(tl.arange(11.0), m.parameters())
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(m[1].bias.detach().numpy(), [10.0])
    with pytest.raises(TypeError, match="expected torch.Tensor"):
        tl.nn.utils.vector_to_parameters([1.0], m.parameters())


# ---------------------------------------------------------------- nn.init
def test_init_functions():
    init = tl.nn.init
    w = tl.empty(300, 400)
    assert init.calculate_gain("relu") == pytest.approx(2 ** 0.5)
    assert init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu", 0.2)
    assert init._calculate_fan_in_and_fan_out(tl.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    checks = [(lambda: init.uniform_(w, -2, 3), 0.5, (25 / 12) ** 0.5),
              (lambda: init.normal_(w, 1.0, 0.5), 1.0, 0.5),
              (lambda: init.xavier_uniform_(w), 0.0, (2 / 700) ** 0.5),
              (lambda: init.xavier_normal_(w, gain=2.0), 0.0, 2 * (2 / 700) ** 0.5),
              (lambda: init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"), 0.0, (2 / 300) ** 0.5),
              (lambda: init.kaiming_uniform_(w, a=1.0), 0.0, (1 / 400) ** 0.5),
              (lambda: init.trunc_normal_(w, 0.0, 1.0, -2.0, 2.0), 0.0, 0.8796)]
    for fn, mean, std in checks:
        out = fn()
        assert out is w
        a = w.numpy()
        assert abs(a.mean() - mean) < 0.02 * max(std, 1) and abs(a.std() - std) < 0.02 * std
    assert abs(w.numpy()).max() <= 2.0
    init.constant_(w, 0.25)
    assert (w.numpy() == 0.25).all()
    init.zeros_(w), init.ones_(w)
    assert (w.numpy() == 1).all()
    init.eye_(w)
    np.testing.assert_array_equal(w.numpy(), np.eye(300, 400))


def test_init_respects_no_grad_and_generator():
    p = tl.nn.Parameter(tl.empty(4, 4))
    tl.nn.init.normal_(p)
    assert p.is_leaf and p.grad_fn is None
    g = tl.Generator().manual_seed(5)
    a = tl.nn.init.uniform_(tl.empty(5), generator=g).numpy().copy()
    g.manual_seed(5)
    np.testing.assert_array_equal(tl.nn.init.uniform_(tl.empty(5), generator=g).numpy(), a)


def test_orthogonal_init():
    w = tl.nn.init.orthogonal_(tl.empty(6, 4), gain=2.0).numpy()
    np.testing.assert_allclose(w.T @ w, 4 * np.eye(4), atol=1e-5)

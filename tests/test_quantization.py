"""Quantization against PyTorch: fake quantization ops (values, straight-through gradients, node names, errors)
and the fused observer + fake-quant op that ``get_default_qat_qconfig`` modules run."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

_SPECIAL = [0.25, 0.35, -0.25, 1e9, -1e9, 1e30, float("nan"), float("inf"), -float("inf")]


def _pair(x: torch.Tensor):
    """A torch leaf and a tapelab leaf with the same values, both requiring grad."""
    return (x.detach().clone().requires_grad_(),
            tapelab.tensor(x.detach().float().numpy()).to(getattr(tapelab, str(x.dtype)[6:])).requires_grad_())


def _np(t) -> np.ndarray:
    return t.detach().float().numpy()


def _same(a, b) -> bool:
    return np.array_equal(_np(a), _np(b), equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("scale,zero_point,qmin,qmax", [(0.1, 3, 0, 255), (0.0123, -5, -128, 127), (1 / 3, 7, 0, 15)])
def test_fake_quantize_per_tensor_bitwise(dtype, scale, zero_point, qmin, qmax):
    """QAT's fake quant: torch rounds nearbyint(x * float32(1/scale)) + zero_point (ties to even), clamps as a
    float (inf to the bounds, NaN to quant_min) and multiplies back in float32; the gradient is the mask."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(4000) * 3, torch.arange(-300, 300) * 0.05, torch.tensor(_SPECIAL)]).to(
        getattr(torch, dtype))
    g = torch.randn(x.shape).to(x.dtype)
    for make in (lambda T: (scale, zero_point), lambda T: (T.tensor([scale]), T.tensor([zero_point], dtype=T.int32))):
        xt, xl = _pair(x)
        yt = torch.fake_quantize_per_tensor_affine(xt, *make(torch), qmin, qmax)
        yl = tapelab.fake_quantize_per_tensor_affine(xl, *make(tapelab), qmin, qmax)
        yt.backward(g)
        yl.backward(tapelab.tensor(g.float().numpy()).to(yl.dtype))
        assert yl.dtype == getattr(tapelab, dtype) and _same(yt, yl) and _same(xt.grad, xl.grad)
        assert yl.grad_fn.name() == yt.grad_fn.name()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("zp_dtype", ["int32", "float32", "float16"])
def test_fake_quantize_per_channel_bitwise(dtype, zp_dtype):
    """Per-channel fake quant: torch's code goes through int64 (non-finite values become quant_min, masked), a
    float zero point is added before rounding, and the product is taken in double."""
    torch.manual_seed(0)
    x = torch.randn(6, 5, 40) * 3
    x[0, 0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30])
    scale = torch.rand(5) * 0.1 + 0.01
    zp = (torch.randint(0, 20, (5,)) if zp_dtype == "int32" else torch.rand(5) * 20).to(getattr(torch, zp_dtype))
    xt, xl = _pair(x.to(getattr(torch, dtype)))
    yt = torch.fake_quantize_per_channel_affine(xt, scale, zp, 1, 0, 255)
    yl = tapelab.fake_quantize_per_channel_affine(xl, tapelab.tensor(scale.numpy()), tapelab.tensor(zp.numpy()),
                                                  1, 0, 255)
    (yt * yt.detach()).sum().backward()
    (yl * yl.detach()).sum().backward()
    assert _same(yt, yl) and _same(xt.grad, xl.grad) and yl.grad_fn.name() == yt.grad_fn.name()


def test_fake_quantize_double_backward():
    """The backward (grad * mask) is differentiable in grad, as torch's cachemask backward is."""
    x = torch.tensor([-3.0, 0.04, 0.5, 30.0], requires_grad=True)
    xl = tapelab.tensor(x.detach().numpy(), requires_grad=True)
    outs = []
    for T, v in ((torch, x), (tapelab, xl)):
        y = T.fake_quantize_per_tensor_affine(v, 0.1, 3, 0, 255)
        (g,) = T.autograd.grad((y * y).sum(), v, create_graph=True)
        (gg,) = T.autograd.grad(g.sum(), v)
        outs.append((g, gg))
    assert _same(outs[0][0], outs[1][0]) and _same(outs[0][1], outs[1][1])


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type and message are what is compared)
        return type(e).__name__, str(e).split("\n")[0]
    return None


@pytest.mark.parametrize("call", [
    lambda T, x: T.fake_quantize_per_tensor_affine(x.int(), 0.1, 0, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 2),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, 0.1, 0.5, 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, T.tensor([0.1, 0.2]), T.tensor([1, 2], dtype=T.int32), 0, 255),
    lambda T, x: T.fake_quantize_per_tensor_affine(x, T.tensor([0.1], requires_grad=True),
                                                   T.tensor([3], dtype=T.int32), 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x.int(), T.ones(3), T.zeros(3, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int32), 1, 5, 2),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.full((3,), 300, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(2, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3, 1), T.zeros(3, 1, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int32), -1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(2), T.zeros(2, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3).double(), T.zeros(3, dtype=T.int32), 1, 0, 255),
    lambda T, x: T.fake_quantize_per_channel_affine(x, T.ones(3), T.zeros(3, dtype=T.int64), 1, 0, 255),
])
def test_fake_quantize_errors(call):
    """Bad dtypes, ranges and shapes raise torch's exception types and messages."""
    expected = _error(lambda: call(torch, torch.ones(2, 3)))
    assert expected is not None
    assert _error(lambda: call(tapelab, tapelab.ones(2, 3))) == expected


def _fused_buffers(T, per_row: bool):
    empty = (T.tensor([]), T.tensor([])) if per_row else (T.tensor(float("inf")), T.tensor(float("-inf")))
    return (T.tensor([1]), T.tensor([1]), *empty, T.tensor([1.0]), T.tensor([0], dtype=T.int32))


@pytest.mark.parametrize("per_row,symmetric,qmin,qmax", [(False, False, 0, 127), (False, True, -128, 127),
                                                          (True, True, -128, 127), (True, False, 0, 255)])
def test_fused_moving_avg_obs_fake_quant(per_row, symmetric, qmin, qmax):
    """FusedMovingAvgObsFakeQuantize's op (get_default_qat_qconfig's): running min/max, ATen's
    ChooseQuantizationParams (small scales cut off at 6.1e-5), the fake quant and its node, step after step."""
    bt, bl = _fused_buffers(torch, per_row), _fused_buffers(tapelab, per_row)
    torch.manual_seed(1)
    for step in range(4):
        x = torch.rand(4, 7) * 1e-6 if step == 3 else torch.randn(4, 7) * (step + 1) + 0.3 * step
        xt, xl = _pair(x)
        yt = torch.fused_moving_avg_obs_fake_quant(xt, *bt, 0.01, qmin, qmax, 0, per_row, symmetric)
        yl = tapelab.fused_moving_avg_obs_fake_quant(xl, *bl, 0.01, qmin, qmax, 0, per_row, symmetric)
        yt.sum().backward()
        yl.sum().backward()
        for a, b in zip(bt + (yt, xt.grad), bl + (yl, xl.grad)):
            assert a.dtype is getattr(torch, str(b.dtype)[8:]) and _same(a, b)
        assert yl.grad_fn.name() == yt.grad_fn.name()
    bt[1][0] = bl[1][0] = 0   # fake quant off: the input passes through
    assert _same(torch.fused_moving_avg_obs_fake_quant(xt, *bt, 0.01, qmin, qmax, 0, per_row, symmetric),
                 tapelab.fused_moving_avg_obs_fake_quant(xl, *bl, 0.01, qmin, qmax, 0, per_row, symmetric))


# ---------------------------------------------------------------- observers, fake-quant modules, eager QAT
import warnings  # noqa: E402

import tapelab.ao.quantization as lq  # noqa: E402
import torch.ao.quantization as tq  # noqa: E402

_OBSERVER_CASES = [(name, kw) for name in ("MinMaxObserver", "MovingAverageMinMaxObserver", "HistogramObserver")
                   for kw in ({}, {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}, {"reduce_range": True},
                              {"quant_min": 0, "quant_max": 15}, {"dtype": "qint32"},
                              {"dtype": "qint8", "qscheme": "per_tensor_symmetric", "quant_min": -8, "quant_max": 7})]
_OBSERVER_CASES += [(name, kw) for name in ("PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver")
                    for kw in ({}, {"ch_axis": 1, "dtype": "qint8", "qscheme": "per_channel_symmetric"},
                               {"qscheme": "per_channel_affine_float_qparams"}, {"ch_axis": 2, "reduce_range": True})]


def _kwargs(T, kw: dict) -> dict:
    return {k: getattr(T, v) if k in ("dtype", "qscheme") else v for k, v in kw.items()}


@pytest.mark.parametrize("name,kw", _OBSERVER_CASES)
def test_observer_qparams_bitwise(name, kw):
    """Observers (calibration and QAT statistics): min/max updates, moving averages, the histogram's re-binning
    and its L2 range search, then scale/zero point for each dtype, scheme, reduce_range and custom range."""
    torch.manual_seed(0)
    xs = [torch.randn(4, 3, 5) * (i + 1) + i * 0.5 for i in range(3)] + [torch.rand(4, 3, 5) * 0.01]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ot, ol = getattr(tq, name)(**_kwargs(torch, kw)), getattr(lq, name)(**_kwargs(tapelab, kw))
    assert (ot.quant_min, ot.quant_max) == (ol.quant_min, ol.quant_max)
    for x in xs:
        ot(x)
        ol(tapelab.tensor(x.numpy()))
        (st, zt), (sl, zl) = ot.calculate_qparams(), ol.calculate_qparams()
        assert _same(st, sl) and _same(zt, zl) and str(zl.dtype)[8:] == str(zt.dtype)[6:]
    assert {k: _np(v).tolist() for k, v in ot.state_dict().items()} == \
        {k: _np(v).tolist() for k, v in ol.state_dict().items()}


@pytest.mark.parametrize("make", [
    lambda q, T: q.MinMaxObserver(qscheme=T.per_channel_affine),
    lambda q, T: q.MovingAverageMinMaxObserver(qscheme=T.per_channel_affine),
    lambda q, T: q.MinMaxObserver(qscheme=T.per_tensor_symmetric, reduce_range=True),
    lambda q, T: q.PerChannelMinMaxObserver(qscheme=T.per_tensor_affine),
    lambda q, T: q.MovingAveragePerChannelMinMaxObserver(qscheme=T.per_tensor_affine),
    lambda q, T: q.HistogramObserver(qscheme=T.per_channel_affine),
    lambda q, T: q.MovingAverageMinMaxObserver(is_dynamic=True),
    lambda q, T: q.MinMaxObserver(dtype=T.float32),
    lambda q, T: q.MinMaxObserver(quant_min=1, quant_max=5),
    lambda q, T: q.QConfig(activation=q.MinMaxObserver(), weight=q.MinMaxObserver),
    lambda q, T: q.get_default_qconfig("cuda"),
    lambda q, T: q.get_default_qat_qconfig("x86", 3),
    lambda q, T: q.FakeQuantize(quant_min=0, quant_max=300),
    lambda q, T: q.FusedMovingAvgObsFakeQuantize(observer=q.MinMaxObserver),
    lambda q, T: q.prepare_qat(T.nn.Linear(2, 2).eval()),
])
def test_quantization_config_errors(make):
    """Bad observer/qconfig arguments raise torch's exception types and messages."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _error(lambda: make(tq, torch))
        assert expected is not None
        kind, message = _error(lambda: make(lq, tapelab))
        assert (kind, message.replace("tapelab.", "torch.")) == expected   # dtypes print as the package is named


def _qat_net(T):
    nn = T.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant = T.ao.quantization.QuantStub()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.relu = nn.ReLU()
            self.fc1 = nn.Linear(4 * 6 * 6, 16)
            self.relu2 = nn.ReLU()
            self.fc2 = nn.Linear(16, 5)
            self.dequant = T.ao.quantization.DeQuantStub()

        def forward(self, x):
            x = self.relu(self.conv(self.quant(x))).flatten(1)
            return self.dequant(self.fc2(self.relu2(self.fc1(x))))
    return Net


@pytest.mark.parametrize("qconfig", ["x86", "x86-v0", "qnnpack", "default"])
def test_prepare_qat_training_matches_torch(qconfig):
    """Eager QAT (fuse_modules -> prepare_qat -> SGD steps -> disable_observer): the same modules swapped in and
    observers attached (module names, types and hooks, state_dict keys), the same losses and fake-quant statistics (to float32 rounding
    of the float layers, which is all that separates the two)."""
    results = []
    for T, q in ((torch, tq), (tapelab, lq)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = {"x86": lambda: q.get_default_qat_qconfig("x86"),
                      "x86-v0": lambda: q.get_default_qat_qconfig("x86", 0),
                      "qnnpack": lambda: q.get_default_qat_qconfig("qnnpack"),
                      "default": lambda: q.default_qat_qconfig}[qconfig]()
            T.manual_seed(0)
            m = _qat_net(T)().eval()
            m = q.fuse_modules(m, [["conv", "relu"], ["fc1", "relu2"]]).train()
            m.qconfig = config
            m = q.prepare_qat(m)
            opt = T.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
            data, target = T.randn(16, 2, 6, 6), T.randint(0, 5, (16,))
            losses = []
            for step in range(4):
                opt.zero_grad()
                loss = T.nn.functional.cross_entropy(m(data[step % 2 * 8:][:8]), target[step % 2 * 8:][:8])
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if step == 2:
                    m.apply(q.disable_observer)
        layout = [(name, type(mod).__name__, sorted(mod._forward_hooks.keys() and ["hook"])) for name, mod in
                  m.named_modules()]
        results.append((layout, losses, {k: _np(v) for k, v in m.state_dict().items()}))
    (rt, lt, st), (rl, ll, sl) = results
    assert rl == rt and list(sl) == list(st)
    np.testing.assert_allclose(ll, lt, rtol=1e-5)
    for k in st:
        np.testing.assert_allclose(sl[k], st[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_qat_state_dict_loads_into_fresh_model():
    """A trained QAT checkpoint loads into a freshly prepared model: per-channel observer buffers and scales
    start empty or of length 1 and take the checkpoint's length, as torch's do."""
    torch.manual_seed(0)
    m = _qat_net(tapelab)().train()
    m.qconfig = lq.get_default_qat_qconfig("x86")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = lq.prepare_qat(m)
        m(tapelab.randn(2, 2, 6, 6))
        fresh = _qat_net(tapelab)().train()
        fresh.qconfig = m.qconfig
        fresh = lq.prepare_qat(fresh)
    fresh.load_state_dict(m.state_dict())
    assert all(np.array_equal(_np(v), _np(fresh.state_dict()[k])) for k, v in m.state_dict().items())


def test_fuse_modules_eval_and_qat():
    """fuse_modules folds batch norm into the conv for inference (ConvReLU2d), fuse_modules_qat keeps it
    (ConvBnReLU2d); the other modules become Identity; outputs equal torch's."""
    for fuse, mode in (("fuse_modules", "eval"), ("fuse_modules_qat", "train")):
        outs = []
        for T, q in ((torch, tq), (tapelab, lq)):
            T.manual_seed(0)
            m = T.nn.Sequential(T.nn.Conv2d(2, 3, 3), T.nn.BatchNorm2d(3), T.nn.ReLU(), T.nn.Flatten(),
                                T.nn.Linear(12, 4), T.nn.ReLU())
            m.train()(T.randn(4, 2, 4, 4))   # running statistics to fold
            getattr(m, mode)()
            fused = getattr(q, fuse)(m, [["0", "1", "2"], ["4", "5"]])
            outs.append((repr(fused).replace("tapelab", "torch"), fused(T.ones(2, 2, 4, 4))))
        assert outs[0][0] == outs[1][0]
        np.testing.assert_allclose(_np(outs[1][1]), _np(outs[0][1]), rtol=1e-5, atol=1e-6)


def test_conv_bn_qat_matches_torch():
    """fuse_modules_qat + prepare_qat turn conv-bn(-relu) into intrinsic.qat.ConvBn(ReLU)2d (batch norm folded
    into the fake-quantized weight); training, freeze_bn_stats and eval give torch's losses and outputs."""
    outs = []
    for T, q in ((torch, tq), (tapelab, lq)):
        nn = T.nn
        T.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Conv2d(4, 4, 3, stride=2), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 3)).train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = q.fuse_modules_qat(m, [["0", "1", "2"], ["3", "4"]])
            m.qconfig = q.get_default_qat_qconfig("x86")
            m = q.prepare_qat(m)
        opt = T.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        data, target = T.randn(16, 2, 4, 4), T.randint(0, 3, (16,))
        losses = []
        for step in range(4):
            opt.zero_grad()
            loss = T.nn.functional.cross_entropy(m(data), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step == 1:
                m.apply(T.ao.nn.intrinsic.qat.freeze_bn_stats)
        outs.append(([(n, type(mod).__name__, mod.training) for n, mod in m.named_modules()], losses,
                     _np(m.eval()(data))))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5)
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- quantized tensors, dynamic quantization
@pytest.mark.parametrize("scale,zero_point,dtype", [(0.1, 10, "quint8"), (0.0123, -5, "qint8"), (1 / 3, 7, "qint32"),
                                                    (0.2, 3, "qint8")])
def test_quantize_per_tensor_bitwise(scale, zero_point, dtype):
    """torch.quantize_per_tensor rounds the fused x * float32(1/scale) + zero_point once (ties to even, as an FMA
    does); dequantize multiplies (code - zero_point) by the float32 scale."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(20000) * 3, torch.arange(-300, 300) * 0.05])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qt = torch.quantize_per_tensor(x, scale, zero_point, getattr(torch, dtype))
        ql = tapelab.quantize_per_tensor(tapelab.tensor(x.numpy()), scale, zero_point, getattr(tapelab, dtype))
    assert np.array_equal(qt.int_repr().numpy(), ql.int_repr().numpy())
    assert ql.int_repr().dtype == getattr(tapelab, str(qt.int_repr().dtype)[6:])
    assert _same(qt.dequantize(), ql.dequantize()) and _same(torch.dequantize(qt), tapelab.dequantize(ql))
    assert (ql.q_scale(), ql.q_zero_point(), ql.is_quantized) == (qt.q_scale(), qt.q_zero_point(), True)
    assert repr(ql.qscheme()).replace("tapelab", "torch") == repr(qt.qscheme())
    assert repr(ql.dtype).replace("tapelab", "torch") == repr(qt.dtype)


def test_quantize_per_channel_and_repr():
    """Per-channel codes (x * float32(1/scale), rounded, plus the zero point), float64 scales, int64 zero points,
    and PyTorch's repr of quantized tensors (dequantized values, then size, dtype, scheme, qparams)."""
    torch.manual_seed(0)
    w = torch.randn(3, 400)
    s, z = torch.tensor([0.1, 0.02, 0.05]), torch.tensor([0, 3, -2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qt = torch.quantize_per_channel(w, s, z, 0, torch.qint8)
        ql = tapelab.quantize_per_channel(tapelab.tensor(w.numpy()), tapelab.tensor(s.numpy()),
                                          tapelab.tensor(z.numpy()), 0, tapelab.qint8)
        small = [T.quantize_per_tensor(T.tensor(v), 0.1, 10, T.quint8)
                 for T, v in ((torch, [-1.0, 0.0, 1.04, 2.0, 30.0]), (tapelab, [-1.0, 0.0, 1.04, 2.0, 30.0]))]
        scalar = [T.quantize_per_tensor(T.tensor(1.5), 0.1, 0, T.qint8) for T in (torch, tapelab)]
        per_channel = [T.quantize_per_channel(T.tensor([[1.0, 2.0], [3.0, -4.0]]), T.tensor([0.1, 0.05]),
                                              T.tensor([0, 3]), 0, T.qint8) for T in (torch, tapelab)]
    assert np.array_equal(qt.int_repr().numpy(), ql.int_repr().numpy()) and _same(qt.dequantize(), ql.dequantize())
    assert _same(qt.q_per_channel_scales(), ql.q_per_channel_scales()) and ql.q_per_channel_scales().dtype is \
        tapelab.float64 and _same(qt.q_per_channel_zero_points(), ql.q_per_channel_zero_points())
    for a, b in (small, scalar, per_channel):
        assert repr(b).replace("tapelab", "torch") == repr(a)


@pytest.mark.parametrize("call", [
    lambda T, q, qc: q.sum(),
    lambda T, q, qc: T.quantize_per_tensor(T.ones(3).int(), 0.1, 0, T.qint8),
    lambda T, q, qc: T.quantize_per_tensor(T.ones(3), 0.1, 0, T.float32),
    lambda T, q, qc: q.q_per_channel_scales(),
    lambda T, q, qc: qc.q_scale(),
])
def test_quantized_tensor_errors(call):
    """Quantized tensors refuse float ops (NotImplementedError), non-float input and non-quantized dtypes
    (RuntimeError), and per-tensor/per-channel accessors of the other scheme, as torch does."""
    errors = []
    for T in (torch, tapelab):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = T.quantize_per_tensor(T.ones(3), 0.1, 0, T.qint8)
            qc = T.quantize_per_channel(T.ones(2, 2), T.tensor([0.1, 0.2]), T.tensor([0, 0]), 0, T.qint8)
            kind, message = _error(lambda: call(T, q, qc))
        errors.append((kind, message[:22]))   # the op's overload name after it is ATen's
    assert errors[0] == errors[1]


@pytest.mark.parametrize("spec", ["set", "per_channel", "by_name"])
def test_quantize_dynamic_linear_bitwise(spec):
    """quantize_dynamic({nn.Linear}, qint8): int8 weights from the weight observer, each input quantized to uint8
    over its own range with reduce_range (0..127), the int32 product exact and fma(acc, x_scale * w_scale, bias)
    as fbgemm/x86 compute it: outputs equal torch's bit for bit, for 2-d and 3-d inputs."""
    outs = []
    for T, q in ((torch, tq), (tapelab, lq)):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(64, 32), T.nn.ReLU(), T.nn.Linear(32, 10))
        qspec = {"set": {T.nn.Linear}, "per_channel": {T.nn.Linear: q.per_channel_dynamic_qconfig},
                 "by_name": {"2": q.default_dynamic_qconfig}}[spec]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qm = q.quantize_dynamic(model, qspec, dtype=T.qint8)
        xs = [T.randn(8, 64) * 2 + 0.3, T.randn(2, 3, 64), T.rand(4, 64)]
        outs.append((repr(qm).replace("tapelab", "torch"), [_np(qm(x)) for x in xs],
                     qm[2].weight().int_repr().numpy()))
    assert outs[0][0] == outs[1][0] and np.array_equal(outs[0][2], outs[1][2])
    for a, b in zip(outs[0][1], outs[1][1]):
        assert np.array_equal(a, b)


def _static_net(T, q):
    nn = T.nn
    return nn.Sequential(q.QuantStub(), nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 6, 3, stride=2, groups=2, bias=False), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 5), q.DeQuantStub()).eval()


@pytest.mark.parametrize("backend", ["x86", "qnnpack", "default"])
def test_static_quantization_convert_bitwise(backend):
    """Eager post-training quantization (fuse_modules -> prepare -> calibrate -> convert): Quantize, quantized
    ConvReLU2d / Conv2d (groups, stride, no bias) / LinearReLU / Linear, max pooling and flatten on the codes,
    DeQuantize. Given the same observers' qparams, torch's fbgemm requantization (exact int accumulation, float
    bias over x_scale * w_scale, rounding of the float32 multiplier product) gives the same codes and outputs."""
    outs = []
    for T, q in ((torch, tq), (tapelab, lq)):
        T.manual_seed(0)
        m = q.fuse_modules(_static_net(T, q), [["1", "2"], ["6", "7"]])
        m.qconfig = {"x86": lambda: q.get_default_qconfig("x86"), "qnnpack": lambda: q.get_default_qconfig("qnnpack"),
                     "default": lambda: q.default_qconfig}[backend]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = q.prepare(m)
            p(T.randn(8, 3, 6, 6))
            # the calibration's float layers may differ by an ulp: hand both sides torch's output qparams
            outs.append((p, q.convert(p)))
    (pt, qt), (pl, ql) = outs
    for name, mod in qt.named_modules():
        if hasattr(mod, "scale") and not isinstance(mod.scale, torch.Tensor):
            lmod = dict(ql.named_modules())[name]
            lmod.scale, lmod.zero_point = mod.scale, mod.zero_point
    assert repr(ql).replace("tapelab", "torch") == repr(qt)
    torch.manual_seed(1)
    x = torch.randn(5, 3, 6, 6) * 1.3
    xl = tapelab.tensor(x.numpy())
    assert np.array_equal(qt[1](qt[0](x)).int_repr().numpy(), ql[1](ql[0](xl)).int_repr().numpy())
    assert np.array_equal(qt(x).numpy(), _np(ql(xl)))


def test_quantized_tensor_pooling_and_views_bitwise():
    """Ops PyTorch runs on per-tensor quantized tensors: average pooling (integer window sums over the window,
    ties to even), max pooling, relu (clamped at the zero point), slicing and flatten keep the qparams."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, 7, 9) * 2
    calls = [lambda F, q: F.avg_pool2d(q, 2), lambda F, q: F.avg_pool2d(q, 3, 2),
             lambda F, q: F.adaptive_avg_pool2d(q[:, :, :6, :8], (3, 4)), lambda F, q: F.max_pool2d(q, 2),
             lambda F, q: F.relu(q), lambda F, q: q.flatten(1)[:, 5:40]]
    for zero_point in (60, 61):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qt = torch.quantize_per_tensor(x, 0.05, zero_point, torch.quint8)
            ql = tapelab.quantize_per_tensor(tapelab.tensor(x.numpy()), 0.05, zero_point, tapelab.quint8)
        for call in calls:
            yt, yl = call(torch.nn.functional, qt), call(tapelab.nn.functional, ql)
            assert (yl.q_scale(), yl.q_zero_point()) == (yt.q_scale(), yt.q_zero_point())
            assert np.array_equal(yt.int_repr().numpy(), yl.int_repr().numpy())


def test_qfunctional_add_mul_cat_bitwise():
    """QFunctional (what convert makes of FloatFunctional, the skip connections of quantizable models): add,
    add_relu, mul and cat requantize to the observed output qparams as torch's quantized ops do."""
    torch.manual_seed(0)
    xa, xb = torch.randn(20000) * 2, torch.randn(20000) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        at, bt = (torch.quantize_per_tensor(xa, 0.05, 61, torch.quint8),
                  torch.quantize_per_tensor(xb, 0.07, 100, torch.quint8))
        al, bl = (tapelab.quantize_per_tensor(tapelab.tensor(xa.numpy()), 0.05, 61, tapelab.quint8),
                  tapelab.quantize_per_tensor(tapelab.tensor(xb.numpy()), 0.07, 100, tapelab.quint8))
    funcs = []
    for T in (torch, tapelab):
        f = T.ao.nn.quantized.QFunctional()
        f.scale, f.zero_point = 0.09, 77
        funcs.append(f)
    ft, fl = funcs
    for name, args_t, args_l in (("add", (at, bt), (al, bl)), ("add_relu", (at, bt), (al, bl)),
                                 ("mul", (at, bt), (al, bl)), ("cat", ([at, bt],), ([al, bl],))):
        yt, yl = getattr(ft, name)(*args_t), getattr(fl, name)(*args_l)
        assert np.array_equal(yt.int_repr().numpy(), yl.int_repr().numpy()), name
        assert (yl.q_scale(), yl.q_zero_point()) == (yt.q_scale(), yt.q_zero_point())
    assert repr(fl).replace("tapelab", "torch") == repr(ft)


def test_float_functional_qat_flow_matches_torch():
    """A residual block with FloatFunctional add_relu and cat: prepare_qat gives it an output observer, training
    matches torch, and convert makes it a QFunctional (module layout as torch's)."""
    outs = []
    for T, q in ((torch, tq), (tapelab, lq)):
        nn = T.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.quant, self.dequant = q.QuantStub(), q.DeQuantStub()
                self.conv = nn.Conv2d(2, 2, 3, padding=1)
                self.skip, self.cat = T.ao.nn.quantized.FloatFunctional(), T.ao.nn.quantized.FloatFunctional()
                self.fc = nn.Linear(4 * 3 * 3, 2)

            def forward(self, x):
                x = self.quant(x)
                y = self.cat.cat([self.skip.add_relu(self.conv(x), x), x], dim=1)
                return self.dequant(self.fc(y.flatten(1)))

        T.manual_seed(0)
        m = Block().train()
        m.qconfig = q.get_default_qat_qconfig("x86")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = q.prepare_qat(m)
            data, target = T.randn(8, 2, 3, 3), T.randint(0, 2, (8,))
            loss = T.nn.functional.cross_entropy(m(data), target)
            loss.backward()
            converted = q.convert(m.eval())
        outs.append((loss.item(), [(n, type(mod).__name__) for n, mod in converted.named_modules()
                                   if "_packed_params" not in n],   # torch's packed-weight holder
                     [(n, type(mod).__name__) for n, mod in m.named_modules()]))
    assert outs[0][1:] == outs[1][1:]
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)


@pytest.mark.parametrize("zero_point,scale,qmin,qmax,grad_factor", [(3.4, 0.1, 0, 255, 1.0),
                                                                     (-3.6, 0.037, -128, 127, 0.5),
                                                                     (0.5, 0.2, 0, 15, 2.0)])
def test_fake_quantize_learnable_per_tensor_bitwise(zero_point, scale, qmin, qmax, grad_factor):
    """torch._fake_quantize_learnable_per_tensor_affine (LSQ-style learned scale and zero point): values, the
    input gradient and the summed scale and zero-point gradients equal torch's bit for bit (ATen's CPU kernel
    contracts nearbyint(zp + x * inv) and (q - zp) * scale - x into fused multiply-adds)."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(3000) * 3, torch.arange(-300, 300) * 0.05])
    g = torch.randn(x.shape)
    results = []
    for T in (torch, tapelab):
        xv = T.tensor(x.numpy(), requires_grad=True)
        s, z = T.tensor([scale], requires_grad=True), T.tensor([zero_point], requires_grad=True)
        y = T._fake_quantize_learnable_per_tensor_affine(xv, s, z, qmin, qmax, grad_factor)
        y.backward(T.tensor(g.numpy()))
        results.append((_np(y), _np(xv.grad), _np(s.grad), _np(z.grad), y.grad_fn.name()))
    for a, b in zip(*results):
        assert (a == b) if isinstance(a, str) else np.array_equal(a, b)


def test_backends_quantized_engine():
    """torch.backends.quantized.engine: x86 by default, settable to a supported engine, RuntimeError otherwise
    (scripts set it before quantizing)."""
    for T in (torch, tapelab):
        q = T.backends.quantized
        saved = q.engine
        try:
            assert saved == "x86" and set(q.supported_engines) >= {"qnnpack", "x86", "fbgemm"}
            q.engine = "qnnpack"
            assert q.engine == "qnnpack"
            with pytest.raises(RuntimeError, match="foo is not a valid value for quantized engine"):
                q.engine = "foo"
        finally:
            q.engine = saved


@pytest.mark.parametrize("writer", ["tapelab", "torch"])
def test_quantized_tensors_round_trip_through_checkpoints_both_ways(writer):
    """A checkpoint holding per-tensor and per-channel quantized tensors (and a qint8 dtype) is written as PyTorch
    writes it (``_rebuild_qtensor`` over a QInt8/QUInt8 storage): each library reads the other's file to the same
    codes, scales, zero points and axis."""
    import io
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = {}
        for m in (tapelab, torch):
            made[m.__name__] = {"x": m.quantize_per_tensor(m.tensor([0.5, -1.0, 2.0]), 0.1, 3, m.qint8),
                                "y": m.quantize_per_channel(m.tensor([[0.5, -1.0], [2.0, 1.0]]),
                                                            m.tensor([0.1, 0.2], dtype=m.float64), m.tensor([0, 1]),
                                                            0, m.quint8),
                                "d": m.qint8}
        reader = torch if writer == "tapelab" else tapelab
        buf = io.BytesIO()
        (tapelab if writer == "tapelab" else torch).save(made[writer], buf)
        buf.seek(0)
        got = reader.load(buf)
    assert got["d"] is reader.qint8
    x, y = got["x"], got["y"]
    assert (x.dtype, x.qscheme(), x.q_scale(), x.q_zero_point()) == (reader.qint8, reader.per_tensor_affine, 0.1, 3)
    assert x.int_repr().tolist() == [8, -7, 23]
    assert (y.dtype, y.qscheme(), y.q_per_channel_axis()) == (reader.quint8, reader.per_channel_affine, 0)
    assert y.int_repr().tolist() == [[5, 0], [11, 6]]
    assert y.q_per_channel_scales().tolist() == [0.1, 0.2] and y.q_per_channel_zero_points().tolist() == [0, 1]




def _converted(m, dynamic: bool):
    """A conv-relu-linear model quantized statically (calibrated on fixed data) or a dynamic-Linear one, built with
    the same float weights in either library."""
    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = m.ao.quantization.QuantStub(), m.ao.quantization.DeQuantStub()
            self.conv, self.relu, self.fc = m.nn.Conv2d(1, 4, 3), m.nn.ReLU(), m.nn.Linear(4 * 6 * 6, 10)

        def forward(self, x):
            return self.dequant(self.fc(self.relu(self.conv(self.quant(x))).flatten(1)))
    net = Net().eval()
    rng = np.random.default_rng(0)
    with m.no_grad():
        for p in net.parameters():
            p.copy_(m.tensor(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    if dynamic:
        return m.ao.quantization.quantize_dynamic(net, {m.nn.Linear}, dtype=m.qint8)
    net.qconfig = m.ao.quantization.get_default_qconfig("x86")
    net = m.ao.quantization.prepare(m.ao.quantization.fuse_modules(net, [["conv", "relu"]]))
    for _ in range(3):
        net(m.tensor(rng.standard_normal((2, 1, 8, 8)).astype(np.float32)))
    return m.ao.quantization.convert(net)


@pytest.mark.parametrize("dynamic", [False, True])
def test_quantized_models_state_dicts_are_torchs_and_load_across_libraries(dynamic):
    """A converted model's state dict has PyTorch's keys (``weight``/``bias``/``scale``/``zero_point`` for a
    quantized conv, ``_packed_params._packed_params`` for a linear layer), and a checkpoint of it written by either
    library loads into a freshly converted model of the other with the same outputs."""
    import io
    x = np.random.default_rng(1).standard_normal((2, 1, 8, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = _converted(tapelab, dynamic), _converted(torch, dynamic)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for writer, reader, fresh in ((tapelab, torch, _converted(torch, dynamic)),
                                      (torch, tapelab, _converted(tapelab, dynamic))):
            source = ours if writer is tapelab else theirs
            buf = io.BytesIO()
            writer.save(source.state_dict(), buf)
            buf.seek(0)
            fresh.load_state_dict(reader.load(buf))
            got = fresh(reader.tensor(x)).detach().numpy()
            want = source(writer.tensor(x)).detach().numpy()
            np.testing.assert_array_equal(got, want)

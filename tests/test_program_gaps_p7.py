"""Gaps found by running more families of research programs seeded under torch and under
``install_aliases()`` and diffing what they print: WGAN-GP (a DCGAN critic's gradient penalty through
``autograd.grad(create_graph=True)`` over conv/conv-transpose/instance norm, R1, weight clipping), a
Glow-style flow (data-initialised ActNorm, invertible 1x1 convolutions by ``linalg.lu`` and by
``slogdet``/``inverse``, affine couplings, squeeze, ``lu_factor``/``lu_solve``/``lu_unpack``), word2vec
skip-gram with negative sampling (``Embedding(sparse=True)``, ``SparseAdam``, ``multinomial`` noise,
sparse Adagrad/SGD), a DLRM-style recommender (``EmbeddingBag`` sum/mean/max with offsets,
``per_sample_weights``, ``include_last_offset``, ``tril_indices`` interactions), a TCN (dilated causal
``Conv1d`` with chomp, both weight norms, ``ReduceLROnPlateau``, ``padding='same'`` with every padding
mode), an audio pipeline (``stft``/``istft`` with five windows, a mel filterbank matmul, log-mel and dB,
SpecAugment masks, MFCC by a DCT matrix, gradients through ``stft``), bf16 autocast on CPU with
``GradScaler``'s calls, seq2seq greedy and beam search (``topk``, ``index_select`` on beams, ``where``,
nucleus and top-k sampling), a char-RNN's temperature sampling with ``multinomial``, YOLO-style box losses
(IoU/GIoU/DIoU/CIoU by hand, focal loss, a hand NMS), U-Net with Dice loss (``interpolate`` in every mode,
both ``align_corners``, ``grid_sample``), a WaveNet (mu-law, gated causal convolutions, conditioning),
attention masks of ``MultiheadAttention``/``TransformerEncoder``, and an SN-GAN (both spectral norms,
hinge loss, an EMA generator by ``lerp_``). Not compared: ``tapelab.vision.ops`` (no torchvision here).
Each test exercises the API pattern directly and compares with real torch (no program is imported)."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch

import tapelab
from tapelab.ops import sparse as tl_sparse


def _warnings_of(call) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.category, str(w.message)) for w in caught]


# ---------------------------------------------------------------- word2vec / DLRM: sparse gradients warn nothing
@pytest.fixture
def implicit_checks_unwarned(monkeypatch):
    """The invariant-check warning is once per process: each test sees it not yet given."""
    monkeypatch.setitem(tl_sparse._invariant_checks, "enabled", None)
    monkeypatch.setitem(tl_sparse._invariant_checks, "warned", False)


@pytest.mark.parametrize("bag", [False, True])
def test_sparse_embedding_backward_gives_no_invariant_warning(implicit_checks_unwarned, bag):
    """``Embedding(sparse=True)``'s backward built its COO gradient through the public constructor, so a
    word2vec program printed PyTorch's "Sparse invariant checks are implicitly disabled" warning, which
    PyTorch gives only for a user's own ``sparse_coo_tensor`` call."""
    def backward(m):
        m.manual_seed(0)
        e = m.nn.EmbeddingBag(10, 3, mode="sum", sparse=True) if bag else m.nn.Embedding(10, 3, sparse=True)
        args = (m.tensor([1, 2, 2, 7]), m.tensor([0, 2])) if bag else (m.tensor([[1, 2], [2, 7]]),)
        e(*args).pow(2).sum().backward()
        return e.weight.grad
    got, want = [], []
    assert _warnings_of(lambda: got.append(backward(tapelab))) == []
    assert _warnings_of(lambda: want.append(backward(torch))) == []
    assert got[0].is_sparse and want[0].is_sparse
    np.testing.assert_array_equal(got[0].coalesce().indices().numpy(), want[0].coalesce().indices().numpy())
    np.testing.assert_allclose(got[0].to_dense().numpy(), want[0].to_dense().numpy(), rtol=1e-6)
    assert _warnings_of(lambda: tapelab.sparse_coo_tensor([[0]], [1.0], (2,)))   # a user's call still warns


def test_loading_a_sparse_tensor_gives_no_invariant_warning(implicit_checks_unwarned):
    """PyTorch's unpickler rebuilds a saved COO tensor with ``check_invariants=False``: loading is silent."""
    buf = io.BytesIO()
    torch.save({"g": torch.sparse_coo_tensor([[0, 3]], [1.0, 2.0], (5,), check_invariants=False)}, buf)
    loaded = []
    assert _warnings_of(lambda: loaded.append(tapelab.load(io.BytesIO(buf.getvalue())))) == []
    np.testing.assert_array_equal(loaded[0]["g"].to_dense().numpy(), [1, 0, 0, 2, 0])


# ---------------------------------------------------------------- DLRM: the printed model
@pytest.mark.parametrize("kwargs", [{}, {"mode": "sum"}, {"padding_idx": 2, "scale_grad_by_freq": True},
                                    {"max_norm": 1.0, "norm_type": 3.0, "mode": "max", "padding_idx": 0}])
def test_embedding_bag_repr_matches_torch(kwargs):
    """``print(model)`` left out ``max_norm``, ``norm_type`` and ``scale_grad_by_freq`` of an ``EmbeddingBag``."""
    assert repr(tapelab.nn.EmbeddingBag(10, 3, **kwargs)) == repr(torch.nn.EmbeddingBag(10, 3, **kwargs))


# ---------------------------------------------------------------- TCN: padding='same' with a padding mode
@pytest.mark.parametrize("nd", [1, 2])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
@pytest.mark.parametrize("kernel,dilation", [(3, 1), (4, 1), (5, 2), (4, 2)])
def test_same_padding_with_a_padding_mode_matches_torch(nd, mode, kernel, dilation):
    """``Conv1d(..., padding='same', padding_mode='reflect')`` ignored the mode (zeros were padded): a
    TCN/WaveNet-style layer's outputs and gradients were wrong; PyTorch pads ``d*(k-1)//2`` on the left
    and the rest on the right with the mode, then convolves unpadded."""
    rng = np.random.default_rng(kernel * 10 + dilation)
    shape = (2, 2) + (11,) * nd
    x, g = rng.standard_normal(shape), rng.standard_normal((2, 3) + (11,) * nd)
    results = []
    for m in (tapelab, torch):
        m.manual_seed(0)
        conv = (m.nn.Conv1d, m.nn.Conv2d)[nd - 1](2, 3, kernel, padding="same", dilation=dilation,
                                                   padding_mode=mode, dtype=m.float64)
        xt = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = conv(xt)
        results.append([out.detach().numpy(), *(t.numpy() for t in m.autograd.grad(
            out, (xt, conv.weight), m.tensor(g)))])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_reversed_padding_attribute_matches_torch():
    """Programs (and PyTorch's own subclasses) read ``_reversed_padding_repeated_twice``."""
    for args in [dict(padding=(1, 2)), dict(padding="same", kernel_size=(4, 3), dilation=(1, 2)),
                 dict(padding="valid")]:
        kw = {"kernel_size": 3, **args}
        assert (tapelab.nn.Conv2d(1, 1, **kw)._reversed_padding_repeated_twice
                == list(torch.nn.Conv2d(1, 1, **kw)._reversed_padding_repeated_twice))


def test_even_kernel_same_padding_warns_once_as_torch(monkeypatch):
    """ATen warns (once per process) that an even kernel with odd dilation under 'same' pads a copy."""
    from tapelab.nn import functional_core
    monkeypatch.setattr(functional_core, "_same_warned", [])
    x, w = tapelab.randn(1, 1, 8), tapelab.randn(1, 1, 4)
    first = _warnings_of(lambda: tapelab.nn.functional.conv1d(x, w, padding="same"))
    assert [msg for _, msg in first] == ["Using padding='same' with even kernel lengths and odd dilation may "
                                         "require a zero-padded copy of the input be created"]
    assert _warnings_of(lambda: tapelab.nn.functional.conv1d(x, w, padding="same")) == []
    monkeypatch.setattr(functional_core, "_same_warned", [])
    assert _warnings_of(lambda: tapelab.nn.functional.conv1d(x, w[..., :3], padding="same")) == []
    assert _warnings_of(lambda: tapelab.nn.functional.conv1d(x, w, padding="same", dilation=2)) == []


# ---------------------------------------------------------------- TCN: weight_norm's deprecation, once
def test_weight_norm_deprecation_is_attributed_to_the_library_once():
    """PyTorch's ``@deprecated`` attributes the FutureWarning to its own ``weight_norm``, so a TCN's many
    ``weight_norm(conv)`` lines print it once under the default filters; ours named each caller's line."""
    def located(m):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.nn.utils.weight_norm(m.nn.Conv1d(1, 1, 2))
            m.nn.utils.weight_norm(m.nn.Conv1d(1, 1, 2))
        return {(w.category, w.filename.rsplit("/", 1)[-1]) for w in caught}
    assert located(tapelab) == {(FutureWarning, "weight_norm.py")} == located(torch)


# ---------------------------------------------------------------- bf16 autocast: float32 norms keep the input's dtype
_NORMS = {
    "batch_norm_train": lambda m, x: m.nn.BatchNorm1d(6)(x),
    "batch_norm_eval": lambda m, x: m.nn.BatchNorm1d(6).eval()(x),
    "layer_norm": lambda m, x: m.nn.LayerNorm(5)(x),
    "group_norm": lambda m, x: m.nn.GroupNorm(3, 6)(x),
    "instance_norm": lambda m, x: m.nn.InstanceNorm1d(6, affine=True, track_running_stats=True)(x),
    "rms_norm": lambda m, x: m.nn.RMSNorm(5)(x),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_NORMS))
def test_reduced_input_through_a_float32_norm_keeps_its_dtype(name, dtype):
    """Under ``autocast('cpu', bfloat16)`` a conv's bf16 output meets a float32 BatchNorm/LayerNorm: PyTorch's
    CPU kernels compute in float32 and return bf16, so the next layers run in bf16; ours promoted to float32
    and the rest of the network (and its printed losses) ran in float32."""
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((4, 6, 5)), rng.standard_normal((4, 6, 5))
    results = []
    for m in (tapelab, torch):
        m.manual_seed(0)
        xt = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # PyTorch's rms_norm says it cannot use its fused kernel
            out = _NORMS[name](m, xt)
        (gx,) = m.autograd.grad(out, xt, m.tensor(g, dtype=out.dtype))
        assert str(out.dtype).split(".")[-1] == dtype and str(gx.dtype).split(".")[-1] == dtype
        results.append([out.detach().float().numpy(), gx.float().numpy()])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=2e-2, atol=2e-2)


def test_autocast_conv_batchnorm_chain_stays_bfloat16():
    """The chain of an autocast CNN (conv -> BatchNorm2d -> GELU -> pool -> LayerNorm -> Linear) in bf16 at each
    layer as PyTorch; the float32 running statistics stay float32."""
    dtypes = []
    for m in (tapelab, torch):
        m.manual_seed(0)
        nn = m.nn
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.GELU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.LayerNorm(4), nn.Linear(4, 2))
        h = m.randn(2, 3, 6, 6)
        seen = []
        with m.autocast(device_type="cpu", dtype=m.bfloat16):
            for layer in model:
                h = layer(h)
                seen.append(str(h.dtype).split(".")[-1])
        dtypes.append(seen + [str(model[1].running_mean.dtype).split(".")[-1]])
    assert dtypes[0] == dtypes[1] == ["bfloat16"] * 7 + ["float32"]


# ---------------------------------------------------------------- DLRM: EmbeddingBag's own index and offset checks
def _error_of(call):
    try:
        call()
    except Exception as e:   # noqa: BLE001 - the test compares whatever is raised
        return type(e).__name__, str(e).split("\n")[0]   # PyTorch may append the offending tensor's repr
    return None


@pytest.mark.parametrize("case", ["index_high", "index_negative", "offsets_start", "offsets_past_end",
                                  "last_offset_past_end"])
def test_embedding_bag_index_and_offset_errors_match_torch(case):
    """A bag's bad index raised embedding's IndexError (PyTorch: a RuntimeError naming the position), and
    offsets not starting at 0 were accepted (the first indices silently dropped)."""
    args = {"index_high": ([1, 12], [0], False), "index_negative": ([1, -1], [0], False),
            "offsets_start": ([1, 2, 3], [1], False), "offsets_past_end": ([1, 2, 3], [0, 4], False),
            "last_offset_past_end": ([1, 2, 3], [0, 1, 4], True)}[case]

    def call(m):
        bag = m.nn.EmbeddingBag(10, 3, include_last_offset=args[2])
        return lambda: bag(m.tensor(args[0]), m.tensor(args[1]))
    theirs = _error_of(call(torch))
    assert theirs is not None and _error_of(call(tapelab)) == theirs


# ---------------------------------------------------------------- audio: stft's once-per-process warnings
def test_stft_warns_once_about_a_missing_window_and_real_output(monkeypatch):
    """PyTorch warns (once) that no window means a rectangular one, and that ``return_complex=False`` is
    deprecated; an audio pipeline's output under tapelab lacked both."""
    from tapelab.ops import _util
    monkeypatch.setattr(_util, "_warned", set())
    x = tapelab.randn(200)
    first = _warnings_of(lambda: tapelab.stft(x, 32, return_complex=False))
    assert [msg.split(".")[0] for _, msg in first] == ["A window was not provided", "stft with return_complex=False is "
                                                                                     "deprecated"]
    assert _warnings_of(lambda: tapelab.stft(x, 32, return_complex=False)) == []
    monkeypatch.setattr(_util, "_warned", set())
    assert _warnings_of(lambda: tapelab.stft(x, 32, window=tapelab.hann_window(32), return_complex=True)) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = tapelab.stft(x, 32, return_complex=False).numpy()
        theirs = torch.stft(torch.tensor(x.numpy()), 32, return_complex=False).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)

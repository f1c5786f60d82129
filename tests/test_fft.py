"""tapelab.fft beyond the op database: an FFT convolution layer trains step for step with PyTorch,
the transforms equal a direct convolution, threads reach scipy's workers, and the tape names the
complex ops."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.base import runtime


def _fft_conv_model(m, weights):
    """A circular-free 1-d convolution by FFT (zero-padded to 2n), then a linear read-out."""
    class FFTConv(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.kernel = m.nn.Parameter(m.tensor(weights["kernel"]))
            self.head = m.nn.Linear(16, 3)
            with m.no_grad():
                self.head.weight.copy_(m.tensor(weights["head_w"]))
                self.head.bias.copy_(m.tensor(weights["head_b"]))

        def forward(self, x):
            n = x.shape[-1]
            spec = m.fft.rfft(x, n=2 * n) * m.fft.rfft(self.kernel, n=2 * n)
            y = m.fft.irfft(spec, n=2 * n)[..., :n]
            return self.head(m.tanh(y))
    return FFTConv()


def test_fft_conv_layer_trains_like_torch():
    rng = np.random.default_rng(0)
    weights = {"kernel": rng.standard_normal(5).astype(np.float32) * 0.3,
               "head_w": rng.standard_normal((3, 16)).astype(np.float32) * 0.2,
               "head_b": np.zeros(3, np.float32)}
    x = rng.standard_normal((8, 16)).astype(np.float32)
    target = rng.integers(0, 3, 8)
    losses = {}
    params = {}
    for m in (torch, tapelab):
        model = _fft_conv_model(m, weights)
        opt = m.optim.SGD(model.parameters(), lr=0.5)
        losses[m.__name__] = []
        for _ in range(3):
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(model(m.tensor(x)), m.tensor(target))
            loss.backward()
            opt.step()
            losses[m.__name__].append(loss.item())
        params[m.__name__] = model.kernel.detach().numpy().copy()
    np.testing.assert_allclose(losses["tapelab"], losses["torch"], rtol=1e-5)
    np.testing.assert_allclose(params["tapelab"], params["torch"], rtol=1e-5, atol=1e-6)
    assert losses["tapelab"][-1] < losses["tapelab"][0]


def test_fft_product_is_a_linear_convolution():
    rng = np.random.default_rng(1)
    a, k = rng.standard_normal(10), rng.standard_normal(4)
    n = len(a) + len(k) - 1
    out = tapelab.fft.irfft(tapelab.fft.rfft(tapelab.tensor(a), n=n) * tapelab.fft.rfft(tapelab.tensor(k), n=n), n=n)
    np.testing.assert_allclose(out.numpy(), np.convolve(a, k), atol=1e-12)


def test_fft_roundtrips_and_gradients_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 6, 5))
    results = []
    for m in (torch, tapelab):
        t = m.tensor(x, requires_grad=True)
        z = m.fft.fftn(t, dim=(1, 2), norm="ortho")
        back = m.fft.ifftn(z * m.fft.fftshift(m.fft.fftfreq(5, dtype=m.float64)), dim=(1, 2), norm="ortho")
        loss = back.abs().sum() + m.fft.hfft(m.fft.ihfft(t, dim=1), n=6, dim=1).pow(2).sum()
        loss.backward()
        results.append((loss.item(), np.asarray(t.grad.detach())))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10, atol=1e-12)


def test_set_num_threads_sets_scipy_workers():
    tapelab.set_num_threads(2)
    assert runtime.fft_workers() == 2
    tapelab.fft.fft(tapelab.randn(4, 8))


def test_tape_names_the_complex_ops():
    x = tapelab.randn(4, 8, requires_grad=True)
    with tapelab.tape() as tp:
        y = tapelab.fft.irfft(tapelab.fft.rfft(x) * 2j, n=8).sum()
        y.backward()
    ops = [r.op for r in tp.nodes]
    assert {"fft_r2c", "mul", "fft_c2r"} <= set(ops)
    rec = next(r for r in tp.nodes if r.op == "fft_r2c" and r.kind == "forward")
    assert rec.dtype == "complex64" and rec.shape == (4, 5)


def test_meta_device_gives_shapes():
    x = tapelab.empty(3, 10, device="meta")
    assert tapelab.fft.rfft(x).shape == (3, 6) and tapelab.fft.rfft(x).dtype is tapelab.complex64
    assert tapelab.fft.irfft2(tapelab.fft.rfft2(x), s=(3, 10)).shape == (3, 10)


@pytest.mark.parametrize("kw", [dict(n_fft=16), dict(n_fft=8, center=False), dict(n_fft=16, onesided=False),
                                dict(n_fft=16, hop_length=5, win_length=12, window="hann", normalized=True),
                                dict(n_fft=16, pad_mode="constant")], ids=range(5))
def test_stft_istft_values_and_gradients_match_torch(kw):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 50))
    outs = []
    for m in (torch, tapelab):
        k = dict(kw)
        if k.get("window") == "hann":
            k["window"] = m.tensor(np.hanning(12))
        xt = m.tensor(x, requires_grad=True)
        s = m.stft(xt, return_complex=True, **k)
        k.pop("pad_mode", None)
        y = m.istft(s, length=50, **k)
        (m.view_as_real(s).pow(2).sum() + y.pow(3).sum()).backward()
        outs.append((s.detach().resolve_conj().numpy(), y.detach().numpy(), xt.grad.numpy()))
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(outs[1][1], x, atol=1e-12)     # the round trip


def test_stft_errors_and_forms_match_torch():
    x = np.random.default_rng(5).standard_normal(40)
    for m in (torch, tapelab):
        with pytest.raises(RuntimeError, match="return_complex parameter be given for real inputs"):
            m.stft(m.tensor(x), 8)
        with pytest.raises(RuntimeError):
            m.istft(m.tensor(x), 8)
    np.testing.assert_allclose(tapelab.tensor(x).stft(16, return_complex=False).numpy(),
                               torch.view_as_real(torch.tensor(x).stft(16, return_complex=True)).numpy(), atol=1e-12)
    z = x + 1j * x[::-1]
    np.testing.assert_allclose(tapelab.stft(tapelab.tensor(z), 8).numpy(),
                               torch.stft(torch.tensor(z), 8, return_complex=True).numpy(), atol=1e-12)

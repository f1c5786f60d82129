"""A scientific-computing script in PyTorch's style (issue 19): special-function values and their
gradients, linear-algebra solves and factorisations, and an FFT convolution, ending in three small
fits: a kernel learned through ``torch.fft``, a conductivity learned through ``linalg.solve`` and a
complex frequency response (a complex128 parameter) learned through ``fft2``/``ifft2``.
Everything in float64; returns the numbers such a script prints."""
from __future__ import annotations

import numpy as np


def _special(torch, out: list) -> None:
    sp = torch.special
    x = torch.linspace(0.2, 4.0, 12, dtype=torch.float64, requires_grad=True)
    # functions PyTorch differentiates: values and gradients
    y = (sp.erfcx(x) + sp.i0e(x) + sp.i1e(x) + sp.log_ndtr(x - 2) + sp.digamma(x) + sp.gammaln(x)
         + sp.polygamma(1, x) + sp.xlog1py(x, x) + sp.entr(x / 5) + sp.expit(x) + sp.sinc(x)
         + sp.ndtri(x / 5) + sp.multigammaln(x + 1, 2) + sp.logit(x / 5, eps=1e-6)
         + sp.zeta(torch.tensor(3.0, dtype=torch.float64), x) + sp.gammainc(torch.tensor(2.0, dtype=torch.float64), x))
    (g,) = torch.autograd.grad(y.sum(), x)
    out += [y.sum().item(), g.sum().item(), g.abs().max().item()]
    # the Bessel, Airy and orthogonal-polynomial families: values
    with torch.no_grad():
        v = x.detach()
        families = [sp.bessel_j0(v), sp.bessel_j1(v), sp.bessel_y0(v), sp.bessel_y1(v), sp.modified_bessel_i0(v),
                    sp.modified_bessel_k1(v), sp.scaled_modified_bessel_k0(v), sp.spherical_bessel_j0(v),
                    sp.airy_ai(-v), sp.chebyshev_polynomial_t(v / 4, 5), sp.hermite_polynomial_h(v, 3),
                    sp.laguerre_polynomial_l(v, 4), sp.legendre_polynomial_p(v / 4, 6)]
        out += [f.sum().item() for f in families]
        out.append(sp.logsumexp(v, 0).item())


def _linalg(torch, out: list, steps: int) -> None:
    la = torch.linalg
    rng = np.random.default_rng(11)
    A = torch.from_numpy(rng.standard_normal((6, 6)) + 6 * np.eye(6))
    b = torch.from_numpy(rng.standard_normal((6, 2)))
    spd = A @ A.mT
    x = la.solve(A, b)
    out += [x.sum().item(), la.det(A).item(), la.slogdet(A).logabsdet.item(), la.inv(A).trace().item(),
            la.cholesky(spd).diagonal().sum().item(), torch.cholesky_solve(b, la.cholesky(spd)).sum().item(),
            la.eigvalsh(spd).sum().item(), la.svdvals(A).max().item(), la.cond(A).item(),
            la.matrix_norm(A, "nuc").item(), la.matrix_exp(A / 10).sum().item(), la.matrix_rank(A).item(),
            la.pinv(A[:, :4]).sum().item(), la.lstsq(A[:, :4], b).solution.sum().item()]
    P, L, U = la.lu(A)
    out.append((P @ L @ U - A).abs().max().item() < 1e-12)
    # a 1-d diffusion problem: learn the conductivity k so that the solution of K(k) u = f matches data
    n = 8
    lap = -2 * np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)
    f = torch.ones(n, 1, dtype=torch.float64)
    target = torch.from_numpy(np.linalg.solve(-1.7 * lap, np.ones((n, 1))))
    log_k = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_k], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        u = la.solve(-log_k.exp() * torch.from_numpy(lap), f)
        loss = ((u - target) ** 2).sum()
        loss.backward()
        opt.step()
        out.append(loss.item())
    out.append(log_k.exp().item())


def _fft(torch, out: list, steps: int) -> None:
    rng = np.random.default_rng(3)
    n = 32
    signal = torch.from_numpy(rng.standard_normal(n))
    true_kernel = torch.from_numpy(np.exp(-np.arange(n) / 3.0) * (np.arange(n) < 8))
    # circular convolution by the FFT, and directly
    conv = torch.fft.irfft(torch.fft.rfft(signal) * torch.fft.rfft(true_kernel), n=n)
    direct = torch.stack([(signal * true_kernel.roll(i).flip(0).roll(1)).sum() for i in range(n)])
    out += [conv.sum().item(), (conv - direct).abs().max().item() < 1e-10]
    # learn the kernel back from the convolved signal
    kernel = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([kernel], lr=0.02)
    for _ in range(steps):
        opt.zero_grad()
        pred = torch.fft.irfft(torch.fft.rfft(signal) * torch.fft.rfft(kernel), n=n)
        loss = ((pred - conv) ** 2).mean()
        loss.backward()
        opt.step()
        out.append(loss.item())
    out.append(torch.fft.fftfreq(8, d=0.5).sum().item())


def _complex_filter(torch, out: list, steps: int) -> None:
    """A learned complex frequency response (a complex128 parameter) that turns an image into its
    phase-shifted copy: fft2, fftshift, polar, angle and view_as_real on the way."""
    rng = np.random.default_rng(5)
    img = torch.from_numpy(rng.standard_normal((8, 8)))
    spec = torch.fft.fftshift(torch.fft.fft2(img))
    out += [spec.abs().sum().item(), torch.angle(spec).sum().item(), torch.view_as_real(spec).pow(2).sum().item()]
    phase = torch.polar(torch.ones(8, 8, dtype=torch.float64), torch.linspace(0, 1, 64, dtype=torch.float64).reshape(8, 8))
    target = torch.fft.ifft2(torch.fft.fft2(img) * phase).real
    w = torch.zeros(8, 8, dtype=torch.complex128, requires_grad=True)
    opt = torch.optim.SGD([w], lr=20.0)
    for _ in range(steps):
        opt.zero_grad()
        loss = (torch.fft.ifft2(torch.fft.fft2(img) * (1 + w)).real - target).pow(2).mean()
        loss.backward()
        opt.step()
        out.append(loss.item())
    out += [w.detach().abs().sum().item(), w.grad.real.abs().sum().item(), w.grad.imag.abs().sum().item()]


def main(torch, steps: int = 10):
    out: list = []
    _special(torch, out)
    _linalg(torch, out, steps)
    _fft(torch, out, steps)
    _complex_filter(torch, out, steps)
    return [float(v) for v in out]

"""OpInfos for tapelab.fft: every transform with ``n``/``s``, ``dim`` and each ``norm``, real and complex
inputs; frequencies and shifts. Small sizes: gradgradcheck differentiates twice by finite differences."""
from __future__ import annotations

from .core import ErrorInput, OpInfo, Sample, arr, carr


def _fn(name):
    return lambda m, x, **kw: getattr(m.fft, name)(x, **kw)


def _err(args, match, kwargs=None, exc=RuntimeError):
    return ErrorInput(Sample(args, kwargs or {}), exc, match)


def _one_d(real_input: bool):
    x = arr if real_input else carr
    return lambda: [Sample((x(5),), name="plain"), Sample((x(3, 2),), {"n": 4, "dim": 0, "norm": "ortho"}, name="pad_dim0"),
                    Sample((x(2, 5),), {"n": 3, "norm": "forward"}, noncontig=True, name="trim_noncontig")]


def _two_d(real_input: bool):
    x = arr if real_input else carr
    return lambda: [Sample((x(2, 3, 2),), {"s": (3, 4), "dim": (0, 2), "norm": "ortho"}, name="s_dims")]


def _n_d(real_input: bool):
    x = arr if real_input else carr
    return lambda: [Sample((x(2, 2, 3),), name="all_dims"),
                    Sample((x(3, 2, 4),), {"s": (3, -1), "dim": (2, 0), "norm": "forward"}, name="s_dim")]


_COMPLEX_IN = ("fft", "ifft", "irfft", "hfft")
_COMPLEX_IN_ND = ("fft2", "ifft2", "irfft2", "hfft2", "fftn", "ifftn", "irfftn", "hfftn")

def _errors_1d(x):
    return lambda: [_err((x(4),), "Invalid normalization mode", {"norm": "bad"}),
                    _err((x(4),), r"Invalid number of data points \(0\)", {"n": 0}),
                    _err((x(4),), "Dimension out of range", {"dim": 3}, IndexError)]


OPS = [OpInfo(f"fft.{name}", _fn(name), _one_d(name not in _COMPLEX_IN),
              errors=_errors_1d(carr if name in _COMPLEX_IN else arr))
       for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")]
# the 2-d forms are the n-d ones with two dims: one sample, no second derivatives
OPS += [OpInfo(f"fft.{name}", _fn(name), _two_d(name not in _COMPLEX_IN_ND), gradgrad=False) for name in
        ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")]
OPS += [OpInfo(f"fft.{name}", _fn(name), _n_d(name not in _COMPLEX_IN_ND),
               errors=lambda: [_err((carr(2, 3),), "must have the same length", {"s": (2,), "dim": (0, 1)}),
                               _err((carr(3),), "Got shape with 2 values", {"s": (2, 3)})])
        for name in ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")]
OPS += [
    OpInfo("fft.rfft_complex_input", _fn("rfft"), lambda: [],
           errors=lambda: [_err((carr(4),), "expects a real input tensor")]),
    OpInfo("fft.fftshift", lambda m, x, **kw: m.fft.fftshift(x, **kw),
           lambda: [Sample((arr(5, 4),), name="all"), Sample((carr(3, 4),), {"dim": 1}, name="complex_dim"),
                    Sample((arr(2, 3, 5),), {"dim": (0, 2)}, name="dims")]),
    OpInfo("fft.ifftshift", lambda m, x, **kw: m.fft.ifftshift(x, **kw),
           lambda: [Sample((arr(5, 4),), name="all"), Sample((carr(3, 5),), {"dim": -1}, name="complex_dim")]),
    # the device comes from a wrapped factory: tests/opdb/ondevice.py's module wraps only top-level factories
    OpInfo("fft.fftfreq", lambda m, n, **kw: m.fft.fftfreq(n, device=m.zeros(0).device, **kw),
           lambda: [Sample((5,), name="odd"), Sample((6,), {"d": 0.25}, name="even_d")], grad=False),
    OpInfo("fft.rfftfreq", lambda m, n, **kw: m.fft.rfftfreq(n, device=m.zeros(0).device, **kw),
           lambda: [Sample((5,), name="odd"), Sample((8,), {"d": 2.0}, name="even_d")], grad=False),
]

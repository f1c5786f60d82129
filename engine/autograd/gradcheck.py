"""Finite-difference checks of analytical gradients, like ``torch.autograd.gradcheck``.

Complex inputs and outputs are checked as pairs of real numbers: each complex input element is
perturbed along its real and its imaginary axis, each complex output counts as (real, imaginary)
rows, and the analytical row of an output's real part is the gradient for ``grad_output = 1``,
of its imaginary part for ``1j`` (PyTorch's convention: ``grad = dL/dx + i dL/dy``)."""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor
from .engine import grad as _grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical Jacobians differ."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn, inputs):
    return tuple(o for o in _as_tuple(fn(*inputs))
                 if isinstance(o, Tensor) and (o.is_floating_point() or o.is_complex()))


def _real_rows(o) -> np.ndarray:
    """An output's values as float64 rows: a complex element gives its real then imaginary part."""
    a = np.asarray(o.detach().__array__()).ravel()
    return np.stack([a.real, a.imag], 1).ravel().astype(np.float64) if a.dtype.kind == "c" \
        else a.astype(np.float64).copy()


def _real_cols(g, x) -> np.ndarray:
    """A gradient as one value per real input coordinate (real, imaginary for a complex input)."""
    a = np.asarray(g.detach().__array__()).ravel()
    return np.stack([a.real, a.imag], 1).ravel().astype(np.float64) if x.is_complex() else a.real.astype(np.float64)


def _width(x) -> int:
    return x.numel() * (2 if x.is_complex() else 1)


def _numerical(fn, inputs, i, eps):
    """Jacobian block d(outputs)/d(inputs[i]) by central differences, one column per element."""
    x = inputs[i]
    data = x._data  # perturbed in place, element by element (works for non-contiguous views too)
    cols = []
    steps = (eps, eps * 1j) if data.dtype.kind == "c" else (eps,)
    for k in range(data.size):  # grad stays on: ``fn`` may itself differentiate (gradgradcheck)
        idx = np.unravel_index(k, data.shape)
        orig = data[idx].item()
        for step in steps:
            data[idx] = orig + step
            plus = [_real_rows(o) for o in _outputs(fn, inputs)]
            data[idx] = orig - step
            minus = [_real_rows(o) for o in _outputs(fn, inputs)]
            data[idx] = orig
            cols.append(np.concatenate([(p - m) / (2 * eps) for p, m in zip(plus, minus)]) if plus else np.zeros(0))
    if not cols:
        return np.zeros((sum(_real_rows(o).size for o in _outputs(fn, inputs)), 0))
    return np.stack(cols, axis=1)


def _analytical(fn, inputs, i, create_graph=False):
    from ..core.creation import zeros_like
    outs = _outputs(fn, inputs)
    x = inputs[i]
    rows = []
    for o in outs:
        seeds = (1, 1j) if o.is_complex() else (1,)
        if not o.requires_grad:  # e.g. the zero first derivative of floor: a zero Jacobian block
            rows.extend(np.zeros(_width(x)) for _ in range(o.numel() * len(seeds)))
            continue
        for k in range(o.numel()):
            for seed in seeds:
                v = zeros_like(o)
                v._data[np.unravel_index(k, v._data.shape)] = seed
                (g,) = _grad([o], [x], [v], retain_graph=True, allow_unused=True)
                rows.append(np.zeros(_width(x)) if g is None else _real_cols(g, x))
    return np.stack(rows) if rows else np.zeros((0, _width(x)))


def _forward(fn, inputs, i):
    """Jacobian block d(outputs)/d(inputs[i]) by forward-mode AD, one unit tangent per element."""
    from . import forward_ad as fwad
    from ..core.creation import zeros_like
    x = inputs[i]
    if x.is_complex():
        raise NotImplementedError("gradcheck(check_forward_ad=True) on complex inputs is not supported by tapelab")
    cols = []
    for k in range(x.numel()):
        t = zeros_like(x).detach()
        t._data[np.unravel_index(k, t._data.shape)] = 1
        with fwad.dual_level():
            args = list(inputs)
            args[i] = fwad.make_dual(x.detach(), t)
            outs = _outputs(fn, args)
            tangents = [fwad.unpack_dual(o).tangent for o in outs]
        cols.append(np.concatenate([np.zeros(o.numel()) if jt is None else _real_rows(jt)
                                    for o, jt in zip(outs, tangents)]) if outs else np.zeros(0))
    return np.stack(cols, axis=1) if cols else np.zeros((sum(o.numel() for o in _outputs(fn, inputs)), 0))


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              fast_mode: bool = False, check_forward_ad: bool = False, check_backward_ad: bool = True,
              **_) -> bool:
    """Compare the vjp-built Jacobian of ``func`` at ``inputs`` with central differences.

    Inputs that require grad should be float64. Raises ``GradcheckError`` naming the input
    and the worst element on mismatch (or returns False with ``raise_exception=False``).
    ``check_forward_ad`` also checks the forward-mode (``forward_ad``) Jacobian;
    ``check_backward_ad=False`` skips the reverse-mode one.

    >>> x = tapelab.randn(3, dtype=tapelab.float64, requires_grad=True)
    >>> tapelab.autograd.gradcheck(tapelab.sin, (x,))
    True
    """
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        if x.dtype.itemsize < 8:
            import warnings
            warnings.warn(f"gradcheck: input {i} is {x.dtype}, not float64; the check may fail from rounding")
        num = _numerical(func, inputs, i, eps)
        checks = ([("", _analytical)] if check_backward_ad else []) + \
            ([("forward-mode ", _forward)] if check_forward_ad else [])
        for mode, jacobian in checks:
            ana = jacobian(func, inputs, i)
            if num.shape != ana.shape or not np.allclose(ana, num, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                diff = np.abs(ana - num) if num.shape == ana.shape else None
                where = np.unravel_index(np.argmax(diff), diff.shape) if diff is not None and diff.size else None
                raise GradcheckError(
                    f"{mode.capitalize()}Jacobian mismatch for output 0 with respect to input {i} "
                    f"(shape {list(x.shape)}),\nnumerical:{num}\nanalytical:{ana}\n"
                    + (f"largest difference {diff[where]:.3g} at (output, input) element {tuple(map(int, where))}"
                       if where is not None else f"shapes differ: {num.shape} vs {ana.shape}"))
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True, **_) -> bool:
    """gradcheck of the gradient itself: checks second derivatives through ``create_graph``."""
    from ..core.creation import randn
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = [_random_like(o, randn) for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))

    def first_grads(*args):
        xs, gos = args[:len(inputs)], args[len(inputs):]
        out = _outputs(func, xs)
        gs = _grad(list(out), [xs[i] for i in diff_idx], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


def _random_like(o, randn):
    """A random grad_output requiring grad, complex for a complex output."""
    if not o.is_complex():
        return randn(o.shape, dtype=o.dtype, requires_grad=True)
    parts = o.dtype.to_real()
    return (randn(o.shape, dtype=parts) + randn(o.shape, dtype=parts) * 1j).requires_grad_()

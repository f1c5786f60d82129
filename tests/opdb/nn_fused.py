"""OpInfos for the fused nn ops (engine/nn/_fused.py): softmax, log_softmax, layer_norm, gelu, hardtanh,
nll_loss and cross_entropy, through ``nn.functional`` on both sides. Class weights are keyword
arrays, so they never require grad (PyTorch has no weight gradient for these losses)."""
from __future__ import annotations

import numpy as np

from .core import ErrorInput, OpInfo, Sample, arr, rng


def _f(m):
    return m.nn.functional


def targets(*shape, classes, ignore=False) -> np.ndarray:
    t = rng().integers(0, classes, size=shape).astype(np.int64)
    if ignore and t.size:
        t.flat[0] = -100
    return t


def _softmax_samples():
    return [Sample((arr(3, 4),), {"dim": 1}, name="dim1"), Sample((arr(2, 3, 4),), {"dim": 0}, name="dim0"),
            Sample((arr(2, 3, 4),), {"dim": -2}, name="negdim"), Sample((arr(),), {"dim": 0}, name="0d"),
            Sample((arr(0, 3),), {"dim": 1}, name="empty"),
            Sample((arr(4, 3),), {"dim": 0}, noncontig=True, name="noncontig")]


def _layer_norm_samples():
    return [Sample((arr(3, 4), (4,)), name="plain"),
            Sample((arr(2, 3, 4), (3, 4), arr(3, 4), arr(3, 4)), name="affine_2d"),
            Sample((arr(2, 5), [5], arr(5)), name="weight_only"),
            Sample((arr(2, 5), (5,), None, arr(5)), name="bias_only"),
            Sample((arr(2, 3, 4), (4,), arr(4), arr(4)), {"eps": 1e-3}, name="eps"),
            Sample((arr(4, 3), (3,), arr(3), arr(3)), noncontig=True, name="noncontig")]


def _gelu_samples():
    return [Sample((arr(3, 4),), name="none"), Sample((arr(3, 4),), {"approximate": "tanh"}, name="tanh"),
            Sample((arr(),), name="0d"), Sample((arr(0, 2),), name="empty"),
            Sample((arr(4, 3),), {"approximate": "tanh"}, noncontig=True, name="noncontig")]


def _class_samples(smoothing: bool):
    w = rng().uniform(0.5, 2.0, 5)
    s = [Sample((arr(4, 5), targets(4, classes=5)), name="mean"),
         Sample((arr(4, 5), targets(4, classes=5, ignore=True)), {"reduction": "sum"}, name="sum_ignore"),
         Sample((arr(3, 5, 2), targets(3, 2, classes=5, ignore=True)), {"reduction": "none"}, name="spatial_none"),
         Sample((arr(4, 5), targets(4, classes=5, ignore=True)), {"weight": w}, name="weight_mean"),
         Sample((arr(5), np.array(2)), name="unbatched"),
         Sample((arr(4, 5), targets(4, classes=5)), {"ignore_index": 1, "reduction": "none"}, name="ignore_1"),
         Sample((arr(4, 5), targets(4, classes=5)), noncontig=True, name="noncontig")]
    if smoothing:
        s += [Sample((arr(4, 5), targets(4, classes=5, ignore=True)), {"label_smoothing": 0.2}, name="smooth"),
              Sample((arr(3, 5, 2), targets(3, 2, classes=5)), {"label_smoothing": 0.1, "weight": w,
                                                                 "reduction": "none"}, name="smooth_weight_none"),
              Sample((arr(4, 5), targets(4, classes=5)), {"label_smoothing": 0.3, "weight": w}, name="smooth_weight")]
    return s


def _nll(m, x, t, **kw):
    return _f(m).nll_loss(_f(m).log_softmax(x, 1 if x.ndim > 1 else 0), t, **kw)


def _class_errors():
    return [ErrorInput(Sample((arr(3, 5), np.array([0, 5, 1]))), IndexError, "out of bounds"),
            ErrorInput(Sample((arr(3, 5), np.array([0, -3, 1]))), IndexError, "out of bounds"),
            ErrorInput(Sample((arr(3, 5), np.array([0, 1]))), ValueError, "batch_size"),
            ErrorInput(Sample((arr(3, 5), np.array([0, 1, 2])), {"reduction": "avg"}), ValueError, "reduction")]


OPS = [
    OpInfo("nn.softmax", lambda m, a, dim: _f(m).softmax(a, dim), _softmax_samples),
    OpInfo("nn.log_softmax", lambda m, a, dim: _f(m).log_softmax(a, dim), _softmax_samples,
           errors=lambda: [ErrorInput(Sample((arr(2, 3),), {"dim": -3}), IndexError, "Dimension out of range")]),
    OpInfo("nn.layer_norm", lambda m, a, shape, w=None, b=None, **kw: _f(m).layer_norm(a, shape, w, b, **kw),
           _layer_norm_samples,
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (2,))), RuntimeError, "normalized_shape"),
                           ErrorInput(Sample((arr(2, 3), (3,), arr(2))), RuntimeError, "weight")]),
    OpInfo("nn.gelu", lambda m, a, **kw: _f(m).gelu(a, **kw), _gelu_samples,
           errors=lambda: [ErrorInput(Sample((arr(2),), {"approximate": "erf"}), RuntimeError, "none or tanh")]),
    OpInfo("nn.cross_entropy", lambda m, x, t, **kw: _f(m).cross_entropy(x, t, **kw), lambda: _class_samples(True),
           differentiable_args=(0,), errors=_class_errors),
    OpInfo("nn.nll_loss", _nll, lambda: _class_samples(False), differentiable_args=(0,), errors=_class_errors),
    OpInfo("nn.hardtanh", lambda m, a, *bounds: _f(m).hardtanh(a, *bounds),
           lambda: [Sample((arr(3, 4, low=-3, high=3),), name="default"),
                    Sample((arr(2, 5, low=-1, high=8), 0.0, 6.0), name="relu6_bounds"),
                    Sample((arr(),), name="0d"), Sample((arr(0, 2),), name="empty"),
                    Sample((arr(4, 3),), noncontig=True, name="noncontig")]),
]


def _sdpa_samples():
    causal_rows = np.tril(np.ones((3, 4), bool))
    dead = np.ones((2, 3, 4), bool)
    dead[1, 2] = False                      # a query that may attend nothing gives zeros
    return [Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5)), name="plain"),
            Sample((arr(2, 2, 3, 4), arr(2, 2, 3, 4), arr(2, 2, 3, 4)), {"is_causal": True}, name="causal"),
            Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5), causal_rows), name="bool_mask"),
            Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5), dead), name="bool_mask_dead_row"),
            Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5), arr(3, 4)), name="float_mask"),
            Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5)), {"scale": 0.3}, name="scale"),
            Sample((arr(1, 4, 3, 2), arr(1, 2, 3, 2), arr(1, 2, 3, 2)), {"enable_gqa": True}, name="gqa"),
            Sample((arr(2, 4, 3), arr(2, 4, 3), arr(2, 4, 3)), noncontig=True, name="noncontig")]


OPS.append(OpInfo("nn.scaled_dot_product_attention",
                  lambda m, q, k, v, mask=None, **kw: _f(m).scaled_dot_product_attention(q, k, v, mask, **kw),
                  _sdpa_samples,
                  errors=lambda: [ErrorInput(Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 3, 5))), RuntimeError,
                                             "positions"),
                                  ErrorInput(Sample((arr(2, 3, 4), arr(2, 4, 4), arr(2, 4, 5), arr(3, 4)),
                                                    {"is_causal": True}), RuntimeError, "is_causal")]))


def _linear_samples():
    return [Sample((arr(3, 4), arr(5, 4), arr(5)), name="matrix"),
            Sample((arr(2, 3, 4), arr(5, 4), arr(5)), name="batch"),
            Sample((arr(2, 1, 3, 4), arr(2, 4)), name="4d_no_bias"),
            Sample((arr(4), arr(3, 4), arr(3)), name="vector"),
            Sample((arr(0, 4), arr(3, 4), arr(3)), name="empty"),
            Sample((arr(4, 3), arr(4, 3), arr(4)), noncontig=True, name="noncontig")]


OPS.append(OpInfo("nn.linear", lambda m, x, w, b=None: _f(m).linear(x, w, b), _linear_samples,
                  errors=lambda: [ErrorInput(Sample((arr(2, 5, 3), arr(4, 5))), RuntimeError,
                                             r"mat1 and mat2 shapes cannot be multiplied \(10x3 and 5x4\)")]))


def _lstm_layer(m, x, h, c, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False):
    """One LSTM layer-direction over the sequence: tapelab's ``lstm`` op against ``torch.lstm``
    (a reversed direction runs on the flipped sequence); outputs, h_n and c_n stacked."""
    if m.__name__ == "torch":
        params = [w_ih, w_hh] + ([b_ih, b_hh] if b_ih is not None else [])
        out, hn, cn = m.lstm(x.flip(0) if reverse else x, (h[None], c[None]), params, b_ih is not None, 1, 0.0,
                             True, False, False)
        return m.cat([out.flip(0) if reverse else out, hn, cn])
    from tapelab.nn import _fused_rnn
    out, hn, cn = _fused_rnn.lstm_layer(x, h, c, w_ih, w_hh, b_ih, b_hh, reverse)
    return m.cat([out, hn[None], cn[None]])


def _lstm_samples():
    T, B, I, H = 3, 2, 3, 2
    def layer():
        return (arr(T, B, I), arr(B, H), arr(B, H), arr(4 * H, I), arr(4 * H, H))
    return [Sample(layer() + (arr(4 * H), arr(4 * H)), name="bias"),
            Sample(layer(), name="no_bias"),
            Sample(layer() + (arr(4 * H), arr(4 * H)), {"reverse": True}, name="reverse"),
            Sample((arr(1, 1, I), arr(1, H), arr(1, H), arr(4 * H, I), arr(4 * H, H)), name="one_step"),
            Sample(layer(), noncontig=True, name="noncontig")]


OPS.append(OpInfo("nn.lstm_layer", _lstm_layer, _lstm_samples, atol=1e-5, grad_atol=2e-4))


def _gru_layer(m, x, h, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False):
    """One GRU layer-direction: tapelab's ``gru`` op against ``torch.gru``; outputs and h_n stacked."""
    if m.__name__ == "torch":
        params = [w_ih, w_hh] + ([b_ih, b_hh] if b_ih is not None else [])
        out, hn = m.gru(x.flip(0) if reverse else x, h[None], params, b_ih is not None, 1, 0.0, True, False, False)
        return m.cat([out.flip(0) if reverse else out, hn])
    from tapelab.nn import _fused_rnn
    out, hn = _fused_rnn.gru_layer(x, h, w_ih, w_hh, b_ih, b_hh, reverse)
    return m.cat([out, hn[None]])


def _gru_samples():
    T, B, I, H = 3, 2, 3, 2
    def layer():
        return (arr(T, B, I), arr(B, H), arr(3 * H, I), arr(3 * H, H))
    return [Sample(layer() + (arr(3 * H), arr(3 * H)), name="bias"),
            Sample(layer(), name="no_bias"),
            Sample(layer() + (arr(3 * H), arr(3 * H)), {"reverse": True}, name="reverse"),
            Sample((arr(1, 1, I), arr(1, H), arr(3 * H, I), arr(3 * H, H)), name="one_step"),
            Sample(layer(), noncontig=True, name="noncontig")]


OPS.append(OpInfo("nn.gru_layer", _gru_layer, _gru_samples, atol=1e-5, grad_atol=2e-4))


def _prob(*shape) -> np.ndarray:
    return arr(*shape, low=0.05, high=0.95)


def _bce_samples():
    return [Sample((_prob(3, 4), _prob(3, 4)), name="mean"),
            Sample((_prob(3, 4), _prob(3, 4)), {"reduction": "sum"}, name="sum"),
            Sample((_prob(2, 3), _prob(2, 3)), {"reduction": "none"}, name="none"),
            Sample((_prob(2, 3), _prob(2, 3), _prob(2, 3)), name="weight"),
            Sample((_prob(), _prob()), name="0d"),
            Sample((_prob(0, 3), _prob(0, 3)), {"reduction": "none"}, name="empty"),
            Sample((_prob(4, 3), _prob(4, 3)), noncontig=True, name="noncontig")]


def _bce_errors():
    return [ErrorInput(Sample((_prob(3, 4), _prob(4, 3))), ValueError, "different to the input size")]


# binary_cross_entropy is its own op for PyTorch's gradient at saturated 0/1 inputs (tests/test_real_program_gaps.py)
OPS.append(OpInfo("nn.binary_cross_entropy",
                  lambda m, x, t, w=None, **kw: _f(m).binary_cross_entropy(x, t, w, **kw), _bce_samples,
                  differentiable_args=(0, 1), errors=_bce_errors))


def _mse_samples():
    return [Sample((arr(3, 4), arr(3, 4)), name="mean"),
            Sample((arr(3, 4), arr(3, 4)), {"reduction": "sum"}, name="sum"),
            Sample((arr(2, 3, 2), arr(2, 3, 2)), {"reduction": "none"}, name="none"),
            Sample((arr(), arr()), name="0d"),
            Sample((arr(0, 3), arr(0, 3)), {"reduction": "sum"}, name="empty"),
            Sample((arr(4, 3), arr(4, 3)), noncontig=True, name="noncontig")]


def _mse_errors():
    return [ErrorInput(Sample((arr(3, 4), arr(3, 4)), {"reduction": "avg"}), ValueError, "not a valid value")]


# mse_loss is one op: PyTorch's node (MseLossBackward0) and its backward formula
OPS.append(OpInfo("nn.mse_loss", lambda m, x, t, **kw: _f(m).mse_loss(x, t, **kw), _mse_samples,
                  differentiable_args=(0, 1), errors=_mse_errors))


def _bce_logits_samples():
    logits = lambda *s: arr(*s, low=-6.0, high=6.0)   # noqa: E731
    return [Sample((logits(3, 4), _prob(3, 4)), name="mean"),
            Sample((logits(3, 4), _prob(3, 4)), {"reduction": "sum"}, name="sum"),
            Sample((logits(2, 3), _prob(2, 3)), {"reduction": "none"}, name="none"),
            Sample((logits(3, 4), _prob(3, 4)), {"weight": _prob(4)}, name="weight"),
            Sample((logits(3, 4), _prob(3, 4)), {"pos_weight": arr(4, low=0.5, high=3.0)}, name="pos_weight"),
            Sample((logits(2, 4), _prob(2, 4)), {"weight": _prob(2, 4), "pos_weight": arr(4, low=0.5, high=3.0),
                                                 "reduction": "sum"}, name="both"),
            Sample((logits(), _prob()), name="0d"),
            Sample((logits(4, 3), _prob(4, 3)), noncontig=True, name="noncontig")]


def _bce_logits_errors():
    return [ErrorInput(Sample((arr(3, 4), _prob(4, 3))), ValueError, "must be the same as input size"),
            ErrorInput(Sample((arr(3, 4), _prob(3, 4)), {"reduction": "avg"}), ValueError, "not a valid value")]


# binary_cross_entropy_with_logits is one op: PyTorch's node, formula and non-differentiable weights
OPS.append(OpInfo("nn.binary_cross_entropy_with_logits",
                  lambda m, x, t, **kw: _f(m).binary_cross_entropy_with_logits(
                      x, t, **{k: (m.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}),
                  _bce_logits_samples, differentiable_args=(0, 1), errors=_bce_logits_errors))


def _upsample_samples():
    """interpolate's linear and bilinear modes (nn/_upsample.py): up, down, sizes, both corner rules."""
    return [Sample((arr(2, 3, 5),), {"scale_factor": 2.0, "mode": "linear"}, name="linear_x2"),
            Sample((arr(1, 2, 9),), {"size": 4, "mode": "linear", "align_corners": True}, name="linear_down_corners"),
            Sample((arr(2, 2, 4, 5),), {"scale_factor": 1.5, "mode": "bilinear"}, name="bilinear_x1.5"),
            Sample((arr(1, 3, 6, 7),), {"size": (3, 9), "mode": "bilinear", "align_corners": True},
                   name="bilinear_size_corners"),
            Sample((arr(1, 2, 5, 4),), {"scale_factor": (2.0, 1.0), "mode": "bilinear"}, name="bilinear_rows_only"),
            Sample((arr(2, 2, 4, 4),), {"scale_factor": 2.0, "mode": "bilinear"}, noncontig=True, name="noncontig")]


OPS.append(OpInfo("nn.interpolate_linear", lambda m, x, **kw: _f(m).interpolate(x, **kw), _upsample_samples,
                  errors=lambda: [ErrorInput(Sample((arr(2, 3, 5),), {"scale_factor": 2.0, "mode": "bilinear"}),
                                             NotImplementedError, "bilinear mode needs 4D input")]))


def _robust_samples(param: str, values: tuple):
    """huber_loss / smooth_l1_loss (nn/_robust_losses.py): each reduction, a delta or beta that is no power of 2
    (the backward's float and double scalings differ there), 0-d, empty, non-contiguous."""
    return [Sample((arr(3, 4), arr(3, 4)), name="mean"),
            Sample((arr(3, 4), arr(3, 4)), {"reduction": "sum", param: values[0]}, name="sum"),
            Sample((arr(2, 3, 2), arr(2, 3, 2)), {"reduction": "none", param: values[1]}, name="none"),
            Sample((arr(), arr()), {param: values[0]}, name="0d"),
            Sample((arr(0, 3), arr(0, 3)), {"reduction": "sum"}, name="empty"),
            Sample((arr(4, 3), arr(4, 3)), {param: values[1]}, noncontig=True, name="noncontig")]


# huber_loss and smooth_l1_loss are one op each with their backward ops (PyTorch's kernels' floats)
OPS.append(OpInfo("nn.huber_loss", lambda m, x, t, **kw: _f(m).huber_loss(x, t, **kw),
                  lambda: _robust_samples("delta", (0.3, 1.7)), differentiable_args=(0, 1),
                  errors=lambda: [ErrorInput(Sample((arr(3), arr(3)), {"delta": 0.0}), RuntimeError, "delta"),
                                  ErrorInput(Sample((arr(3), arr(3)), {"reduction": "avg"}), ValueError,
                                             "not a valid value")]))
OPS.append(OpInfo("nn.smooth_l1_loss", lambda m, x, t, **kw: _f(m).smooth_l1_loss(x, t, **kw),
                  lambda: _robust_samples("beta", (1 / 9, 0.3)) + [Sample((arr(3, 4), arr(3, 4)), {"beta": 0.0},
                                                                          name="beta0")],
                  differentiable_args=(0, 1),
                  errors=lambda: [ErrorInput(Sample((arr(3), arr(3)), {"beta": -1.0}), RuntimeError, "negative")]))

"""Transformer encoder/decoder layers, their stacks and nn.Transformer against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl
from test_nn_attention import _convert, module_parity, pair, randn, same_error, twin

D, NHEAD, FF, S, TGT, B = 8, 2, 16, 4, 3, 2
# torch's nested-tensor fast path explains why it is off; mixed bool/float masks warn in both libraries
pytestmark = [pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
              pytest.mark.filterwarnings("ignore:Support for mismatched")]


def seq(length: int, batch_first: bool) -> np.ndarray:
    return randn(B, length, D) if batch_first else randn(length, B, D)


def causal(n: int) -> np.ndarray:
    return np.triu(np.full((n, n), -np.inf), 1)


def enc_layer_pair(dropout=0.0, **kwargs):
    return pair(torch.nn.TransformerEncoderLayer, tl.nn.TransformerEncoderLayer, D, NHEAD, FF, dropout, **kwargs)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(norm_first, batch_first, activation):
    tm, lm = enc_layer_pair(norm_first=norm_first, batch_first=batch_first, activation=activation)
    module_parity(tm, lm, seq(S, batch_first))


def test_encoder_layer_callable_activation_no_bias_and_float32():
    tm = torch.nn.TransformerEncoderLayer(D, NHEAD, FF, 0.0, activation=torch.tanh, bias=False).double()
    lm = twin(tm, tl.nn.TransformerEncoderLayer(D, NHEAD, FF, 0.0, activation=tl.tanh, bias=False).double())
    module_parity(tm, lm, seq(S, False))
    tm, lm = enc_layer_pair(dtype="float32")
    module_parity(tm, lm, seq(S, False).astype("float32"), dtype="float32")


@pytest.mark.parametrize("masks", ["causal", "causal_hint", "padding", "both", "bool_mask"])
def test_encoder_layer_masks(masks):
    tm, lm = enc_layer_pair(batch_first=True)
    kpm = np.array([[False, False, False, True], [False, False, False, False]])
    kw = {"causal": dict(src_mask=causal(S)), "causal_hint": dict(src_mask=causal(S), is_causal=True),
          "padding": dict(src_key_padding_mask=kpm), "both": dict(src_mask=causal(S), src_key_padding_mask=kpm),
          "bool_mask": dict(src_mask=np.isinf(causal(S)), src_key_padding_mask=kpm)}[masks]
    module_parity(tm, lm, seq(S, True), kwargs=kw)


def test_mismatched_mask_types_warn():
    lm = tl.nn.TransformerEncoderLayer(D, NHEAD, FF)
    with pytest.warns(UserWarning, match="Support for mismatched src_key_padding_mask and src_mask is deprecated"):
        lm(tl.randn(S, B, D), src_mask=tl.tensor(causal(S), dtype=tl.float32),
           src_key_padding_mask=tl.zeros((B, S), dtype=tl.bool))


def test_encoder_layer_eval_with_dropout_matches():
    tm, lm = enc_layer_pair(dropout=0.1)
    tm.eval(), lm.eval()
    module_parity(tm, lm, seq(S, False))


def test_encoder_layer_train_dropout_is_seeded():
    lm = tl.nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.5)
    x = tl.tensor(seq(S, False).astype("float32"))
    tl.manual_seed(3)
    a = lm(x).detach().numpy()
    tl.manual_seed(3)
    np.testing.assert_array_equal(a, lm(x).detach().numpy())
    assert not np.allclose(a, lm.eval()(x).detach().numpy())


@pytest.mark.parametrize("with_norm", [False, True])
def test_encoder_stack(with_norm):
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerEncoderLayer(D, NHEAD, FF, 0.0, batch_first=True)
    t_norm = torch.nn.LayerNorm(D) if with_norm else None
    tm = torch.nn.TransformerEncoder(t_layer, 2, t_norm, enable_nested_tensor=False).double()
    lm = tl.nn.TransformerEncoder(tl.nn.TransformerEncoderLayer(D, NHEAD, FF, 0.0, batch_first=True), 2,
                                  tl.nn.LayerNorm(D) if with_norm else None).double()
    twin(tm, lm)
    kpm = np.array([[False, False, True, True], [False, False, False, False]])
    module_parity(tm, lm, seq(S, True), kwargs=dict(mask=causal(S), src_key_padding_mask=kpm))
    module_parity(tm, lm, seq(S, True), kwargs=dict(mask=causal(S)))          # causal mask detected
    module_parity(tm, lm, seq(S, True)[0])                                      # unbatched


def dec_layer_pair(**kwargs):
    return pair(torch.nn.TransformerDecoderLayer, tl.nn.TransformerDecoderLayer, D, NHEAD, FF, 0.0, **kwargs)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer(norm_first, batch_first):
    tm, lm = dec_layer_pair(norm_first=norm_first, batch_first=batch_first)
    kpm = np.array([[False, False, True, False], [False, False, False, False]])
    module_parity(tm, lm, seq(TGT, batch_first), seq(S, batch_first))
    module_parity(tm, lm, seq(TGT, batch_first), seq(S, batch_first),
                  kwargs=dict(tgt_mask=causal(TGT), tgt_is_causal=True, memory_key_padding_mask=kpm))


def test_transformer_full_model():
    torch.manual_seed(0)
    kwargs = dict(d_model=D, nhead=NHEAD, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=FF,
                  dropout=0.0)
    tm, lm = pair(torch.nn.Transformer, tl.nn.Transformer, **kwargs)
    src_kpm = np.array([[False, False, False, True], [False, False, False, False]])
    module_parity(tm, lm, seq(S, False), seq(TGT, False),
                  kwargs=dict(tgt_mask=causal(TGT), src_key_padding_mask=src_kpm, memory_key_padding_mask=src_kpm))


def test_state_dict_keys_and_repr():
    cases = [
        (lambda m: m.TransformerEncoderLayer(D, NHEAD, FF)),
        (lambda m: m.TransformerDecoderLayer(D, NHEAD, FF, bias=False)),
        (lambda m: m.TransformerEncoder(m.TransformerEncoderLayer(D, NHEAD, FF), 2, m.LayerNorm(D),
                                        enable_nested_tensor=False)),
        (lambda m: m.Transformer(D, NHEAD, 1, 2, FF)),
    ]
    for build in cases:
        t, l = build(torch.nn), build(tl.nn)
        assert [(k, tuple(v.shape)) for k, v in l.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
        assert repr(l) == repr(t)


def test_transformer_init_is_xavier_on_matrices():
    m = tl.nn.Transformer(D, NHEAD, 1, 1, FF)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6 / (D + FF))
    assert np.all(np.abs(w) <= bound) and w.std() > bound / 3
    np.testing.assert_array_equal(m.encoder.norm.weight.detach().numpy(), np.ones(D, np.float32))


def test_generate_square_subsequent_mask():
    for n in (1, 4):
        np.testing.assert_array_equal(tl.nn.Transformer.generate_square_subsequent_mask(n).numpy(),
                                      torch.nn.Transformer.generate_square_subsequent_mask(n).numpy())
    assert tl.nn.Transformer.generate_square_subsequent_mask(3, dtype=tl.float64).dtype == tl.float64


@pytest.mark.parametrize("case", ["batch", "features"])
def test_transformer_errors(case):
    tm, lm = pair(torch.nn.Transformer, tl.nn.Transformer, D, NHEAD, 1, 1, FF)
    src, tgt = {"batch": (randn(S, B, D), randn(TGT, B + 1, D)),
                "features": (randn(S, B, D), randn(TGT, B, D + 1))}[case]
    same_error(lambda: tm(*_convert(torch, (src, tgt), False, {})),
               lambda: lm(*_convert(tl, (src, tgt), False, {})))


def test_bad_activation_name():
    same_error(lambda: torch.nn.TransformerEncoderLayer(D, NHEAD, activation="swish"),
               lambda: tl.nn.TransformerEncoderLayer(D, NHEAD, activation="swish"))

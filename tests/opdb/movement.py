"""OpInfos for movement ops: views, joining, splitting, flipping, padding, copies."""
from __future__ import annotations

import numpy as np
import torch

from tapelab.ops import movement

from .core import ErrorInput, OpInfo, Sample, arr

INTS = np.arange(6).reshape(2, 3)


def _pad(m, a, *pad_args, **kw):
    """``nn.functional.pad`` for torch; tapelab's primitive until nn.functional re-exports it."""
    fn = torch.nn.functional.pad if m is torch else movement.pad
    return fn(a, *pad_args, **kw)


def _dim_error(*args):
    return lambda: [ErrorInput(Sample((arr(2, 3), *args)), IndexError, "Dimension out of range")]


def _copy(m, a, b):
    out = a.clone()
    out.copy_(b)
    return out


UNARY = [Sample((arr(3, 4),), name="2d"), Sample((arr(4, 3),), noncontig=True, name="noncontig"),
         Sample((arr(0, 3),), name="empty")]

OPS = [
    OpInfo("reshape", lambda m, a, s: a.reshape(s), lambda: [Sample((arr(3, 4), (4, 3))), Sample((arr(3, 4), (-1,)), name="infer"),
                                                          Sample((arr(4, 3), (2, 6)), noncontig=True, name="noncontig"),
                                                          Sample((arr(), (1, 1)), name="0d"), Sample((arr(0, 3), (3, 0)), name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(3, 4), (5, 3))), RuntimeError, "invalid for input of size 12"),
                           ErrorInput(Sample((arr(3, 4), (-1, -1))), RuntimeError, "only one dimension can be inferred")]),
    OpInfo("view", lambda m, a, *s: a.view(*s), lambda: [Sample((arr(3, 4), 2, 6)), Sample((arr(2, 3, 4), -1, 4), name="infer"),
                                                       Sample((arr(4, 3), 4, 1, 3), noncontig=True, name="noncontig_ok")],
           errors=lambda: [ErrorInput(Sample((arr(4, 3), 12), noncontig=True), RuntimeError, "view size is not compatible")]),
    OpInfo("view_as", lambda m, a, b: a.view_as(b), lambda: [Sample((arr(3, 4), arr(2, 6)))], differentiable_args=(0,)),
    OpInfo("permute", lambda m, a: a.permute(2, 0, 1), lambda: [Sample((arr(2, 3, 4),)), Sample((arr(2, 0, 4),), name="empty")]),
    OpInfo("permute_neg", lambda m, a: a.permute(-1, 0), lambda: [Sample((arr(4, 3),), noncontig=True)],
           errors=lambda: [ErrorInput(Sample((arr(2, 3, 4),)), RuntimeError, "number of dimensions")]),
    OpInfo("transpose", lambda m, a, *d: a.transpose(*d),
           lambda: [Sample((arr(2, 3, 4), 0, -1)), Sample((arr(), 0, -1), name="0d"), Sample((arr(4, 3), 1, 0), noncontig=True)],
           errors=_dim_error(0, 2)),
    OpInfo("swapaxes", lambda m, a: m.swapaxes(a, 0, 1), lambda: [Sample((arr(4, 3),), noncontig=True)]),
    OpInfo("swapdims", lambda m, a: a.swapdims(-1, -2), lambda: [Sample((arr(2, 3, 4),))]),
    OpInfo("movedim", lambda m, a, s, d: m.movedim(a, s, d),
           lambda: [Sample((arr(2, 3, 4), 0, -1)), Sample((arr(2, 3, 4), (0, 1), (2, 0)), name="tuple"),
                    Sample((arr(4, 3), 1, 0), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (0, 0), (1, 0))), RuntimeError, "repeated dim"),
                           ErrorInput(Sample((arr(2, 3), 2, 0)), IndexError, "Dimension out of range")]),
    OpInfo("moveaxis", lambda m, a: a.moveaxis(-1, 0), lambda: [Sample((arr(2, 3, 4),))]),
    OpInfo("t", lambda m, a: a.t(), lambda: [Sample((arr(3, 4),)), Sample((arr(3),), name="1d"), Sample((arr(),), name="0d")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3, 4),)), RuntimeError, "expects a tensor with <= 2 dimensions")]),
    OpInfo("T", lambda m, a: a.T, lambda: [Sample((arr(3, 4),)), Sample((arr(4, 3),), noncontig=True, name="noncontig")]),
    OpInfo("mT", lambda m, a: a.mT, lambda: [Sample((arr(2, 3, 4),))],
           errors=lambda: [ErrorInput(Sample((arr(3),)), RuntimeError, "only supported on matrices")]),
    OpInfo("expand", lambda m, a: a.expand(2, 3, 4), lambda: [Sample((arr(3, 1),)), Sample((arr(),), name="0d")],
           errors=lambda: [ErrorInput(Sample((arr(3, 2),)), RuntimeError, "must match the existing size")]),
    OpInfo("expand_neg1", lambda m, a: a.expand(2, -1, 4), lambda: [Sample((arr(3, 1),)), Sample((arr(4, 1),), noncontig=True)]),
    OpInfo("expand_as", lambda m, a, b: a.expand_as(b), lambda: [Sample((arr(3, 1), arr(2, 3, 4)))], differentiable_args=(0,)),
    OpInfo("broadcast_to", lambda m, a: m.broadcast_to(a, (2, 3)), lambda: [Sample((arr(3),)), Sample((arr(),), name="0d")]),
    OpInfo("broadcast_tensors", lambda m, a, b: m.broadcast_tensors(a, b),
           lambda: [Sample((arr(3, 1), arr(4))), Sample((arr(), arr(2, 2)), name="0d")],
           errors=lambda: [ErrorInput(Sample((arr(3), arr(4))), RuntimeError, "must match the size")]),
    OpInfo("unsqueeze", lambda m, a, d: a.unsqueeze(d), lambda: [Sample((arr(2, 3), -1)), Sample((arr(), 0), name="0d"),
                                                               Sample((arr(2, 3), 1), name="mid")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 3)), IndexError, "Dimension out of range")]),
    OpInfo("squeeze", lambda m, a, *d: a.squeeze(*d),
           lambda: [Sample((arr(2, 1, 3, 1),)), Sample((arr(2, 1, 3, 1), (1, -1)), name="tuple"),
                    Sample((arr(2, 1, 3), 0), name="nonsingleton"), Sample((arr(), 0), name="0d")],
           errors=_dim_error(5)),
    OpInfo("flatten", lambda m, a, *d: a.flatten(*d), lambda: [Sample((arr(2, 3, 4), 1)), Sample((arr(),), name="0d"),
                                                             Sample((arr(4, 3),), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 1, 0)), RuntimeError, "start_dim cannot come after end_dim")]),
    OpInfo("unflatten", lambda m, a, d, s: a.unflatten(d, s),
           lambda: [Sample((arr(2, 6), 1, (2, 3))), Sample((arr(2, 6), -1, (-1, 2)), name="infer")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 1, (2, 2))), RuntimeError, "don't multiply up")]),
    OpInfo("repeat", lambda m, a, *r: a.repeat(*r),
           lambda: [Sample((arr(2, 3), 2, 1)), Sample((arr(3), 2, 2), name="lead"), Sample((arr(), 3), name="0d"),
                    Sample((arr(2, 3), 0, 2), name="zero"), Sample((arr(4, 3), 1, 2), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 2)), RuntimeError, "can not be smaller")]),
    OpInfo("tile", lambda m, a, r: a.tile(r), lambda: [Sample((arr(2, 3), (2,))), Sample((arr(3), (2, 2)), name="lead")]),
    OpInfo("cat", lambda m, ts, *d: m.cat(ts, *d),
           lambda: [Sample(([arr(2, 3), arr(4, 3)],)), Sample(([arr(2, 3), arr(2, 1), arr(2, 2)], -1), name="negdim"),
                    Sample(([arr(2, 3), arr(0)],), name="skip_empty_1d"), Sample(([arr(0, 3), arr(2, 3)],), name="empty"),
                    Sample(([arr(3, 2), arr(3, 4)], 1), noncontig=True, name="noncontig"),
                    Sample(([arr(2, 3), INTS],), name="promote")],
           errors=lambda: [ErrorInput(Sample(([arr(2, 3), arr(2, 4)],)), RuntimeError,
                                      "Sizes of tensors must match except in dimension 0"),
                           ErrorInput(Sample(([arr(2, 3), arr(3)],)), RuntimeError, "same number of dimensions"),
                           ErrorInput(Sample(([arr(), arr()],)), RuntimeError, "zero-dimensional"),
                           ErrorInput(Sample(([arr(2, 3)], 2)), IndexError, "Dimension out of range"),
                           ErrorInput(Sample(([],)), ValueError, "non-empty")]),
    OpInfo("concat", lambda m, a, b: m.concat((a, b), dim=1), lambda: [Sample((arr(2, 3), arr(2, 2)))]),
    OpInfo("stack", lambda m, ts, *d: m.stack(ts, *d),
           lambda: [Sample(([arr(2, 3), arr(2, 3)],)), Sample(([arr(2, 3), arr(2, 3), arr(2, 3)], -1), name="negdim"),
                    Sample(([arr(), arr()],), name="0d"), Sample(([arr(3, 2), arr(3, 2)], 1), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample(([arr(2, 3), arr(3, 2)],)), RuntimeError, "stack expects each tensor to be equal size"),
                           ErrorInput(Sample(([arr(2, 3)], 3)), IndexError, "Dimension out of range")]),
    OpInfo("hstack", lambda m, a, b: m.hstack([a, b]),
           lambda: [Sample((arr(2, 3), arr(2, 1))), Sample((arr(2), arr(3)), name="1d"), Sample((arr(), arr()), name="0d")]),
    OpInfo("vstack", lambda m, a, b: m.vstack((a, b)), lambda: [Sample((arr(2, 3), arr(1, 3))), Sample((arr(3), arr(3)), name="1d")]),
    OpInfo("dstack", lambda m, a, b: m.dstack((a, b)), lambda: [Sample((arr(2, 3), arr(2, 3))), Sample((arr(3), arr(3)), name="1d")]),
    OpInfo("column_stack", lambda m, a, b: m.column_stack((a, b)), lambda: [Sample((arr(3), arr(3, 2)))]),
    OpInfo("atleast_2d", lambda m, a: m.atleast_2d(a), lambda: [Sample((arr(),)), Sample((arr(3),), name="1d")]),
    OpInfo("split", lambda m, a, s, *d: a.split(s, *d),
           lambda: [Sample((arr(5, 2), 2)), Sample((arr(2, 6), [1, 2, 3], -1), name="sizes"),
                    Sample((arr(4, 3), 2, 1), noncontig=True, name="noncontig"), Sample((arr(0, 2), 2), name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), [1, 1], 1)), RuntimeError, "split_with_sizes expects split_sizes to sum"),
                           ErrorInput(Sample((arr(2, 3), 1, 5)), IndexError, "Dimension out of range")]),
    OpInfo("chunk", lambda m, a, c, *d: a.chunk(c, *d),
           lambda: [Sample((arr(5, 2), 3)), Sample((arr(2, 6), 4, -1), name="uneven"), Sample((arr(0, 2), 2), name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 0)), RuntimeError, "chunk expects `chunks` to be greater than 0")]),
    OpInfo("tensor_split", lambda m, a, s, *d: a.tensor_split(s, *d),
           lambda: [Sample((arr(7, 2), 3)), Sample((arr(2, 7), [1, 5], 1), name="indices"), Sample((arr(5), [-2, 9]), name="clamp")]),
    OpInfo("unbind", lambda m, a, *d: a.unbind(*d), lambda: [Sample((arr(3, 2),)), Sample((arr(2, 3), -1), name="negdim")],
           errors=_dim_error(2)),
    OpInfo("flip", lambda m, a, *d: a.flip(*d),
           lambda: [Sample((arr(2, 3, 4), 0)), Sample((arr(2, 3, 4), (0, -1)), name="dims"), Sample((arr(), ()), name="0d"),
                    Sample((arr(4, 3), 1), noncontig=True, name="noncontig"), Sample((arr(0, 3), 0), name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (0, 0))), RuntimeError, "appears multiple times"),
                           ErrorInput(Sample((arr(2, 3), 2)), IndexError, "Dimension out of range")]),
    OpInfo("fliplr", lambda m, a: m.fliplr(a), lambda: [Sample((arr(2, 3),))],
           errors=lambda: [ErrorInput(Sample((arr(3),)), RuntimeError, "Input must be >= 2-d")]),
    OpInfo("flipud", lambda m, a: a.flipud(), lambda: [Sample((arr(2, 3),))]),
    OpInfo("roll", lambda m, a, s, *d: a.roll(s, *d),
           lambda: [Sample((arr(3, 4), 1)), Sample((arr(3, 4), (1, -2), (0, 1)), name="dims"),
                    Sample((arr(3, 4), 5, -1), name="wrap"), Sample((arr(4, 3), 1, 0), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(3, 2), 1, (0, 1))), RuntimeError, "shifts and dimensions must align")]),
    OpInfo("narrow", lambda m, a, *args: a.narrow(*args),
           lambda: [Sample((arr(4, 3), 0, 1, 2)), Sample((arr(4, 3), -1, -2, 2), name="neg"),
                    Sample((arr(4, 3), 1, 0, 0), name="empty"), Sample((arr(4, 3), 1, 1, 2), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 1, 2, 2)), RuntimeError, "exceeds dimension size"),
                           ErrorInput(Sample((arr(2, 3), 2, 0, 1)), IndexError, "Dimension out of range")]),
    OpInfo("select", lambda m, a, d, i: a.select(d, i),
           lambda: [Sample((arr(4, 3), 0, 1)), Sample((arr(4, 3), -1, -1), name="neg"), Sample((arr(3),  0, 2), name="to0d"),
                    Sample((arr(4, 3), 1, 2), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), 1, 3)), IndexError, "out of range"),
                           ErrorInput(Sample((arr(), 0, 0)), IndexError, "0-dim")]),
    OpInfo("contiguous", lambda m, a: a.contiguous(), lambda: UNARY),
    OpInfo("clone", lambda m, a: a.clone(), lambda: UNARY + [Sample((arr(),), name="0d")]),
    OpInfo("tril", lambda m, a, *k: a.tril(*k),
           lambda: [Sample((arr(4, 4),)), Sample((arr(2, 3, 4), 1), name="batched"), Sample((arr(3, 4), -1), name="neg"),
                    Sample((arr(4, 3),), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(3),)), RuntimeError, "at least 2 dimensions")]),
    OpInfo("triu", lambda m, a, *k: m.triu(a, *k), lambda: [Sample((arr(4, 4),)), Sample((arr(2, 3, 4), -1), name="batched")]),
    OpInfo("pad_constant", lambda m, a, p, **kw: _pad(m, a, p, **kw),
           lambda: [Sample((arr(2, 3), (1, 2))), Sample((arr(2, 3), (1, 0, 2, 1)), {"value": 1.5}, name="2d"),
                    Sample((arr(2, 3), (-1, 1, 0, -1)), name="crop"), Sample((arr(4, 3), (1, 1)), noncontig=True, name="noncontig"),
                    Sample((arr(0, 3), (1, 1)), name="empty")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (1,))), RuntimeError, "divisible by 2"),
                           ErrorInput(Sample((arr(2, 3), (1, 1, 1, 1, 1, 1))), RuntimeError, "less than or equal")]),
    OpInfo("pad_reflect", lambda m, a, p: _pad(m, a, p, mode="reflect"),
           lambda: [Sample((arr(2, 5), (2, 1))), Sample((arr(1, 2, 4, 5), (1, 3, 2, 0)), name="2d"),
                    Sample((arr(1, 3, 3, 4), (1, 1, 1, 1, 2, 1)), name="3d")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (3, 3))), RuntimeError, "Padding size should be less than"),
                           ErrorInput(Sample((arr(3), (1, 1))), NotImplementedError, "not supported")]),
    OpInfo("pad_replicate", lambda m, a, p: _pad(m, a, p, mode="replicate"),
           lambda: [Sample((arr(2, 3), (2, 4))), Sample((arr(1, 2, 3, 4), (1, 3, 2, 0)), name="2d")]),
    OpInfo("pad_circular", lambda m, a, p: _pad(m, a, p, mode="circular"),
           lambda: [Sample((arr(2, 3), (2, 3))), Sample((arr(1, 2, 3, 4), (1, 3, 2, 0)), name="2d")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), (4, 1))), RuntimeError, "wrapping around more than once")]),
    # the overwritten input's gradient is a constant zero, which gradgradcheck cannot differentiate
    OpInfo("copy_", _copy, gradgrad=False, samples=lambda: [Sample((arr(2, 3), arr(2, 3))), Sample((arr(2, 3), arr(3)), name="bcast"),
                                    Sample((arr(4, 3), arr(4, 3)), noncontig=True, name="noncontig")],
           errors=lambda: [ErrorInput(Sample((arr(2, 3), arr(2))), RuntimeError, "must match")]),
]

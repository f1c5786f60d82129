"""torch.* / Tensor.* composites of the coverage push (engine/ops/stats.py, engine/ops/shaping.py),
each against torch: values, dtypes and float64 gradients; the special-function primitives are in
tests/opdb/special.py (run by tests/test_ops.py, gradcheck included)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tapelab
from _against_torch import compare

R = np.random.default_rng(0)


def a(*shape):
    return R.standard_normal(shape)


def ints(*shape, low=0, high=6):
    return R.integers(low, high, size=shape)


NANS = np.array([[1.0, np.nan, 3.0, 0.5], [np.nan, 2.5, np.nan, np.nan], [2.0, -1.0, 4.0, 4.0]])
ALL_NAN = np.array([[np.nan, np.nan, np.nan], [1.0, np.nan, 2.0]])
TIES = np.array([[1.0, 3.0, 3.0, 2.0, 5.0], [0.0, 0.0, -1.0, 0.0, 2.0]])

CASES = {
    # stats
    "cummax": (lambda m, x: m.cummax(x, 1), (TIES,)),
    "cummin_dim0": (lambda m, x: x.cummin(0), (TIES,)),
    "cummax_nan": (lambda m, x: m.cummax(x, 1), (NANS,), False),
    "logcumsumexp": (lambda m, x: m.logcumsumexp(x, -1), (a(3, 5) * 30,)),
    "nansum": (lambda m, x: (m.nansum(x), x.nansum(1)), (NANS,)),
    "nanmean": (lambda m, x: (m.nanmean(x), m.nanmean(x, 1, keepdim=True)), (NANS,)),
    "nanmedian": (lambda m, x: (m.nanmedian(x), *m.nanmedian(x, 1)), (NANS,)),
    "nan_all_nan_slices": (lambda m, x: (m.nanmean(x, 1), m.nansum(x, 1), m.nanmedian(x, 1).values,
                                         m.nanquantile(x, 0.5, dim=1)), (ALL_NAN,), False),
    "quantile": (lambda m, x: (m.quantile(x, 0.3), m.quantile(x, m.tensor([0.1, 0.5, 1.0], dtype=m.float64), dim=1,
                                                                           keepdim=True)),
                 (a(3, 6),)),
    "quantile_modes": (lambda m, x: tuple(m.quantile(x, 0.4, dim=0, interpolation=i)
                                          for i in ("lower", "higher", "midpoint", "nearest")), (a(5, 3),)),
    "nanquantile": (lambda m, x: (m.nanquantile(x, 0.25, dim=1), x.nanquantile(m.tensor([0.0, 0.7], dtype=m.float64))),
                    (NANS,)),
    "histc": (lambda m, x: (m.histc(x, 5), m.histc(x, 4, min=-1, max=1)), (a(20),), False),
    "histogram": (lambda m, x: tuple(m.histogram(x, 6)) + tuple(m.histogram(x, m.tensor([-2.0, 0.0, 0.5, 3.0], dtype=m.float64),
                                                                            density=True)), (a(30),), False),
    "bincount": (lambda m, x: (m.bincount(x), x.bincount(minlength=9),
                               m.bincount(x, m.arange(12, dtype=m.float64))), (ints(12),), False),
    "bucketize": (lambda m, x: (m.bucketize(x, m.tensor([-1.0, 0.0, 1.0])),
                                m.bucketize(x, m.tensor([-1.0, 0.0, 1.0]), right=True, out_int32=True)),
                  (np.array([-2.0, -1.0, 0.5, 1.0, 3.0]),), False),
    "isin": (lambda m, x: (m.isin(x, m.tensor([1, 3, 5])), m.isin(x, m.tensor([1, 3]), invert=True)), (ints(3, 4),),
             False),
    "isreal": (lambda m, x: m.isreal(x), (a(2, 3),), False),
    "aminmax": (lambda m, x: (*m.aminmax(x), *m.aminmax(x, dim=1, keepdim=True)), (a(3, 4),)),
    "cov": (lambda m, x: (m.cov(x), x.cov(correction=0)), (a(3, 6),)),
    "cov_weights": (lambda m, x: m.cov(x, fweights=m.tensor([1, 2, 1, 3, 1]), aweights=m.tensor(
        [0.5, 1.0, 2.0, 1.0, 0.3], dtype=m.float64)), (a(2, 5),)),
    "corrcoef": (lambda m, x: m.corrcoef(x), (a(3, 6),)),
    "diff": (lambda m, x, p: (m.diff(x), m.diff(x, n=2, dim=0, prepend=p)), (a(3, 4), a(1, 4))),
    "dist": (lambda m, x, y: (m.dist(x, y), m.dist(x, y, 1.5), x.dist(y, float("inf"))), (a(3, 4), a(3, 4))),
    "renorm": (lambda m, x: (m.renorm(x, 2, 0, 1.0), x.renorm(1, 1, 0.5)), (a(3, 4) * 2,)),
    "unique_consecutive": (lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True),
                           (np.array([1, 1, 2, 2, 3, 1, 1, 2]),), False),
    "unique_consecutive_dim": (lambda m, x: m.unique_consecutive(x, return_counts=True, dim=0),
                               (np.array([[1, 2], [1, 2], [3, 4], [1, 2]]),), False),
    # shaping
    "diagonal_scatter": (lambda m, x, s: m.diagonal_scatter(x, s, 1), (a(3, 4), a(3))),
    "select_scatter": (lambda m, x, s: m.select_scatter(x, s, 1, -1), (a(3, 4), a(3))),
    "slice_scatter": (lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), (a(3, 5), a(3, 2))),
    "diag_embed": (lambda m, x: (m.diag_embed(x), m.diag_embed(x, -1, 0, 2)), (a(2, 3),)),
    "diagflat": (lambda m, x: (m.diagflat(x), x.diagflat(2)), (a(2, 2),)),
    "rot90": (lambda m, x: tuple(m.rot90(x, k, (1, 2)) for k in (-1, 0, 1, 2, 3, 5)), (a(2, 3, 4),)),
    "ravel": (lambda m, x: (m.ravel(x), x.t().ravel()), (a(3, 4),)),
    "dhvsplit": (lambda m, x: (*m.dsplit(x, 2), *m.hsplit(x, [1]), *x.vsplit(2)), (a(2, 3, 4),)),
    "split_with_sizes": (lambda m, x: (*m.split_with_sizes(x, [1, 3], 1), *x.unsafe_split(2, 1),
                                       *m.unsafe_chunk(x, 2, 1), *m.unsafe_split_with_sizes(x, [2, 2], 1)), (a(3, 4),)),
    "repeat_interleave": (lambda m, x: (m.repeat_interleave(x, 2), x.repeat_interleave(m.tensor([1, 0, 2]), dim=0),
                                        m.repeat_interleave(m.tensor([2, 0, 3]))), (a(3, 2),)),
    "masked_scatter": (lambda m, x, s: m.masked_scatter(x, m.tensor([[True, False, True], [False, True, True]]), s),
                       (a(2, 3), a(6))),
    "put": (lambda m, x, s: (m.put(x, m.tensor([0, -1, 4]), s), x.put(m.tensor([1, 1]), s[:2], True)), (a(2, 3), a(3))),
    "index_reduce": (lambda m, x, s: tuple(m.index_reduce(x, 0, m.tensor([0, 2, 0]), s, r) for r in
                                           ("mean", "amax", "amin")), (a(3, 2), a(3, 2))),
    # tapelab's scatter_reduce has no gradient for prod yet: values only
    "index_reduce_prod": (lambda m, x, s: m.index_reduce(x, 0, m.tensor([0, 2, 0]), s, "prod"), (a(3, 2), a(3, 2)),
                          False),
    "index_reduce_exclude": (lambda m, x, s: x.index_reduce(1, m.tensor([1, 1]), s, "mean", include_self=False),
                             (a(2, 3), a(2, 2))),
    "addbmm": (lambda m, x, b1, b2: (m.addbmm(x, b1, b2), x.addbmm(b1, b2, beta=0.5, alpha=2)),
               (a(3, 4), a(2, 3, 5), a(2, 5, 4))),
    "addmv": (lambda m, x, mat, v: m.addmv(x, mat, v, beta=2, alpha=-1), (a(3), a(3, 4), a(4))),
    "addr": (lambda m, x, u, v: (m.addr(x, u, v), x.addr(u, v, alpha=3)), (a(3, 4), a(3), a(4))),
    "adjoint": (lambda m, x: (m.adjoint(x), x.mH, x[0].H), (a(2, 3, 4),)),
    "cross": (lambda m, x, y: (m.cross(x, y, dim=1), x.cross(y, -1)), (a(3, 3), a(3, 3))),
    "positive": (lambda m, x: m.positive(x), (a(3),)),
    "block_diag": (lambda m, x, y, z: m.block_diag(x, y, z), (a(2, 3), a(1), a(2, 2))),
    "cartesian_prod": (lambda m, x, y: m.cartesian_prod(x, y), (a(3), a(2))),
    "combinations": (lambda m, x: (m.combinations(x), m.combinations(x, 3, with_replacement=True)), (a(4),)),
    "tri_indices": (lambda m: (m.tril_indices(4, 3), m.triu_indices(3, 5, 1), m.tril_indices(3, 3, -1)), (), False),
    "vander": (lambda m, x: (m.vander(x), m.vander(x, 4, increasing=True)), (a(3),), False),  # torch cannot backprop it
    "trapezoid": (lambda m, y, x: (m.trapezoid(y), m.trapezoid(y, x), m.trapz(y, dx=0.5, dim=0),
                                   m.cumulative_trapezoid(y, x)), (a(3, 5), np.sort(a(5)))),
    "gradient": (lambda m, y, x: (*m.gradient(y), *m.gradient(y, spacing=[2.0, 0.5], edge_order=2),
                                  *m.gradient(y, spacing=[x], dim=1), *m.gradient(y, spacing=(x,), dim=-1, edge_order=2)),
                 (a(4, 5), np.cumsum(np.abs(a(5))) + np.arange(5))),
    "cdist": (lambda m, x, y: (m.cdist(x, y), m.cdist(x, y, 1.0), m.cdist(x, y, 3.0), m.cdist(x, y, float("inf"))),
              (a(2, 4, 3), a(2, 5, 3))),
    "unravel_index": (lambda m: m.unravel_index(m.tensor([0, 5, 11, -1]), (3, 4)), (), False),
    "meshgrid": (lambda m, x, y, z: (*m.meshgrid(x, y, indexing="ij"), *m.meshgrid([x, y, z], indexing="xy"),
                                     *m.meshgrid(x, indexing="xy")), (a(3), a(2), a(4))),
    "row_stack": (lambda m, x, y: m.row_stack((x, y)), (a(3), a(2, 3))),
    "unfold": (lambda m, x: (x.unfold(1, 2, 1), x.unfold(0, 2, 2), x.unfold(-1, 3, 2)), (a(4, 5),)),
    "sum_to_size": (lambda m, x: (x.sum_to_size(1, 5), x.sum_to_size((4, 1)), x.sum_to_size(5)), (a(4, 5),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    fn, inputs, *grad = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(fn, *inputs, grad=grad[0] if grad else True)


def test_in_place_methods_match_torch():
    def run(m, x, s, v):
        x = x.clone()
        x.addmv_(s, v[:4])
        x2 = m.zeros(3, 3, dtype=m.float64)
        x2.fill_diagonal_(5.0)
        x3 = m.zeros(5, 2, dtype=m.float64)
        x3.fill_diagonal_(1.0, wrap=True)
        x4 = x.clone()
        x4.put_(m.tensor([0, 2]), v[:2])
        x5 = x4.clone().masked_scatter_(x4 > 0, v)
        x6 = m.ones(2, 2, dtype=m.float64)
        x6.addr_(v[:2], v[2:4])
        x7 = x6.clone().addmm_(x6, x6, beta=0.5)
        x8 = m.ones(2, 3, dtype=m.float64).renorm_(2, 0, 1.0)
        x9 = x2.clone()
        x9.index_reduce_(0, m.tensor([1]), v[:3].reshape(1, 3), "amax")
        return x, x2, x3, x4, x5, x6, x7, x8, x9
    compare(run, a(3), a(3, 4), a(6), grad=False)


def test_real_tensor_conjugation_and_parts():
    for m in (torch, tapelab):
        x = m.tensor([-1.5, 0.0, 2.0])
        assert x.conj() is x and x.resolve_conj() is x and x.resolve_neg() is x and x.real is x
        assert x.conj_physical() is x and m.conj_physical(x) is x and x.conj_physical_() is x
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
            x.imag
    compare(lambda m, x: (x.angle(), m.angle(x), m.angle(m.tensor([-2, 0, 3]))), a(2, 3))


def test_tensor_copy_and_in_place_cumulative_methods():
    def fn(m, x):
        y, z = x.detach().clone(), x.detach().clone()
        y.cumsum_(1)
        z.cumprod_(0, dtype=m.float64)
        return (x.narrow_copy(1, 1, 2), m.narrow_copy(x, 0, 0, 1), y, z,
                (x > 0).nonzero_static(size=8), m.nonzero_static(x > 0, size=1, fill_value=-7))
    compare(fn, a(2, 3))


def test_meshgrid_warns_without_indexing_like_torch():
    for m in (torch, tapelab):
        with pytest.warns(UserWarning, match="required to pass the indexing argument"):
            grids = m.meshgrid(m.arange(3), m.arange(2))
        assert [tuple(g.shape) for g in grids] == [(3, 2), (3, 2)]


def test_cross_without_dim_warns_like_torch():
    for m in (torch, tapelab):
        with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
            out = m.cross(m.ones(2, 3), m.ones(2, 3))
        assert tuple(out.shape) == (2, 3)


def test_errors_match_torch():
    for m in (torch, tapelab):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
            m.bincount(m.tensor([1, -1]))
        with pytest.raises(RuntimeError, match="q must be in the range \\[0, 1\\] but got 1.5"):
            m.quantile(m.zeros(3), 1.5)
        with pytest.raises(RuntimeError, match="expected total rotation dims == 2"):
            m.rot90(m.zeros(2, 2), 1, (0,))
        with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
            m.diff(m.tensor(1.0))
        with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 4"):
            m.split_with_sizes(m.zeros(4), [1, 2])
        with pytest.raises(RuntimeError, match="only supported on matrices"):
            m.zeros(2, 2, 2).H
        with pytest.raises(RuntimeError, match="is not divisible by the split_size"):
            m.hsplit(m.zeros(2, 3), 2)
        with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3 but size is 4"):
            m.zeros(3).unfold(0, 4, 1)
        with pytest.raises(RuntimeError, match="index_reduce"):
            m.zeros(3).index_reduce(0, m.tensor([0]), m.ones(1), "sum")
        with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point"):
            m.nanmean(m.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="gcd_cpu\" not implemented for 'Float'"):
            m.gcd(m.zeros(2), m.zeros(2))
        assert m.mvlgamma(m.zeros(2), 3).tolist() == [float("inf")] * 2   # no domain check in PyTorch 2.13


def test_return_type_names():
    x = tapelab.randn(3, 4)
    assert tapelab.cummax(x, 0)._fields == ("values", "indices")
    assert tapelab.aminmax(x)._fields == ("min", "max")
    assert tapelab.histogram(x.reshape(-1), 3)._fields == ("hist", "bin_edges")
    m, e = tapelab.frexp(x)
    assert tapelab.frexp(x).mantissa is not None and e.dtype == tapelab.int32

"""Gaps found by running programs on einops, timm, PEFT and torch_geometric unchanged under
``install_aliases()``: the torch API call sequence each library uses, exercised directly and compared
with real torch (none of those libraries is imported here)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

REDUCED = pytest.mark.parametrize("dt", ["bfloat16", "float16"])


def _same(ours, theirs) -> None:
    np.testing.assert_array_equal(ours.detach().float().numpy(), theirs.detach().float().numpy())


def _pair(dt: str, *arrays):
    """The arrays as ``dt`` tensors of tapelab and of torch."""
    return ([tapelab.tensor(a).to(getattr(tapelab, dt)) for a in arrays],
            [torch.tensor(a).to(getattr(torch, dt)) for a in arrays])


# ---------------------------------------------------------------- timm's Muon: Newton-Schulz in bfloat16
@REDUCED
@pytest.mark.parametrize("batched", [False, True])
def test_addmm_baddbmm_round_once_in_reduced_precision(dt, batched):
    """PyTorch's GEMM forms ``beta * input + alpha * m1 @ m2`` in float32 and rounds once; rounding
    the product and then each scaled term changed the last bit of a quarter of the elements."""
    rng = np.random.default_rng(0)
    shape = (3, 8, 20) if batched else (8, 20)
    x, c = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[:-1] + (8,)).astype(np.float32)
    (ox, oc), (tx, tc) = _pair(dt, x, c)
    op = "baddbmm" if batched else "addmm"
    ours = getattr(tapelab, op)(oc, ox, ox.mT, beta=0.5, alpha=-2.0)
    _same(ours, getattr(torch, op)(tc, tx, tx.mT, beta=0.5, alpha=-2.0))


@pytest.mark.parametrize("batched", [False, True])
def test_newton_schulz_with_out_buffers_matches_torch(batched):
    """timm's Muon orthogonalises in bfloat16 with preallocated ``out=`` buffers, one aliasing an input."""
    rng = np.random.default_rng(1)
    g = rng.standard_normal((2, 16, 40) if batched else (16, 40)).astype(np.float32)
    g /= np.linalg.norm(g, axis=(-2, -1), keepdims=True) * 1.02    # spectral norm below 1
    results = []
    for m in (tapelab, torch):
        mm_fn = m.baddbmm if batched else m.addmm
        X = m.tensor(g).to(m.bfloat16)
        A = m.empty((*X.shape[:-1], X.size(-2)), dtype=X.dtype)
        B, C = m.empty_like(A), m.empty_like(X)
        for a, b, c in [(3.4445, -4.7750, 2.0315)] * 4:
            mm_fn(A, X, X.mT, beta=0.0, alpha=1.0, out=A)
            mm_fn(A, A, A, beta=b, alpha=c, out=B)
            mm_fn(X, B, X, beta=a, alpha=1.0, out=C)
            X, C = C, X
        results.append(X)
    _same(*results)


def test_addmm_reduced_gradients_match_torch():
    rng = np.random.default_rng(2)
    w, b = rng.standard_normal((6, 10)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32)
    grads = []
    for m in (tapelab, torch):
        W, bias = (m.tensor(a).to(m.bfloat16).requires_grad_() for a in (w, b))
        out = m.addmm(bias, W, W.mT, beta=0.25, alpha=3.0)
        out.float().square().sum().backward()
        grads.append((out, W.grad, bias.grad))
    (out, *ours), (want, *theirs) = grads
    _same(out, want)
    for a, b in zip(ours, theirs):   # PyTorch rounds each bfloat16 term of a gradient before summing: 2 ulps
        np.testing.assert_allclose(a.float().numpy(), b.float().numpy(), rtol=2 ** -6, atol=1e-6)


# ---------------------------------------------------------------- timm's AdafactorBigVision: bfloat16 momentum
@pytest.mark.parametrize("call", [
    lambda m, a, b, c: a.lerp(b, 0.05),
    lambda m, a, b, c: a.lerp(b, 0.3),
    lambda m, a, b, c: a.clone().lerp_(b, 0.7),
    lambda m, a, b, c: a.lerp(b, c - 0.5),
    lambda m, a, b, c: m.addcmul(a, b, c, value=0.37),
    lambda m, a, b, c: a.clone().addcmul_(b, b, value=-0.999),
    lambda m, a, b, c: m.addcdiv(a, b, c, value=0.37),
    lambda m, a, b, c: a.clone().addcdiv_(b, c.sqrt().add_(1e-8), value=-1e-3),
], ids=["lerp", "lerp_fma", "lerp_fma_upper", "lerp_tensor_weight", "addcmul", "addcmul_", "addcdiv", "addcdiv_"])
def test_bfloat16_optimizer_updates_round_once(call):
    """Optimizers keep bfloat16 state and update it with ``lerp_``/``addcmul_``/``addcdiv_`` and a
    Python float; PyTorch computes those in float32, the float included (lerp and addcmul with a
    fused multiply-add), and rounds once."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 64, 64)).astype(np.float32)
    c = rng.random((64, 64)).astype(np.float32) + 0.5
    ours, theirs = _pair("bfloat16", a, b, c)
    _same(call(tapelab, *ours), call(torch, *theirs))


# ---------------------------------------------------------------- PEFT's load_peft_weights: device("mps")
@pytest.mark.parametrize("spec", ["mps", "xpu:1", "hpu", "privateuseone"])
def test_every_pytorch_device_type_names_a_device(spec):
    """Libraries compare with ``device("mps")`` on any machine; only making a tensor there fails."""
    ours, theirs = tapelab.device(spec), torch.device(spec)
    assert (repr(ours), ours.type, ours.index, str(ours)) == (repr(theirs), theirs.type, theirs.index, str(theirs))
    assert ours == tapelab.device(spec) and ours != tapelab.device("cpu") and not tapelab.device("cpu") == spec
    if theirs.type == "xpu":    # a PyTorch built without XPU asserts, as tapelab does
        with pytest.raises(AssertionError, match="Torch not compiled with XPU enabled"):
            torch.zeros(2, device=spec)
        with pytest.raises(AssertionError, match="Torch not compiled with XPU enabled"):
            tapelab.zeros(2, device=spec)
        return
    with pytest.raises(NotImplementedError, match=f"no {theirs.type} backend"):
        tapelab.zeros(2, device=spec)


def test_an_unknown_device_type_refuses_as_pytorch():
    with pytest.raises(RuntimeError) as theirs:
        torch.device("npu")
    with pytest.raises(RuntimeError) as ours:
        tapelab.device("npu")
    assert str(ours.value) == str(theirs.value)


# ---------------------------------------------------------------- safetensors' safe_open: asarray(storage, dtype=uint8)
@pytest.mark.parametrize("dtype", ["uint8", "int16"])
def test_asarray_reads_a_storage_as_dtype_sharing_memory(dtype):
    """safetensors reads each tensor as ``asarray(storage[start:stop], dtype=uint8).view(dtype)``."""
    got = []
    for m in (tapelab, torch):
        t = m.arange(6, dtype=m.int16)
        a = m.asarray(t.untyped_storage(), dtype=getattr(m, dtype))
        a[1] = 9
        got.append((a, t))
    (a, t), (a2, t2) = got
    _same(a, a2)
    _same(t, t2)


# ---------------------------------------------------------------- torch_geometric's import: the names it reads
def test_config_show_says_no_mkl():
    """torch_geometric sets ``NO_MKL`` from ``'USE_MKL=OFF' in torch.__config__.show()``; tapelab has no MKL."""
    with tapelab.install_aliases():
        import torch.__config__ as config
        assert config is tapelab.__config__
    assert isinstance(torch.__config__.show(), str) and "USE_MKL=" in torch.__config__.show()
    assert "USE_MKL=OFF" in tapelab.__config__.show()
    assert f"at::get_num_threads() : {tapelab.get_num_threads()}\n" in tapelab.__config__.parallel_info()


ATEN_CALLS = [
    ("add.Tensor", lambda m, x: (x, x * 2), {"alpha": 3}),
    ("sub.Tensor", lambda m, x: (x, 1.5), {}),
    ("clone.default", lambda m, x: (x,), {}),
    ("_to_copy.default", lambda m, x: (x,), {"dtype": "float64"}),
    ("alias.default", lambda m, x: (x,), {}),
    ("slice.Tensor", lambda m, x: (x, 1, 1, 3), {}),
    ("select.int", lambda m, x: (x, 0, 1), {}),
    ("index.Tensor", lambda m, x: (x, [m.tensor([1, 0, 1])]), {}),
    ("index_select.default", lambda m, x: (x, 1, m.tensor([2, 0])), {}),
    ("cat.default", lambda m, x: ([x, x],), {"dim": 1}),
    ("flip.default", lambda m, x: (x, [0]), {}),
    ("unsqueeze.default", lambda m, x: (x, 0), {}),
    ("squeeze.dim", lambda m, x: (x[:1], 0), {}),
    ("mm.default", lambda m, x: (x, x.T), {}),
]


@pytest.mark.parametrize("name,args,kwargs", ATEN_CALLS, ids=[c[0] for c in ATEN_CALLS])
def test_aten_overloads_are_keys_and_call_the_op(name, args, kwargs):
    """torch_geometric's Index/EdgeIndex key their handlers on ``torch.ops.aten.<op>.<overload>`` at import."""
    outs = []
    for m in (tapelab, torch):
        packet, overload = name.split(".")
        op = getattr(getattr(m.ops.aten, packet), overload)
        assert op is getattr(getattr(m.ops.aten, packet), overload) and {op: 1}[op] == 1
        x = m.tensor([[3.0, 1.0, 2.0], [6.0, 5.0, 4.0]])
        kw = {k: getattr(m, v) if isinstance(v, str) else v for k, v in kwargs.items()}
        outs.append(op(*args(m, x), **kw))
    assert outs[0].dtype.name == str(outs[1].dtype).split(".")[1]
    _same(*outs)


def test_aten_sort_stable_and_unknown_names():
    values, indices = tapelab.ops.aten.sort.stable(tapelab.tensor([[2.0, 1.0, 2.0]]), stable=True, dim=1,
                                                   descending=True)
    want = torch.ops.aten.sort.stable(torch.tensor([[2.0, 1.0, 2.0]]), stable=True, dim=1, descending=True)
    _same(values, want[0])
    assert indices.tolist() == want[1].tolist()
    assert hasattr(torch.ops.aten, "_sparse_addmm") and hasattr(tapelab.ops.aten, "_sparse_addmm")
    for m in (tapelab, torch):
        assert not hasattr(m.ops.aten, "no_such_op_anywhere")


@tapelab.jit._overload
def _scale(x: tapelab.Tensor, factor: float) -> tapelab.Tensor:
    ...


def _scale(x, factor=2.0):  # noqa: F811 - the implementation after its overload stub, as TorchScript programs write
    return x * factor


@torch.jit._overload
def _scale_torch(x: torch.Tensor, factor: float) -> torch.Tensor:
    ...


def _scale_torch(x, factor=2.0):  # noqa: F811
    return x * factor


def test_jit_overload_declarations_keep_the_implementation():
    """``@torch.jit._overload`` stubs (torch_geometric's utils) then the implementation of the same name."""
    _same(_scale(tapelab.tensor([1.0, 2.0])), _scale_torch(torch.tensor([1.0, 2.0])))
    assert tapelab.jit._overload_method(_scale) is _scale


def test_dlpack_round_trip_shares_memory_with_torch():
    """torch_geometric imports ``torch.utils.dlpack.from_dlpack``; the capsule crosses to PyTorch and back."""
    from tapelab.utils.dlpack import from_dlpack, to_dlpack
    ours = tapelab.arange(6.0).reshape(2, 3)
    theirs = torch.utils.dlpack.from_dlpack(to_dlpack(ours))
    theirs[0, 0] = 7.0
    assert ours[0, 0].item() == 7.0
    back = from_dlpack(torch.utils.dlpack.to_dlpack(theirs))
    _same(back, theirs)
    with tapelab.install_aliases():
        from torch.utils.dlpack import from_dlpack as aliased
        assert aliased is from_dlpack


@pytest.mark.parametrize("values", [[[1.5, -2.25], [3.0, 4.125]], [[1, 2, 3]], list(range(2000))])
def test_tensor_str_under_aliases_matches_torch(values):
    """torch_geometric's OFF writer: ``from torch._tensor_str import PRINT_OPTS, _tensor_str``."""
    from torch._tensor_str import PRINT_OPTS as THEIR_OPTS, _tensor_str as theirs
    with tapelab.install_aliases():
        from torch._tensor_str import PRINT_OPTS, _tensor_str
    assert PRINT_OPTS.threshold == THEIR_OPTS.threshold
    assert _tensor_str(tapelab.tensor(values), indent=0) == theirs(torch.tensor(values), indent=0)


def test_futures_collect_and_wait_like_torch():
    """torch_geometric's feature stores annotate with ``torch.futures.Future``."""
    got = []
    for m in (tapelab, torch):
        futs = [m.futures.Future() for _ in range(2)]
        for f, v in zip(futs, (1, 2)):
            f.set_result(v)
        got.append((m.futures.wait_all(futs), [f.wait() for f in m.futures.collect_all(futs).wait()]))
    assert got[0] == got[1] == ([1, 2], [1, 2])


@pytest.mark.parametrize("name", ["sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged"])
def test_compressed_layouts_are_named(name):
    """``src.layout == torch.sparse_csr`` (torch_geometric's is_torch_sparse_tensor) on a dense tensor."""
    import pickle
    ours = getattr(tapelab, name)
    assert (tapelab.zeros(2).layout == ours) is (torch.zeros(2).layout == getattr(torch, name)) is False
    assert pickle.loads(pickle.dumps(ours)) is ours
    assert repr(ours) == repr(getattr(torch, name)).replace("torch", "tapelab")


# ---------------------------------------------------------------- timm under bfloat16 autocast: whole ops run lower
AUTOCAST_CALLS = [
    ("conv2d_bias", lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, stride=2)),
    ("conv_transpose2d_bias", lambda m, x, w, b: m.nn.functional.conv_transpose2d(x, w.transpose(0, 1), b)),
    ("addmm", lambda m, x, w, b: m.addmm(b[:6], x.flatten(1)[:, :6], w.flatten(1)[:6, :6])),
    ("baddbmm", lambda m, x, w, b: m.baddbmm(b[:6], x[:, :2, :6, :6].flatten(0, 1), x[:, :2, :6, :6].flatten(0, 1).mT)),
]


@pytest.mark.parametrize("name,call", AUTOCAST_CALLS, ids=[c[0] for c in AUTOCAST_CALLS])
def test_autocast_bias_and_input_join_the_lower_precision(name, call):
    """A patch embedding's ``Conv2d`` (bias included) and ``addmm`` give bfloat16 under CPU autocast, as in
    PyTorch, where the bias is part of the one op autocast casts; a float32 bias promoted the result."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 3, 8, 8)).astype(np.float32), rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    outs = []
    for m in (tapelab, torch):
        args = [m.tensor(a, requires_grad=True) for a in (x, w, b)]
        with m.autocast("cpu", dtype=m.bfloat16):
            out = call(m, *args)
        out.float().sum().backward()
        outs.append((out, [a.grad.dtype for a in args if a.grad is not None]))
    (ours, our_grads), (theirs, their_grads) = outs
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1] == "bfloat16"
    assert [str(d).split(".")[1] for d in our_grads] == [str(d).split(".")[1] for d in their_grads]
    # PyTorch adds the bias before its one rounding to bfloat16; here the product is rounded, then the sum: an ulp
    np.testing.assert_allclose(ours.detach().float().numpy(), theirs.detach().float().numpy(), rtol=2 ** -7, atol=2e-2)


# ---------------------------------------------------------------- PEFT's BOFT: try a C++ extension, fall back
def test_cpp_extension_load_fails_like_a_failed_build():
    """PEFT imports ``torch.utils.cpp_extension.load`` and falls back to Python when the build raises."""
    import torch.utils.cpp_extension as theirs
    with tapelab.install_aliases():
        from torch.utils.cpp_extension import CUDA_HOME, load, load_inline
    assert callable(theirs.load) and callable(theirs.load_inline) and CUDA_HOME is None
    for fn in (load, load_inline):
        with pytest.raises(RuntimeError, match="Error building extension 'fbd_cuda'"):
            fn("fbd_cuda", ["fbd_cuda.cpp"])


# ---------------------------------------------------------------- torch_geometric's coalesce: edge_index[:, perm]
@pytest.mark.parametrize("key", [
    lambda m, a, i: a[:, i], lambda m, a, i: a[..., i], lambda m, a, i: a[i][:, i], lambda m, a, i: a[:, [[0], [1]], i],
    lambda m, a, i: a.index_select(2, i), lambda m, a, i: a[:, i, 1:], lambda m, a, i: a[1, 2, i[0]],
], ids=["cols", "ellipsis", "twice", "broadcast", "index_select", "with_slice", "scalar"])
def test_advanced_indexing_returns_row_major_like_torch(key):
    """``coalesce`` sorts an edge_index with ``edge_index[:, perm]``; EdgeIndex then refuses a non-contiguous one."""
    got = []
    for m in (tapelab, torch):
        a = m.arange(24).reshape(2, 3, 4)
        out = key(m, a, m.tensor([1, 0]))
        got.append((out, out.stride(), out.is_contiguous()))
    (ours, our_stride, our_contig), (theirs, their_stride, their_contig) = got
    _same(ours, theirs)
    assert (ours.shape, our_stride, our_contig) == (theirs.shape, their_stride, their_contig) and our_contig

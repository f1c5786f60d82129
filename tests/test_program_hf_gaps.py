"""Gaps found by running Hugging Face ``transformers`` models (GPT-2, Llama, BERT, T5, ViT, Mistral, Qwen2)
unchanged under ``install_aliases()``: the torch API each gap is in, exercised directly and compared with
real torch (transformers itself is not imported here)."""
from __future__ import annotations

import io
import math
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch
from torch.nn.attention import flex_attention as torch_flex
from torch.utils import _pytree as torch_pytree

import tapelab
from tapelab.nn.attention import flex_attention as tapelab_flex
from tapelab.utils import _pytree as tapelab_pytree

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])
STORAGE_DTYPES = ["uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


# ---------------------------------------------------------------- storage dtypes (checkpoint loading maps to them)
@pytest.mark.parametrize("name", STORAGE_DTYPES)
def test_storage_dtypes_cast_like_torch(name):
    values = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 448.0 if "e4m3" in name else 4.0], dtype=np.float32)
    theirs = torch.tensor(values).to(getattr(torch, name))
    ours = tapelab.tensor(values).to(getattr(tapelab, name))
    assert ours.dtype is getattr(tapelab, name) and ours.element_size() == theirs.element_size()
    for attr in ("is_floating_point", "is_signed", "itemsize"):
        assert getattr(ours.dtype, attr) == getattr(theirs.dtype, attr), attr
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
    np.testing.assert_array_equal(ours.to(tapelab.int64).numpy(), theirs.to(torch.int64).numpy())


@pytest.mark.parametrize("a,b", [("uint16", "int64"), ("uint64", "uint8"), ("float8_e4m3fn", "float32"),
                                 ("float8_e5m2", "float8_e4m3fn"), ("uint32", "float32"), ("uint16", "uint16"),
                                 ("float64", "uint64")])
def test_storage_dtypes_promote_like_torch(a, b):
    try:
        want = torch.promote_types(getattr(torch, a), getattr(torch, b))
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e)):
            tapelab.promote_types(getattr(tapelab, a), getattr(tapelab, b))
    else:
        assert tapelab.promote_types(getattr(tapelab, a), getattr(tapelab, b)).name == str(want).split(".")[1]


def test_finfo_of_float8_matches_torch():
    for name in ("float8_e4m3fn", "float8_e5m2"):
        ours, theirs = tapelab.finfo(getattr(tapelab, name)), torch.finfo(getattr(torch, name))
        assert (ours.max, ours.min, ours.eps, ours.bits) == (theirs.max, theirs.min, theirs.eps, theirs.bits)


# ---------------------------------------------------------------- pytree key paths (ModelOutput registers with them)
NT = namedtuple("NT", "a b")


def _tree():
    return {"x": [1, (2, 3)], "y": NT(4, OrderedDict(z=5)), "w": []}


@pytest.mark.parametrize("P", [torch_pytree, tapelab_pytree], ids=["torch", "tapelab"])
def test_tree_flatten_with_path(P):
    pairs, spec = P.tree_flatten_with_path(_tree())
    assert [(P.keystr(k), v) for k, v in pairs] == [("['x'][0]", 1), ("['x'][1][0]", 2), ("['x'][1][1]", 3),
                                                    ("['y'].a", 4), ("['y'].b['z']", 5)]
    assert P.tree_unflatten([v for _, v in pairs], spec) == _tree()
    mapped = P.tree_map_with_path(lambda path, x: len(path) * 10 + x, _tree())
    assert mapped["x"] == [21, (32, 33)] and mapped["y"].b["z"] == 35
    assert [k.get(_tree()["y"]) for k, _ in [(P.GetAttrKey("a"), None)]] == [4]


@pytest.mark.parametrize("P", [torch_pytree, tapelab_pytree], ids=["torch", "tapelab"])
def test_registered_dict_like_node_with_keys(P):
    class Output(dict):
        pass

    P.register_pytree_node(Output, P._dict_flatten, lambda values, keys: Output(P._dict_unflatten(values, keys)),
                           flatten_with_keys_fn=P._dict_flatten_with_keys)
    pairs, _ = P.tree_flatten_with_path(Output(logits=1, loss=[2]))
    assert [(P.keystr(k), v) for k, v in pairs] == [("['logits']", 1), ("['loss'][0]", 2)]
    assert P._dict_flatten_with_keys({"a": 1}) == ([(P.MappingKey("a"), 1)], ["a"])
    with pytest.raises(ValueError, match="already registered"):
        P.register_pytree_node(Output, P._dict_flatten, P._dict_unflatten)


# ---------------------------------------------------------------- torch.version, torch._check, memory formats
def test_version_module():
    assert tapelab.version.hip is None and tapelab.version.debug is False
    assert tapelab.version.__version__ == tapelab.__version__
    assert (tapelab.version.cuda is None) == (not tapelab.cuda.is_available())


@BOTH
def test_check_functions(m):
    m._check(True)
    m._check_tensor_all(m.tensor([True, True]))
    with pytest.raises(RuntimeError, match="^shape is wrong$"):
        m._check(False, lambda: "shape is wrong")
    with pytest.raises(RuntimeError, match="Expected cond to be True"):
        m._check(False)
    for fn, error in ((m._check_index, IndexError), (m._check_value, ValueError), (m._check_type, TypeError),
                      (m._check_not_implemented, NotImplementedError)):
        with pytest.raises(error, match="^no$"):
            fn(False, lambda: "no")
    with pytest.raises(KeyError):
        m._check_with(KeyError, False, lambda: "k")
    with pytest.raises(TypeError, match="cond must be a bool, but got a Tensor"):
        m._check(m.tensor(True))
    with pytest.raises(RuntimeError, match="^mask$"):
        m._check_tensor_all(m.tensor([True, False]), lambda: "mask")


@BOTH
def test_memory_formats_are_accepted(m):
    x = m.arange(24.0).reshape(2, 3, 2, 2).transpose(1, 2)
    for fmt in (m.contiguous_format, m.preserve_format):
        y = x.clone(memory_format=fmt)
        np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert x.contiguous(memory_format=m.contiguous_format).is_contiguous()
    assert isinstance(m.channels_last, m.memory_format) and m.channels_last is not m.contiguous_format


# ---------------------------------------------------------------- cuda / compiler / _dynamo names used at import
def test_cuda_stream_context_and_graph_are_classes():
    assert isinstance(tapelab.cuda.StreamContext, type) and isinstance(tapelab.cuda.CUDAGraph, type)
    assert issubclass(tapelab.cuda.CUDAGraph, tapelab.graphs.Graph)
    with tapelab.cuda.stream(None) as s:          # None is a no-op in PyTorch too
        assert s is None
    assert isinstance(tapelab.cuda.stream(None), tapelab.cuda.StreamContext)
    _ = tapelab.cuda.CUDAGraph | None              # annotations: `torch.cuda.CUDAGraph | None`


@BOTH
def test_compiler_and_dynamo_hints(m):
    import importlib
    dynamo = importlib.import_module(m.__name__ + "._dynamo")
    fn = lambda x: x + 1  # noqa: E731
    assert m.compiler.allow_in_graph(fn) is fn and dynamo.allow_in_graph(fn) is fn
    assert m.compiler.is_exporting() is False and m.compiler.is_compiling() is False
    x = m.zeros(3)
    dynamo.mark_static_address(x)
    assert dynamo.assume_constant_result(fn) is fn
    from importlib import import_module
    TransformGetItemToIndex = import_module(m.__name__ + "._dynamo._trace_wrapped_higher_order_op").TransformGetItemToIndex
    a = m.arange(10) * 2
    with TransformGetItemToIndex():
        got = m.vmap(lambda i: a[i])(m.arange(3))
    assert got.tolist() == [0, 2, 4]


# ---------------------------------------------------------------- flex attention
def _flex_inputs(m, rs, gqa: bool, requires_grad: bool = False):
    q = rs.standard_normal((2, 4, 6, 8)).astype(np.float32)
    k = rs.standard_normal((2, 2 if gqa else 4, 7, 8)).astype(np.float32)
    v = rs.standard_normal((2, 2 if gqa else 4, 7, 5)).astype(np.float32)
    return [m.tensor(a, requires_grad=requires_grad) for a in (q, k, v)]


def _mods(m, F):
    bias = m.linspace(-1, 1, 7)
    mask = F.and_masks(lambda b, h, qi, ki: qi + 1 >= ki, F.or_masks(lambda b, h, qi, ki: ki != 2,
                                                                   lambda b, h, qi, ki: b == 1))
    return mask, (lambda s, b, h, qi, ki: s + bias[ki] * (h + 1))


def _run_flex(m, F, gqa, with_mask, with_score, requires_grad=False):
    q, k, v = _flex_inputs(m, np.random.RandomState(0), gqa, requires_grad)
    mask, score = _mods(m, F)
    block = F.create_block_mask(mask, 2, None, 6, 7, device="cpu", BLOCK_SIZE=4) if with_mask else None
    out, aux = F.flex_attention(q, k, v, score_mod=score if with_score else None, block_mask=block, enable_gqa=gqa,
                                return_aux=F.AuxRequest(lse=True, max_scores=requires_grad))
    values = [out, aux.lse] + ([aux.max_scores] if requires_grad else [])
    if requires_grad:
        (out.square().sum() + aux.lse.sum()).backward()
        values += [q.grad, k.grad, v.grad]
    return [t.detach().numpy() for t in values], (block.to_dense().numpy() if block is not None else None)


def _torch_reference_grads(gqa, with_mask, with_score):
    """The max scores and gradients of the same attention written with plain torch ops (torch's flex has no
    CPU backward and returns no max scores on the CPU)."""
    q, k, v = _flex_inputs(torch, np.random.RandomState(0), gqa, True)
    mask, score = _mods(torch, torch_flex)
    kk, vv = (k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)) if gqa else (k, v)
    s = q @ kk.transpose(-2, -1) / math.sqrt(8)
    idx = [torch.arange(n).reshape([n if i == d else 1 for i in range(4)]) for d, n in enumerate((2, 4, 6, 7))]
    if with_score:
        s = score(s, *idx)
    if with_mask:
        s = s.masked_fill(~mask(*idx).expand(2, 4, 6, 7), float("-inf"))
    lse = s.logsumexp(-1)
    out = s.softmax(-1) @ vv
    (out.square().sum() + lse.sum()).backward()
    return [t.detach().numpy() for t in (s.amax(-1), q.grad, k.grad, v.grad)]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("gqa", [False, True])
@pytest.mark.parametrize("with_mask,with_score", [(True, True), (True, False), (False, True)])
def test_flex_attention_matches_torch(gqa, with_mask, with_score):
    theirs, dense_t = _run_flex(torch, torch_flex, gqa, with_mask, with_score)
    ours, dense_o = _run_flex(tapelab, tapelab_flex, gqa, with_mask, with_score, requires_grad=True)
    for a, b in zip(ours, theirs + _torch_reference_grads(gqa, with_mask, with_score)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    if with_mask:
        np.testing.assert_array_equal(dense_o, dense_t)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_flex_attention_fully_masked_rows_and_lse():
    res = []
    for m, F in ((torch, torch_flex), (tapelab, tapelab_flex)):
        q, k, v = _flex_inputs(m, np.random.RandomState(1), False)
        block = F.create_block_mask(lambda b, h, qi, ki: (qi < 4) & (ki <= qi), None, None, 6, 7, device="cpu")
        out, lse = F.flex_attention(q, k, v, block_mask=block, scale=0.3, return_lse=True)
        res.append((out.numpy(), lse.numpy(), block.shape, F.create_mask(lambda b, h, qi, ki: qi >= ki, 1, 2, 3, 4).numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5, atol=1e-6)
    assert not res[1][0][:, :, 4:].any()
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-5)
    assert res[1][2] == tuple(res[0][2])
    np.testing.assert_array_equal(res[1][3], res[0][3])


def test_flex_attention_rejects_head_mismatch_without_gqa():
    q, k, v = _flex_inputs(tapelab, np.random.RandomState(0), True)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        tapelab_flex.flex_attention(q, k, v)


# ---------------------------------------------------------------- torch.library custom ops
def _custom_matmul(m, tag):
    lib = m.library

    scaled_mm = lib.custom_op(f"hfgaps{tag}::scaled_mm", lambda a, b: (a @ b) * 2, mutates_args=(),
                              schema="(Tensor a, Tensor b) -> Tensor")

    @scaled_mm.register_fake
    def _(a, b):
        return a.new_empty(a.shape[0], b.shape[1])

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):   # deliberately not the true derivative: the registered formula must be the one used
        a, b = ctx.saved_tensors
        return g @ b.T, 3 * a.T @ g

    lib.register_autograd(f"hfgaps{tag}::scaled_mm", backward, setup_context=setup_context)
    return scaled_mm


@BOTH
def test_custom_op_with_registered_autograd(m):
    op = _custom_matmul(m, "a" if m is torch else "b")
    rs = np.random.RandomState(0)
    a = m.tensor(rs.standard_normal((3, 4)), requires_grad=True)
    b = m.tensor(rs.standard_normal((4, 2)), requires_grad=True)
    out = op(a, b)
    np.testing.assert_allclose(out.detach().numpy(), 2 * a.detach().numpy() @ b.detach().numpy(), rtol=1e-12)
    by_name = getattr(m.ops, "hfgapsa" if m is torch else "hfgapsb").scaled_mm(a, b=b)   # torch.ops.<ns>.<name>
    np.testing.assert_allclose(by_name.detach().numpy(), out.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    g = np.ones((3, 2))
    np.testing.assert_allclose(a.grad.numpy(), g @ b.detach().numpy().T, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), 3 * a.detach().numpy().T @ g, rtol=1e-12)


def test_custom_op_without_autograd_runs_its_function_and_needs_a_namespace():
    @tapelab.library.custom_op("hfgapsc::plus_one", mutates_args=())
    def plus_one(x: tapelab.Tensor) -> tapelab.Tensor:
        return x + 1

    x = tapelab.tensor([1.0, 2.0], requires_grad=True)
    plus_one(x).sum().backward()                 # its own ops record, so it still differentiates
    assert x.grad.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="namespace::name"):
        tapelab.library.custom_op("no_namespace", lambda x: x, mutates_args=())
    assert tapelab.ops.hfgapsc.plus_one is plus_one
    with pytest.raises(AttributeError, match="no attribute 'minus_one'"):
        tapelab.ops.hfgapsc.minus_one
    with pytest.raises(AttributeError, match="no attribute 'not_a_namespace'"):
        tapelab.ops.not_a_namespace


# ---------------------------------------------------------------- save_on_cpu, extra-state key, expand views
@BOTH
def test_save_on_cpu_keeps_gradients(m):
    x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with m.autograd.graph.save_on_cpu(pin_memory=False):
        y = (x.exp() * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), (np.exp(x.detach().numpy()) * (1 + x.detach().numpy())), rtol=1e-6)


def test_extra_state_key_suffix_is_torchs():
    assert tapelab.nn.modules.module._EXTRA_STATE_KEY_SUFFIX == torch.nn.modules.module._EXTRA_STATE_KEY_SUFFIX

    class WithExtra(tapelab.nn.Module):
        def get_extra_state(self):
            return {"step": 3}

        def set_extra_state(self, state):
            self.loaded = state

    m = WithExtra()
    key = tapelab.nn.modules.module._EXTRA_STATE_KEY_SUFFIX
    assert m.state_dict() == {key: {"step": 3}}
    m.load_state_dict({key: {"step": 4}})
    assert m.loaded == {"step": 4}


@BOTH
def test_expand_adding_unit_dims_is_a_writable_view(m):
    base = m.arange(8)
    view = base.expand((1, -1))
    assert view.stride() == (8, 1)
    view.copy_(m.arange(8).flip(0).expand((1, -1)))       # BERT's init writes its position_ids buffer this way
    assert base.tolist() == list(range(7, -1, -1))
    z = m.zeros(3)
    z.expand(1, 1, 3).add_(2)
    assert z.tolist() == [2.0, 2.0, 2.0]
    assert m.ones(1).expand(1, 1).stride() == (1, 1)
    assert m.arange(3).expand(2, 3).stride() == (0, 1)


# ---------------------------------------------------------------- torchvision.io
def test_decode_image_matches_pil():
    Image = pytest.importorskip("PIL.Image")
    rs = np.random.RandomState(0)
    rgba = rs.randint(0, 256, (5, 7, 4), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, format="PNG")
    data = tapelab.tensor(np.frombuffer(buf.getvalue(), dtype=np.uint8).copy())
    from tapelab.vision.io import ImageReadMode, decode_image
    full = decode_image(data)
    assert full.dtype is tapelab.uint8 and tuple(full.shape) == (4, 5, 7)
    np.testing.assert_array_equal(full.numpy(), rgba.transpose(2, 0, 1))
    rgb = decode_image(data, mode=ImageReadMode.RGB)
    np.testing.assert_array_equal(rgb.numpy(), rgba[:, :, :3].transpose(2, 0, 1))
    gray = decode_image(data, mode="GRAY")
    want = np.asarray(Image.fromarray(rgba, "RGBA").convert("L"))[None]
    np.testing.assert_array_equal(gray.numpy(), want)
    with pytest.raises(RuntimeError, match="1-D uint8"):
        decode_image(tapelab.zeros(3))


# ---------------------------------------------------------------- torch.distributed.tensor (transformers imports it)
def _torch_placement(p):
    from torch.distributed.tensor import placement_types as tp
    if isinstance(p, tapelab.distributed.tensor.placement_types._StridedShard):
        return tp._StridedShard(p.dim, split_factor=p.split_factor)
    if isinstance(p, tapelab.distributed.tensor.Shard):
        return tp.Shard(p.dim)
    if isinstance(p, tapelab.distributed.tensor.Partial):
        return tp.Partial(p.reduce_op)
    return tp.Replicate()


def test_placements_print_compare_and_cut_like_torch():
    from tapelab.distributed.tensor import Partial, Replicate, Shard
    from tapelab.distributed.tensor.placement_types import _StridedShard
    from torch.distributed.tensor.placement_types import Shard as TorchShard
    for p in (Shard(1), Replicate(), Partial(), Partial("avg"), _StridedShard(0, split_factor=2)):
        t = _torch_placement(p)
        assert (repr(p), str(p)) == (repr(t), str(t))
        assert (p.is_shard(), p.is_replicate(), p.is_partial()) == (t.is_shard(), t.is_replicate(), t.is_partial())
    assert Shard(0) == Shard(0) and Shard(0) != Shard(1) and Shard(0) != _StridedShard(0, split_factor=1)
    assert len({Shard(0), Shard(0), Replicate(), Replicate(), Partial()}) == 3
    for size in range(0, 11):
        for n in range(1, 5):
            for rank in range(n):
                assert Shard.local_shard_size_and_offset(size, n, rank) == \
                    TorchShard.local_shard_size_and_offset(size, n, rank), (size, n, rank)


def test_local_shape_and_global_offset_match_torch():
    import itertools
    from tapelab.distributed.tensor import Replicate, Shard
    from tapelab.distributed.tensor._utils import _compute_local_shape_and_global_offset as ours
    from tapelab.distributed.tensor.placement_types import _StridedShard
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset as theirs
    options = [Shard(0), Shard(1), Replicate(), _StridedShard(0, split_factor=2), _StridedShard(1, split_factor=3)]
    checked = 0
    for shape in [(7, 5), (8, 3), (2, 9), (1, 4)]:
        for mesh in [(2,), (3,), (2, 2), (3, 2)]:
            for placements in itertools.product(options, repeat=len(mesh)):
                for coordinate in itertools.product(*[range(m) for m in mesh]):
                    want = theirs(shape, mesh, list(coordinate), [_torch_placement(p) for p in placements])
                    assert ours(shape, mesh, list(coordinate), placements) == want, (shape, mesh, placements, coordinate)
                    checked += 1
    assert checked > 1000


def test_dtensor_on_a_2x2_mesh_of_4_ranks(tmp_path):
    pytest.importorskip("mpi4py", reason="tapelab.distributed needs the 'mpi' extra (mpi4py, mpich)")
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    from tapelab.distributed.run import mpiexec
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset as torch_layout
    program = Path(__file__).parent / "programs" / "dtensor_checks.py"
    done = subprocess.run([mpiexec(), "-n", "4", sys.executable, "-m", "mpi4py", str(program), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sys.path.insert(0, str(program.parent))
    try:
        from dtensor_checks import GLOBAL, LAYOUTS
    finally:
        sys.path.pop(0)
    for rank in range(4):
        res = json.loads((tmp_path / f"rank{rank}.json").read_text())
        coordinate = [rank // 2, rank % 2]
        assert res["coordinate"] == coordinate and res["tp_local_rank"] == rank % 2
        assert res["tp_ranks"] == [2 * (rank // 2), 2 * (rank // 2) + 1] and res["dp_ranks"] == [rank % 2, 2 + rank % 2]
        for name, placements in LAYOUTS.items():
            got = res["layouts"][name]
            shape, offset = torch_layout((7, 5), (2, 2), coordinate, [_torch_placement(p) for p in placements])
            assert [tuple(x) for x in got["shape_offset"]] == [shape, offset] and got["shape"] == [7, 5]
            local = np.array(got["local"], dtype=np.float32).reshape(shape)
            if "full" in got:        # rank 0's values along each mesh dim, cut as PyTorch cuts them
                np.testing.assert_array_equal(local, GLOBAL[offset[0]:offset[0] + shape[0], offset[1]:offset[1] + shape[1]])
                np.testing.assert_array_equal(np.array(got["full"]), GLOBAL)
                assert got["from_local_shape"] == [   # from_local takes the pieces as even, as PyTorch does
                    local.shape[d] * int(np.prod([2 for p in placements if getattr(p, "dim", None) == d]))
                    for d in range(2)]
        assert res["partial_full"] == [float(rank % 2 + 2 + rank % 2)] * 2      # sum over the dp group
        tp = [2 * (rank // 2), 2 * (rank // 2) + 1]
        assert res["all_reduce"] == [sum(i + 10 * r for r in tp) for i in range(4)]
        blocks = [np.arange(4.0).reshape(2, 2) + 10 * r for r in tp]
        assert res["all_gather"] == np.concatenate(blocks, axis=1).tolist()
    # all_to_all_single_autograd: rank 2t sends rows [0] / [1, 2, 3]; rank 2t+1 sends [0, 1] / [2, 3]
    for t in (0, 1):
        lo, hi = [json.loads((tmp_path / f"rank{2 * t + i}.json").read_text()) for i in (0, 1)]
        base = 20 * t
        assert lo["a2a"] == [base + 0.0, base + 10.0, base + 11.0]
        assert hi["a2a"] == [base + 1.0, base + 2.0, base + 3.0, base + 12.0, base + 13.0]
        assert lo["a2a_grad"] == [1.0, 1.0, 2.0, 3.0] and hi["a2a_grad"] == [2.0, 3.0, 4.0, 5.0]


def test_fsdp_and_distributed_checkpoint_refuse_by_name():
    from tapelab.distributed import checkpoint, fsdp
    from tapelab.distributed._composable.fsdp import fully_shard
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        fully_shard(tapelab.nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        fsdp.FullyShardedDataParallel(tapelab.nn.Linear(2, 2))
    assert not isinstance(tapelab.nn.Linear(2, 2), fsdp.FullyShardedDataParallel)
    policy = fsdp.MixedPrecisionPolicy(param_dtype=tapelab.bfloat16)
    assert policy.param_dtype is tapelab.bfloat16 and policy.cast_forward_inputs and fsdp.CPUOffloadPolicy().pin_memory
    with pytest.raises(NotImplementedError, match="tapelab.save"):
        checkpoint.save({})
    with pytest.raises(NotImplementedError, match="tapelab.save"):
        checkpoint.hf_storage.HuggingFaceStorageReader("/tmp")


# ---------------------------------------------------------------- numpy spellings and Python types as dtypes
@pytest.mark.parametrize("call", [
    lambda m, a: a.sum(axis=1), lambda m, a: m.sum(a, 0, keepdims=True), lambda m, a: a.mean(axis=0),
    lambda m, a: a.all(axis=-1), lambda m, a: (a > 0).any(axis=0, keepdims=True), lambda m, a: a.amax(axis=1),
    lambda m, a: a.amin(axis=(0, 1), keepdims=True), lambda m, a: a.max(axis=1).values,
    lambda m, a: a.min(axis=0, keepdims=True).indices, lambda m, a: a.argmax(axis=1), lambda m, a: a.argmin(axis=0),
    lambda m, a: a.std(axis=0), lambda m, a: a.var(axis=1, keepdims=True), lambda m, a: m.var_mean(a, axis=1)[1],
    lambda m, a: m.std_mean(a, axis=0)[0], lambda m, a: a.prod(axis=1), lambda m, a: m.median(a, axis=1).values,
    lambda m, a: m.nanmedian(a, axis=0).values, lambda m, a: m.nansum(a, axis=0), lambda m, a: m.nanmean(a, axis=1),
    lambda m, a: m.count_nonzero(a > 0, axis=1), lambda m, a: a.mean(axis=0, dtype=float),
], ids=lambda f: "")
def test_reductions_take_axis_and_keepdims(call):
    x = np.random.RandomState(0).standard_normal((3, 4)).astype(np.float32)
    want, got = call(torch, torch.tensor(x)), call(tapelab, tapelab.tensor(x))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@BOTH
def test_axis_and_dim_together_is_a_type_error(m):
    with pytest.raises(TypeError):
        m.ones(2, 3).sum(0, axis=1)


@pytest.mark.parametrize("call", [
    lambda m: m.tensor(0, dtype=int), lambda m: m.tensor([1.5], dtype=float), lambda m: m.tensor([2], dtype=bool),
    lambda m: m.as_tensor([1, 2], dtype=float), lambda m: m.zeros(2, dtype=float), lambda m: m.ones(2, dtype=int),
    lambda m: m.empty(2, dtype=complex).zero_(), lambda m: m.full((2,), 1, dtype=bool), lambda m: m.arange(3, dtype=float),
    lambda m: m.linspace(0, 1, 3, dtype=float), lambda m: m.eye(2, dtype=int), lambda m: m.ones(2).to(int),
    lambda m: m.ones(2).to(dtype=bool), lambda m: m.ones(2).new_zeros(2, dtype=int), lambda m: m.ones(2).new_full((2,), 3, dtype=float),
    lambda m: m.zeros_like(m.ones(2), dtype=int), lambda m: m.empty_like(m.ones(2), dtype=float).fill_(2),
    lambda m: m.ones(2, 2).sum(dtype=int), lambda m: m.randint(0, 1, (2,), dtype=float), lambda m: m.randn(2, dtype=float).mul(0),
], ids=lambda f: "")
def test_python_number_types_as_dtypes(call):
    want, got = call(torch), call(tapelab)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_float8_and_uint16_safetensors_written_by_torch_load(tmp_path):
    """transformers' checkpoints may hold float8 and wide unsigned tensors (these were refused before)."""
    from safetensors.torch import save_file
    values = torch.tensor([0.0, 0.5, -1.5, 448.0])
    tensors = {"f8": values.to(torch.float8_e4m3fn), "e5": values.to(torch.float8_e5m2),
               "u16": torch.tensor([0, 7, 65535], dtype=torch.uint16), "u32": torch.tensor([1, 2**32 - 1], dtype=torch.uint32)}
    save_file(tensors, str(tmp_path / "w.safetensors"))
    loaded = tapelab.load(str(tmp_path / "w.safetensors"))
    for name, want in tensors.items():
        assert str(loaded[name].dtype).split(".")[1] == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(loaded[name].to(tapelab.float64).numpy(), want.to(torch.float64).numpy())
    tapelab.save(loaded, str(tmp_path / "again.safetensors"))
    again = tapelab.load(str(tmp_path / "again.safetensors"))
    assert all(again[k].dtype is loaded[k].dtype for k in tensors)


# ---------------------------------------------------------------- found running transformers' Trainer (accelerate)
@BOTH
def test_scaling_a_quotient_in_place_then_backward(m):
    """Trainer divides the loss by the token count and then scales it in place (``loss *= k``): PyTorch's
    division saves its inputs, not its result, so backward still runs."""
    a = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = m.tensor([2.0, 4.0, 0.5], requires_grad=True)
    y = a / b
    y *= 3
    (y * m.tensor([1.0, -1.0, 2.0])).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 3 * np.array([1.0, -1.0, 2.0]) / np.array([2.0, 4.0, 0.5]))
    np.testing.assert_allclose(b.grad.numpy(), -3 * np.array([1.0, -1.0, 2.0]) * np.array([1, 2, 3]) / np.array([4, 16, 0.25]))


@BOTH
def test_device_equals_an_unknown_device_string(m):
    assert (m.device("cpu") == "npu") is False and (m.device("cpu") != "xpu") is True


def test_compiled_module_class_is_reachable_as_torch_dynamo_eval_frame():
    model = tapelab.nn.Linear(2, 2)
    compiled = tapelab.compile(model)
    assert isinstance(compiled, tapelab._dynamo.eval_frame.OptimizedModule) and compiled._orig_mod is model
    assert not isinstance(model, tapelab._dynamo.eval_frame.OptimizedModule)


def test_fsdp_enums_match_torch():
    from tapelab.distributed.fsdp.fully_sharded_data_parallel import ShardingStrategy, StateDictType
    from torch.distributed.fsdp import ShardingStrategy as TS, StateDictType as TT
    assert [(e.name, e.value) for e in StateDictType] == [(e.name, e.value) for e in TT]
    assert [(e.name, e.value) for e in ShardingStrategy] == [(e.name, e.value) for e in TS]


def test_transforms_v2_functional_on_tensors():
    from tapelab.vision.transforms.v2 import functional as F
    img = tapelab.tensor(np.arange(2 * 4 * 6, dtype=np.uint8).reshape(2, 4, 6)[:1])
    rgb = F.grayscale_to_rgb(img)
    assert tuple(rgb.shape) == (3, 4, 6) and (rgb[2] == img[0]).all()
    scaled = F.to_dtype(img, tapelab.float32, scale=True)
    np.testing.assert_allclose(scaled.numpy(), img.numpy() / 255.0, rtol=1e-6)
    assert F.to_dtype(img, tapelab.float32).max().item() == 23.0
    normed = F.normalize(scaled.expand(3, 4, 6), [0.5] * 3, [0.25] * 3)
    np.testing.assert_allclose(normed.numpy(), (np.broadcast_to(img.numpy() / 255.0, (3, 4, 6)) - 0.5) / 0.25, rtol=1e-5)
    arr = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    np.testing.assert_array_equal(F.to_image(arr).numpy(), arr.transpose(2, 0, 1))
    with pytest.raises(ValueError, match="expected 3, got 2"):   # torchvision's unpacking of r, g, b
        F.grayscale_to_rgb(tapelab.zeros(2, 4, 4))


@BOTH
def test_scaling_a_power_in_place_then_backward(m):
    """``y = x ** 2; y *= k`` then backward runs in PyTorch (PowBackward saves its inputs); an exponent tensor's
    gradient still matches."""
    x = m.tensor([0.5, 1.0, 2.0], requires_grad=True)
    b = m.tensor([2.0, 0.5, 3.0], requires_grad=True)
    y = x ** 2
    y *= 2
    w = x.clone()
    w.pow_(3)
    (y.sum() + (x ** b).sum() + (3.0 ** b).sum() + w.sum()).backward()
    xs, bs = np.array([0.5, 1.0, 2.0]), np.array([2.0, 0.5, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), 4 * xs + bs * xs ** (bs - 1) + 3 * xs ** 2, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), xs ** bs * np.log(xs) + 3.0 ** bs * np.log(3.0), rtol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("eager_kernels", [True, False])
def test_gelu_output_changed_in_place_before_backward(approximate, eager_kernels):
    """PyTorch's gelu saves its input only: ``h = gelu(x); h.mul_(2)`` then backward is legal."""
    from tapelab import kernels
    kernels.set_enabled(eager_kernels)
    grads = []
    for lib in (tapelab, torch):
        x = lib.tensor(np.linspace(-4, 4, 48, dtype=np.float32).reshape(6, 8), requires_grad=True)
        h = lib.nn.functional.gelu(x, approximate=approximate)
        h.mul_(2)
        (h * h).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


_AXIS_CALLS = ["m.stack([x, x], axis=0)", "x.softmax(axis=-1)", "m.softmax(x, axis=-1)", "x.log_softmax(axis=1)",
               "x.cumsum(axis=0)", "x.cumprod(axis=1)", "x.sort(axis=1).values", "x.argsort(axis=1)",
               "x.squeeze(axis=0)", "x.unsqueeze(axis=0)", "x.topk(2, axis=1).values", "m.cat(x.chunk(2, axis=1), 1)",
               "x.logsumexp(axis=1)", "m.stack(x.unbind(axis=0))", "m.cat([x, x], axis=1)",
               "m.take_along_dim(x, m.zeros(2, 1, dtype=m.int64), axis=1)", "x.sum(axis=0)",
               "x.cummax(axis=0).values", "x.cummin(axis=1).indices", "x.logcumsumexp(axis=0)", "m.diff(x, axis=1)",
               "x.kthvalue(1, axis=1).values", "x.mode(axis=1).values", "x.repeat_interleave(2, axis=0)",
               "m.stack(x.aminmax(axis=0))"]


@pytest.mark.parametrize("call", _AXIS_CALLS)
def test_functions_with_a_dim_take_numpy_axis_as_torch(call):
    """PyTorch takes ``axis=`` wherever a native function has a ``dim`` (numpy-ported code writes it)."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3) / 5
    got = eval(call, {"m": tapelab, "x": tapelab.tensor(data)})
    want = eval(call, {"m": torch, "x": torch.tensor(data)})
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_a_missing_dim_without_axis_is_torchs_type_error():
    for call in ("x.cumsum()", "x.unsqueeze()", "m.softmax(x)", "m.nn.functional.softmax(x, axis=1)"):
        with pytest.raises(TypeError) as want:
            eval(call, {"m": torch, "x": torch.zeros(2)})
        with pytest.raises(TypeError) as got:
            eval(call, {"m": tapelab, "x": tapelab.zeros(2)})
        if "axis" not in call:
            assert str(got.value) == str(want.value)

"""Names real programs reach for that sit outside the op set: einsum's sublist form,
``backends.cuda.sdp_kernel``, ``Tensor.apply_``/``map_``, ``nn.utils.fusion``, ``torch.hub``;
against the torch in the venv."""
import hashlib
import warnings

import numpy as np
import pytest
import torch

import tapelab


def test_einsum_sublist_form_matches_torch():
    rng = np.random.default_rng(0)
    a, b, c = rng.random((3, 4), dtype=np.float32), rng.random((4, 5), dtype=np.float32), rng.random((2, 3, 4), dtype=np.float32)
    for args in (lambda L: (L.tensor(a), [0, 1], L.tensor(b), [1, 2], [0, 2]),
                 lambda L: (L.tensor(a), [0, 1], L.tensor(b), [1, 2]),
                 lambda L: (L.tensor(c), [..., 0, 1], [..., 1]),
                 lambda L: (L.tensor(a), [0, 0 + 1], [])):
        np.testing.assert_allclose(tapelab.einsum(*args(tapelab)).numpy(), torch.einsum(*args(torch)).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"within the range \[0, 52\)"):
        tapelab.einsum(tapelab.tensor(a), [0, 60])


def test_sdp_kernel_sets_and_restores_the_flags():
    with pytest.warns(FutureWarning, match="sdp_kernel\\(\\)` is deprecated"):
        with tapelab.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
            assert not tapelab.backends.cuda.flash_sdp_enabled() and tapelab.backends.cuda.math_sdp_enabled()
            q = tapelab.randn(1, 2, 4, 8)
            assert tapelab.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).shape == (1, 2, 4, 8)
    assert tapelab.backends.cuda.flash_sdp_enabled() and tapelab.backends.cuda.mem_efficient_sdp_enabled()


def test_apply_and_map_match_torch():
    for lib in (tapelab, torch):
        x = lib.arange(6.0).reshape(2, 3)
        assert x.apply_(lambda v: v * v + 1) is x
        assert x.tolist() == [[1.0, 2.0, 5.0], [10.0, 17.0, 26.0]]
        assert x.map_(lib.tensor([1.0, 0.0, -1.0]), lambda a, b: a * b).tolist() == [[1.0, 0.0, -5.0], [10.0, 0.0, -26.0]]
        i = lib.tensor([1, 2, 3])
        assert i.apply_(lambda v: v * 3).tolist() == [3, 6, 9] and i.dtype == lib.int64


def _bn(lib, n, m):
    bn = getattr(lib.nn, n)(m)
    bn.running_mean.copy_(lib.tensor(np.linspace(-1, 1, m, dtype=np.float32)))
    bn.running_var.copy_(lib.tensor(np.linspace(0.5, 2, m, dtype=np.float32)))
    with lib.no_grad():
        bn.weight.copy_(lib.tensor(np.linspace(0.8, 1.3, m, dtype=np.float32)))
        bn.bias.copy_(lib.tensor(np.linspace(-0.2, 0.3, m, dtype=np.float32)))
    return bn.eval()


@pytest.mark.parametrize("kind", ["conv", "conv_t", "conv_nobias", "linear"])
def test_fusion_matches_torch_and_the_unfused_pair(kind):
    out = {}
    for lib in (tapelab, torch):
        rng = np.random.default_rng(1)           # the same draws for both libraries
        if kind == "linear":
            layer, bn, x = lib.nn.Linear(5, 4), _bn(lib, "BatchNorm1d", 4), rng.random((3, 5), dtype=np.float32)
        elif kind == "conv_t":
            layer, bn, x = lib.nn.ConvTranspose2d(3, 4, 3), _bn(lib, "BatchNorm2d", 4), rng.random((2, 3, 5, 5), dtype=np.float32)
        else:
            layer = lib.nn.Conv2d(3, 4, 3, bias=kind == "conv")
            bn, x = _bn(lib, "BatchNorm2d", 4), rng.random((2, 3, 5, 5), dtype=np.float32)
        with lib.no_grad():
            for p in layer.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
        layer.eval()
        fuse = (lib.nn.utils.fusion.fuse_linear_bn_eval(layer, bn) if kind == "linear"
                else lib.nn.utils.fusion.fuse_conv_bn_eval(layer, bn, transpose=kind == "conv_t"))
        xt = lib.tensor(x)
        out[lib.__name__] = (fuse(xt).detach().numpy(), bn(layer(xt)).detach().numpy(), fuse.weight.requires_grad)
        assert isinstance(fuse.weight, lib.nn.Parameter) and fuse is not layer
    np.testing.assert_allclose(out["tapelab"][0], out["torch"][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["tapelab"][0], out["tapelab"][1], rtol=1e-5, atol=1e-5)
    assert out["tapelab"][2] is True
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        tapelab.nn.utils.fusion.fuse_conv_bn_eval(tapelab.nn.Conv2d(1, 2, 3), tapelab.nn.BatchNorm2d(2))


def test_hub_loads_weights_by_url_into_pytorchs_cache_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert tapelab.hub.get_dir() == str(tmp_path / "th" / "hub")
    src = tmp_path / "weights.pth"
    torch.save(torch.nn.Linear(3, 2).state_dict(), src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = tmp_path / f"lin-{digest[:8]}.pth"
    named.write_bytes(src.read_bytes())
    sd = tapelab.hub.load_state_dict_from_url(named.as_uri(), check_hash=True)
    assert sorted(sd) == ["bias", "weight"] and tuple(sd["weight"].shape) == (2, 3)
    cached = tmp_path / "th" / "hub" / "checkpoints" / named.name
    assert cached.exists()
    named.unlink()                                            # a second call reads the cache
    assert sorted(tapelab.hub.load_state_dict_from_url(named.as_uri().replace("lin-", "lin-"))) == ["bias", "weight"]
    bad = tmp_path / "lin-00000000.pth"
    bad.write_bytes(src.read_bytes())
    with pytest.raises(RuntimeError, match="invalid hash value"):
        tapelab.hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "md"), check_hash=True)
    assert not (tmp_path / "md" / bad.name).exists()


def test_hub_load_list_help_from_a_local_hubconf(tmp_path):
    (tmp_path / "hubconf.py").write_text(
        "dependencies = ['torch']\n"
        "import tapelab\n"
        "def tiny(width=4):\n    '''A linear layer of the given width.'''\n    return tapelab.nn.Linear(2, width)\n"
        "def _private():\n    pass\n")
    m = tapelab.hub.load(str(tmp_path), "tiny", width=6, source="local")
    assert isinstance(m, tapelab.nn.Linear) and m.out_features == 6
    assert tapelab.hub.list(str(tmp_path), source="local") == ["tiny"]
    assert tapelab.hub.help(str(tmp_path), "tiny", source="local") == "A linear layer of the given width."
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf"):
        tapelab.hub.load(str(tmp_path), "nope", source="local")
    with pytest.raises(ValueError, match='Unknown source: "svn"'):
        tapelab.hub.load(str(tmp_path), "tiny", source="svn")


def test_data_classes_are_generic_as_in_torch():
    """Libraries subclass ``Sampler[list[int]]`` and ``Dataset[tuple[Tensor, int]]`` (timm does)."""
    from tapelab.utils.data import DataLoader, Dataset, IterableDataset, Sampler

    class Batches(Sampler[list]):
        def __iter__(self):
            return iter([[0, 1], [2, 3]])

        def __len__(self):
            return 2

    class Squares(Dataset[tuple]):
        def __getitem__(self, i):
            return tapelab.tensor(float(i * i))

        def __len__(self):
            return 4
    assert [b.tolist() for b in DataLoader(Squares(), batch_sampler=Batches())] == [[0.0, 1.0], [4.0, 9.0]]
    assert IterableDataset[int] is not None and DataLoader[int] is not None
    for cls in (Sampler, Dataset, IterableDataset, DataLoader):
        assert cls[int].__origin__ is cls


def test_jit_annotations_and_hub_names_libraries_import():
    from tapelab.hub import HASH_REGEX, urlparse
    from tapelab.jit.annotations import BroadcastingList2, List, Optional, Tuple  # noqa: F401
    assert HASH_REGEX.search("resnet18-f37072fd.pth").group(1) == "f37072fd"
    assert urlparse("https://x.org/a/b.pth").path == "/a/b.pth"
    assert BroadcastingList2[int] == List[int]


def test_torch_C_names_libraries_probe():
    assert tapelab._C._get_tracing_state() is None and torch._C._get_tracing_state() is None
    assert tapelab._C._log_api_usage_once("x") is None
    assert getattr(tapelab._C, "_CudaDeviceProperties", None) is None        # the "not available" branch
    assert tapelab._C._get_cudnn_enabled() is True
    assert isinstance(tapelab.Generator(), tapelab._C.Generator)


def test_import_paths_libraries_use():
    """Lightning and others import these at module level; they must exist where PyTorch has them."""
    from tapelab.distributed.constants import default_pg_timeout
    from tapelab.nn.modules.module import _IncompatibleKeys
    assert default_pg_timeout == torch.distributed.constants.default_pg_timeout
    assert tapelab.nn.Linear(2, 2).load_state_dict(tapelab.nn.Linear(2, 2).state_dict()).__class__ is _IncompatibleKeys
    red = tapelab.distributed.ReduceOp
    assert isinstance(red.SUM, red.RedOpType) and isinstance(torch.distributed.ReduceOp.SUM, torch.distributed.ReduceOp.RedOpType)


def test_post_accumulate_grad_hook_runs_an_optimizer_step_inside_backward_as_torch():
    results = {}
    for lib in (tapelab, torch):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.0, 0.5, -0.4]]))
            lin.bias.copy_(lib.tensor([0.05, -0.05]))
        opts = {p: lib.optim.SGD([p], lr=0.5) for p in lin.parameters()}
        seen = []

        def step(p, opts=opts, seen=seen):
            seen.append(tuple(p.shape))
            opts[p].step()
            opts[p].zero_grad()
        handles = [p.register_post_accumulate_grad_hook(step) for p in lin.parameters()]
        (lin(lib.ones(4, 3)) ** 2).sum().backward()
        handles[1].remove()
        (lin(lib.ones(4, 3)) ** 2).sum().backward()
        results[lib.__name__] = (lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy(),
                                 lin.bias.grad is None, sorted(seen))
    t, r = results["tapelab"], results["torch"]
    np.testing.assert_allclose(t[0], r[0], rtol=1e-6)
    np.testing.assert_allclose(t[1], r[1], rtol=1e-6)
    assert t[2] == r[2] and t[3] == r[3]
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (tapelab.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_inplace_view_methods_match_torch():
    for lib in (tapelab, torch):
        x = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.unsqueeze_(0)
        y = x * lib.arange(6.0).reshape(2, 3)
        assert y.t_() is y and tuple(y.shape) == (3, 2)
        y.unsqueeze_(0).transpose_(1, 2)
        assert tuple(y.shape) == (1, 2, 3)
        (y.squeeze_() * y).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(6.0).reshape(2, 3) ** 2)
        z = lib.zeros(2, 3)
        assert tuple(z.swapaxes_(0, 1).shape) == (3, 2) and tuple(z.swapdims_(0, 1).shape) == (2, 3)


def test_small_tensor_methods_match_torch():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    for lib in (tapelab, torch):
        z = lib.ones(2, 3)
        assert [z.storage_offset(), z[1].storage_offset(), z[:, 1].storage_offset(), z.t()[2].storage_offset()] == [0, 3, 1, 2]
        assert tuple(lib.zeros(3).bernoulli(0.3).shape) == (3,)
        assert lib.tensor([0.0, 1.0]).bernoulli().tolist() == [0.0, 1.0]
        assert tuple(lib.ones(2).new_empty_strided((2, 3), (3, 1)).shape) == (2, 3)
    np.testing.assert_allclose(tapelab.tensor(a).hardshrink(0.5).numpy(), torch.tensor(a).hardshrink(0.5).numpy())
    np.testing.assert_allclose(tapelab.tensor(a).prelu(tapelab.tensor([0.25])).numpy(),
                               torch.tensor(a).prelu(torch.tensor([0.25])).numpy())


def test_storages_match_torch():
    """safetensors finds shared weights through these: a view reports its base's block."""
    for lib in (tapelab, torch):
        x = lib.arange(6.0).reshape(2, 3)
        s = x.untyped_storage()
        assert (s.nbytes(), s.size(), len(s), s.element_size(), str(s.device)) == (24, 24, 24, 1, "cpu")
        assert s.data_ptr() == x.data_ptr() == x[1].untyped_storage().data_ptr() == x.t().untyped_storage().data_ptr()
        assert x.clone().untyped_storage().data_ptr() != s.data_ptr()
        if lib is torch:   # PyTorch warns once per process: another test may have had its warning
            torch.storage._warn_typed_storage_removal.__dict__.pop("has_warned", None)
        with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
            t = x.storage()
        assert (t.size(), t.element_size(), t.nbytes(), t.tolist()) == (6, 4, 24, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
        assert t.data_ptr() == x.data_ptr() and not s.is_shared()
        assert lib.UntypedStorage(8).nbytes() == 8
    assert isinstance(tapelab.ones(1).untyped_storage(), tapelab.UntypedStorage)


def test_fx_graph_appending_tracer_and_a_proxy_without_a_tracer():
    """pytorch/examples fx: graphs built by hand from Proxies over raw nodes."""
    import operator
    g = tapelab.fx.Graph()
    x = tapelab.fx.Proxy(g.placeholder("x"))                       # no tracer: one appending to g
    assert isinstance(x.tracer, tapelab.fx.proxy.GraphAppendingTracer)
    y = tapelab.fx.Proxy(g.placeholder("y"), tapelab.fx.proxy.GraphAppendingTracer(g))
    out = (x + y) * 2
    g.output(out.node)
    gm = tapelab.fx.GraphModule(tapelab.nn.Module(), g)
    assert gm(tapelab.ones(2), tapelab.full((2,), 3.0)).tolist() == [8.0, 8.0]
    assert [n.target for n in g.nodes if n.op == "call_function"] == [operator.add, operator.mul]
    from tapelab.fx.node import Target  # noqa: F401  (a type alias programs annotate with)

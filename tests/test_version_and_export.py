"""``torch.__version__`` gates and ``torch.export``: a program that checks the PyTorch version takes
the modern path, and ``export(...).module()`` gives the module's outputs and gradients, as PyTorch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
import tapelab.vision


def test_version_compares_as_the_pytorch_release_it_implements():
    v = tapelab.__version__
    assert isinstance(v, str) and v.startswith(torch.__version__.split("+")[0] + "+tapelab.")
    assert v >= "2.0" and v >= "1.13.0a0" and v > (2, 12) and v < "3" and not v < "2.13"
    assert v == tapelab.version.__version__ and hash(v) == hash(str(v))
    from packaging.version import parse
    assert parse(v) >= parse("2.0")
    assert tapelab.vision.__version__ >= "0.15"


def _net(m):
    m.manual_seed(0)
    net = m.nn.Sequential(m.nn.Linear(6, 8), m.nn.BatchNorm1d(8), m.nn.GELU(), m.nn.Linear(8, 3))
    with m.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(m.linspace(-0.5, 0.5 + 0.1 * i, p.numel()).reshape(p.shape))
    return net


def test_export_module_matches_torch_with_signature():
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    progs = {m: m.export.export(_net(m).eval(), (m.tensor(x),)) for m in (torch, tapelab)}
    t_ep, l_ep = progs[torch], progs[tapelab]
    np.testing.assert_allclose(l_ep.module()(tapelab.tensor(x)).detach().numpy(),
                               t_ep.module()(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    ts, ls = t_ep.graph_signature, l_ep.graph_signature
    assert ls.parameters == ts.parameters and ls.buffers == ts.buffers
    assert ls.user_inputs == ("input",) and len(ts.user_inputs) == 1
    assert sorted(l_ep.state_dict) == sorted(t_ep.state_dict)
    assert l_ep.run_decompositions() is l_ep and "prims.linear" in str(l_ep)
    with pytest.raises(RuntimeError, match="Unable to call ExportedProgram directly"):
        l_ep(tapelab.tensor(x))
    with pytest.raises(RuntimeError, match=r"Expected input at input.shape\[0\] to be equal to 4, but got 5"):
        l_ep.module()(tapelab.ones(5, 6))


def test_export_train_mode_mutates_buffers_and_passes_gradients():
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    got = {}
    for m in (torch, tapelab):
        net = _net(m).train()
        ep = m.export.export(net, (m.tensor(x),))
        out = ep.module()(m.tensor(x))
        got[m] = out.detach().numpy()
    np.testing.assert_allclose(got[tapelab], got[torch], rtol=1e-5, atol=1e-6)
    ep = tapelab.export.export(_net(tapelab).train(), (tapelab.tensor(x),))
    assert set(ep.graph_signature.buffers_to_mutate.values()) == {
        "1.running_mean", "1.running_var", "1.num_batches_tracked"}
    mod = ep.module()
    before = ep._mod[1].running_mean.clone()
    loss = mod(tapelab.tensor(x)).square().mean()
    loss.backward()
    assert not tapelab.equal(ep._mod[1].running_mean, before)
    assert ep._mod[0].weight.grad is not None and ep._mod[0].weight.grad.abs().sum() > 0


def test_export_dynamic_batch_dim():
    net = _net(tapelab).eval()
    batch = tapelab.export.Dim("batch", min=2, max=16)
    ep = tapelab.export.export(net, (tapelab.ones(4, 6),), dynamic_shapes={"input": {0: batch}})
    assert ep.range_constraints == {"batch": (2, 16)}
    mod = ep.module()
    for n in (3, 9, 3):
        x = tapelab.linspace(-1, 1, n * 6).reshape(n, 6)
        np.testing.assert_allclose(mod(x).detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    assert len(ep._graphs) == 3   # 4 (the example), 3 and 9, each traced once
    with pytest.raises(RuntimeError, match=r"input.shape\[0\] to be <= 16, but got 17"):
        mod(tapelab.ones(17, 6))
    with pytest.raises(RuntimeError, match=r"input.shape\[1\] to be equal to 6, but got 7"):
        mod(tapelab.ones(4, 7))
    with pytest.raises(ValueError, match="outside its range"):
        tapelab.export.export(net, (tapelab.ones(20, 6),), dynamic_shapes={"input": {0: batch}})
    with pytest.raises(ValueError, match="not inputs of forward"):
        tapelab.export.export(net, (tapelab.ones(4, 6),), dynamic_shapes={"x": {0: batch}})


def test_export_keyword_inputs():
    class Scale(tapelab.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = tapelab.nn.Parameter(tapelab.full((3,), 2.0))

        def forward(self, x, *, bias):
            return x * self.w + bias

    ep = tapelab.export.export(Scale(), (tapelab.ones(3),), {"bias": tapelab.full((3,), 0.5)})
    assert ep.graph_signature.user_inputs == ("x", "bias") and ep.graph_signature.parameters == ("w",)
    assert ep.module()(tapelab.ones(3), bias=tapelab.zeros(3)).tolist() == [2.0, 2.0, 2.0]


def test_autograd_profiler_is_reachable_after_import():
    """``torch.autograd.profiler.profile()`` right after ``import torch``, as programs write it."""
    assert tapelab.autograd.profiler is tapelab.profiler.legacy
    with tapelab.autograd.profiler.profile() as p:
        with tapelab.autograd.profiler.record_function("block"):
            (tapelab.ones(2, 3) * 2).sum()
    with torch.autograd.profiler.profile() as q:
        with torch.autograd.profiler.record_function("block"):
            (torch.ones(2, 3) * 2).sum()
    assert {"block", "aten::sum", "aten::mul", "aten::ones"} <= {e.key for e in p.key_averages()}
    assert {"block", "aten::sum"} <= {e.key for e in q.key_averages()}


def test_untyped_storage_from_file_as_safetensors_reads_it(tmp_path):
    """safetensors' loader: ``UntypedStorage.from_file``, a byte slice per tensor, then
    ``asarray(slice, dtype=uint8).view(dtype=...).reshape(shape)``."""
    values = np.arange(12, dtype=np.float32) * 0.5
    path = tmp_path / "blob.bin"
    path.write_bytes(b"\x00" * 8 + values.tobytes())
    got = []
    for m in (torch, tapelab):
        storage = m.UntypedStorage.from_file(str(path), shared=False, nbytes=8 + values.nbytes)
        assert storage.untyped() is storage and len(storage) == 8 + values.nbytes
        piece = storage[8:8 + values.nbytes]
        t = m.asarray(piece, dtype=m.uint8).view(dtype=m.float32).reshape((3, 4))
        t[0, 0] = 100.0                      # private pages: the file keeps its bytes
        got.append(t.tolist())
    assert got[0] == got[1] and got[1][0][0] == 100.0
    assert path.read_bytes()[8:12] == np.float32(0).tobytes()
    shared = tapelab.UntypedStorage.from_file(str(path), shared=True, nbytes=8)
    tapelab.asarray(shared, dtype=tapelab.uint8)[0] = 7
    del shared
    assert path.read_bytes()[0] == 7
    with pytest.raises(RuntimeError, match="unable to mmap"):
        tapelab.UntypedStorage.from_file(str(path), nbytes=10 ** 6)


def test_top_level_grad_scaler_to_dlpack_and_output_nr():
    """``torch.GradScaler`` (torch.amp's), ``torch.to_dlpack`` and ``Tensor.output_nr``, as in PyTorch."""
    assert tapelab.GradScaler is tapelab.amp.GradScaler and torch.GradScaler is torch.amp.GradScaler
    x = tapelab.arange(4.0)
    back = np.from_dlpack(tapelab.utils.dlpack.from_dlpack(tapelab.to_dlpack(x)))
    assert back.tolist() == [0.0, 1.0, 2.0, 3.0]
    for m in (torch, tapelab):
        leaf = m.ones(3, requires_grad=True)
        assert [t.output_nr for t in leaf.unbind(0)] == [0, 1, 2] and leaf.output_nr == 0

"""Names and behaviours PyTorch Lightning needs from ``torch`` (found running a LightningModule with
Trainer.fit/validate/test, checkpoints and torchmetrics under ``install_aliases``), each checked
against PyTorch. Lightning itself is not imported here."""
from __future__ import annotations

import importlib
import io
import pickle
import sys

import numpy as np
import pytest
import torch

import tapelab


def both(fn):
    return fn(tapelab), fn(torch)


def test_tensor_meta_is_tensors_metaclass():
    assert both(lambda m: isinstance(m.Tensor, m._C._TensorMeta)) == (True, True)


def test_pytorch_file_reader_reads_a_torch_checkpoint(tmp_path):
    path = tmp_path / "ck.pt"
    torch.save({"w": torch.arange(4.0), "step": 3}, path)
    records = {}
    for m in (tapelab, torch):
        r = m.PyTorchFileReader(str(path))
        records[m.__name__] = (sorted(r.get_all_records()), r.has_record("data.pkl"), r.has_record("nope"),
                               r.get_record("data.pkl"))
    t, p = records["tapelab"], records["torch"]
    assert t[1:3] == p[1:3] == (True, False)
    assert "data.pkl" in t[0] and set(t[0]) >= set(p[0]) - {".data/serialization_id"}
    assert bytes(t[3]) == bytes(p[3])
    with pytest.raises(RuntimeError, match="PyTorchFileReader"):
        tapelab.PyTorchFileReader(str(tmp_path / "missing.pt"))


@pytest.mark.parametrize("workers", [0, 1])
def test_dataloader_iterators_are_pytorchs_types(workers):
    def run(m):
        dl_mod = importlib.import_module(m.__name__ + ".utils.data.dataloader")
        ds = m.utils.data.TensorDataset(m.arange(10.0))
        loader = m.utils.data.DataLoader(ds, batch_size=3, num_workers=workers)
        it = iter(loader)
        kind = (_MULTI if workers else _SINGLE)
        out = [isinstance(it, dl_mod._BaseDataLoaderIter), isinstance(it, getattr(dl_mod, kind)), len(it),
               next(it)[0].tolist()]
        if workers:
            it._shutdown_workers()
        out.append([b[0].tolist() for b in loader])
        return out

    _SINGLE, _MULTI = "_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"
    t, r = both(run)
    assert t == r
    assert t[:3] == [True, True, 4]


def test_pytree_node_type_and_pytree_name():
    from collections import namedtuple
    from tapelab.utils import _pytree as tp
    from torch.utils import _pytree as rp
    P = namedtuple("P", "a b")
    for value in ([1], (1,), {"a": 1}, P(1, 2), 3, "s", torch.ones(1)):
        t, r = tp._get_node_type(value), rp._get_node_type(value)
        expect = namedtuple if r is namedtuple else type(value)
        assert r is expect
        assert (t is namedtuple) == (r is namedtuple)
        assert (t in tp.SUPPORTED_NODES) == (r in rp.SUPPORTED_NODES) or r is namedtuple
    assert tp.PyTree is not None


def test_flop_counter_mode_matches_torch_per_module():
    def run(m):
        fc = importlib.import_module(m.__name__ + ".utils.flop_counter")

        class Net(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = m.nn.Linear(8, 16)
                self.c = m.nn.Conv2d(3, 5, 3)
                self.s = m.nn.Sequential(m.nn.ReLU(), m.nn.Linear(16, 4))

            def forward(self, x, im):
                return self.s(self.a(x)).sum() + self.c(im).sum() + (x @ x.T).sum()

        net = Net()
        with m.no_grad(), fc.FlopCounterMode(display=False) as counter:
            net(m.randn(4, 8), m.randn(2, 3, 9, 9))
        return counter.get_total_flops(), {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}

    (tt, tc), (rt, rc) = both(run)
    assert tt == rt == 28252
    assert tc == rc


def test_script_module_is_a_type_no_scripted_module_is():
    def run(m):
        lin = m.jit.script(m.nn.Linear(2, 2))
        return isinstance(m.ScriptModule, type), isinstance(m.jit.ScriptModule, type), isinstance(lin, m.nn.Module)

    t, r = both(run)
    assert t == r == (True, True, True)
    assert not isinstance(tapelab.jit.script(tapelab.nn.Linear(2, 2)), tapelab.ScriptModule)


def test_autograd_profiler_module_under_aliases():
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    try:
        with tapelab.install_aliases():
            prof = importlib.import_module("torch.autograd.profiler")
            assert prof.record_function is tapelab.profiler.record_function
            assert prof.EventList is tapelab.profiler.EventList
            with prof.profile(enabled=False) as p:
                tapelab.ones(2) + 1
            assert isinstance(p, tapelab.profiler.profile)
            with prof.emit_nvtx():
                pass
    finally:
        sys.modules.update(saved)
    assert torch.autograd.profiler.profile is not tapelab.profiler.legacy.profile
    with tapelab.profiler.legacy.profile(record_shapes=True) as p:
        tapelab.ones(2, 3).sum()
    names = {e.key for e in p.key_averages()}
    with torch.autograd.profiler.profile(record_shapes=True) as q:
        torch.ones(2, 3).sum()
    assert {"aten::sum", "aten::ones"} <= names and {"aten::sum", "aten::ones"} <= {e.key for e in q.key_averages()}


@pytest.mark.parametrize("args,kwargs", [(("cpu",), {}), (("float64",), {}), (("tensor",), {}),
                                         (("cpu", "float16"), {"non_blocking": True}), ((), {"dtype": "float32"}),
                                         ((), {"device": "cpu", "memory_format": "channels_last"})])
def test_parse_to(args, kwargs):
    def run(m):
        def conv(a):
            if a in ("float64", "float16", "float32", "channels_last"):
                return getattr(m, a)
            if a == "tensor":
                return m.ones(1, dtype=m.float16)
            return a
        dev, dt, nb, mf = m._C._nn._parse_to(*map(conv, args), **{k: conv(v) for k, v in kwargs.items()})
        return (str(dev) if dev is not None else None, str(dt).split(".")[-1] if dt is not None else None, nb,
                str(mf).split(".")[-1] if mf is not None else None)

    t, r = both(run)
    assert t == r


def test_cuda_rng_state_all_without_a_gpu():
    if torch.cuda.is_available() or tapelab.cuda.is_available():
        pytest.skip("checks the machine without a GPU")
    assert tapelab.cuda.get_rng_state_all() == torch.cuda.get_rng_state_all() == []
    tapelab.cuda.set_rng_state_all([])
    torch.cuda.set_rng_state_all([])


def test_module_to_with_parsed_arguments_round_trips_a_checkpoint():
    """Lightning's checkpoint: a module moved with _parse_to's result, saved and loaded equal."""
    def run(m):
        m.manual_seed(0)
        lin = m.nn.Linear(3, 2)
        dev, dt = m._C._nn._parse_to(m.float64)[:2]
        lin.to(device=dev, dtype=dt)
        buf = io.BytesIO()
        m.save({"state_dict": lin.state_dict(), "epoch": 1}, buf)
        buf.seek(0)
        back = m.load(buf)
        return str(back["state_dict"]["weight"].dtype).split(".")[-1], back["epoch"]

    assert both(run) == (("float64", 1), ("float64", 1))


def test_pickled_dataloader_iterator_state_is_dropped_like_torch():
    def run(m):
        loader = m.utils.data.DataLoader(m.utils.data.TensorDataset(m.arange(4.0)), batch_size=2)
        it = iter(loader)
        with pytest.raises((TypeError, pickle.PicklingError, NotImplementedError, AttributeError)):
            pickle.dumps(it)
        return np.asarray(next(it)[0].tolist())

    t, r = both(run)
    np.testing.assert_array_equal(t, r)


@pytest.mark.parametrize("input_grad", [True, False])
def test_flop_counter_mode_counts_backward_gemms_as_torch(input_grad):
    def run(m):
        fc = importlib.import_module(m.__name__ + ".utils.flop_counter")
        m.manual_seed(0)
        lin, conv = m.nn.Linear(8, 16), m.nn.Conv2d(3, 5, 3)
        x = m.randn(4, 8, requires_grad=input_grad)
        im = m.randn(2, 3, 9, 9, requires_grad=True)
        with fc.FlopCounterMode(display=False) as counter:
            (lin(x).sum() + conv(im).sum() + (x @ x.T).sum()).backward()
        return counter.get_total_flops()

    t, r = both(run)
    assert t == r


@pytest.mark.parametrize("convert", [float, complex])
def test_scalar_of_a_tensor_that_requires_grad_warns_once_like_torch(convert):
    import subprocess
    code = ("import warnings, {m}\nwarnings.simplefilter('always')\nt = {m}.tensor(1.5, requires_grad=True)\n"
            "with warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
            "    {c}(t); {c}(t * 2); int(t); {c}({m}.tensor(2.0))\n"
            "print(len(w), [str(x.message).splitlines()[0] for x in w])")
    out = [subprocess.run([sys.executable, "-c", code.format(m=m, c=convert.__name__)], capture_output=True,
                          text=True, check=True).stdout for m in ("tapelab", "torch")]
    assert out[0] == out[1]
    assert out[0].startswith("1 ")

"""PyTorch's checkpoints in tapelab: files PyTorch wrote load (without PyTorch) with equal values,
files tapelab writes load in PyTorch, and PyTorch 2.6+'s weights-only security model holds.

The PyTorch-written files are tests/fixtures/pt, made by tests/fixtures/make_pt_fixtures.py; when
PyTorch is installed every test also runs on files that script writes now ("fresh").
"""
import io
import os
import pickle
import subprocess
import sys
import types
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import tapelab
from tapelab import nn
from tapelab.serialization import (add_safe_globals, clear_safe_globals, get_safe_globals,
                                   get_unsafe_globals_in_checkpoint, load, safe_globals, save)

FIXTURES = Path(__file__).parent / "fixtures"
DTYPES = ["float32", "float64", "float16", "bool", "uint8", "int8", "int16", "int32", "int64"]


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


needs_torch = pytest.mark.skipif(not _has_torch(), reason="PyTorch is the reader or writer here")


class Net(nn.Module):
    """The researcher's own model, as make_pt_fixtures.py defines it for PyTorch (there: __main__.Net)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("offset", tapelab.arange(3.0))
        self.scale = 0.5

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.bn(self.fc1(x))))) * self.scale + self.offset


class Config:
    """A user class a checkpoint may carry, once the user allows it."""

    def __init__(self, lr):
        self.lr = lr


@pytest.fixture(scope="module", params=["committed", pytest.param("fresh", marks=needs_torch)])
def pt(request, tmp_path_factory):
    if request.param == "committed":
        return FIXTURES / "pt"
    out = tmp_path_factory.mktemp("pt")
    subprocess.run([sys.executable, str(FIXTURES / "make_pt_fixtures.py"), str(out)], check=True)
    return out


@pytest.fixture
def main_net(monkeypatch):
    """A program run as a script defines Net in __main__, where the whole-model files look for it."""
    monkeypatch.setattr(sys.modules["__main__"], "Net", Net, raising=False)


def _expected(pt):
    return np.load(pt / "expected.npz")


def _np(t):
    return np.asarray(t.detach())


# ---------------------------------------------------------------- PyTorch wrote, tapelab reads
@pytest.mark.parametrize("name", ["tensors.pt", "tensors_legacy.pt"])
def test_tensors_of_every_dtype_load_with_their_values(pt, name):
    out, exp = load(pt / name), _expected(pt)
    for dt in DTYPES:
        t = out[f"t_{dt}"]
        assert t.dtype == getattr(tapelab, dt) and t.shape == (2, 3)
        np.testing.assert_array_equal(_np(t), exp[f"t_{dt}"])
    assert out["scalar"].shape == () and out["scalar"].dtype == tapelab.int64 and out["scalar"].item() == 7
    assert out["empty"].shape == (0, 3)
    assert type(out["param"]) is nn.Parameter and out["param"].requires_grad
    nested = out["nested"]
    assert type(nested) is OrderedDict and list(nested) == ["lst", "tup", "size", "dtype", "device"]
    assert nested["lst"][0].tolist() == [1, 2] and nested["lst"][1:] == [3, "x"]
    assert nested["tup"] == (1.5, None, True)
    assert type(nested["size"]) is tapelab.Size and nested["size"] == (2, 3)
    assert nested["dtype"] is tapelab.float16 and nested["device"] == tapelab.device("cpu")


@pytest.mark.parametrize("name", ["tensors.pt", "tensors_legacy.pt"])
def test_views_of_one_storage_share_memory_again(pt, name):
    out, exp = load(pt / name), _expected(pt)
    for key in ("base", "base_t", "row", "cols"):
        np.testing.assert_array_equal(_np(out[key]), exp[key])
    out["base"][1, 2] = -1.0
    assert out["row"][2].item() == -1.0 and out["base_t"][2, 1].item() == -1.0 and out["cols"][1, 1].item() == -1.0


def test_state_dict_loads_into_a_tapelab_model(pt):
    sd, exp = load(pt / "state_dict.pt"), _expected(pt)
    assert type(sd) is OrderedDict
    for k, v in sd.items():
        np.testing.assert_array_equal(_np(v), exp[f"sd_{k}"])
    net = Net()
    net.load_state_dict(sd)
    out = net.eval()(tapelab.tensor(exp["x"]))
    np.testing.assert_allclose(_np(out), exp["net_out"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["net.pt", "net_legacy.pt"])
def test_whole_model_loads_as_the_users_class(pt, name, main_net):
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL __main__.Net was not an allowed global"):
        load(pt / name)
    net, exp = load(pt / name, weights_only=False), _expected(pt)
    assert type(net) is Net and not net.training and net.scale == 0.5
    assert type(net.fc1) is nn.Linear and type(net.bn) is nn.BatchNorm1d and type(net.act) is nn.ReLU
    assert list(net.state_dict()) == [k[3:] for k in exp.files if k.startswith("sd_")]
    out = net(tapelab.tensor(exp["x"]))
    np.testing.assert_allclose(_np(out), exp["net_out"], rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert net.fc1.weight.grad.shape == (8, 4)


def test_whole_sequential_loads(pt):
    seq, exp = load(pt / "sequential.pt", weights_only=False), _expected(pt)
    assert type(seq) is nn.Sequential and [type(m) for m in seq] == [nn.Linear, nn.ReLU, nn.Linear]
    np.testing.assert_allclose(_np(seq(tapelab.tensor(exp["x"]))), exp["seq_out"], rtol=1e-5, atol=1e-6)
    pure_python = types.SimpleNamespace(Unpickler=pickle._Unpickler)  # a pickle_module means a full load
    assert type(load(pt / "sequential.pt", pickle_module=pure_python)) is nn.Sequential


def test_torch_names_without_a_tapelab_equivalent_are_named():
    class Fake:
        def __reduce__(self):
            return (_Global("torch.nn.modules.fancy", "FancyLayer"), ())
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.fancy.FancyLayer has no tapelab equivalent"
                                                     ".*tapelab.nn.modules.fancy.FancyLayer, .*tapelab.nn.FancyLayer"):
        load(_archive(_dumps(Fake())), weights_only=False)


@needs_torch
@pytest.mark.parametrize("legacy", [False, True])
def test_pickle_protocol_4_files_load(tmp_path, legacy):
    import torch
    path = tmp_path / "p4.pt"
    torch.save({"w": torch.arange(3.0), "n": 2}, path, pickle_protocol=4, _use_new_zipfile_serialization=not legacy)
    out = load(path)
    assert out["w"].tolist() == [0.0, 1.0, 2.0] and out["n"] == 2


def test_map_location_on_pytorch_files(pt):
    for where in ("cpu", tapelab.device("cpu"), {"cpu": "cpu"}, lambda storage, loc: storage):
        out = load(pt / "tensors.pt", map_location=where)
        assert out["base"].device == tapelab.device("cpu")
    seen = []
    load(pt / "tensors.pt", map_location=lambda storage, loc: seen.append((loc, storage.dtype)))
    assert ("cpu", tapelab.float16) in seen


# ---------------------------------------------------------------- the allow-list
def test_safe_globals_allow_the_users_classes(pt, main_net):
    allowed = [(Net, "__main__.Net"), nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Dropout]  # Net as the file names it
    assert sorted(get_unsafe_globals_in_checkpoint(pt / "net.pt")) == [
        "__main__.Net", "torch.nn.modules.activation.ReLU", "torch.nn.modules.batchnorm.BatchNorm1d",
        "torch.nn.modules.dropout.Dropout", "torch.nn.modules.linear.Linear"]
    with safe_globals(allowed):
        net = load(pt / "net.pt")
        assert get_unsafe_globals_in_checkpoint(pt / "net.pt") == []
    assert type(net) is Net and get_safe_globals() == []
    exp = _expected(pt)
    np.testing.assert_allclose(_np(net(tapelab.tensor(exp["x"]))), exp["net_out"], rtol=1e-5, atol=1e-6)
    with safe_globals(allowed[:-1]):
        with pytest.raises(pickle.UnpicklingError, match="GLOBAL torch.nn.modules.dropout.Dropout"):
            load(pt / "net.pt")


def test_add_safe_globals_and_clear(tmp_path):
    path = tmp_path / "ckpt.pt"
    save({"cfg": Config(0.1), "w": tapelab.ones(2)}, path)
    name = f"{Config.__module__}.Config"
    with pytest.raises(pickle.UnpicklingError, match=f"GLOBAL {name} was not an allowed global"):
        load(path)
    try:
        add_safe_globals([Config])
        assert get_safe_globals() == [Config]
        out = load(path)
        assert type(out["cfg"]) is Config and out["cfg"].lr == 0.1
        clear_safe_globals()
        with pytest.raises(pickle.UnpicklingError):
            load(path)
        add_safe_globals([(Config, name)])
        assert load(path)["cfg"].lr == 0.1
    finally:
        clear_safe_globals()


def test_allowed_functions_cannot_be_aimed_outside_their_storage():
    from tapelab.serialization._storage import Storage, rebuild_tensor
    storage = Storage(np.zeros(4, np.float32))
    assert rebuild_tensor(storage, 1, (3,), (1,)).shape == (3,)
    for offset, size, stride in [(0, (5,), (1,)), (3, (2,), (1,)), (0, (2, 2), (3, 1)), (0, (2,), (-1,)), (4, (), ())]:
        with pytest.raises(RuntimeError, match="invalid tensor in checkpoint"):
            rebuild_tensor(storage, offset, size, stride)


# ---------------------------------------------------------------- malicious files
class _Global:
    """Pickles as the global ``module.name``, whatever is importable here."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's reduce asks for a callable
        raise TypeError("only ever pickled")


def _pickle_global(pickler, obj):
    pickler.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())


class _Pickler(pickle._Pickler):
    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[_Global] = _pickle_global

    def reducer_override(self, obj):
        return NotImplemented


def _dumps(obj):
    buf = io.BytesIO()
    _Pickler(buf, 2).dump(obj)
    return buf.getvalue()


class Evil:
    """Runs a shell command when unpickled: the attack weights-only loading exists to stop."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class EvalEvil(Evil):
    def __reduce__(self):
        return (eval, (self.command,))


def _archive(pkl: bytes) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/version", "3\n")
    buf.seek(0)
    return buf


def _legacy(pkl: bytes) -> io.BytesIO:
    header = b"".join(pickle.dumps(x, protocol=2) for x in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}))
    return io.BytesIO(header + pkl + pickle.dumps([], protocol=2))


@pytest.mark.parametrize("container", [_archive, _legacy])
def test_malicious_reduce_never_runs_under_weights_only(tmp_path, container):
    marker = tmp_path / "pwned"
    pkl = pickle.dumps({"w": [1.0], "payload": Evil(f"touch {marker}")}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL posix.system whose module posix is blocked"):
        load(container(pkl))
    with safe_globals([os.system]):  # a blocked module stays blocked
        with pytest.raises(pickle.UnpicklingError, match="is blocked"):
            load(container(pkl))
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL eval was not an allowed global"):
        load(container(pickle.dumps([EvalEvil(code)], protocol=2)))
    assert not marker.exists()
    load(container(pkl), weights_only=False)  # the same file, trusted: the payload is real
    assert marker.exists()


def test_weights_only_refuses_every_code_path_before_it_runs(tmp_path):
    marker = tmp_path / "pwned"
    attacks = {  # a pickle program per instruction that could call something, with what it must say
        "reduce on a non-global": (b"\x80\x02]q\x00)R.", "unrecognized function"),
        "newobj of a non-class": (b"\x80\x02ccollections\nOrderedDict\n)R)\x81.", "Can only create new object"),
        "build into a dtype": (b"\x80\x02ctorch\nfloat32\n}X\x01\x00\x00\x00aK\x01sb.", "Can only build"),
        "append to a dict": (b"\x80\x02}K\x01a.", "Can only append to lists"),
        "setitem on a list": (b"\x80\x02]K\x01K\x02s.", "Can only SETITEM"),
        "INST opcode": (b"\x80\x02(ios\nsystem\n.", "Unsupported operand"),
        "non-storage persistent id": (b"\x80\x02X\x03\x00\x00\x00abc\x85Q.", "Only persistent_load of storage"),
        "builtins": (b"\x80\x02c__builtin__\ngetattr\n.", "GLOBAL getattr was not an allowed global"),
    }
    for what, (pkl, message) in attacks.items():
        with pytest.raises(pickle.UnpicklingError, match=message):
            load(_archive(pkl))
    assert not marker.exists()


def test_forcing_weights_only_through_the_environment(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    pkl = pickle.dumps(Evil(f"touch {marker}"), protocol=2)
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError):
        load(_archive(pkl), weights_only=False)
    assert not marker.exists()
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        load(_archive(pkl), pickle_module=pickle, weights_only=True)


@needs_torch
@pytest.mark.parametrize("legacy", [False, True])
def test_pytorch_written_malicious_file_and_pytorchs_own_message(tmp_path, legacy):
    import torch
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "x": Evil(f"touch {marker}")}, path, _use_new_zipfile_serialization=not legacy)
    with pytest.raises(pickle.UnpicklingError) as ours:
        load(path)
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(path)
    assert str(ours.value) == str(theirs.value)
    assert not marker.exists()


@needs_torch
def test_refusal_messages_are_pytorchs(pt):
    import torch
    for name in ("sequential.pt", "net.pt"):
        with pytest.raises(pickle.UnpicklingError) as ours:
            load(pt / name)
        with pytest.raises(pickle.UnpicklingError) as theirs:
            torch.load(pt / name)
        assert str(ours.value) == str(theirs.value)


# ---------------------------------------------------------------- tapelab wrote, PyTorch reads
def _mixed():
    base = tapelab.arange(12.0).reshape(3, 4)
    obj = {f"t_{dt}": (tapelab.arange(6) - 2).reshape(2, 3).to(getattr(tapelab, dt)) for dt in DTYPES}
    obj.update(base=base, row=base[1], cols=base[:, ::2], epoch=3, lr=1e-3, name="run", flags=[True, None],
               param=nn.Parameter(tapelab.ones(2)), size=tapelab.Size([2, 3]), dtype=tapelab.float16)
    return obj


@needs_torch
@pytest.mark.parametrize("fmt", ["zip", "zip without byteorder", "legacy"])
def test_pytorch_reads_what_tapelab_saves(tmp_path, fmt):
    import torch
    obj = _mixed()
    save(obj, tmp_path / "ckpt.pt", _use_new_zipfile_serialization=fmt != "legacy",
         _disable_byteorder_record=fmt == "zip without byteorder")
    for mmap in (False, True) if fmt == "zip" else (False,):
        out = torch.load(tmp_path / "ckpt.pt", mmap=mmap)
        for dt in DTYPES:
            assert out[f"t_{dt}"].dtype == getattr(torch, dt)
            np.testing.assert_array_equal(out[f"t_{dt}"].numpy(), _np(obj[f"t_{dt}"]))
        assert out["cols"].tolist() == obj["cols"].tolist() and out["cols"].stride() == (4, 2)
        assert out["row"].untyped_storage().data_ptr() == out["base"].untyped_storage().data_ptr()
        assert (out["epoch"], out["lr"], out["name"], out["flags"]) == (3, 1e-3, "run", [True, None])
        assert type(out["param"]) is torch.nn.Parameter and out["size"] == torch.Size([2, 3])
        assert out["dtype"] is torch.float16


@needs_torch
def test_pytorch_reads_an_ordered_dict_and_a_state_dict(tmp_path):
    import torch
    ordered = OrderedDict(step=tapelab.tensor(5), state={0: {"exp_avg": tapelab.ones(3)}}, groups=[{"lr": 0.1}])
    save(ordered, tmp_path / "opt.pt")
    out = torch.load(tmp_path / "opt.pt")
    assert type(out) is OrderedDict and list(out) == ["step", "state", "groups"]
    assert out["step"].item() == 5 and out["state"][0]["exp_avg"].tolist() == [1.0] * 3
    assert out["groups"] == [{"lr": 0.1}]
    net = Net()
    save(net.state_dict(), tmp_path / "net.safetensors")
    sd = torch.load(tmp_path / "net.safetensors")
    assert sorted(sd) == sorted(net.state_dict())
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(sd[k].numpy(), _np(v))


@pytest.mark.parametrize("legacy", [False, True])
def test_tapelab_reads_what_it_saves_in_either_pytorch_format(legacy):
    obj = _mixed()
    buf = io.BytesIO()
    save(obj, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    out = load(buf)
    for k, v in obj.items():
        if isinstance(v, tapelab.Tensor):
            assert out[k].dtype == v.dtype and out[k].tolist() == v.tolist()
        else:
            assert out[k] == v
    out["base"][1, 2] = -1.0
    assert out["row"][2].item() == -1.0 and out["cols"][1, 1].item() == -1.0


def test_loading_pytorch_files_never_imports_torch():
    code = ("import sys, tapelab; d = sys.argv[1]; tapelab.load(d + '/tensors.pt');"
            "tapelab.load(d + '/tensors_legacy.pt');"
            "sys.modules['__main__'].Net = tapelab.nn.Module; tapelab.load(d + '/sequential.pt', weights_only=False);"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code, str(FIXTURES / "pt")], check=True)


@needs_torch
def test_dtypes_tapelab_lacks_are_named(tmp_path):
    import torch
    torch.save({"w": torch.arange(4.0, dtype=torch.bfloat16)}, tmp_path / "bf16.pt")
    if hasattr(tapelab, "bfloat16"):
        assert load(tmp_path / "bf16.pt")["w"].float().tolist() == [0.0, 1.0, 2.0, 3.0]
    else:
        with pytest.raises(RuntimeError, match="torch.BFloat16Storage holds bfloat16 data, and tapelab has no "
                                               "bfloat16 dtype"):
            load(tmp_path / "bf16.pt")
    torch.save({"dtype": torch.complex64}, tmp_path / "c64.pt")
    if not hasattr(tapelab, "complex64"):
        with pytest.raises(pickle.UnpicklingError, match="GLOBAL torch.complex64 is allowed by PyTorch's weights-only "
                                                         "load, but tapelab has no dtype complex64"):
            load(tmp_path / "c64.pt")


def test_tapelab_whole_model_roundtrip(tmp_path):
    net = Net()
    nn.init.uniform_(net.bn.running_mean, -0.5, 0.5)
    net.eval()
    save(net, tmp_path / "net.pt")
    with pytest.raises(pickle.UnpicklingError, match=f"GLOBAL {Net.__module__}.Net was not an allowed global"):
        load(tmp_path / "net.pt")
    out = load(tmp_path / "net.pt", weights_only=False)
    assert type(out) is Net and not out.training and type(out.fc1.weight) is nn.Parameter
    for (k, a), (k2, b) in zip(net.state_dict().items(), out.state_dict().items()):
        assert k == k2 and a.dtype == b.dtype
        np.testing.assert_array_equal(_np(a), _np(b))
    x = tapelab.randn(5, 4)
    np.testing.assert_array_equal(_np(out(x)), _np(net(x)))


def test_cuda_tensors_save_their_location_and_map_back(monkeypatch):
    """On the simulated cuda:0 (numpy behind tapelab's cuda device): saved locations and map_location."""
    from tapelab._backend import simulated_cuda
    from tapelab.serialization import _storage
    monkeypatch.setattr(_storage, "cuda_available", lambda: True)
    with simulated_cuda(0):
        w = tapelab.arange(6.0).reshape(2, 3).to("cuda")
        for obj, name in (({"w": w, "epoch": 1}, None), ({"w": w}, "w.safetensors")):  # PyTorch's zip, safetensors
            buf = io.BytesIO()
            if name:
                buf.name = name
            save(obj, buf)
            for where, expected in [(None, "cuda:0"), ("cpu", "cpu"), ({"cuda:0": "cpu"}, "cpu"),
                                    (lambda storage, loc: storage, "cpu"),
                                    (lambda storage, loc: storage.cuda(0), "cuda:0")]:
                buf.seek(0)
                out = load(buf, map_location=where)["w"]
                assert str(out.device) == expected and out.tolist() == w.tolist()

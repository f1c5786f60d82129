"""save/load: round trips of tensors, containers and modules, the format each object is written in,
and refusal of every damaged file. (PyTorch-written checkpoints: test_checkpoints_pt.py.)"""
import io
import json
import math
import os
import pickle
import struct
from collections import OrderedDict

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import tapelab
from tapelab.serialization import CheckpointError, load, save

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    return load(buf, **kw)


def _same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, tapelab.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (2, 3, 4)])
def test_tensor_roundtrip_keeps_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal(shape) * 50).astype(dtype)
    t = tapelab.tensor(arr)
    _same(_roundtrip(t), t)


def test_non_contiguous_and_views():
    base = tapelab.arange(12.0).reshape(3, 4)
    obj = {"t": base.t(), "row": base[1], "cols": base[:, ::2]}
    _same(_roundtrip(obj), {k: v.contiguous() for k, v in obj.items()})


def test_nested_structures_roundtrip():
    """What a weights-only load accepts: tensors, containers, numbers, strings, dtypes, devices."""
    obj = OrderedDict(
        weights={"a.weight": tapelab.randn(3, 2), "a.bias": tapelab.zeros(2)},
        state={0: {"step": tapelab.tensor(3.0), "buf": tapelab.ones(2)}, 7: {}},
        groups=[{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 7], "nesterov": False, "name": None}],
        numbers=[1, -2 ** 70, 1.5, float("inf"), -float("inf"), float("nan"), True, False, None],
        text="ünïcode \"quoted\" \n newline", empty=([], (), {}), nested=((1, (2, [3])),),
        keys={1.5: "float key", True: "bool key", None: "none key", (1, "a"): "tuple key", "s": 1},
        dtype=tapelab.float16, device=tapelab.device("cpu"), size=tapelab.Size([2, 3]), counts={1, 2})
    out = _roundtrip(obj)
    _same(out, obj)
    assert type(out) is OrderedDict and type(out["weights"]) is dict and type(out["size"]) is tapelab.Size


def test_numpy_values_need_weights_only_false_as_in_pytorch():
    obj = {"array": np.arange(4, dtype=np.int16), "np_scalar": np.float64(2.5), "w": tapelab.ones(2)}
    with pytest.raises(pickle.UnpicklingError, match="(?s)Weights only load failed.*GLOBAL numpy"):
        _roundtrip(obj)
    _same(_roundtrip(obj, weights_only=False), obj)


def test_shared_tensor_stays_shared_and_requires_grad_is_kept_as_torch():
    t = tapelab.randn(3, requires_grad=True)
    out = _roundtrip({"a": t, "b": [t], "c": t.detach()})
    assert out["a"] is out["b"][0] and out["a"] is not out["c"]
    assert out["a"].requires_grad and out["a"].is_leaf and not out["c"].requires_grad


def test_paths_and_file_objects(tmp_path):
    obj = {"w": tapelab.randn(4, 4)}
    path = tmp_path / "ckpt.tl"
    save(obj, path)
    _same(load(path), obj)
    save(obj, str(path))
    _same(load(str(path)), obj)
    assert os.listdir(tmp_path) == ["ckpt.tl"]  # no temporary file left behind
    with open(path, "wb") as f:
        save(obj, f)
    with open(path, "rb") as f:
        _same(load(f), obj)


def test_map_location():
    t = tapelab.ones(2)
    assert _roundtrip(t, map_location="cpu").device == tapelab.device("cpu")
    assert _roundtrip(t, map_location={"cuda:0": "cpu"}).device == tapelab.device("cpu")
    assert _roundtrip(t, map_location=tapelab.device("cpu")).device == tapelab.device("cpu")
    assert _roundtrip(t, map_location=lambda storage, loc: storage).device == tapelab.device("cpu")
    assert _roundtrip([t], map_location=lambda storage, loc: None)[0].device == tapelab.device("cpu")
    with pytest.raises(TypeError, match="map_location"):
        _roundtrip({}, map_location=3)
    with pytest.raises(TypeError, match="map_location returned"):
        _roundtrip([t], map_location=lambda storage, loc: "cpu")


def _forge(tree, arrays):
    """A well-formed, correctly hashed file with a hand-written tree (what a tool could write)."""
    from tapelab.serialization import _safetensors
    meta = {"format": "tapelab", "tapelab.version": "1", "tapelab.tree": json.dumps(tree)}
    meta["tapelab.sha256"] = _safetensors.digest(meta, arrays)
    return io.BytesIO(safetensors.numpy.save(arrays, metadata=meta))


@pytest.mark.skipif(tapelab.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_tensor_without_cuda_asks_for_map_location():
    f = _forge({"tensor": "0", "device": "cuda:0", "grad": False, "param": False}, {"0": np.ones(2)})
    with pytest.raises(RuntimeError, match=r"torch.cuda.is_available\(\) is False.*map_location=torch.device\('cpu'\)"):
        load(f)
    f.seek(0)
    assert load(f, map_location="cpu").tolist() == [1.0, 1.0]


def _safetensors_target() -> io.BytesIO:
    """A buffer named like a safetensors file: where save writes a state dict as safetensors."""
    buf = io.BytesIO()
    buf.name = "weights.safetensors"
    return buf


def test_format_follows_the_name_and_the_object():
    """A state dict written to a ``.safetensors`` name is safetensors (any safetensors reader sees its keys);
    anything else, a state dict saved elsewhere included, is PyTorch's zip, which torch.load reads."""
    import torch
    sd = OrderedDict(w=tapelab.randn(2, 3), b=tapelab.zeros(3, dtype=tapelab.int64))
    sd["tied"] = sd["w"]
    buf = _safetensors_target()
    save(sd, buf)
    assert buf.getvalue()[8:9] == b"{"
    assert sorted(safetensors.numpy.load(buf.getvalue())) == ["b", "w"]
    out = load(io.BytesIO(buf.getvalue()))
    assert list(out) == ["w", "b", "tied"] and out["tied"] is out["w"]
    plain = io.BytesIO()
    save(sd, plain)
    assert plain.getvalue()[:4] == b"PK\x03\x04"
    plain.seek(0)
    theirs = torch.load(plain)
    assert list(theirs) == ["w", "b", "tied"] and theirs["tied"].data_ptr() == theirs["w"].data_ptr()
    for obj in ({"w": tapelab.ones(1), "epoch": 3}, [tapelab.ones(1)], tapelab.ones(1), {1: tapelab.ones(1)}, 3):
        buf = io.BytesIO()
        save(obj, buf)
        assert buf.getvalue()[:4] == b"PK\x03\x04", obj


def test_save_rejects_what_pickle_cannot_store():
    with pytest.raises((pickle.PicklingError, AttributeError)):
        save({"f": lambda x: x}, io.BytesIO())

    class Sub(tapelab.Tensor):   # a subclass is saved by reference to its class, as PyTorch: a local one cannot be
        pass
    with pytest.raises((pickle.PicklingError, AttributeError), match="Sub"):
        save([Sub([1.0])], io.BytesIO())


# ---------------------------------------------------------------- damaged and foreign files
def _checkpoint_bytes():
    buf = _safetensors_target()
    save({"w": tapelab.arange(6.0).reshape(2, 3), "step": tapelab.tensor(3),
          "mask": tapelab.ones(2, dtype=tapelab.bool)}, buf)
    return buf.getvalue()


def _refused(data, match=None, name="bad.ckpt"):
    f = io.BytesIO(data)
    f.name = name
    with pytest.raises(CheckpointError, match=match) as info:
        load(f)
    assert isinstance(info.value, RuntimeError) and name in str(info.value)
    return info.value


def test_empty_and_tiny_files():
    _refused(b"", "empty")
    _refused(b"\x01\x02\x03", "not a checkpoint")


@pytest.mark.parametrize("keep", [8, 9, 50, -100, -1])
def test_truncated(keep):
    data = _checkpoint_bytes()
    _refused(data[:keep], "truncated|corrupt")


def test_trailing_bytes():
    _refused(_checkpoint_bytes() + b"\0" * 8, "corrupt")


def test_every_single_bit_flip_is_detected():
    data = _checkpoint_bytes()
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            try:
                load(io.BytesIO(bytes(flipped)))
            except CheckpointError:
                continue
            pytest.fail(f"a flip of bit {bit} in byte {i} of {len(data)} loaded silently")


def test_data_bit_flip_names_the_checksum():
    data = bytearray(_checkpoint_bytes())
    data[-3] ^= 0x10
    _refused(bytes(data), "checksum mismatch")


def test_random_bytes():
    _refused(np.random.default_rng(0).bytes(4096), "not a checkpoint")


def test_header_that_is_not_json():
    junk = b"{not json" + b" " * 7
    _refused(struct.pack("<Q", len(junk)) + junk, "unreadable header")


def _zip_bytes():
    buf = io.BytesIO()
    save({"w": tapelab.arange(6.0), "epoch": 3}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("keep", [4, 100, -30])
def test_truncated_zip_archives(keep):
    _refused(_zip_bytes()[:keep], "corrupt or truncated zip|not a checkpoint|damaged|missing")


def test_zip_storage_bit_flip_fails_its_crc():
    data = bytearray(_zip_bytes())
    at = bytes(data).index(np.arange(6.0, dtype=np.float32).tobytes())
    data[at + 5] ^= 0x04
    _refused(bytes(data), "damaged record archive/data/0")


def test_zip_without_a_pickle_and_torchscript_archives():
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("m/code/__torch__.py", "")
        zf.writestr("m/constants.pkl", b"")
    _refused(buf.getvalue(), "TorchScript")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("notes/readme.txt", "hi")
    _refused(buf.getvalue(), "without notes/data.pkl")


def test_plain_pickles_are_not_checkpoints():
    _refused(pickle.dumps({"a": 1}, protocol=2), "not a checkpoint")
    _refused(pickle.dumps(os.system, protocol=5), "not a checkpoint")


def test_plain_safetensors_file_loads_as_a_dict(tmp_path):
    path = tmp_path / "model.safetensors"
    safetensors.torch.save_file({"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(2, dtype=torch.int64)}, path)
    out = load(path)
    assert sorted(out) == ["b", "w"]
    assert out["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and out["b"].dtype == tapelab.int64


def test_forged_tree_errors_are_checkpoint_errors():
    with pytest.raises(CheckpointError, match="malformed object tree"):
        load(_forge({"tensor": "9", "device": "cpu", "grad": False, "param": False}, {"0": np.ones(1)}))
    with pytest.raises(CheckpointError, match="malformed object tree"):
        load(_forge({"exec": "import os"}, {}))


def test_optimizer_and_scheduler_state_roundtrip():
    p = tapelab.randn(3, requires_grad=True)
    opt = tapelab.optim.Adam([p], lr=0.1)
    sched = tapelab.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10)
    p.grad = tapelab.ones(3)
    opt.step()
    sched.step()
    out = _roundtrip({"opt": opt.state_dict(), "sched": sched.state_dict()})
    assert out["opt"]["param_groups"] == opt.state_dict()["param_groups"]
    assert out["sched"] == sched.state_dict()
    _same(out["opt"]["state"], opt.state_dict()["state"])


def test_header_length_that_starts_like_a_pickle_still_loads():
    for n in range(1, 1200):
        buf = _safetensors_target()
        save({"k" * n: tapelab.ones(1)}, buf)
        if buf.getvalue()[:2] == b"\x80\x02":
            buf.seek(0)
            assert list(load(buf)) == ["k" * n]
            return
    pytest.fail("no header of length 0x0280 was produced")


def test_parameters_and_module_state_dicts():
    p = tapelab.nn.Parameter(tapelab.ones(2))
    out = _roundtrip({"p": p})
    assert isinstance(out["p"], tapelab.nn.Parameter) and out["p"].requires_grad
    model = tapelab.nn.Linear(3, 2)
    sd = _roundtrip(model.state_dict())
    assert type(sd) is type(model.state_dict()) and list(sd) == ["weight", "bias"]
    other = tapelab.nn.Linear(3, 2)
    other.load_state_dict(sd)
    np.testing.assert_array_equal(np.asarray(other.weight.detach()), np.asarray(model.weight.detach()))


def test_the_archive_is_laid_out_as_torch_save_lays_it_out():
    """The same checkpoint makes a file of the same size with the same records at the same offsets as
    torch.save's (its .format_version, .storage_alignment and .data/serialization_id records, data
    descriptors and zip64 end records), and a path's archive folder is its name without the suffix."""
    import zipfile
    import torch

    def written(m, target):
        obj = {"w": m.ones(3), "view": m.arange(10.0).reshape(2, 5)[:, 1:], "epoch": 3, "name": "run"}
        m.save(obj, target)
        return target

    ours, theirs = written(tapelab, io.BytesIO()), written(torch, io.BytesIO())
    assert len(ours.getvalue()) == len(theirs.getvalue())
    layout = [[(i.filename, i.file_size, i.header_offset, i.flag_bits) for i in zipfile.ZipFile(b).infolist()]
              for b in (ours, theirs)]
    assert layout[0] == layout[1]
    assert zipfile.ZipFile(ours).read("archive/.data/serialization_id").isdigit()
    assert tapelab.serialization.PyTorchFileReader(ours).serialization_id() == \
        zipfile.ZipFile(ours).read("archive/.data/serialization_id").decode()


def test_the_archive_folder_of_a_path_is_its_stem_and_zip64_fields_read_back(tmp_path, monkeypatch):
    """``ckpt.pth.tar`` is written under ``ckpt.pth/`` as torch.save names it; past the 4 GiB limit (lowered
    here to 100 bytes) sizes and offsets move to zip64 fields that Python's zipfile and torch.load read."""
    import zipfile
    import torch
    from tapelab.serialization import _zipformat
    path = tmp_path / "ckpt.pth.tar"
    tapelab.save({"w": tapelab.arange(64.0), "epoch": 3}, path)
    assert zipfile.ZipFile(path).namelist()[0] == "ckpt.pth/data.pkl"
    monkeypatch.setattr(_zipformat, "_ZIP64_LIMIT", 100)
    tapelab.save({"w": tapelab.arange(64.0), "epoch": 3}, path)
    assert zipfile.ZipFile(path).testzip() is None
    got = torch.load(path)
    assert got["epoch"] == 3 and got["w"].tolist() == list(range(64))

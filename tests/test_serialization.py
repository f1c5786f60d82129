"""save/load: round trips of tensors and plain containers, and refusal of every damaged file."""
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
    obj = OrderedDict(
        weights={"a.weight": tapelab.randn(3, 2), "a.bias": tapelab.zeros(2)},
        state={0: {"step": tapelab.tensor(3.0), "buf": tapelab.ones(2)}, 7: {}},
        groups=[{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 7], "nesterov": False, "name": None}],
        numbers=[1, -2 ** 70, 1.5, float("inf"), -float("inf"), float("nan"), True, False, None],
        text="ünïcode \"quoted\" \n newline", empty=([], (), {}), nested=((1, (2, [3])),),
        keys={1.5: "float key", True: "bool key", None: "none key", (1, "a"): "tuple key", "s": 1},
        dtype=tapelab.float16, device=tapelab.device("cpu"), array=np.arange(4, dtype=np.int16),
        np_scalar=np.float64(2.5))
    out = _roundtrip(obj)
    expected = OrderedDict(obj, np_scalar=2.5)
    _same(out, expected)
    assert type(out) is OrderedDict and type(out["weights"]) is dict


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
    with pytest.raises(TypeError, match="map_location"):
        _roundtrip(t, map_location=lambda storage, loc: storage)
    with pytest.raises(TypeError, match="map_location"):
        _roundtrip({}, map_location=3)


def _forge(tree, arrays):
    """A well-formed, correctly hashed file with a hand-written tree (what a tool could write)."""
    from tapelab import serialization as s
    meta = {"format": "tapelab", "tapelab.version": "1", "tapelab.tree": json.dumps(tree)}
    meta["tapelab.sha256"] = s._digest(meta, arrays)
    return io.BytesIO(safetensors.numpy.save(arrays, metadata=meta))


@pytest.mark.skipif(tapelab.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_tensor_without_cuda_asks_for_map_location():
    f = _forge({"tensor": "0", "device": "cuda:0", "grad": False, "param": False}, {"0": np.ones(2)})
    with pytest.raises(CheckpointError, match="map_location='cpu'"):
        load(f)
    f.seek(0)
    assert load(f, map_location="cpu").tolist() == [1.0, 1.0]


def test_save_rejects_what_it_cannot_store_without_pickle():
    with pytest.raises(TypeError, match=r"cannot save object at obj\['model'\]\['f'\]"):
        save({"model": {"f": object()}}, io.BytesIO())
    with pytest.raises(TypeError, match="set"):
        save({1, 2}, io.BytesIO())


# ---------------------------------------------------------------- damaged and foreign files
def _checkpoint_bytes():
    buf = io.BytesIO()
    save({"w": tapelab.arange(6.0).reshape(2, 3), "meta": {"epoch": 3, "name": "run"}, "n": [1, (2, 3)]}, buf)
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
    _refused(b"\x01\x02\x03", "too short")


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
    _refused(np.random.default_rng(0).bytes(4096), "truncated|not a tapelab checkpoint|corrupt")


def test_header_that_is_not_json():
    junk = b"{not json" + b" " * 7
    _refused(struct.pack("<Q", len(junk)) + junk, "unreadable header")


def test_pytorch_zip_checkpoint_is_refused_with_a_conversion_hint(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(CheckpointError, match="PyTorch zip checkpoint.*does not unpickle.*safetensors") as info:
        load(path)
    assert "model.pt" in str(info.value)


def test_legacy_pickle_checkpoints_are_refused():
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=False)
    _refused(buf.getvalue(), "pickle")
    _refused(pickle.dumps({"a": 1}, protocol=2), "pickle")
    _refused(pickle.dumps(os.system, protocol=5), "pickle")


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
    for n in range(0, 1200, 1):
        buf = io.BytesIO()
        save({"s": "x" * n}, buf)
        if buf.getvalue()[:2] == b"\x80\x02":
            buf.seek(0)
            assert load(buf) == {"s": "x" * n}
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

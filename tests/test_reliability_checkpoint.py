"""Issue 16, defects 5 and 6: checkpoint writes are atomic and durable; bad files raise CheckpointError.

Saving: symlinks are written through, permission bits are kept, stale temp files of dead
processes are cleaned, concurrent saves of one path never raise and leave one complete
checkpoint, and a save killed mid-way (SIGKILL) keeps the previous checkpoint readable.
Loading: foreign dtypes (BF16, F8, U16), a deeply nested header and crafted object trees all
raise ``CheckpointError`` naming the problem.
"""
import io
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import safetensors.numpy

import tapelab
from tapelab.serialization import CheckpointError, _atomic, _safetensors

posix = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions, symlinks and signals")


def _sd(value: float, n: int = 4):
    return {"w": tapelab.full((n,), value), "b": tapelab.full((2,), value)}


def _value(path) -> float:
    sd = tapelab.load(path)
    w = sd["w"].numpy()
    assert (w == w[0]).all() and (sd["b"].numpy() == w[0]).all(), "a mixed or partial checkpoint"
    return float(w[0])


def _temps(folder):
    return sorted(p for p in os.listdir(folder) if p.startswith(_atomic.TMP_PREFIX) or ".tmp" in p)


# ---------------------------------------------------------------- saving
def test_save_replaces_atomically_and_leaves_no_temp(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    tapelab.save(_sd(1.0), path)
    tapelab.save(_sd(2.0), path)
    assert _value(path) == 2.0
    assert _temps(tmp_path) == []


def test_save_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real(fd)
    monkeypatch.setattr(os, "fsync", spy)
    tapelab.save(_sd(1.0), tmp_path / "c.pt")
    assert synced == [False, True]       # the file before the rename, the directory after it


@posix
def test_save_through_symlink_writes_the_target(tmp_path):
    real = tmp_path / "store" / "weights.safetensors"
    real.parent.mkdir()
    tapelab.save(_sd(1.0), real)
    link = tmp_path / "latest.safetensors"
    link.symlink_to(real)
    tapelab.save(_sd(2.0), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _value(real) == 2.0 and _value(link) == 2.0
    assert _temps(tmp_path) == [] and _temps(real.parent) == []


@posix
def test_save_through_dangling_symlink_creates_the_target(tmp_path):
    real = tmp_path / "new.safetensors"
    link = tmp_path / "link.safetensors"
    link.symlink_to(real)
    tapelab.save(_sd(3.0), link)
    assert link.is_symlink() and _value(real) == 3.0


@posix
def test_resave_keeps_permission_bits(tmp_path):
    path = tmp_path / "secret.pt"
    tapelab.save(_sd(1.0), path)
    os.chmod(path, 0o600)
    tapelab.save(_sd(2.0), path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o640)
    tapelab.save({"epoch": 3, "w": tapelab.ones(1)}, path)       # the zip format too
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


@posix
def test_new_file_gets_open_default_mode(tmp_path):
    old = os.umask(0o027)
    try:
        tapelab.save(_sd(1.0), tmp_path / "fresh.pt")
        with open(tmp_path / "plain", "wb"):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "fresh.pt").st_mode) == stat.S_IMODE(os.stat(tmp_path / "plain").st_mode)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@posix
def test_stale_temp_files_of_dead_processes_are_cleaned(tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f"{_atomic.TMP_PREFIX}{dead}-abc.tmp"
    old_style = tmp_path / f"ckpt.pt.tmp{dead}"
    live = tmp_path / f"{_atomic.TMP_PREFIX}{os.getppid()}-xyz.tmp"     # a running process's save
    own = tmp_path / f"{_atomic.TMP_PREFIX}{os.getpid()}-xyz.tmp"       # another thread's save in flight
    for p in (stale, old_style, live, own):
        p.write_bytes(b"partial")
    tapelab.save(_sd(1.0), tmp_path / "ckpt.pt")
    assert not stale.exists() and not old_style.exists()
    assert live.exists() and own.exists()


@posix
def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    tapelab.save(_sd(1.0), path)
    script = textwrap.dedent(f"""
        import os, signal, tapelab
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)   # die after writing, before the rename
        tapelab.save({{"w": tapelab.full((4,), 2.0), "b": tapelab.full((2,), 2.0)}}, {str(path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert _value(path) == 1.0                       # the previous checkpoint, intact
    assert len(_temps(tmp_path)) == 1                # the killed save's temp file
    tapelab.save(_sd(3.0), path)
    assert _temps(tmp_path) == [] and _value(path) == 3.0


@pytest.mark.parametrize("fmt", ["safetensors", "zip"])
def test_concurrent_saves_of_one_path(tmp_path, fmt):
    path = tmp_path / "shared.pt"
    errors = []
    start = threading.Barrier(4)

    def saver(k):
        try:
            start.wait()
            for i in range(10):
                v = float(k * 100 + i)
                obj = _sd(v, 256) if fmt == "safetensors" else {**_sd(v, 256), "epoch": i}
                tapelab.save(obj, path)
        except BaseException as e:   # noqa: BLE001 - the test reports any failure
            errors.append(e)

    threads = [threading.Thread(target=saver, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _value(path) in {float(k * 100 + 9) for k in range(4)}
    assert _temps(tmp_path) == []


def test_failed_save_leaves_old_file_and_no_temp(tmp_path):
    path = tmp_path / "ckpt.pt"
    tapelab.save(_sd(1.0), path)

    class Unpicklable:
        def __reduce__(self):
            raise TypeError("nope")
    with pytest.raises(Exception):
        tapelab.save({"x": Unpicklable()}, path)
    assert _value(path) == 1.0 and _temps(tmp_path) == []


# ---------------------------------------------------------------- loading bad files
_SIZES = {"BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F6_E2M3": 1, "U16": 2, "U32": 4,
          "C64": 8}


def _foreign(dtype: str, n: int = 3) -> bytes:
    header = json.dumps({"t": {"dtype": dtype, "shape": [n], "data_offsets": [0, n * _SIZES[dtype]]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * (n * _SIZES[dtype])


@pytest.mark.parametrize("dtype", ["F8_E8M0", "F6_E2M3"])
def test_foreign_dtype_names_the_dtype(dtype):
    with pytest.raises(CheckpointError, match=f"dtype {dtype}"):
        tapelab.load(io.BytesIO(_foreign(dtype)))


@pytest.mark.parametrize("dtype", ["F16", "BF16", "C64", "F8_E4M3", "F8_E5M2", "U16", "U32"])
def test_foreign_supported_dtype_loads(dtype):
    t = tapelab.load(io.BytesIO(_foreign(dtype)))["t"]
    assert t.dtype == {"F16": tapelab.float16, "BF16": tapelab.bfloat16, "C64": tapelab.complex64,
                       "F8_E4M3": tapelab.float8_e4m3fn, "F8_E5M2": tapelab.float8_e5m2, "U16": tapelab.uint16,
                       "U32": tapelab.uint32}[dtype]
    assert t.shape == (3,)


@pytest.mark.parametrize("where", ["metadata", "tensor entry"])
def test_deeply_nested_header(where):
    deep = b"[" * 100_000 + b"]" * 100_000
    body = b'{"__metadata__": ' + deep + b"}" if where == "metadata" else \
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "x": ' + deep + b"}"
    with pytest.raises(CheckpointError, match="nests too deeply"):
        tapelab.load(io.BytesIO(struct.pack("<Q", len(body)) + body + b"\0" * 4))


def _crafted(tree) -> bytes:
    arrays = {"w": np.ones(2, np.float32), "i": np.ones(2, np.int64)}
    md = {"format": "tapelab", "tapelab.version": "1",
          "tapelab.tree": tree if isinstance(tree, str) else json.dumps(tree)}
    md["tapelab.sha256"] = _safetensors.digest(md, arrays)     # a valid checksum: only the tree is bad
    return safetensors.numpy.save(arrays, metadata=md)


def _tensor_node(name="w", device="cpu", grad=False, param=False):
    return {"dict": [["k", {"tensor": name, "device": device, "grad": grad, "param": param}]]}


@pytest.mark.parametrize("tree, match", [
    (_tensor_node(device="bogus:7"), "bad device 'bogus:7'"),
    (_tensor_node(device=5), "device string"),
    (_tensor_node("i", grad=True), "int64 is marked requires_grad"),
    (_tensor_node("i", grad=True, param=True), "int64 is marked requires_grad"),
    (_tensor_node(grad="no"), "two booleans"),
    (_tensor_node("missing"), "KeyError"),
    ({"device": "nope"}, "bad device 'nope'"),
    ({"dtype": "nope"}, "malformed object tree"),
    ({}, "malformed tree node"),
    ({"dict": [[[1], 2]]}, "unhashable"),
    ({"tensor": [1], "device": "cpu", "grad": False, "param": False}, "malformed object tree"),
    ("[" * 100_000 + "]" * 100_000, "RecursionError"),
])
def test_crafted_tree_raises_checkpoint_error(tree, match):
    with pytest.raises(CheckpointError, match=match):
        tapelab.load(io.BytesIO(_crafted(tree)))


def test_well_formed_crafted_tree_still_loads():
    sd = tapelab.load(io.BytesIO(_crafted(_tensor_node(grad=True, param=True))))
    assert sd["k"].dtype == tapelab.float32
    assert isinstance(sd["k"], tapelab.nn.Parameter) and sd["k"].requires_grad

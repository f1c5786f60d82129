"""PyTorch's checkpoint archive (``torch.save`` since 1.6): a zip of ``<name>/data.pkl`` (the
pickle), ``<name>/data/<key>`` (each storage's raw bytes), ``<name>/byteorder`` and
``<name>/version``.

Records are stored uncompressed, each storage starting on a 64-byte boundary as PyTorch writes
them, so ``torch.load(..., mmap=True)`` can map them.
"""
from __future__ import annotations

import io
import os
import struct
import sys
import zipfile

import numpy as np

from ._errors import CheckpointError
from ._pickler import TorchPickler
from ._storage import checked_storage_id, place

_ALIGN = 64
_VERSION = b"3\n"


# ---------------------------------------------------------------- write
def save(obj, f, protocol: int, byteorder_record: bool = True) -> None:
    """Pickle ``obj`` with PyTorch's names and write the archive to the binary file ``f``."""
    data = io.BytesIO()
    pickler = TorchPickler(data, protocol)
    pickler.dump(obj)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        _write(zf, "archive/data.pkl", data.getbuffer())
        if byteorder_record:
            _write(zf, "archive/byteorder", sys.byteorder.encode())
        for key, ref in pickler.storages.items():
            _write(zf, f"archive/data/{key}", ref.array.view(np.uint8) if ref.array.size else b"")
        _write(zf, "archive/version", _VERSION)


def _write(zf: zipfile.ZipFile, name: str, data) -> None:
    """One stored record whose data starts on a 64-byte boundary (padding in an extra field, as PyTorch's)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.file_size = len(memoryview(data).cast("B"))
    zip64 = 20 if info.file_size * 1.05 > zipfile.ZIP64_LIMIT else 0
    header = 30 + len(name.encode()) + 4 + zip64
    pad = -(zf.fp.tell() + header) % _ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with zf.open(info, "w", force_zip64=bool(zip64)) as out:
        out.write(data)


# ---------------------------------------------------------------- read
def load(where: str, data: bytes, map_location, make_unpickler):
    """The object in a PyTorch archive; ``make_unpickler(file, load_storage)`` chooses how much to trust it."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except Exception as e:          # (BadZipFile, EOFError, NotImplementedError for a damaged version field...)
        raise CheckpointError(where, f"corrupt or truncated zip archive ({type(e).__name__}: {e})") from None
    prefix = names[0].split("/")[0] if names else ""
    if f"{prefix}/constants.pkl" in names:
        raise CheckpointError(where, "this is a TorchScript archive (torch.jit.save); tapelab loads "
                                     "torch.save checkpoints only")
    if f"{prefix}/data.pkl" not in names:
        raise CheckpointError(where, f"a zip file without {prefix}/data.pkl is not a PyTorch checkpoint")
    byteorder = _record(zf, where, f"{prefix}/byteorder") if f"{prefix}/byteorder" in names else b"little"
    if byteorder not in (b"little", b"big"):
        raise CheckpointError(where, f"unknown byte order {byteorder!r}")
    storages: dict = {}

    def load_storage(pid):
        storage_type, key, location, numel = checked_storage_id(where, pid, 5)[:4]
        if key not in storages:
            dtype = np.dtype(storage_type.dtype.np).newbyteorder("<" if byteorder == b"little" else ">")
            raw = _record(zf, where, f"{prefix}/data/{key}")
            if len(raw) != numel * dtype.itemsize:
                raise CheckpointError(where, f"storage {key} holds {len(raw)} bytes; {numel} elements of "
                                             f"{storage_type.dtype} need {numel * dtype.itemsize}")
            array = np.frombuffer(bytearray(raw), dtype).astype(dtype.newbyteorder("="), copy=False)
            storages[key] = place(array, location, map_location)
        return storages[key]

    return make_unpickler(io.BytesIO(_record(zf, where, f"{prefix}/data.pkl")), load_storage).load()


def _record(zf: zipfile.ZipFile, where: str, name: str) -> bytes:
    try:
        return zf.read(name)
    except KeyError:
        raise CheckpointError(where, f"missing record {name}") from None
    except Exception as e:
        # zipfile reads a damaged record in many ways: a flipped bit turns the compression method
        # into one it lacks (NotImplementedError), sets the encryption flag (RuntimeError), or
        # corrupts the deflate/bzip2/lzma stream (zlib.error, OSError, LZMAError), besides BadZipFile
        raise CheckpointError(where, f"damaged record {name} ({type(e).__name__}: {e})") from None


# ---------------------------------------------------------------- records
class PyTorchFileReader:
    """``torch.PyTorchFileReader``: the records of a checkpoint archive by their name under its top
    folder (``"data.pkl"``, ``"data/0"``), for code that reads an archive itself (lazy loaders)."""

    def __init__(self, f) -> None:
        self._where = str(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file>")
        try:
            self._zip = zipfile.ZipFile(f)
        except Exception as e:
            raise RuntimeError(f"PyTorchFileReader failed reading zip archive {self._where}: {e}") from None
        names = self._zip.namelist()
        self._prefix = names[0].split("/")[0] + "/" if names else ""

    def get_all_records(self) -> list[str]:
        return [n[len(self._prefix):] for n in self._zip.namelist()]

    def has_record(self, name: str) -> bool:
        return self._prefix + name in self._zip.namelist()

    def get_record(self, name: str) -> bytes:
        return _record(self._zip, self._where, self._prefix + name)

    def serialization_id(self) -> str:
        return ""

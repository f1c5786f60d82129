"""PyTorch's checkpoint archive (``torch.save`` since 1.6): a zip of ``<name>/data.pkl`` (the
pickle), ``<name>/.format_version``, ``<name>/.storage_alignment``, ``<name>/byteorder``,
``<name>/data/<key>`` (each storage's raw bytes), ``<name>/version`` and
``<name>/.data/serialization_id``.

Records are stored uncompressed, each storage starting on a 64-byte boundary as PyTorch writes
them, so ``torch.load(..., mmap=True)`` can map them; the archive is laid out byte for byte as
PyTorch's writer lays it out, so the same object makes a file of the same size.
"""
from __future__ import annotations

import io
import os
import struct
import sys
import zipfile
import zlib

import numpy as np

from ._errors import CheckpointError
from ._pickler import TorchPickler
from ._storage import checked_storage_id, place

_ALIGN = 64
_VERSION = b"3\n"
_FORMAT_VERSION = b"1"
_ZIP64_LIMIT = 0xFFFFFFFF    # a size or offset from here on takes zip64's 8-byte fields
_FLAGS = 0x0808              # sizes in a data descriptor after the data; UTF-8 names


# ---------------------------------------------------------------- write
def save(obj, f, protocol: int, byteorder_record: bool = True, archive: str = "archive",
         pickler: type = TorchPickler, extra: dict[str, bytes] | None = None) -> None:
    """Pickle ``obj`` with PyTorch's names and write the archive to the binary file ``f``: the records
    PyTorch writes, in its order (``archive`` is PyTorch's top folder: a path's file name without its
    last suffix, ``archive`` for a file object); ``extra`` adds ``<archive>/extra/<name>`` records,
    where TorchScript archives keep ``torch.jit.save``'s extra files."""
    data = io.BytesIO()
    pickler = pickler(data, protocol)
    pickler.dump(obj)
    zf = _ZipWriter(f)
    zf.write(f"{archive}/data.pkl", data.getbuffer())
    zf.write(f"{archive}/.format_version", _FORMAT_VERSION)
    zf.write(f"{archive}/.storage_alignment", str(_ALIGN).encode())
    if byteorder_record:
        zf.write(f"{archive}/byteorder", sys.byteorder.encode())
    for key, ref in pickler.storages.items():
        zf.write(f"{archive}/data/{key}", ref.array.view(np.uint8) if ref.array.size else b"")
    for name, blob in (extra or {}).items():
        zf.write(f"{archive}/extra/{name}", blob)
    zf.write(f"{archive}/version", _VERSION)
    zf.write(f"{archive}/.data/serialization_id", _serialization_id())
    zf.close()


def _serialization_id() -> bytes:
    """40 decimal digits, fresh per file, as PyTorch's (two random 64-bit numbers, 20 digits each)."""
    return "".join(str(int.from_bytes(os.urandom(8), "little")).zfill(20) for _ in range(2)).encode()


class _ZipWriter:
    """The zip layout PyTorch's writer (miniz) produces, so a checkpoint is the same size and shape as
    torch.save's: stored records, each one's data on a 64-byte boundary (padding in an ``FB`` extra
    field), its CRC and sizes in a data descriptor after it, then the central directory and zip64's
    end records; a record or offset past 4 GiB takes zip64's 8-byte fields."""

    def __init__(self, f):
        self.f, self.entries = f, []
        self.start = f.tell() if f.seekable() else 0
        self.at = 0

    def _out(self, data) -> None:
        self.f.write(data)
        self.at += len(data)

    def write(self, name: str, data) -> None:
        raw, encoded = memoryview(data).cast("B"), name.encode()
        offset = self.at
        pad = -(self.start + offset + 30 + len(encoded) + 4) % _ALIGN
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        self._out(struct.pack("<4s5H3L2H", b"PK\x03\x04", 0, _FLAGS, 0, 0, 0, 0, 0, 0, len(encoded), len(extra)))
        self._out(encoded + extra)
        self._out(raw)
        crc, size = zlib.crc32(raw), len(raw)
        if size >= _ZIP64_LIMIT:
            self._out(struct.pack("<4sL2Q", b"PK\x07\x08", crc, size, size))
        else:
            self._out(struct.pack("<4s3L", b"PK\x07\x08", crc, size, size))
        self.entries.append((encoded, crc, size, offset))

    def close(self) -> None:
        directory = self.at
        for encoded, crc, size, offset in self.entries:
            big = [v for v in (size, size, offset) if v >= _ZIP64_LIMIT]   # zip64's order: sizes, then offset
            extra = struct.pack("<2H", 1, 8 * len(big)) + struct.pack(f"<{len(big)}Q", *big) if big else b""
            self._out(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 0, 0, _FLAGS, 0, 0, 0, crc, _field(size),
                                  _field(size), len(encoded), len(extra), 0, 0, 0, 0, _field(offset)))
            self._out(encoded + extra)
        count, length, end = len(self.entries), self.at - directory, self.at
        self._out(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 0x031E, 0x2D, 0, 0, count, count, length, directory))
        self._out(struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1))
        self._out(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                              _field(length), _field(directory), 0))


def _field(value: int) -> int:
    """A 4-byte zip field: the value, or 0xFFFFFFFF saying that zip64's 8-byte field holds it."""
    return 0xFFFFFFFF if value >= _ZIP64_LIMIT else value


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

    def get_storage_from_record(self, name: str, numel: int, dtype):
        """The record as a 1-d tensor of ``numel`` elements of ``dtype`` (bytes for ``UntypedStorage``),
        as PyTorch's reader gives a storage's record to lazy loaders (Lightning's ``_lazy_load``)."""
        from ..core.creation import from_numpy
        from ..core.storage import UntypedStorage
        np_dtype = np.dtype(np.uint8) if dtype is UntypedStorage else dtype.np
        data = self.get_record(name)
        if len(data) < numel * np_dtype.itemsize:
            raise RuntimeError(f"PyTorchFileReader: record {name} of {self._where} holds {len(data)} bytes, "
                               f"fewer than {numel} elements of {np_dtype}")
        return from_numpy(np.frombuffer(bytearray(data[:numel * np_dtype.itemsize]), np_dtype))

    def serialization_id(self) -> str:
        """The id PyTorch writes into each archive (``.data/serialization_id``), or "" for one without it."""
        return self.get_record(".data/serialization_id").decode() if self.has_record(".data/serialization_id") else ""

"""Read a `pytorch_model.bin` state dict into numpy arrays, safely and without torch.

`torch.load` unpickles arbitrary Python objects, so a downloaded `.bin` can run any code. This
reader accepts only the zip format torch writes since 1.6 (`<name>/data.pkl` + one raw file per
storage) and unpickles `data.pkl` with an Unpickler whose `find_class` knows only the few globals a
state dict needs (the tensor rebuild functions, the typed storage classes, OrderedDict). Those
names resolve to stand-ins that build numpy arrays; any other global is refused with
UnsafePickleError before anything runs.

The file is not trusted in any other way either:
  * every stand-in a pickle can reach is made afresh for each file and is read-only (BUILD and
    SETATTR-style opcodes fail), so one file cannot change how a later file is decoded;
  * a storage must be stored uncompressed (as torch writes it) with exactly the bytes its pickle
    declares, so a small file cannot declare a large storage;
  * a tensor's size, offset and strides are checked against its storage before anything is
    copied: it may not reach past the storage nor hold more elements than the storage from its
    offset on (a stride-0 expansion of a small storage into a huge array);
  * the tensors of a file together may take at most twice the bytes its storages hold (a tied
    weight appears twice in a state dict); more can only come from one storage expanded many times.
"""
from __future__ import annotations

import collections
import io
import math
import os
import pickle
import types
import zipfile
from typing import Callable

import numpy as np
from bert_tf.errors import BertTfError

try:  # ml_dtypes ships with TensorFlow; without it bfloat16 is widened to float32.
    import ml_dtypes
    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BFLOAT16 = None


class TorchBinError(BertTfError, ValueError):
    """A `pytorch_model.bin` that is not a readable zip-format torch state dict."""


class UnsafePickleError(TorchBinError):
    """The pickle references a global outside the state-dict allowlist (it could run code)."""


# torch storage class -> (numpy dtype, or "bfloat16"; bytes per element in the file)
_STORAGE_DTYPES = types.MappingProxyType({
    "DoubleStorage": (np.float64, 8), "FloatStorage": (np.float32, 4), "HalfStorage": (np.float16, 2),
    "BFloat16Storage": ("bfloat16", 2), "LongStorage": (np.int64, 8), "IntStorage": (np.int32, 4),
    "ShortStorage": (np.int16, 2), "CharStorage": (np.int8, 1), "ByteStorage": (np.uint8, 1),
    "BoolStorage": (np.bool_, 1),
})
# A state dict's tensors may take this many times the bytes of its storages (a tied weight is listed twice).
_EXPANSION_LIMIT = 2


class _ReadOnly:
    """Base of every object a pickle can reach: no __dict__ and no settable attribute, so a BUILD
    opcode (or a `__setstate__`-style state) applied to it fails instead of changing it."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")


class _StorageType(_ReadOnly):
    """Stand-in for `torch.FloatStorage` & co: names the element type."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)


class _Storage(_ReadOnly):
    """One storage of the archive: its element type and its elements (a read-only numpy array)."""

    __slots__ = ("type_name", "array")

    def __init__(self, type_name: str, array: np.ndarray):
        object.__setattr__(self, "type_name", type_name)
        object.__setattr__(self, "array", array)


class _Function(_ReadOnly):
    """Stand-in for an allowed torch function, bound to the load of one file."""

    __slots__ = ("_function",)

    def __init__(self, function: Callable):
        object.__setattr__(self, "_function", function)

    def __call__(self, *args):
        return self._function(*args)


def _rebuild_parameter(data, *_unused):
    return data


def _is_int_tuple(value) -> bool:
    return isinstance(value, tuple) and all(type(n) is int and n >= 0 for n in value)


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickler limited to the allowlist; storages are read from the zip archive.

    Everything a pickle can reach is created here, per file: nothing it does outlives this load.
    """

    def __init__(self, archive: zipfile.ZipFile, prefix: str, path: str):
        self._archive, self._prefix, self._path = archive, prefix, path
        super().__init__(io.BytesIO(_read_member(archive, f"{prefix}data.pkl", path)))
        self._big_endian = False
        if f"{prefix}byteorder" in archive.namelist():
            self._big_endian = _read_member(archive, f"{prefix}byteorder", path).strip() == b"big"
        self._storages: dict[str, _Storage] = {}
        self.budget = _EXPANSION_LIMIT * _storage_bytes(archive, prefix)
        self._globals = {
            ("torch._utils", "_rebuild_tensor_v2"): _Function(self._rebuild_tensor),
            ("torch._utils", "_rebuild_tensor"): _Function(self._rebuild_tensor),
            ("torch._utils", "_rebuild_parameter"): _Function(_rebuild_parameter),
            ("collections", "OrderedDict"): collections.OrderedDict,  # a builtin type: immutable
            **{("torch", name): _StorageType(name) for name in _STORAGE_DTYPES},
        }

    def find_class(self, module: str, name: str):
        try:
            return self._globals[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self._path}: refusing to load: the pickle references {module}.{name}, which "
                "is not part of a plain tensor state dict (arbitrary pickles can run code)") from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and type(pid[4]) is int and pid[4] >= 0):
            raise UnsafePickleError(f"{self._path}: unexpected persistent id {pid!r:.80}")
        storage_type, key, numel = pid[1].name, pid[2], pid[4]
        if key not in self._storages:
            self._storages[key] = _Storage(storage_type, self._read_storage(key, storage_type, numel))
        storage = self._storages[key]
        if storage.type_name != storage_type or storage.array.size != numel:
            raise TorchBinError(f"{self._path}: storage {key} is declared twice, as {storage_type} of "
                                f"{numel} and as {storage.type_name} of {storage.array.size} elements")
        return storage

    def _read_storage(self, key: str, storage_type: str, numel: int) -> np.ndarray:
        member = f"{self._prefix}data/{key}"
        dtype, itemsize = _STORAGE_DTYPES[storage_type]
        size = _member_info(self._archive, member, self._path).file_size
        if size != numel * itemsize:
            raise TorchBinError(f"{self._path}: storage {key} declares {numel} {storage_type} elements "
                                f"({numel * itemsize} bytes) but {member} holds {size} bytes")
        raw = _read_member(self._archive, member, self._path)
        if dtype == "bfloat16":
            bits = np.frombuffer(raw, dtype=">u2" if self._big_endian else "<u2")
            if _BFLOAT16 is not None:
                return bits.astype(np.uint16).view(_BFLOAT16)
            return (bits.astype(np.uint32) << 16).view(np.float32)
        dtype = np.dtype(dtype).newbyteorder(">" if self._big_endian else "<")
        return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)

    def _rebuild_tensor(self, storage, offset, size, stride, *_unused) -> np.ndarray:
        """numpy equivalent of torch._utils._rebuild_tensor_v2 (strides are in elements); the layout is
        checked against the storage and the file's budget before anything is copied."""
        if not (isinstance(storage, _Storage) and type(offset) is int and offset >= 0
                and _is_int_tuple(size) and _is_int_tuple(stride) and len(size) == len(stride)):
            raise TorchBinError(f"{self._path}: invalid tensor layout: offset {offset!r:.40}, "
                                f"size {size!r:.80}, stride {stride!r:.80}")
        array, numel = storage.array, math.prod(size)
        if numel == 0:
            return np.zeros(size, dtype=array.dtype)
        end = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
        if end > array.size:
            raise TorchBinError(f"{self._path}: a tensor of shape {list(size)} (offset {offset}, stride "
                                f"{list(stride)}) reaches past its storage of {array.size} elements")
        if numel > array.size - offset:
            raise TorchBinError(f"{self._path}: a tensor of shape {list(size)} (stride {list(stride)}) "
                                f"expands a storage of {array.size} elements into {numel}")
        self._spend(numel * array.itemsize)
        view = np.lib.stride_tricks.as_strided(
            array[offset:], shape=size, strides=[s * array.itemsize for s in stride])
        return np.array(view)  # a contiguous copy, independent of the zip buffer

    def _spend(self, nbytes: int) -> None:
        if nbytes > self.budget:
            raise TorchBinError(f"{self._path}: its tensors take more than {_EXPANSION_LIMIT}x the bytes "
                                "its storages hold (storages reused to expand the file on loading)")
        self.budget -= nbytes


def _member_info(archive: zipfile.ZipFile, member: str, path: str) -> zipfile.ZipInfo:
    """The member's entry; refused unless stored uncompressed, as torch writes every member."""
    try:
        info = archive.getinfo(member)
    except KeyError:
        raise TorchBinError(f"{path}: {member} missing from the archive") from None
    if info.compress_type != zipfile.ZIP_STORED:
        raise TorchBinError(f"{path}: {member} is compressed (torch stores every member uncompressed; "
                            "a compressed one can expand far beyond the file)")
    return info


def _read_member(archive: zipfile.ZipFile, member: str, path: str) -> bytes:
    _member_info(archive, member, path)
    return archive.read(member)


def _storage_bytes(archive: zipfile.ZipFile, prefix: str) -> int:
    """Bytes of the archive's uncompressed storages (those held in the file as they are)."""
    return sum(info.file_size for info in archive.infolist()
               if info.filename.startswith(f"{prefix}data/") and info.compress_type == zipfile.ZIP_STORED)


def load_torch_bin(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a zip-format `pytorch_model.bin` state dict as {name: numpy array}; torch not needed.

    Raises UnsafePickleError for any pickle global outside the allowlist, TorchBinError for a
    legacy (pre-1.6, non-zip) file, a file that is not a state dict, or a tensor layout or storage
    size that does not fit the bytes the file holds (checked before anything is materialised).
    """
    path = os.fspath(path)
    if not zipfile.is_zipfile(path):
        raise TorchBinError(f"{path}: not a zip-format torch file (legacy torch.save files are not "
                            "read: re-save it with torch>=1.6, or use model.safetensors)")
    try:
        with zipfile.ZipFile(path) as archive:
            state, budget = _unpickle(archive, path)
    except zipfile.BadZipFile as e:
        raise TorchBinError(f"{path}: corrupt zip archive ({e})") from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()):
        raise TorchBinError(f"{path}: data.pkl is not a flat {{name: tensor}} state dict")
    if sum(v.nbytes for v in state.values()) > budget:
        raise TorchBinError(f"{path}: its tensors take more than {_EXPANSION_LIMIT}x the bytes its "
                            "storages hold (one tensor listed under many names)")
    return dict(state)


def _unpickle(archive: zipfile.ZipFile, path: str) -> tuple[object, int]:
    """The unpickled data.pkl and the file's byte budget for its tensors (see the module docstring)."""
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(pickles) != 1:
        raise TorchBinError(f"{path}: expected one data.pkl in the archive, found {len(pickles)}")
    unpickler = _StateDictUnpickler(archive, pickles[0][: -len("data.pkl")], path)
    budget = unpickler.budget
    try:
        return unpickler.load(), budget
    except TorchBinError:
        raise
    except Exception as e:  # a corrupt pickle: one readable error, not a deep traceback
        raise TorchBinError(f"{path}: cannot unpickle data.pkl ({type(e).__name__}: {e})") from None

"""Read a `pytorch_model.bin` state dict into numpy arrays, safely and without torch.

`torch.load` unpickles arbitrary Python objects, so a downloaded `.bin` can run any code. This
reader accepts only the zip format torch writes since 1.6 (`<name>/data.pkl` + one raw file per
storage) and unpickles `data.pkl` with an Unpickler whose `find_class` knows only the few globals a
state dict needs (the tensor rebuild functions, the typed storage classes, OrderedDict). Those
names resolve to local stand-ins that build numpy arrays; any other global is refused with
UnsafePickleError before anything runs.
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile

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


_STORAGE_DTYPES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    """Stand-in for `torch.FloatStorage` & co: only carries the element dtype."""

    def __init__(self, name: str):
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


def _rebuild_tensor(storage: np.ndarray, offset: int, size, stride, *_unused) -> np.ndarray:
    """numpy equivalent of torch._utils._rebuild_tensor_v2 (strides are in elements)."""
    size, stride = tuple(size), tuple(stride)
    if offset < 0 or len(size) != len(stride) or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise TorchBinError(f"invalid tensor layout: offset {offset}, size {size}, stride {stride}")
    if not size:
        return np.array(storage[offset], dtype=storage.dtype).reshape(())
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if any(n == 0 for n in size):
        return np.zeros(size, dtype=storage.dtype)
    if needed > storage.size:
        raise TorchBinError(f"tensor of shape {size} reaches past its storage ({storage.size} elements)")
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=[s * storage.itemsize for s in stride])
    return np.array(view)  # a contiguous copy, independent of the zip buffer


def _rebuild_parameter(data: np.ndarray, *_unused) -> np.ndarray:
    return data


_ALLOWED = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
}
_ALLOWED.update({("torch", name): _StorageType(name) for name in _STORAGE_DTYPES})


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickler limited to the allowlist; storages are read from the zip archive."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, big_endian: bool,
                 path: str):
        super().__init__(io.BytesIO(data))
        self._archive, self._prefix = archive, prefix
        self._big_endian, self._path = big_endian, path
        self._storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self._path}: refusing to load: the pickle references {module}.{name}, which "
                "is not part of a plain tensor state dict (arbitrary pickles can run code)") from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise UnsafePickleError(f"{self._path}: unexpected persistent id {pid!r:.80}")
        storage_type, key = pid[1], str(pid[2])
        if key not in self._storages:
            self._storages[key] = self._read_storage(key, storage_type)
        return self._storages[key]

    def _read_storage(self, key: str, storage_type: _StorageType) -> np.ndarray:
        member = f"{self._prefix}data/{key}"
        try:
            raw = self._archive.read(member)
        except KeyError:
            raise TorchBinError(f"{self._path}: storage {member} missing from the archive") from None
        if storage_type.dtype == "bfloat16":
            bits = np.frombuffer(raw, dtype=">u2" if self._big_endian else "<u2")
            if _BFLOAT16 is not None:
                return bits.astype(np.uint16).view(_BFLOAT16)
            return (bits.astype(np.uint32) << 16).view(np.float32)
        dtype = np.dtype(storage_type.dtype).newbyteorder(">" if self._big_endian else "<")
        return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)


def load_torch_bin(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a zip-format `pytorch_model.bin` state dict as {name: numpy array}; torch not needed.

    Raises UnsafePickleError for any pickle global outside the allowlist, TorchBinError for a
    legacy (pre-1.6, non-zip) file or a file that is not a state dict.
    """
    path = os.fspath(path)
    if not zipfile.is_zipfile(path):
        raise TorchBinError(f"{path}: not a zip-format torch file (legacy torch.save files are not "
                            "read: re-save it with torch>=1.6, or use model.safetensors)")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise TorchBinError(f"{path}: expected one data.pkl in the archive, found {len(pickles)}")
        prefix = pickles[0][: -len("data.pkl")]
        big_endian = False
        if f"{prefix}byteorder" in archive.namelist():
            big_endian = archive.read(f"{prefix}byteorder").strip() == b"big"
        unpickler = _StateDictUnpickler(archive.read(pickles[0]), archive, prefix, big_endian, path)
        try:
            state = unpickler.load()
        except TorchBinError:
            raise
        except Exception as e:  # a corrupt pickle: one readable error, not a deep traceback
            raise TorchBinError(f"{path}: cannot unpickle data.pkl ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()):
        raise TorchBinError(f"{path}: data.pkl is not a flat {{name: tensor}} state dict")
    return dict(state)

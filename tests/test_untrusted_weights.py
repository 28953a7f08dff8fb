"""Weights from an untrusted Hugging Face folder: wrong dtype, NaN/Inf and wrong shapes are refused in one
line naming the file and the tensor; the restricted unpickler keeps no state between files and refuses
layouts that would expand a small file in memory; shard indexes are checked before any shard is read.

The pytorch_model.bin files are written by hand (zip + protocol 2 pickle opcodes, laid out as torch.save
lays them out), so these tests need no torch."""
from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from safetensors.numpy import save_file

from bert_tf.errors import BertTfError
from bert_tf.checkpoints import hf
from bert_tf.checkpoints.torch_bin import TorchBinError, load_torch_bin

REPO = pathlib.Path(__file__).resolve().parent.parent
HIDDEN, INTERMEDIATE, VOCAB, POSITIONS = 4, 8, 12, 8
CONFIG = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": 1, "num_attention_heads": 1,
          "intermediate_size": INTERMEDIATE, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": POSITIONS, "type_vocab_size": 2,
          "initializer_range": 0.02, "model_type": "bert", "architectures": ["BertModel"]}


def _tiny_state() -> dict[str, np.ndarray]:
    """A complete one-layer BertModel state dict, with the int64 position_ids buffer HF writes."""
    h, i = HIDDEN, INTERMEDIATE
    shapes = {"embeddings.word_embeddings.weight": (VOCAB, h),
              "embeddings.position_embeddings.weight": (POSITIONS, h),
              "embeddings.token_type_embeddings.weight": (2, h), "embeddings.LayerNorm.weight": (h,),
              "embeddings.LayerNorm.bias": (h,), "pooler.dense.weight": (h, h), "pooler.dense.bias": (h,)}
    for module, shape in {"attention.self.query": (h, h), "attention.self.key": (h, h),
                          "attention.self.value": (h, h), "attention.output.dense": (h, h),
                          "intermediate.dense": (i, h), "output.dense": (h, i),
                          "attention.output.LayerNorm": (h,), "output.LayerNorm": (h,)}.items():
        shapes[f"encoder.layer.0.{module}.weight"], shapes[f"encoder.layer.0.{module}.bias"] = shape, shape[:1]
    rng = np.random.default_rng(0)
    state = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    state["embeddings.position_ids"] = np.arange(POSITIONS, dtype=np.int64)[None]
    return state


def _hf_folder(folder: pathlib.Path, state: dict[str, np.ndarray], *, weights: str = "model.safetensors"
               ) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "vocab.txt").write_text("".join(f"tok{n}\n" for n in range(VOCAB)))
    if weights.endswith(".bin"):
        _genuine_bin(folder / weights, state)
    else:
        save_file(state, str(folder / weights))
    return folder


# --------------------------------------------------------------------------- pytorch_model.bin by hand

_STORAGES = {"float32": "FloatStorage", "float16": "HalfStorage", "int64": "LongStorage",
             "int32": "IntStorage", "bool": "BoolStorage"}


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def _tuple(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def _tensor(key: str, numel: int, size, stride, *, offset: int = 0, storage: str = "FloatStorage") -> bytes:
    """Opcodes of `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())`."""
    pid = _tuple(_str("storage"), _global("torch", storage), _str(key), _str("cpu"), _int(numel))
    args = _tuple(pid + b"Q", _int(offset), _tuple(*map(_int, size)), _tuple(*map(_int, stride)), b"\x89",
                  _global("collections", "OrderedDict") + b")R")
    return _global("torch._utils", "_rebuild_tensor_v2") + args + b"R"


def _state_pickle(entries: list[tuple[str, bytes]], *, before: bytes = b"") -> bytes:
    """A protocol 2 pickle of an OrderedDict {name: tensor}; `before` runs first, its result popped."""
    items = b"".join(_str(name) + value for name, value in entries)
    return b"\x80\x02" + before + _global("collections", "OrderedDict") + b")R(" + items + b"u."


def _write_bin(path: pathlib.Path, data_pkl: bytes, storages: dict[str, bytes],
               compression: int = zipfile.ZIP_STORED) -> pathlib.Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", data_pkl)
        archive.writestr("archive/byteorder", "little")
        for key, raw in storages.items():
            archive.writestr(f"archive/data/{key}", raw, compress_type=compression)
        archive.writestr("archive/version", "3\n")
    return path


def _genuine_bin(path: pathlib.Path, tensors: dict[str, np.ndarray]) -> pathlib.Path:
    """A pytorch_model.bin as torch.save writes one: one storage per tensor, contiguous strides."""
    entries, storages = [], {}
    for key, (name, value) in enumerate(tensors.items()):
        stride = [int(np.prod(value.shape[d + 1:])) for d in range(value.ndim)]
        entries.append((name, _tensor(str(key), value.size, value.shape, stride,
                                      storage=_STORAGES[value.dtype.name])))
        storages[str(key)] = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
    return _write_bin(path, _state_pickle(entries), storages)


# --------------------------------------------------------------------------- wrong dtype, NaN/Inf, shape

@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_or_bool_weight_is_refused_naming_file_and_tensor_while_int64_position_ids_load(
        tmp_path, weights, dtype):
    good = hf.read_hf_state_dict(_hf_folder(tmp_path / "good", _tiny_state(), weights=weights))
    assert good["embeddings.position_ids"].dtype == np.int64
    state = _tiny_state()
    name = "encoder.layer.0.attention.self.key.weight"
    state[name] = np.ones((HIDDEN, HIDDEN), dtype=dtype)
    folder = _hf_folder(tmp_path / "bad", state, weights=weights)
    with pytest.raises(BertTfError) as info:
        hf.read_hf_state_dict(folder)
    message = str(info.value)
    assert "\n" not in message and str(folder / weights) in message and name in message and dtype in message


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_weight_holding_nan_or_inf_is_refused_naming_file_and_tensor(tmp_path, weights, bad_value):
    state = _tiny_state()
    name = "encoder.layer.0.output.LayerNorm.bias"
    state[name][2] = bad_value
    folder = _hf_folder(tmp_path / "bad", state, weights=weights)
    with pytest.raises(BertTfError, match=r"NaN or Inf.*\[2\]") as info:
        hf.read_hf_state_dict(folder)
    assert "\n" not in str(info.value) and str(folder / weights) in str(info.value) and name in str(info.value)


@pytest.mark.parametrize("name, shape", [
    ("encoder.layer.0.intermediate.dense.weight", (HIDDEN, INTERMEDIATE)),  # not transposed
    ("embeddings.word_embeddings.weight", (VOCAB + 1, HIDDEN)),
    ("embeddings.LayerNorm.weight", (HIDDEN, 1)),
    ("classifier.weight", (3, HIDDEN + 1)),
    ("cls.seq_relationship.weight", (3, HIDDEN)),
    ("encoder.layer.1.output.dense.bias", (HIDDEN,)),  # a layer the config does not have
])
def test_weight_of_a_shape_the_config_does_not_imply_is_refused_in_one_line(tmp_path, name, shape):
    state = _tiny_state()
    state[name] = np.zeros(shape, np.float32)
    folder = _hf_folder(tmp_path / "bad", state)
    with pytest.raises(BertTfError) as info:
        hf.read_hf_state_dict(folder)
    message = str(info.value)
    assert "\n" not in message and str(folder / "model.safetensors") in message and name in message
    assert str(folder / "config.json") in message


def test_converter_refuses_an_integer_weight_in_one_line_and_writes_nothing(tmp_path, capsys):
    from bert_tf.checkpoints import convert as convert_cli

    state = _tiny_state()
    state["pooler.dense.weight"] = np.arange(HIDDEN * HIDDEN, dtype=np.int32).reshape(HIDDEN, HIDDEN)
    folder = _hf_folder(tmp_path / "hf", state)
    status = convert_cli.main(["hf-to-tf1", f"--input_dir={folder}", f"--output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1
    assert "error:" in err[0] and "model.safetensors" in err[0] and "pooler.dense.weight" in err[0]
    assert not (tmp_path / "out" / "bert_model.ckpt.index").exists()


def test_init_checkpoint_from_a_folder_with_nan_is_refused_and_the_model_keeps_its_weights(tmp_path):
    from bert_tf.checkpoints import load_init_checkpoint
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    state = _tiny_state()
    state["pooler.dense.bias"][0] = np.nan
    folder = _hf_folder(tmp_path / "hf", state)
    model = BertModel(BertConfig.from_dict(hf.read_hf_config(folder)))
    before = [v.numpy().copy() for v in model.weights]
    with pytest.raises(BertTfError, match=r"model\.safetensors: tensor pooler\.dense\.bias holds 1 NaN"):
        load_init_checkpoint(model, folder)
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, variable.numpy())


@pytest.mark.parametrize("bad", ["nan", "int32"])
def test_tf1_checkpoint_with_a_nan_or_integer_weight_is_refused_and_nothing_is_assigned(tmp_path, bad):
    from bert_tf.checkpoints import load_init_checkpoint
    from bert_tf.checkpoints.tf1 import write_tf1_checkpoint
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    config = BertConfig.from_dict(hf.read_hf_config(_hf_folder(tmp_path / "hf", _tiny_state())))
    model = BertModel(config)
    weights = hf.hf_to_tf1(_tiny_state())
    name = "bert/pooler/dense/bias"
    if bad == "nan":
        weights[name] = weights[name].copy()
        weights[name][1] = np.nan
    else:
        weights[name] = np.zeros(weights[name].shape, np.int32)
    write_tf1_checkpoint(weights, tmp_path / "ckpt" / "model.ckpt")
    before = [v.numpy().copy() for v in model.weights]
    message = "holds 1 NaN" if bad == "nan" else "int32"
    with pytest.raises(BertTfError, match=rf"tensor {name} .*{message}"):
        load_init_checkpoint(model, tmp_path / "ckpt" / "model.ckpt")
    for old, variable in zip(before, model.weights):
        np.testing.assert_array_equal(old, variable.numpy())


# --------------------------------------------------------------------------- a stateless unpickler

def _build(target: bytes, state: bytes) -> bytes:
    """Opcodes applying pickle's BUILD (`__setstate__` / `__dict__` update / setattr) to `target`."""
    return target + state + b"b0"


def _slot_state(key: str, value: bytes) -> bytes:
    return b"N}" + _str(key) + value + b"s\x86"


def _dict_state(key: str, value: bytes) -> bytes:
    return b"}" + _str(key) + value + b"s"


_MUTATIONS = {
    "storage dtype via __dict__": _build(_global("torch", "FloatStorage"), _dict_state("dtype", _str("<f2"))),
    "storage name via setattr": _build(_global("torch", "FloatStorage"),
                                       _slot_state("name", _str("HalfStorage"))),
    "rebuild function attribute": _build(_global("torch._utils", "_rebuild_tensor_v2"),
                                         _dict_state("patched", _int(1))),
    "rebuild function defaults": _build(_global("torch._utils", "_rebuild_tensor_v2"),
                                        _slot_state("__defaults__", b")")),
}


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
def test_a_pickle_that_tries_to_mutate_the_reader_is_refused_and_later_files_decode_identically(
        tmp_path, mutation):
    genuine = _genuine_bin(tmp_path / "genuine.bin", {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.linspace(-1, 1, 6).astype(np.float16),
        "ids": np.arange(5, dtype=np.int64)[None]})
    first = load_torch_bin(genuine)
    crafted = _write_bin(tmp_path / "crafted.bin", _state_pickle([], before=_MUTATIONS[mutation]), {})
    with pytest.raises(TorchBinError, match="crafted.bin"):
        load_torch_bin(crafted)
    again = load_torch_bin(genuine)
    assert list(again) == list(first)
    for name, value in first.items():
        assert again[name].dtype == value.dtype and again[name].shape == value.shape, name
        np.testing.assert_array_equal(again[name], value, err_msg=name)


# --------------------------------------------------------------------------- layouts that expand a small file

def _one_float_storage(path: pathlib.Path, size, stride, *, numel: int = 1, offset: int = 0,
                       raw: bytes | None = None, compression: int = zipfile.ZIP_STORED) -> pathlib.Path:
    data = _state_pickle([("weight", _tensor("0", numel, size, stride, offset=offset))])
    return _write_bin(path, data, {"0": np.zeros(numel, "<f4").tobytes() if raw is None else raw}, compression)


@pytest.mark.parametrize("case, kwargs, message", [
    ("stride-0 expansion", dict(size=[2000, 2000], stride=[0, 0]),
     "expands a storage of 1 elements into 4000000"),
    ("reaches past", dict(size=[4, 4], stride=[4, 1], numel=8), "reaches past its storage of 8"),
    ("offset past", dict(size=[2], stride=[1], numel=2, offset=1), "reaches past"),
    ("storage bigger than its bytes", dict(size=[2], stride=[1], numel=10**9, raw=b"\0" * 8),
     "declares 1000000000 FloatStorage elements"),
    ("storage smaller than its bytes", dict(size=[2], stride=[1], numel=2, raw=b"\0" * 12), "holds 12 bytes"),
    ("compressed storage", dict(size=[4096], stride=[1], numel=4096, compression=zipfile.ZIP_DEFLATED),
     "is compressed"),
])
def test_a_layout_or_storage_the_file_cannot_back_is_refused_naming_the_file(tmp_path, case, kwargs, message):
    path = _one_float_storage(tmp_path / "pytorch_model.bin", **kwargs)
    with pytest.raises(TorchBinError, match=message) as info:
        load_torch_bin(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_one_storage_rebuilt_under_many_names_is_refused(tmp_path):
    entries = [(f"copy_{n}", _tensor("0", 1024, [1024], [1])) for n in range(3)]
    path = _write_bin(tmp_path / "pytorch_model.bin", _state_pickle(entries), {"0": bytes(4096)})
    with pytest.raises(TorchBinError, match="more than 2x the bytes"):
        load_torch_bin(path)


@pytest.mark.parametrize("side", [12000, 100000])  # 576 MB (it fits: peak memory tells), 37 GB
def test_refusing_a_small_file_that_expands_to_gigabytes_keeps_peak_memory_small(tmp_path, side):
    path = _one_float_storage(tmp_path / "pytorch_model.bin", size=[side, side], stride=[0, 0])
    assert path.stat().st_size < 2048
    # torch_bin needs only numpy: loaded alone, the baseline is not TensorFlow's few hundred MB. The address
    # space is capped at 4 GiB so that a reader which does materialise cannot take the machine's memory.
    probe = ("import importlib.util, resource, sys\n"
             "spec = importlib.util.spec_from_file_location('torch_bin', 'bert_tf/checkpoints/torch_bin.py')\n"
             "torch_bin = importlib.util.module_from_spec(spec)\n"
             "spec.loader.exec_module(torch_bin)\n"
             "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
             "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "before = peak()\n"
             "try:\n    torch_bin.load_torch_bin(sys.argv[1]); outcome = 'loaded'\n"
             "except torch_bin.TorchBinError as e:\n"
             "    outcome = 'refused' if 'expands a storage' in str(e) else 'other'\n"
             "print(outcome, before, peak())\n")
    # ru_maxrss starts at the RSS the process had when it exec'd, i.e. its forking parent's (pytest, with
    # TensorFlow): a small shell forks the probe so that the peak it reads is its own.
    run = subprocess.run(["sh", "-c", '"$0" -c "$1" "$2"; exit $?', sys.executable, probe, str(path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    outcome, before_kb, after_kb = run.stdout.split()
    assert int(after_kb) - int(before_kb) < 32 * 1024, (before_kb, after_kb)  # KB
    assert outcome == "refused"


# --------------------------------------------------------------------------- shard indexes

def _sharded(folder: pathlib.Path, weight_map) -> pathlib.Path:
    state = _tiny_state()
    half = sorted(state)[: len(state) // 2]
    first, second = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    _hf_folder(folder, {k: v for k, v in state.items() if k in half}, weights=first)
    save_file({k: v for k, v in state.items() if k not in half}, str(folder / second))
    if weight_map == "genuine":
        weight_map = {k: first if k in half else second for k in state}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return index


def test_sharded_folders_of_either_format_read_every_tensor_once(tmp_path):
    _sharded(tmp_path / "safetensors", "genuine")
    state = hf.read_hf_state_dict(tmp_path / "safetensors")
    assert sorted(state) == sorted(_tiny_state())
    np.testing.assert_array_equal(state["pooler.dense.weight"], _tiny_state()["pooler.dense.weight"])
    folder = _hf_folder(tmp_path / "bin", _tiny_state(), weights="pytorch_model-00001-of-00001.bin")
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": dict.fromkeys(_tiny_state(), "pytorch_model-00001-of-00001.bin")}))
    assert sorted(hf.read_hf_state_dict(folder)) == sorted(_tiny_state())


@pytest.mark.parametrize("weight_map, message", [
    ({"pooler.dense.bias": "model.safetensors.index.json"}, "names an index"),
    ({"pooler.dense.bias": "pytorch_model.bin.index.json"}, "names an index"),
    (None, "no \"weight_map\""),
    (["model-00001-of-00002.safetensors"], "no \"weight_map\""),
    ({}, "no \"weight_map\""),
    ({"pooler.dense.bias": 7}, "not a file name"),
    ({"pooler.dense.bias": "../outside.safetensors"}, "not a file name in the index's folder"),
    ({"pooler.dense.bias": "/etc/passwd"}, "not a file name in the index's folder"),
    ({"pooler.dense.bias": "sub/model.safetensors"}, "not a file name in the index's folder"),
    ({"pooler.dense.bias": "model-00009-of-00009.safetensors"}, "is missing"),
    ({"pooler.dense.bias": "model-00001-of-00002.safetensors"}, "does not hold it"),
])
def test_a_bad_shard_index_gets_one_line_naming_the_index(tmp_path, weight_map, message):
    (tmp_path / "outside.safetensors").write_bytes(b"")
    index = _sharded(tmp_path / "hf", weight_map)
    if weight_map is None:
        index.write_text(json.dumps({"metadata": {}}))
    with pytest.raises(BertTfError, match=message) as info:
        hf.read_hf_state_dict(tmp_path / "hf")
    assert str(info.value).startswith(str(index) + ":") and "\n" not in str(info.value)


def test_a_tensor_in_two_shards_is_refused(tmp_path):
    folder = _hf_folder(tmp_path / "hf", _tiny_state(), weights="model-00001-of-00002.safetensors")
    save_file({"pooler.dense.bias": np.zeros(HIDDEN, np.float32)},
              str(folder / "model-00002-of-00002.safetensors"))
    weight_map = dict.fromkeys(_tiny_state(), "model-00001-of-00002.safetensors")
    weight_map["pooler.dense.bias"] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(BertTfError, match="pooler.dense.bias is in both .*00001.* and .*00002"):
        hf.read_hf_state_dict(folder)

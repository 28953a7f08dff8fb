"""The generic TFRecord module on real records: the original program's golden files and GLUE features."""
import csv
import gzip
import subprocess
import sys

import numpy as np
import pytest

from shared_data import REPO_ROOT, shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.data import tfrecord
from bert_tf.text.tokenization import FullTokenizer

GOLDEN = ("golden", "create_pretraining_data")


def golden_files() -> list[str]:
    return sorted(str(p) for p in shared_path(*GOLDEN).glob("*/*.tfrecord"))


def tf_data_records(path: str, compression: str = "") -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]


def protobuf_values(record: bytes) -> dict[str, list]:
    """The Example's features as protobuf itself parses them."""
    example = tf.train.Example.FromString(record)
    return {name: list(getattr(feature, feature.WhichOneof("kind")).value)
            for name, feature in example.features.feature.items()}


def stsb_features(rows: int = 40, max_seq_length: int = 32) -> list[dict]:
    """Classifier-style features of the first real STS-B dev pairs: padded ids, mask, segments, a float score."""
    tokenizer = FullTokenizer(str(shared_path("vocab", "uncased", "vocab.txt")), do_lower_case=True)
    with open(shared_path("glue", "STS-B", "dev.tsv"), encoding="utf-8") as f:
        table = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:rows + 1]
    features = []
    for row in table:
        a, b = tokenizer.tokenize(row[7])[:12], tokenizer.tokenize(row[8])[:12]
        tokens = ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
        ids = tokenizer.convert_tokens_to_ids(tokens)
        pad = max_seq_length - len(ids)
        features.append({"input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
                         "segment_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * pad,
                         "label": [float(row[9])], "guid": [f"dev-{row[0]}".encode()]})
    return features


def test_golden_records_read_back_equal_tf_datas_reading_of_them():
    files = golden_files()
    assert len(files) == 6
    for path in files:
        ours = list(tfrecord.read_records(path))
        assert ours == tf_data_records(path) and len(ours) >= 15, path


def test_golden_examples_decode_to_protobufs_own_values():
    for path in golden_files():
        for record in list(tfrecord.read_records(path))[:50]:
            assert tfrecord.decode_example(record) == protobuf_values(record)


def test_reframed_golden_records_are_byte_identical_to_the_original_files():
    for path in golden_files():
        with open(path, "rb") as f:
            original = f.read()
        assert b"".join(tfrecord.frame_record(r) for r in tfrecord.read_records(path)) == original, path


def test_encoded_examples_equal_protobufs_own_encoding():
    for features in stsb_features():
        proto = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=features["input_ids"])),
            "label": tf.train.Feature(float_list=tf.train.FloatList(value=features["label"])),
            "guid": tf.train.Feature(bytes_list=tf.train.BytesList(value=features["guid"]))}))
        ours = tfrecord.encode_example({k: features[k] for k in ("input_ids", "label", "guid")})
        assert tf.train.Example.FromString(ours) == proto
        for name in ("input_ids", "label", "guid"):  # one entry: no map order to differ in
            single = tf.train.Example(features=tf.train.Features(feature={name: proto.features.feature[name]}))
            assert tfrecord.encode_example({name: features[name]}) == single.SerializeToString()


def test_examples_round_trip_ints_floats_bytes_and_edge_values(tmp_path):
    examples = [
        {"ints": [0, 1, -1, 2**63 - 1, -2**63], "floats": [0.5, -2.25, 1e-3], "text": ["héllo", b"\x00\xff"]},
        {"ints": np.array([[3, 4], [5, 6]], dtype=np.int32), "floats": np.array([1.5], dtype=np.float32),
         "text": [], "scalar": 7},
    ]
    path = tmp_path / "edge.tfrecord"
    assert tfrecord.write_examples(path, examples) == 2
    first, second = tfrecord.read_examples(str(path))
    assert first == {"ints": [0, 1, -1, 2**63 - 1, -2**63], "floats": [0.5, -2.25, np.float32(1e-3).item()],
                     "text": ["héllo".encode(), b"\x00\xff"]}
    assert second == {"ints": [3, 4, 5, 6], "floats": [1.5], "text": [], "scalar": [7]}
    assert [protobuf_values(r) for r in tf_data_records(str(path))] == [first, second]


def test_values_that_do_not_fit_a_feature_are_refused():
    with pytest.raises(ValueError, match="does not fit in int64"):
        tfrecord.encode_example({"x": [2**63]})
    with pytest.raises(ValueError, match="mixes strings with numbers"):
        tfrecord.encode_example({"x": [1, "a"]})


@pytest.mark.parametrize("compress", [False, True])
def test_written_feature_caches_are_read_by_tf_data_with_the_fixed_length_spec(tmp_path, compress):
    features = stsb_features()
    path = str(tmp_path / ("stsb.tfrecord" + (".gz" if compress else "")))
    tfrecord.write_examples(path, features, compress=compress)
    assert tfrecord.compression_type(path) == ("GZIP" if compress else "")
    spec = tfrecord.fixed_length_spec(features[0])
    dataset = tf.data.TFRecordDataset(path, compression_type=tfrecord.compression_type(path))
    parsed = [tf.io.parse_single_example(r, spec) for r in dataset]
    assert len(parsed) == len(features)
    for mine, theirs in zip(features, parsed):
        for name in ("input_ids", "input_mask", "segment_ids", "guid"):
            assert theirs[name].numpy().tolist() == mine[name]
        assert theirs["label"].numpy().tolist() == [np.float32(mine["label"][0]).item()]
    compression = "GZIP" if compress else ""
    assert list(tfrecord.read_examples(path)) == [protobuf_values(r) for r in tf_data_records(path, compression)]


def test_plain_files_are_byte_identical_to_tensorflows_writer(tmp_path):
    records = list(tfrecord.read_records(golden_files()[0]))[:100]
    with tfrecord.TFRecordWriter(tmp_path / "ours.tfrecord") as writer:
        for record in records:
            writer.write(record)
    with tf.io.TFRecordWriter(str(tmp_path / "theirs.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "theirs.tfrecord").read_bytes()


def test_gzip_output_depends_on_the_data_only(tmp_path):
    records = list(tfrecord.read_records(golden_files()[0]))[:50]
    outputs = []
    for name in ("a.tfrecord.gz", "b.tfrecord.gz"):
        with tfrecord.TFRecordWriter(tmp_path / name, compress=True) as writer:
            for record in records:
                writer.write(record)
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1] and gzip.decompress(outputs[0]) == b"".join(map(tfrecord.frame_record, records))


def test_corruption_and_truncation_are_detected_and_name_the_file(tmp_path):
    path = golden_files()[0]
    with open(path, "rb") as f:
        data = bytearray(f.read(4000))
    first_length = int.from_bytes(data[:8], "little")
    cases = {
        "length.tfrecord": (lambda d: d.__setitem__(0, d[0] ^ 1), "corrupt record length"),
        "data.tfrecord": (lambda d: d.__setitem__(20, d[20] ^ 1), "corrupt record data"),
        "footer.tfrecord": (lambda d: d.__setitem__(12 + first_length, d[12 + first_length] ^ 1),
                            "corrupt record data"),
    }
    for name, (damage, message) in cases.items():
        damaged = bytearray(data)
        damage(damaged)
        (tmp_path / name).write_bytes(bytes(damaged))
        with pytest.raises(tfrecord.RecordFileError, match=f"{name}: {message}"):
            list(tfrecord.read_records(str(tmp_path / name)))
    (tmp_path / "short.tfrecord").write_bytes(bytes(data[:100]))
    with pytest.raises(tfrecord.RecordFileError, match="short.tfrecord: truncated record"):
        list(tfrecord.read_records(str(tmp_path / "short.tfrecord")))
    (tmp_path / "header.tfrecord").write_bytes(bytes(data[:12 + first_length + 4 + 5]))
    with pytest.raises(tfrecord.RecordFileError, match="header.tfrecord: truncated record header"):
        list(tfrecord.read_records(str(tmp_path / "header.tfrecord")))
    (tmp_path / "cut.tfrecord.gz").write_bytes(gzip.compress(bytes(data))[:-30])
    with pytest.raises(tfrecord.RecordFileError, match="cut.tfrecord.gz: corrupt gzip data"):
        list(tfrecord.read_records(str(tmp_path / "cut.tfrecord.gz")))


def test_bytes_that_are_not_an_example_are_named_with_the_record_index(tmp_path):
    path = tmp_path / "text.tfrecord"
    with tfrecord.TFRecordWriter(path) as writer:
        writer.write(tfrecord.encode_example({"ok": [1]}))
        writer.write(b"\x0a\xff\xff\xff")
    with pytest.raises(tfrecord.RecordFileError, match="text.tfrecord: record 1: not a tf.train.Example"):
        list(tfrecord.read_examples(str(path)))


def test_a_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "out.tfrecord"
    with pytest.raises(RuntimeError):
        with tfrecord.TFRecordWriter(path) as writer:
            writer.write(b"one")
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_data_preparation_modules_import_no_tensorflow():
    modules = ["bert_tf.data.tfrecord", "bert_tf.data.files", "bert_tf.data.atomic_io",
               "bert_tf.pretraining.records", "bert_tf.pretraining.instances", "bert_tf.pretraining.sharded",
               "bert_tf.pretraining.corpus"]
    code = f"import sys; [__import__(m) for m in {modules!r}]; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, timeout=120).returncode == 0

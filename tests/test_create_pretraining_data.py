"""create_pretraining_data, faithful mode: the original's records exactly, the record schema, bad input."""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

sys.path.insert(0, str(REPO_ROOT))

from bert_tf.data import tfrecord  # noqa: E402
from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.pretraining import records as pr  # noqa: E402

SCRIPT = str(REPO_ROOT / "data_prep" / "create_pretraining_data.py")
GOLDEN_CONFIGS = ["default_uncased", "wwm_uncased_seq256", "cased_seq64_short", "two_inputs_two_outputs",
                  "single_document"]


def run_cli(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *flags], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=300)


def tf_content_sha256(paths) -> str:
    """The golden README's content_sha256, parsing with TensorFlow's own tf.train.Example."""
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    h = hashlib.sha256()
    for path in paths:
        for record in tf.data.TFRecordDataset(str(path), compression_type="GZIP" if str(path).endswith(".gz")
                                              else None).as_numpy_iterator():
            ex = tf.train.Example.FromString(record)
            d = {}
            for k, f in ex.features.feature.items():
                kind = f.WhichOneof("kind")
                d[k] = ([int(v) for v in f.int64_list.value] if kind == "int64_list" else
                        [float(v) for v in f.float_list.value])
            h.update((json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8"))
    return h.hexdigest()


def golden_flags(config: str, out_dir) -> tuple[list[str], list[str], dict]:
    """The golden's flags with shared paths made absolute and outputs moved to out_dir."""
    folder = shared_path("golden", "create_pretraining_data", config)
    root = folder.parent.parent.parent.parent  # shared/
    flags, outputs = [], []
    for line in (folder / "flags.txt").read_text().split():
        name, value = line[2:].split("=", 1)
        if name in ("input_file", "vocab_file"):
            value = ",".join(str(root / v) for v in value.split(","))
        if name == "output_file":
            outputs = [str(out_dir / os.path.basename(v)) for v in value.split(",")]
            value = ",".join(outputs)
        flags.append(f"--{name}={value}")
    summary = json.loads((folder / f"{config}.summary.json").read_text())
    return flags, outputs, summary


@pytest.mark.parametrize("config", GOLDEN_CONFIGS)
def test_faithful_mode_writes_the_originals_records_exactly(config, tmp_path):
    flags, outputs, golden = golden_flags(config, tmp_path)
    result = run_cli(*flags)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(outputs) == len(golden["files"])
    for path, gold in zip(outputs, golden["files"]):
        assert tf_content_sha256([path]) == gold["content_sha256"]
    summary = json.loads(open(pd.summary_path(outputs[0])).read())
    assert summary["instances"] == golden["instance_count"]
    assert summary["tokens"] == golden["total_tokens"]
    assert summary["masked_positions"] == golden["masked_positions"]
    assert summary["random_next"] == golden["nsp_label_counts"]["1_random_next"]
    assert summary["shorter_than_max"] == golden["instances_shorter_than_max_seq_length"]
    assert summary["vocab_sha256"] == golden["vocab_sha256"]
    if config == "single_document":
        assert "single document" in result.stderr


def test_original_records_parse_with_our_feature_spec_and_decoder():
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    golden = shared_path("golden", "create_pretraining_data", "wwm_uncased_seq256")
    path = str(golden / "wwm_uncased_seq256.tfrecord")
    summary = json.loads((golden / "wwm_uncased_seq256.summary.json").read_text())
    ds = tf.data.TFRecordDataset(path).batch(64).map(lambda s: pr.parse_examples(s, 256, 40))
    batches = list(ds.as_numpy_iterator())
    assert sum(len(b["input_ids"]) for b in batches) == summary["instance_count"] == 721
    first = batches[0]
    assert first["input_ids"].shape == (64, 256) and first["masked_lm_weights"].dtype.name == "float32"
    assert int(sum(b["input_mask"].sum() for b in batches)) == summary["total_tokens"]
    assert float(sum(b["masked_lm_weights"].sum() for b in batches)) == summary["masked_positions"]
    want = summary["first_instances_of_first_file"][0]
    assert list(first["masked_lm_positions"][0][:len(want["masked_lm_positions"])]) == want["masked_lm_positions"]
    # The pure-Python reader agrees with TensorFlow's parser on every record.
    for i, record in enumerate(tfrecord.read_records(path)):
        mine = tfrecord.decode_example(record)
        batch, row = batches[i // 64], i % 64
        for name in pr.FEATURE_NAMES:
            assert mine[name] == batch[name][row].tolist(), (i, name)


def test_encoder_matches_protobuf_serialization_values():
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    encoder = pr.ExampleEncoder(max_seq_length=8, max_predictions_per_seq=3)
    record = encoder.encode([101, 7592, 30000, 102, 2088, 102], [0, 0, 0, 0, 1, 1], [2, 4], [2026, 2088], 1)
    feats = tf.train.Example.FromString(record).features.feature
    assert list(feats["input_ids"].int64_list.value) == [101, 7592, 30000, 102, 2088, 102, 0, 0]
    assert list(feats["input_mask"].int64_list.value) == [1] * 6 + [0, 0]
    assert list(feats["segment_ids"].int64_list.value) == [0, 0, 0, 0, 1, 1, 0, 0]
    assert list(feats["masked_lm_positions"].int64_list.value) == [2, 4, 0]
    assert list(feats["masked_lm_ids"].int64_list.value) == [2026, 2088, 0]
    assert list(feats["masked_lm_weights"].float_list.value) == [1.0, 1.0, 0.0]
    assert list(feats["next_sentence_labels"].int64_list.value) == [1]


def test_gzip_output_has_the_same_records_and_reads_with_tf_gzip(tmp_path):
    flags, outputs, golden = golden_flags("single_document", tmp_path)
    result = run_cli(*flags, "--gzip", "--num_workers=1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert tf_content_sha256([outputs[0] + ".gz"]) == golden["files"][0]["content_sha256"]


def test_rerun_skips_complete_outputs_unless_overwrite(tmp_path):
    flags, outputs, _ = golden_flags("single_document", tmp_path)
    assert run_cli(*flags).returncode == 0
    mtime = os.path.getmtime(outputs[0])
    second = run_cli(*flags)
    assert "already complete" in second.stderr and os.path.getmtime(outputs[0]) == mtime
    third = run_cli(*flags, "--overwrite")
    assert third.returncode == 0 and "already complete" not in third.stderr


def test_failed_write_leaves_no_file_that_looks_complete(tmp_path):
    path = str(tmp_path / "out.tfrecord")
    with pytest.raises(RuntimeError):
        with tfrecord.TFRecordWriter(path) as writer:
            writer.write(b"x" * 100)
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []


def test_stream_random_makes_exactly_the_draws_of_random_random():
    for seed in (0, 12345, 2**40 + 7):
        ref, fast = random.Random(seed), pd.StreamRandom(seed, block_words=97)  # tiny blocks: many refills
        for step in range(400):
            n = (step * 37) % 300
            a, b = list(range(n)), list(range(n))
            ref.shuffle(a)
            fast.shuffle(b)
            assert a == b
            assert ref.random() == fast.random()
            assert ref.randint(0, n) == fast.randint(0, n)
            assert ref.randint(2, 30521 + step) == fast.randint(2, 30521 + step)
        big_a, big_b = list(range(70000)), list(range(70000))
        ref.shuffle(big_a)
        fast.shuffle(big_b)
        assert big_a == big_b and ref.random() == fast.random()


def test_parallel_tokenization_keeps_line_order_and_ids():
    text = shared_path("golden", "create_pretraining_data", "input", "wiki_sample.txt")
    lines = [line for doc in pd.iter_text_documents([str(text)]) for line in doc]
    vocab = str(shared_path("vocab", "uncased", "vocab.txt"))
    single = pd.tokenize_lines_parallel(lines, "exact", vocab, True, num_workers=1)
    parallel = pd.tokenize_lines_parallel(lines, "exact", vocab, True, num_workers=2, chunk_lines=300,
                                          min_parallel_lines=0)
    assert parallel == single and len(single) == 1940 and sum(map(len, single)) > 40_000


def _bad_run(tmp_path, **overrides) -> subprocess.CompletedProcess:
    flags = {"input_file": str(shared_path("golden", "create_pretraining_data", "input", "single_document.txt")),
             "output_file": str(tmp_path / "out.tfrecord"),
             "vocab_file": str(shared_path("vocab", "uncased", "vocab.txt")), "dupe_factor": "1"}
    flags.update(overrides)
    return run_cli(*[f"--{k}={v}" for k, v in flags.items()])


def _assert_one_line_error(result, *words):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("create_pretraining_data.py: error:")
    for word in words:
        assert word in last, last


def test_missing_input_file_is_a_one_line_error(tmp_path):
    _assert_one_line_error(_bad_run(tmp_path, input_file=str(tmp_path / "nope*.txt")), "--input_file", "nope")


def test_missing_vocab_file_is_a_one_line_error(tmp_path):
    _assert_one_line_error(_bad_run(tmp_path, vocab_file=str(tmp_path / "vocab.txt")), "--vocab_file")


def test_empty_input_is_a_one_line_error(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    _assert_one_line_error(_bad_run(tmp_path, input_file=str(empty)), "no documents")


def test_non_utf8_input_names_file_and_line(tmp_path):
    text = shared_path("golden", "create_pretraining_data", "input", "single_document.txt").read_bytes()
    lines = text.split(b"\n")
    lines[4] = lines[4][:10] + b"\xff\xfe" + lines[4][10:]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\n".join(lines))
    _assert_one_line_error(_bad_run(tmp_path, input_file=str(bad)), f"{bad}:5", "UTF-8")


def test_too_short_max_seq_length_is_a_one_line_error(tmp_path):
    _assert_one_line_error(_bad_run(tmp_path, max_seq_length="4"), "--max_seq_length=4")


def test_unwritable_output_is_a_one_line_error(tmp_path):
    _assert_one_line_error(_bad_run(tmp_path, output_file=str(tmp_path / "missing_dir" / "o.tfrecord")),
                           "missing_dir")


def test_max_predictions_below_seq_length_times_prob_warns(tmp_path):
    result = _bad_run(tmp_path, max_predictions_per_seq="5")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--max_predictions_per_seq=5 is below" in result.stderr

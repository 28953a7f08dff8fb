"""Pre-training input pipeline on real records: the original program's golden TFRecords and ours."""
import gzip
import shutil

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.data import tfrecord
from bert_tf.data.files import NoMatchingFileError
from bert_tf.pretraining import input_pipeline
from bert_tf.pretraining.input_pipeline import InputError, check_record_files, expand_input_files, pretraining_dataset

GOLDEN = ("golden", "create_pretraining_data")


def golden(name: str, pattern: str = "*.tfrecord") -> list[str]:
    return sorted(str(p) for p in shared_path(*GOLDEN, name).glob(pattern))


def decoded(path: str) -> list[dict]:
    return [tfrecord.decode_example(r) for r in tfrecord.read_records(path)]


def test_eval_batches_are_the_original_records_in_order_as_int32():
    path = golden("default_uncased")[0]
    expected = decoded(path)
    dataset = pretraining_dataset([path], batch_size=8, max_seq_length=128, max_predictions_per_seq=20,
                                  is_training=False)
    batches = list(dataset.take(3))
    for k, batch in enumerate(batches):
        for name, values in batch.items():
            assert values.dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32), name
            want = np.asarray([expected[8 * k + i][name] for i in range(8)])
            np.testing.assert_array_equal(values.numpy(), want.reshape(values.shape), err_msg=name)
    assert batches[0]["next_sentence_labels"].shape == (8, 1)


def test_eval_repeats_past_the_end_for_a_fixed_number_of_steps():
    path = golden("single_document")[0]  # 15 records
    dataset = pretraining_dataset([path], batch_size=4, max_seq_length=128, max_predictions_per_seq=20,
                                  is_training=False)
    assert len(list(dataset.take(10))) == 10


def test_training_reads_every_file_shuffled_and_drops_the_remainder():
    files = golden("two_inputs_two_outputs")
    assert len(files) == 2
    everything = {tuple(e["input_ids"]) for f in files for e in decoded(f)}
    dataset = pretraining_dataset(files, batch_size=32, max_seq_length=128, max_predictions_per_seq=20,
                                  is_training=True, seed=1)
    seen = set()
    for batch in dataset.take(150):  # 4,800 records: five times the 895 in both files
        assert batch["input_ids"].shape == (32, 128)
        seen.update(tuple(row) for row in batch["input_ids"].numpy().tolist())
    assert seen == everything


def test_input_pipelines_get_disjoint_files():
    files = golden("two_inputs_two_outputs")
    ids = []
    for index in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=index,
                                             num_replicas_in_sync=2)
        dataset = pretraining_dataset(files, batch_size=16, max_seq_length=128, max_predictions_per_seq=20,
                                      is_training=False, input_context=context)
        ids.append({tuple(r) for b in dataset.take(30) for r in b["input_ids"].numpy().tolist()})
    assert ids[0] == {tuple(e["input_ids"]) for e in decoded(files[0])}
    assert ids[1] == {tuple(e["input_ids"]) for e in decoded(files[1])}


def test_gzip_records_read_like_plain_ones(tmp_path):
    path = golden("default_uncased")[0]
    packed = tmp_path / "records.tfrecord.gz"
    with open(path, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain, zipped = (next(iter(pretraining_dataset([p], batch_size=4, max_seq_length=128,
                                                   max_predictions_per_seq=20, is_training=False)))
                     for p in (path, str(packed)))
    for name in plain:
        np.testing.assert_array_equal(plain[name].numpy(), zipped[name].numpy())


def test_records_of_another_length_are_refused_naming_the_file():
    path = golden("wwm_uncased_seq256")[0]  # seq 256, 40 predictions
    check_record_files([path], 256, 40)
    with pytest.raises(InputError, match=r"wwm_uncased_seq256.tfrecord: record 0 has input_ids of length 256, "
                                         r"expected 128 \(--max_seq_length\)"):
        check_record_files([path], 128, 40)
    with pytest.raises(InputError, match=r"masked_lm_positions of length 40, expected 20 \(--max_predictions_per_seq\)"):
        check_record_files([path], 256, 20)
    dataset = pretraining_dataset([path], batch_size=4, max_seq_length=128, max_predictions_per_seq=40,
                                  is_training=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"wwm_uncased_seq256\.tfrecord"):
        next(iter(dataset))


def test_input_file_patterns_expand_in_order_and_a_missing_one_is_named(tmp_path):
    folder = shared_path(*GOLDEN)
    spec = f"{folder}/two_inputs_two_outputs/*.tfrecord,{folder}/default_uncased/default_uncased.tfrecord"
    files = expand_input_files(spec)
    assert [f.rsplit("/", 1)[1] for f in files] == ["two_inputs_two_outputs.0.tfrecord",
                                                   "two_inputs_two_outputs.1.tfrecord", "default_uncased.tfrecord"]
    with pytest.raises(NoMatchingFileError, match="nothing-here-\\*.tfrecord"):
        expand_input_files(f"{spec},{tmp_path}/nothing-here-*.tfrecord")
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(InputError, match="empty.tfrecord: holds no record"):
        check_record_files([str(tmp_path / "empty.tfrecord")], 128, 20)
    (tmp_path / "text.tfrecord").write_text("not a record file\n" * 10)
    with pytest.raises(InputError, match="text.tfrecord: not a readable TFRecord file"):
        check_record_files([str(tmp_path / "text.tfrecord")], 128, 20)


def test_global_batch_must_split_over_replicas():
    assert input_pipeline.check_batch_size(32, 2) == 16
    with pytest.raises(InputError, match="--train_batch_size=30 must be a positive multiple of the 4 replicas"):
        input_pipeline.check_batch_size(30, 4)

"""Corrupt, cut and unfit inputs end as one readable line naming the file (issue 17): TF1 checkpoints,
pre-training records met in the middle of training, fine-tuning feature caches, and resuming in an
--output_dir whose checkpoint belongs to another model."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.checkpoints import CheckpointError, read_tf1_checkpoint
from bert_tf.checkpoints import convert as convert_cli
from bert_tf.data import tfrecord
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertPretrainingModel
from bert_tf.pretraining import input_pipeline
from bert_tf.pretraining.objective import PRETRAINING
from bert_tf.tasks import feature_cache
from bert_tf.tasks.base import FeatureSpec
from bert_tf.training.input_errors import InputFileError
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.trainer import LoopConfig, Trainer, TrainingError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 128,
        "num_attention_heads": 2, "num_hidden_layers": 1, "type_vocab_size": 2, "vocab_size": 30522}
CHECKPOINT = "tf1_tiny_from_original_bert_code"


# ---------------------------------------------------------------------------------------- helpers

def golden_records(name: str, count: int) -> list[bytes]:
    path = shared_path("golden", "create_pretraining_data", name, f"{name}.tfrecord")
    records = []
    for record in tfrecord.read_records(str(path)):
        records.append(record)
        if len(records) == count:
            return records
    raise AssertionError(f"{path} holds fewer than {count} records")


def write_records(path, records: list[bytes]) -> str:
    with open(path, "wb") as f:
        f.write(b"".join(tfrecord.frame_record(r) for r in records))
    return str(path)


def record_start(records: list[bytes], index: int) -> int:
    return sum(len(r) + 16 for r in records[:index])


def flip_byte(path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def with_values(record: bytes, **features: list) -> bytes:
    example = tfrecord.decode_example(record)
    example.update(features)
    return tfrecord.encode_example(example)


def read_all(files: list[str], **kwargs) -> None:
    """Reads the files (in order, then again: the eval pipeline repeats) inside `reading`, as programs do."""
    dataset = input_pipeline.pretraining_dataset(files, batch_size=4, max_seq_length=128, max_predictions_per_seq=20,
                                                 is_training=False, **kwargs)
    with input_pipeline.reading(files):
        for _ in dataset.take(40):
            pass


def copy_checkpoint(folder, *suffixes: str) -> str:
    source = shared_path("checkpoints", CHECKPOINT)
    os.makedirs(folder, exist_ok=True)
    for suffix in suffixes:
        shutil.copyfile(source / f"bert_model.ckpt{suffix}", os.path.join(folder, f"bert_model.ckpt{suffix}"))
    return os.path.join(folder, "bert_model.ckpt")


def cut(path, keep: float = 0.5) -> None:
    os.truncate(path, int(os.path.getsize(path) * keep))


def run_pretraining(tmp_path, input_file: str, *extra: str, config: dict = TINY) -> subprocess.CompletedProcess:
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps(config))
    args = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config_file}",
            f"--input_file={input_file}", f"--output_dir={tmp_path / 'out'}", "--do_train",
            "--train_batch_size=4", "--num_train_steps=2", "--num_warmup_steps=1", "--save_checkpoints_steps=2",
            "--steps_per_loop=1", *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def the_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    return errors[0]


def make_trainer(output_dir, **config_changes) -> Trainer:
    keras.utils.set_random_seed(7)
    config = BertConfig(**{**TINY, **config_changes})
    model = BertPretrainingModel(config)
    optimizer = create_optimizer(1e-3, num_train_steps=4, num_warmup_steps=1)
    files = [str(shared_path("golden", "create_pretraining_data", "default_uncased", "default_uncased.tfrecord"))]

    def dataset_fn(context):
        return input_pipeline.pretraining_dataset(files, batch_size=4, max_seq_length=128, max_predictions_per_seq=20,
                                                  is_training=True, input_context=context, seed=3, deterministic=True)

    loop = LoopConfig(output_dir=str(output_dir), num_train_steps=2, global_batch_size=4, steps_per_loop=1,
                      save_checkpoints_steps=2)
    return Trainer(tf.distribute.get_strategy(), model, optimizer, PRETRAINING, loop, dataset_fn)


# ---------------------------------------------------------------------------------------- TF1 checkpoints

def test_a_cut_tf1_checkpoint_is_one_error_naming_its_data_file(tmp_path):
    prefix = copy_checkpoint(tmp_path, ".index", ".data-00000-of-00001")
    cut(prefix + ".data-00000-of-00001")
    with pytest.raises(CheckpointError, match=r"bert_model\.ckpt\.data-00000-of-00001: truncated \(\d+ bytes\)") as e:
        read_tf1_checkpoint(prefix)
    assert "\n" not in str(e.value)


def test_a_missing_tf1_data_file_is_named(tmp_path):
    prefix = copy_checkpoint(tmp_path, ".index")
    with pytest.raises(CheckpointError, match=r"bert_model\.ckpt\.data-00000-of-00001: missing \(a data file of "):
        read_tf1_checkpoint(prefix)


def test_the_converter_refuses_a_cut_checkpoint_with_one_error_line(tmp_path, capsys):
    source = tmp_path / "original"
    prefix = copy_checkpoint(source, ".index", ".data-00000-of-00001")
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copyfile(shared_path("checkpoints", CHECKPOINT, name), source / name)
    cut(prefix + ".data-00000-of-00001")
    status = convert_cli.main(["tf1-to-hf", f"--input_dir={source}", f"--output_dir={tmp_path / 'hf'}"])
    assert status == 1
    line = the_error_line(capsys.readouterr().err)
    assert f"{prefix}.data-00000-of-00001: truncated" in line
    assert not (tmp_path / "hf").exists()


# ---------------------------------------------------------------------------------------- pre-training records

def damage_mid_record(path, records):
    flip_byte(path, record_start(records, 30) + 40)  # in record 30's data: its CRC fails


def cut_mid_record(path, records):
    cut(path, (record_start(records, 30) + 40) / os.path.getsize(path))


def cut_in_a_header(path, records):
    cut(path, (record_start(records, 30) + 5) / os.path.getsize(path))  # TensorFlow's reader stops silently


def gzip_then_cut(path, records):
    data = gzip.compress(open(path, "rb").read())
    with open(path, "wb") as f:
        f.write(data[: len(data) * 3 // 4])


@pytest.mark.parametrize("damage, message", [
    (damage_mid_record, r"corrupt record data at byte \d+"), (cut_mid_record, r"truncated record at byte \d+"),
    (cut_in_a_header, r"ends inside a record after byte \d+ of \d+ \(the file was cut; its last record is "
                      r"incomplete\)$"),
    (gzip_then_cut, "corrupt gzip data")])
def test_a_damaged_record_file_stops_the_pipeline_naming_the_file(tmp_path, damage, message):
    good = golden_records("default_uncased", 40)
    files = [write_records(tmp_path / "good.tfrecord", good), write_records(tmp_path / "damaged.tfrecord", good)]
    damage(files[1], good)
    with pytest.raises(InputFileError, match=r"^" + str(tmp_path / "damaged.tfrecord") + ": " + message):
        read_all(files)


def test_run_pretraining_stops_at_a_corrupt_record_with_one_error_line(tmp_path):
    records = golden_records("default_uncased", 40)
    path = write_records(tmp_path / "corrupt.tfrecord", records)
    damage_mid_record(path, records)
    done = run_pretraining(tmp_path, path)
    assert done.returncode == 1
    line = the_error_line(done.stderr)
    assert line.startswith("run_pretraining.py: error: ")
    assert f"{path}: corrupt record data at byte {record_start(records, 30)}" in line


def test_records_of_two_lengths_in_one_file_name_the_file_record_and_feature(tmp_path):
    mixed = golden_records("default_uncased", 10) + golden_records("cased_seq64_short", 10)  # 128 then 64 tokens
    path = write_records(tmp_path / "mixed.tfrecord", mixed)
    input_pipeline.check_record_files([path], 128, 20)  # record 0 fits: only the pipeline can tell
    with pytest.raises(InputFileError, match=r"mixed\.tfrecord: record 10 has input_ids of length 64, "
                                             r"expected 128 \(--max_seq_length\)$"):
        read_all([path])


@pytest.mark.parametrize("feature, value, message", [
    ("input_ids", 30522, r"input_ids value 30522 outside \[0, 30522\) \(vocab_size of the model\)"),
    ("masked_lm_ids", -1, r"masked_lm_ids value -1 outside \[0, 30522\) \(vocab_size of the model\)"),
    ("segment_ids", 2, r"segment_ids value 2 outside \[0, 2\) \(type_vocab_size of the model\)"),
    ("masked_lm_positions", 128, r"masked_lm_positions value 128 outside \[0, 128\) \(--max_seq_length\)")])
def test_an_id_out_of_range_names_the_file_record_and_feature(tmp_path, feature, value, message):
    records = golden_records("default_uncased", 12)
    values = tfrecord.decode_example(records[7])[feature]
    records[7] = with_values(records[7], **{feature: [value] + values[1:]})
    path = write_records(tmp_path / "ids.tfrecord", records)
    with pytest.raises(InputFileError, match=r"ids\.tfrecord: record 7 has " + message):
        read_all([path], vocab_size=30522, type_vocab_size=2)


def test_run_pretraining_stops_at_an_id_beyond_the_vocab_with_one_error_line(tmp_path):
    records = golden_records("default_uncased", 12)
    for i in range(1, 12):  # record 0 is fine: the check before training reads only that one
        ids = tfrecord.decode_example(records[i])["input_ids"]
        records[i] = with_values(records[i], input_ids=ids[:3] + [30522] + ids[4:])
    path = write_records(tmp_path / "ids.tfrecord", records)
    done = run_pretraining(tmp_path, path)
    assert done.returncode == 1
    line = the_error_line(done.stderr)
    assert re.search(re.escape(path) + r": record ([1-9]|1[01]) has input_ids value 30522 outside \[0, 30522\) "
                     r"\(vocab_size of the model\)$", line), line


# ---------------------------------------------------------------------------------------- feature caches

SPEC = {"input_ids": FeatureSpec("int", (8,), sequence=True), "label_ids": FeatureSpec("int")}


def write_cache(tmp_path) -> str:
    path = str(tmp_path / "task-train-0123456789abcdef.tfrecord")
    rows = [{"input_ids": list(range(i, i + 8)), "label_ids": i % 2} for i in range(50)]
    feature_cache.write_features(path, rows, SPEC)
    return path


def test_a_feature_cache_changed_since_it_was_written_is_rebuilt_not_read(tmp_path):
    path = write_cache(tmp_path)
    assert feature_cache.complete_count(path) == 50
    flip_byte(path, os.path.getsize(path) // 2)  # same size, other bytes
    assert feature_cache.complete_count(path) is None


def test_a_feature_cache_damaged_while_it_is_read_names_the_file(tmp_path):
    path = write_cache(tmp_path)
    flip_byte(path, os.path.getsize(path) // 2)
    expected = r"^" + path + r": corrupt record (data|length) at byte \d+; it is a feature cache: delete it and rerun"
    with pytest.raises(InputFileError, match=expected + " to rebuild it$"):
        with feature_cache.reading(path):
            for _ in feature_cache.dataset(path, SPEC):
                pass


# ---------------------------------------------------------------------------------------- resuming

def test_resuming_in_an_output_dir_of_another_model_is_one_line(tmp_path):
    path = write_records(tmp_path / "train.tfrecord", golden_records("default_uncased", 40))
    assert run_pretraining(tmp_path, path).returncode == 0
    out = tmp_path / "out"
    wider = {**TINY, "hidden_size": 64, "intermediate_size": 128}
    done = run_pretraining(tmp_path, path, "--num_train_steps=4", config=wider)
    assert done.returncode == 1
    assert the_error_line(done.stderr).endswith(
        f"{out / 'ckpt-2'} was written for a different model (hidden_size 32 there, per "
        f"{out / 'model_config.json'}, vs 64 here); use a new --output_dir")
    # every variable keeps its shape, so only the recorded config can tell
    other_heads = {**TINY, "num_attention_heads": TINY["num_attention_heads"] // 2}
    done = run_pretraining(tmp_path, path, "--num_train_steps=4", config=other_heads)
    assert done.returncode == 1
    assert f"(num_attention_heads {TINY['num_attention_heads']} there, per " in the_error_line(done.stderr)
    assert sorted(n for n in os.listdir(out) if n.startswith("ckpt-")) == ["ckpt-2.data-00000-of-00001",
                                                                        "ckpt-2.index"]


def test_a_trainer_restoring_a_checkpoint_of_another_model_is_one_line_naming_the_variable(tmp_path):
    make_trainer(tmp_path).train()
    with pytest.raises(TrainingError, match=r"ckpt-2 was written for a different model \(shape \(32,\) in the "
                                            r"checkpoint vs \(64,\) here for .*; use a new --output_dir$"):
        make_trainer(tmp_path, hidden_size=64, intermediate_size=128).restore()


def test_a_cut_training_checkpoint_is_one_line_naming_it(tmp_path):
    make_trainer(tmp_path).train()
    cut(tmp_path / "ckpt-2.data-00000-of-00001")
    with pytest.raises(TrainingError, match=r"ckpt-2: cannot read this checkpoint \(truncated data file\); name an earlier one"):
        make_trainer(tmp_path).restore()


def test_a_cut_training_checkpoint_read_for_evaluation_or_as_init_checkpoint_is_one_line_naming_it(tmp_path):
    from bert_tf.checkpoints import load_init_checkpoint
    from bert_tf.checkpoints.restore import CheckpointUnreadable
    from bert_tf.training.results import restore_for_eval

    make_trainer(tmp_path).train()
    cut(tmp_path / "ckpt-2.data-00000-of-00001")
    model = BertPretrainingModel(BertConfig(**TINY))
    expected = r"ckpt-2: cannot read this checkpoint \(truncated data file\)$"
    with pytest.raises(CheckpointUnreadable, match=expected):
        restore_for_eval(model, str(tmp_path))
    with pytest.raises(CheckpointUnreadable, match=expected):
        load_init_checkpoint(model, str(tmp_path / "ckpt-2"))


def test_an_evaluation_checkpoint_of_another_model_is_one_line_naming_it(tmp_path):
    from bert_tf.checkpoints.restore import CheckpointMismatch
    from bert_tf.training.results import restore_for_eval

    make_trainer(tmp_path).train()
    wider = BertPretrainingModel(BertConfig(**{**TINY, "hidden_size": 64, "intermediate_size": 128}))
    with pytest.raises(CheckpointMismatch, match=r"ckpt-2 was written for a different model \(shape "):
        restore_for_eval(wider, str(tmp_path))


def test_a_checkpoint_named_but_gone_is_refused_not_silently_restarted(tmp_path):
    make_trainer(tmp_path).train()
    os.remove(tmp_path / "ckpt-2.index")
    with pytest.raises(TrainingError, match=r"checkpoint names .*ckpt-2, whose \.index file is missing"):
        make_trainer(tmp_path).restore()

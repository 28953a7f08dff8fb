"""The fine-tuning skeleton with its first task (GLUE classification) on real data and the original's checkpoints."""
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.checkpoints import load_tf1_checkpoint
from bert_tf.model.configs import BertConfig
from bert_tf.options import parse
from bert_tf.tasks import classifier, glue_data
from bert_tf.tasks.feature_cache import CACHE_DIR
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.training.evaluation import predict

PRETRAINED = "tf1_tiny_from_original_bert_code"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _options(output_dir, data_dir, *flags):
    ckpt = shared_path("checkpoints", PRETRAINED)
    return parse(classifier.ClassifierOptions, [
        "--task_name=MRPC", f"--data_dir={data_dir}", f"--vocab_file={ckpt / 'vocab.txt'}",
        f"--bert_config_file={ckpt / 'bert_config.json'}", f"--init_checkpoint={ckpt / 'bert_model.ckpt'}",
        f"--output_dir={output_dir}", "--max_seq_length=32", "--train_batch_size=32", "--eval_batch_size=24",
        "--learning_rate=1e-3", "--seed=1", *flags])


def _mrpc_copy(tmp_path):
    data = tmp_path / "MRPC"
    shutil.copytree(shared_path("glue", "MRPC"), data)
    return data


def _dev_lines(data_dir) -> int:
    return sum(1 for _ in open(data_dir / "dev.tsv", encoding="utf-8")) - 1


@pytest.mark.slow
def test_mrpc_fine_tunes_from_the_original_checkpoint_and_scores_every_dev_pair_once(tmp_path):
    data = _mrpc_copy(tmp_path)
    out = tmp_path / "out"
    options = _options(out, data, "--do_train", "--do_eval", "--num_train_epochs=0.1", "--save_checkpoints_steps=5")
    metrics = classifier.run(options)
    dev = _dev_lines(data)
    assert dev == 408
    predictions = (out / "eval_results.tsv").read_text().splitlines()
    assert len(predictions) == dev  # the tail batch (408 = 17 x 24) and nothing twice
    probabilities = np.array([[float(v) for v in line.split("\t")] for line in predictions])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    assert metrics["eval_accuracy"] * dev == pytest.approx(round(metrics["eval_accuracy"] * dev))
    keys = [line.split(" = ")[0] for line in (out / "eval_results.txt").read_text().splitlines()]
    assert keys == ["eval_accuracy", "eval_loss", "f1", "global_step"]
    steps = int(3667 / 32 * 0.1)
    assert f"global_step = {steps}" in (out / "eval_results.txt").read_text()
    assert (out / "export" / "bert_model.ckpt.index").exists()
    exported = tf.train.list_variables(str(out / "export" / "bert_model.ckpt"))
    assert {"output_weights", "output_bias"} <= {name for name, _ in exported}


@pytest.mark.slow
def test_cached_features_serve_a_rerun_and_a_changed_input_gets_new_ones(tmp_path):
    data = _mrpc_copy(tmp_path)
    out = tmp_path / "out"
    classifier.run(_options(out, data, "--do_eval"))
    cached = sorted((out / CACHE_DIR).glob("*.tfrecord"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    first = (out / "eval_results.txt").read_text()
    classifier.run(_options(out, data, "--do_eval"))
    assert cached[0].stat().st_mtime_ns == stamp  # served, not rebuilt
    assert (out / "eval_results.txt").read_text() == first
    lines = (data / "dev.tsv").read_text(encoding="utf-8-sig").splitlines(keepends=True)
    (data / "dev.tsv").write_text("".join(lines[:-1]), encoding="utf-8")  # one pair fewer
    classifier.run(_options(out, data, "--do_eval"))
    assert len(sorted((out / CACHE_DIR).glob("*.tfrecord"))) == 2
    assert len((out / "eval_results.tsv").read_text().splitlines()) == 407
    with open(cached[0], "r+b") as f:  # a truncated cache file is rebuilt, never trusted
        f.truncate(100)
    (data / "dev.tsv").write_text("".join(lines), encoding="utf-8-sig")
    classifier.run(_options(out, data, "--do_eval"))
    assert (out / "eval_results.txt").read_text() == first


def test_eval_metrics_equal_the_original_model_fn_in_eval_mode():
    folder = shared_path("checkpoints", "tf1_tiny_classifier_from_original_bert_code")
    ref = json.loads((folder / "reference.json").read_text())
    fmt = dataclasses.replace(glue_data.GLUE["mrpc"], labels=("0", "1", "2"), score="accuracy")
    task = classifier.ClassifierTask("mrpc", fmt, None, FullTokenizer(str(folder / "vocab.txt")), 8)
    model = task.build_model(BertConfig.from_json_file(folder / "bert_config.json"))
    load_tf1_checkpoint(model, folder / "bert_model.ckpt")
    inputs = {k: np.asarray(ref["inputs"][k], np.int32) for k in ("input_ids", "input_mask", "segment_ids",
                                                                 "label_ids")}
    out = predict(tf.distribute.get_strategy(), model, lambda: tf.data.Dataset.from_tensor_slices(inputs),
                  3, 2, task.prediction_keys, task.passthrough_keys)
    scores = task.scores(out["logits"].astype(np.float64), out["label_ids"])
    expected = ref["model_fn_eval_mode"]["metrics"]
    assert scores["eval_accuracy"] == pytest.approx(expected["eval_accuracy"], abs=1e-6)
    assert scores["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-5)


def test_sts_b_is_a_regression_with_pearson_and_spearman(tmp_path):
    data = tmp_path / "STS-B"
    data.mkdir()
    for name in ("dev.tsv", "test.tsv"):
        lines = (shared_path("glue", "STS-B") / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (data / name).write_text("".join(lines[:41]), encoding="utf-8")
    out = tmp_path / "out"
    ckpt = shared_path("checkpoints", PRETRAINED)
    metrics = classifier.run(parse(classifier.ClassifierOptions, [
        "--task_name=STS-B", f"--data_dir={data}", f"--vocab_file={ckpt / 'vocab.txt'}",
        f"--bert_config_file={ckpt / 'bert_config.json'}", f"--init_checkpoint={ckpt / 'bert_model.ckpt'}",
        f"--output_dir={out}", "--max_seq_length=32", "--do_eval", "--do_predict"]))
    assert set(metrics) == {"eval_loss", "pearson", "spearman"}
    assert -1 <= metrics["pearson"] <= 1 and -1 <= metrics["spearman"] <= 1
    assert len((out / "test_results.tsv").read_text().splitlines()) == 40
    assert not (out / "predict_results.txt").exists()  # unlabelled: no metrics


def test_bad_input_gets_one_line_naming_the_file_and_line(tmp_path):
    data = tmp_path / "MRPC"
    data.mkdir()
    (data / "dev.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\tonly four columns\n")
    ckpt = shared_path("checkpoints", PRETRAINED)
    done = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC", f"--data_dir={data}",
         f"--vocab_file={ckpt / 'vocab.txt'}", f"--bert_config_file={ckpt / 'bert_config.json'}",
         f"--output_dir={tmp_path / 'out'}", "--do_eval"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"run_classifier.py: error: {data / 'dev.tsv'}:2: expected at least 5 tab-separated columns, found 4")

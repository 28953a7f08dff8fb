"""run_swag.py as users run it: a tiny fine-tune on a slice of the SWAG-layout proxy set built from a real
book, its results and predictions, the multiple-choice head through our TF1 writer and the Hugging Face
converter into transformers' BertForMultipleChoice, and bad input."""
import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from checkpoint_checks import assert_hf_folder_converts_back_to_the_same_weights
from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras

from bert_tf.checkpoints import export_original_folder, get_tf1_weights, load_tf1_checkpoint, read_tf1_checkpoint
from bert_tf.checkpoints import convert as convert_cli
from bert_tf.checkpoints import hf
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import BertMultipleChoiceModel
from bert_tf.tasks.multiple_choice.proxy_set import ProxySetOptions, build
from bert_tf.tasks.multiple_choice.task import MultipleChoiceTask
from bert_tf.text.tokenization import FullTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "tf1_tiny_from_original_bert_code"
HEAD = ("cls/multiple_choice/output_weights", "cls/multiple_choice/output_bias")
SLICE = {"train.csv": 48, "val.csv": 24, "test.csv": 20}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A slice of the proxy set built from Anna Karenina: the first rows of each split."""
    root = tmp_path_factory.mktemp("swag")
    build(ProxySetOptions(input=str(shared_path("corpus", "books", "1399-0.txt")), output_dir=str(root / "full")))
    (root / "data").mkdir()
    for name, count in SLICE.items():
        lines = (root / "full" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (root / "data" / name).write_text("".join(lines[:count + 1]), encoding="utf-8")
    return root / "data"


def _command(data, out, *flags):
    tiny = shared_path("checkpoints", TINY)
    return [sys.executable, os.path.join(REPO, "run_swag.py"), f"--data_dir={data}", f"--output_dir={out}",
            f"--init_checkpoint={tiny / 'bert_model.ckpt'}", "--max_seq_length=64", "--train_batch_size=8",
            "--learning_rate=1e-3", "--num_train_epochs=2", "--seed=1", *flags]


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    """(output folder, stderr) of one tiny fine-tune with dev evaluation and test prediction."""
    out = tmp_path_factory.mktemp("swag_run") / "out"
    done = subprocess.run(_command(data, out, "--do_train", "--do_eval", "--do_predict"), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stderr


def _results(path) -> dict[str, float]:
    return {key: float(value) for key, value in (line.split(" = ") for line in path.read_text().splitlines())}


def _predictions(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.slow
def test_a_tiny_fine_tune_writes_accuracy_and_one_prediction_per_example(data, trained):
    out, log = trained
    assert re.search(r"Training on 48 rows: 12 steps of 8", log)
    for split, source, results in (("eval", "val.csv", "eval_results.txt"), ("test", "test.csv", "test_results.txt")):
        with open(data / source, encoding="utf-8", newline="") as f:
            gold = list(csv.DictReader(f))
        predicted = _predictions(out / f"{split}_predictions.tsv")
        assert [(p["id"], p["label"]) for p in predicted] == [(g["fold-ind"], g["label"]) for g in gold]
        probabilities = np.array([[float(p[f"probability_{i}"]) for i in range(4)] for p in predicted])
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
        assert [int(p["prediction"]) for p in predicted] == list(np.argmax(probabilities, axis=1))
        written = _results(out / results)
        right = np.mean([p["prediction"] == p["label"] for p in predicted])
        assert written["eval_accuracy"] == pytest.approx(right, abs=1e-12)
        loss = -np.mean(np.log(probabilities[np.arange(len(gold)), [int(g["label"]) for g in gold]]))
        assert written["eval_loss"] == pytest.approx(loss, rel=1e-9) and written["global_step"] == 12


@pytest.mark.slow
def test_training_exports_the_original_format_with_the_multiple_choice_head(trained):
    out, _ = trained
    exported = read_tf1_checkpoint(str(out / "export" / "bert_model.ckpt"))
    assert exported[HEAD[0]].shape == (1, 64) and exported[HEAD[1]].shape == (1,)
    assert hf.infer_hf_architecture(exported) == "BertForMultipleChoice"


def _features(data, config_folder, count=6):
    """Packed rows [count, 4, 64] of the dev slice, through the task (the program's own features)."""
    tokenizer = FullTokenizer(str(config_folder / "vocab.txt"), do_lower_case=True)
    task = MultipleChoiceTask("swag", str(data), tokenizer, 64, 4)
    rows = task.features("eval", task.examples("eval")[:count])
    return {key: np.array([row[key] for row in rows], dtype=np.int32) for key in ("input_ids", "input_mask",
                                                                                    "segment_ids")}


@pytest.mark.slow
def test_the_head_converts_to_transformers_multiple_choice_with_the_same_logits_and_back(data, trained, tmp_path):
    torch = pytest.importorskip("torch", reason="torch not installed: transformers check skipped")
    transformers = pytest.importorskip("transformers")
    out, _ = trained
    export = out / "export"
    assert convert_cli.main(["tf1-to-hf", f"--input_dir={export}", f"--output_dir={tmp_path / 'hf'}"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForMultipleChoice"]
    theirs = transformers.BertForMultipleChoice.from_pretrained(tmp_path / "hf", attn_implementation="eager").eval()
    ours = BertMultipleChoiceModel(BertConfig.from_json_file(export / "bert_config.json"))
    load_tf1_checkpoint(ours, export / "bert_model.ckpt")
    features = _features(data, export)
    logits = ours(features)["logits"].numpy()
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(features["input_ids"], dtype=torch.long),
                          attention_mask=torch.tensor(features["input_mask"], dtype=torch.long),
                          token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long)).logits
    assert logits.shape == (6, 4)
    np.testing.assert_allclose(logits, expected.numpy(), rtol=0, atol=1e-5)

    assert_hf_folder_converts_back_to_the_same_weights(export, tmp_path / "hf", tmp_path / "back")


def test_the_head_names_its_variables_in_the_original_style_and_round_trips_through_the_tf1_writer(tmp_path):
    tiny = shared_path("checkpoints", TINY)
    config = BertConfig.from_json_file(tiny / "bert_config.json")
    model = BertMultipleChoiceModel(config)
    report = load_tf1_checkpoint(model, tiny / "bert_model.ckpt", allow_missing=list(HEAD), ignore_unexpected=True)
    assert sorted(report.missing) == sorted(HEAD)
    model.classifier.output_bias.assign([0.25])
    names = get_tf1_weights(model)
    assert names[HEAD[0]].shape == (1, 64) and names[HEAD[1]].tolist() == [0.25]
    export_original_folder(model, config, tmp_path / "export")
    again = BertMultipleChoiceModel(config)
    load_tf1_checkpoint(again, tmp_path / "export" / "bert_model.ckpt")
    for name, value in get_tf1_weights(again).items():
        np.testing.assert_array_equal(value, names[name], err_msg=name)
    state = hf.tf1_to_hf(names)
    assert state["classifier.weight"].shape == (1, 64) and "bert.pooler.dense.weight" in state
    assert set(hf.hf_to_tf1(state, architecture="BertForMultipleChoice")) == set(names)


def test_the_model_scores_each_choice_alone_and_survives_keras_serialization():
    tiny = shared_path("checkpoints", TINY)
    config = BertConfig.from_json_file(tiny / "bert_config.json")
    model = BertMultipleChoiceModel(config)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1024, size=(2, 3, 16)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 2, 9:] = 0
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    logits = model(inputs)["logits"].numpy()
    swapped = {key: value[:, ::-1] for key, value in inputs.items()}
    np.testing.assert_allclose(model(swapped)["logits"].numpy(), logits[:, ::-1], rtol=0, atol=1e-6)
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    copy.set_weights(model.get_weights())
    np.testing.assert_allclose(copy(inputs)["logits"].numpy(), logits, rtol=0, atol=1e-6)


def test_users_own_jsonl_questions_with_three_choices_are_evaluated_and_predicted(data, tmp_path):
    from bert_tf.tasks.multiple_choice.data import read_examples

    own = tmp_path / "own"
    own.mkdir()
    for split, name in (("val.csv", "dev.jsonl"), ("test.csv", "test.jsonl")):
        lines = []
        for e in read_examples(str(data / split), "swag", 4):
            choices = [e.endings[e.label]] + [x for i, x in enumerate(e.endings) if i != e.label][:2]
            record = {"id": e.guid, "context": e.context, "choices": choices, "label": 0}
            lines.append(json.dumps(record if name == "dev.jsonl" else {**record, "label": None}) + "\n")
        (own / name).write_text("".join(lines), encoding="utf-8")
    done = subprocess.run(_command(own, tmp_path / "out", "--task_name=multiple_choice", "--num_choices=3",
                                   "--do_eval", "--do_predict"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(_results(tmp_path / "out" / "eval_results.txt")) == {"eval_accuracy", "eval_loss", "global_step"}
    predicted = _predictions(tmp_path / "out" / "test_predictions.tsv")
    assert len(predicted) == SLICE["test.csv"] and {p["label"] for p in predicted} == {""}
    assert "probability_2" in predicted[0] and "probability_3" not in predicted[0]
    assert not (tmp_path / "out" / "test_results.txt").exists()  # unlabelled: no figures


BAD_INPUT = {
    "unknown task": (None, None, ["--do_train", "--task_name=race"],
                     r"--task_name=race: value should be one of <swag\|multiple_choice>"),
    "bad label": ("val.csv", 3, ["--do_eval"], r"val\.csv:3: label '7' is not a choice index 0\.\.3"),
    "no data file": ("test.csv", None, ["--do_predict"], r"--data_dir: no test\.csv in "),
    "five choices for swag": (None, None, ["--do_train", "--num_choices=5"],
                              r"--task_name=swag has 4 choices \(ending0\.\.3\), not --num_choices=5"),
}


def _break(data, tmp_path, name, line):
    """A copy of the data with `name` removed (line None) or its `line` labelled 7."""
    copy = tmp_path / "data"
    copy.mkdir()
    for file in data.iterdir():
        if file.name != name or line is not None:
            (copy / file.name).write_text(file.read_text(encoding="utf-8"), encoding="utf-8")
    if line is not None:
        lines = (copy / name).read_text(encoding="utf-8").splitlines(keepends=True)
        lines[line - 1] = lines[line - 1].rstrip("\n")[:-1] + "7\n"
        (copy / name).write_text("".join(lines), encoding="utf-8")
    return copy


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_ends_in_one_readable_line(data, tmp_path, case):
    name, line, flags, message = BAD_INPUT[case]
    folder = _break(data, tmp_path, name, line) if name else data
    done = subprocess.run(_command(folder, tmp_path / "out", *flags), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_swag.py: error: ") and re.search(message, last), last

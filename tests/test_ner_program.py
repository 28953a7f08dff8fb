"""run_ner.py as users run it: a tiny fine-tune on a real CoNLL-2003 slice from the command line, its files
scored again by bert-tf-conlleval, the tagging head through the Hugging Face converter into transformers, and
bad input."""
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
import tensorflow as tf

from bert_tf.checkpoints import load_tf1_checkpoint, read_tf1_checkpoint
from bert_tf.checkpoints import convert as convert_cli
from bert_tf.model.configs import BertConfig
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner.conll import read_conll

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "tf1_tiny_from_original_bert_code"
DOCSTART = "-DOCSTART- -X- -X- O\n"
HEAD = ("cls/token_classification/output_weights", "cls/token_classification/output_bias")


def _documents(name: str, first: int, count: int) -> str:
    parts = shared_path("conll2003", name).read_text().split(DOCSTART)[1:]
    return "".join(DOCSTART + part for part in parts[first:first + count])


def _slice(folder):
    """Train, dev and test files of a few real CoNLL-2003 documents each."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(_documents("train.txt", 0, 4))
    (folder / "valid.txt").write_text(_documents("valid.txt", 0, 2))
    (folder / "test.txt").write_text(_documents("test.txt", 0, 2))
    return folder


def _command(data, out, *flags):
    tiny = shared_path("checkpoints", TINY)
    return [sys.executable, os.path.join(REPO, "run_ner.py"), f"--data_dir={data}", f"--output_dir={out}",
            f"--vocab_file={tiny / 'vocab.txt'}", f"--bert_config_file={tiny / 'bert_config.json'}",
            f"--init_checkpoint={tiny / 'bert_model.ckpt'}", "--max_seq_length=32", "--train_batch_size=8",
            "--learning_rate=2e-3", "--num_train_epochs=2", "--seed=1", *flags]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data folder, output folder, stderr) of one tiny fine-tune with dev evaluation and test prediction."""
    root = tmp_path_factory.mktemp("ner")
    data, out = _slice(root / "data"), root / "out"
    done = subprocess.run(_command(data, out, "--do_train", "--do_eval", "--do_predict"), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return data, out, done.stderr


def _results(path) -> dict[str, float]:
    return {key: float(value) for key, value in
            (line.split(" = ") for line in path.read_text().splitlines())}


def _words_and_gold(path):
    return [(word, tag) for s in read_conll(str(path)) for word, tag in zip(s.words, s.tags)]


@pytest.mark.slow
def test_a_tiny_fine_tune_tags_every_dev_and_test_word_once_in_conll_format(trained):
    data, out, log = trained
    for split, source in (("eval", "valid.txt"), ("test", "test.txt")):
        predicted = read_conll(str(out / f"{split}_predictions.txt"))
        gold = read_conll(str(data / source))
        assert [s.words for s in predicted] == [s.words for s in gold]
        assert [s.document for s in predicted] == [s.document for s in gold]
        lines = [line.split() for line in (out / f"{split}_predictions.txt").read_text().splitlines() if line]
        assert all(len(fields) == 3 for fields in lines)
        assert [(w, g) for s in gold for w, g in zip(s.words, s.tags)] == [
            (fields[0], fields[1]) for fields in lines if fields[0] != "-DOCSTART-"]
    rows, sentences = map(int, re.search(r"eval features: (\d+) rows from (\d+) examples", log).groups())
    assert rows > sentences  # sentences longer than --max_seq_length are cut into pieces, every word kept


@pytest.mark.slow
def test_eval_results_are_what_conlleval_computes_on_the_written_predictions(trained):
    _, out, _ = trained
    for split in ("eval", "test"):
        written = _results(out / f"{split}_results.txt")
        again = conlleval.evaluate(conlleval.read_predictions(str(out / f"{split}_predictions.txt")))
        for key in ("precision", "recall", "f1", "accuracy"):
            assert written[key] == pytest.approx(getattr(again, key), rel=1e-12), (split, key)
        for kind, scores in again.per_type.items():
            assert written[f"f1_{kind}"] == pytest.approx(scores.f1, rel=1e-12), (split, kind)
        assert written["eval_loss"] > 0 and written["global_step"] > 0
    cli = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval", str(out / "eval_predictions.txt")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["f1"] == pytest.approx(_results(out / "eval_results.txt")["f1"], rel=1e-12)


@pytest.mark.slow
def test_training_writes_tensorboard_labels_and_an_original_format_export_with_the_head(trained):
    _, out, _ = trained
    labels = (out / "label_list.txt").read_text().split()
    assert labels[0] == "O" and set(labels) == {"O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG",
                                                 "B-PER", "I-PER"}
    assert (out / "export" / "label_list.txt").read_text().split() == labels
    exported = read_tf1_checkpoint(str(out / "export" / "bert_model.ckpt"))
    assert exported[HEAD[0]].shape == (9, 64) and exported[HEAD[1]].shape == (9,)
    tags = set()
    for folder in ("train", "eval", "predict"):
        for path in (out / folder).glob("events.out.tfevents.*"):
            for event in tf.compat.v1.train.summary_iterator(str(path)):
                tags |= {f"{folder}/{value.tag}" for value in event.summary.value}
    assert {"train/loss", "train/learning_rate", "eval/f1", "eval/precision", "eval/recall", "eval/f1_PER",
            "predict/f1"} <= tags, tags


@pytest.mark.slow
def test_a_later_predict_run_reuses_the_stored_labels_and_checkpoint(trained, tmp_path):
    data, out, _ = trained
    before = (out / "test_predictions.txt").read_bytes()
    done = subprocess.run(_command(data, out, "--do_predict"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "test_predictions.txt").read_bytes() == before


@pytest.mark.slow
def test_the_tagger_converts_to_transformers_token_classification_with_the_same_logits(trained, tmp_path):
    torch = pytest.importorskip("torch", reason="torch not installed: transformers check skipped")
    transformers = pytest.importorskip("transformers")
    _, out, _ = trained
    export = out / "export"
    assert convert_cli.main(["tf1-to-hf", f"--input_dir={export}", f"--output_dir={tmp_path / 'hf'}"]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    labels = (export / "label_list.txt").read_text().split()
    assert config["architectures"] == ["BertForTokenClassification"]
    assert config["id2label"] == {str(i): label for i, label in enumerate(labels)}
    theirs = transformers.BertForTokenClassification.from_pretrained(tmp_path / "hf",
                                                                     attn_implementation="eager").eval()
    from bert_tf.model.heads import BertTokenClassifierModel

    ours = BertTokenClassifierModel(BertConfig.from_json_file(export / "bert_config.json"), num_labels=len(labels))
    load_tf1_checkpoint(ours, export / "bert_model.ckpt")
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1024, size=(3, 32)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 20:] = 0
    logits = ours({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})["logits"].numpy()
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits
    real = mask.astype(bool)
    np.testing.assert_allclose(logits[real], expected.numpy()[real], rtol=0, atol=1e-5)

    assert_hf_folder_converts_back_to_the_same_weights(export, tmp_path / "hf", tmp_path / "back")
    assert (tmp_path / "back" / "label_list.txt").read_text().split() == labels


def _bad(tmp_path, name: str, text: str | None, *flags):
    data = _slice(tmp_path / "data")
    if text is not None:
        (data / name).write_text(text)
    return subprocess.run(_command(data, tmp_path / "out", *flags), capture_output=True, text=True, timeout=300)


BAD_INPUT = {
    "wrong number of fields": ("train.txt", DOCSTART + "\nEU NNP B-NP B-ORG\nrejects VBZ B-VP\n", ["--do_train"],
                               r"train\.txt:4: 3 fields where the file's lines have 4"),
    "tag outside the training labels": ("valid.txt", DOCSTART + "\nParis NNP B-NP B-CITY\n", ["--do_eval"],
                                        r"valid\.txt:3: tag 'B-CITY' is not among the training labels"),
    "empty file": ("test.txt", "", ["--do_predict"], r"test\.txt: no sentences"),
    "unknown context": ("test.txt", None, ["--do_predict", "--context=paragraph"],
                        r"--context must be one of document, sentence, got 'paragraph'"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_ends_in_one_readable_line(tmp_path, case):
    name, text, flags, message = BAD_INPUT[case]
    done = _bad(tmp_path, name, text, *flags)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_ner.py: error: ") and re.search(message, last), last

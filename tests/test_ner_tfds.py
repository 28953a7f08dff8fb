"""run_ner.py through TensorFlow Datasets: a real CoNLL-2003 slice prepared offline by tfds's own `conll2003`
builder (tests/tfds_fixture.py) reads as the same sentences as the CoNLL files, predicts the same tags with
the same entity figures, and bad use ends in one readable line."""
import collections
import os
import re
import subprocess
import sys

import pytest

from shared_data import shared_path
from tfds_fixture import build_local_conll2003

pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets not installed (bert_tf[tfds])")

from bert_tf.tasks.ner import conlleval  # noqa: E402
from bert_tf.tasks.ner.conll import read_conll  # noqa: E402
from bert_tf.tasks.ner.task import PREDICTIONS_FILE, RESULTS_FILE, scores  # noqa: E402
from bert_tf.tasks.ner.tfds_source import TfdsConllSource  # noqa: E402
from bert_tf.tasks.tfds_data import TfdsDataError  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "tf1_tiny_from_original_bert_code"
DOCSTART = "-DOCSTART- -X- -X- O\n"
LABELS = "O,B-LOC,I-LOC,B-MISC,I-MISC,B-ORG,I-ORG,B-PER,I-PER"
FILES = {"train": ("train.txt", 4), "eval": ("valid.txt", 2), "predict": ("test.txt", 2)}
UNLIKE = ("accuracy", "eval_loss")  # figures the -DOCSTART- lines and the sentence order touch (see below)


def _documents(name: str, count: int) -> str:
    parts = shared_path("conll2003", name).read_text().split(DOCSTART)[1:]
    return "".join(DOCSTART + part for part in parts[:count])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(CoNLL slice folder, tfds data_dir) of the first documents of each shared file, the same text in both."""
    root = tmp_path_factory.mktemp("ner_tfds")
    data = root / "data"
    data.mkdir()
    texts = {}
    for split, (name, count) in FILES.items():
        texts[split] = _documents(name, count)
        (data / name).write_text(texts[split])
    tfds_dir = build_local_conll2003(root / "tfds", *(texts[split].encode() for split in FILES))
    return data, tfds_dir


def _multiset(sentences):
    return collections.Counter((s.words, s.tags) for s in sentences)


def test_tfds_gives_each_split_the_sentences_of_its_conll_file_in_another_order(prepared):
    data, tfds_dir = prepared
    source = TfdsConllSource("conll2003", tfds_dir)
    for split, (name, _) in FILES.items():
        ours, theirs = source.examples(split), read_conll(str(data / name))
        assert len(ours) == len(theirs), split
        assert _multiset(ours) == _multiset(theirs), split
        assert [s.words for s in ours] != [s.words for s in theirs]  # tfds's writer shuffles the records
        assert {s.document for s in ours} == {0}
        assert [s.line for s in ours] == sorted({s.line for s in ours}) and ours[0].line >= 1
        assert source.examples(split) is ours  # read once
        assert all(os.path.isfile(path) for path in source.input_files(split))


@pytest.mark.parametrize("name", ["squad/v1.1", "conll2002", "glue/mrpc"])
def test_an_unsupported_tfds_name_is_an_error_naming_conll2003(prepared, name):
    with pytest.raises(TfdsDataError, match=rf"--tfds_name={re.escape(name)}: .*use conll2003"):
        TfdsConllSource(name, prepared[1])


def test_a_version_suffix_is_accepted(prepared):
    assert len(TfdsConllSource("conll2003:1.0.0", prepared[1]).examples("predict")) == len(
        read_conll(str(prepared[0] / "test.txt")))


def _command(out, *flags):
    tiny = shared_path("checkpoints", TINY)
    return [sys.executable, os.path.join(REPO, "run_ner.py"), f"--output_dir={out}",
            f"--vocab_file={tiny / 'vocab.txt'}", f"--bert_config_file={tiny / 'bert_config.json'}",
            f"--init_checkpoint={tiny / 'bert_model.ckpt'}", "--max_seq_length=32", f"--label_list={LABELS}", "--seed=1",
            *flags]


def _run(out, *flags, timeout=600):
    return subprocess.run(_command(out, *flags), capture_output=True, text=True, timeout=timeout)


def _results(path) -> dict[str, float]:
    return {key: float(value) for key, value in (line.split(" = ") for line in path.read_text().splitlines())}


def _predicted(path):
    """The sentences of a predictions file as a multiset of (words, gold tags, predicted tags)."""
    sentences, words = collections.Counter(), []
    for line in path.read_text().split("\n"):
        fields = line.split()
        if fields and fields[0] != "-DOCSTART-":
            words.append(fields)
        elif words:
            sentences[tuple(zip(*words))] += 1
            words = []
    return sentences


@pytest.mark.slow
def test_predicting_from_tfds_tags_every_sentence_as_from_the_files_with_the_same_entity_figures(prepared, tmp_path):
    data, tfds_dir = prepared
    flags = ("--context=sentence", "--do_eval", "--do_predict")
    from_files = _run(tmp_path / "files", f"--data_dir={data}", *flags)
    assert from_files.returncode == 0, from_files.stderr[-3000:]
    from_tfds = _run(tmp_path / "tfds", "--tfds_name=conll2003", f"--tfds_data_dir={tfds_dir}", *flags)
    assert from_tfds.returncode == 0, from_tfds.stderr[-3000:]
    for split in ("eval", "predict"):
        results, predictions = RESULTS_FILE[split], PREDICTIONS_FILE[split]
        ours = _predicted(tmp_path / "tfds" / predictions)
        assert ours == _predicted(tmp_path / "files" / predictions), split
        assert sum(ours.values()) == len(read_conll(str(data / FILES[split][0])))

        ours, theirs = _results(tmp_path / "tfds" / results), _results(tmp_path / "files" / results)
        assert ours.keys() == theirs.keys()
        assert {key: ours[key] for key in ours if key not in UNLIKE} == \
            {key: theirs[key] for key in theirs if key not in UNLIKE}, split
        # The loss sums the same per-word terms in tfds's sentence order: equal up to rounding.
        assert ours["eval_loss"] == pytest.approx(theirs["eval_loss"], rel=1e-12, abs=0)
        # conlleval counts each -DOCSTART- line of the files' predictions as a correct "O" token; without
        # them, the files' predictions score exactly the tfds run's figures, accuracy included.
        without = tmp_path / f"{split}_without_docstart.txt"
        without.write_text("".join(line for line in (tmp_path / "files" / predictions).read_text().splitlines(True)
                                   if not line.startswith("-DOCSTART-")))
        again = scores(conlleval.evaluate(conlleval.read_predictions(str(without))))
        assert {key: ours[key] for key in again} == again, split
        assert ours["accuracy"] != theirs["accuracy"]


@pytest.mark.slow
def test_tfds_with_document_context_ends_in_one_line_asking_for_sentence_context(prepared, tmp_path):
    done = _run(tmp_path / "out", "--tfds_name=conll2003", f"--tfds_data_dir={prepared[1]}", "--do_predict",
                timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert re.match(r"run_ner\.py: error: .*pass --context=sentence", last), last


@pytest.mark.slow
def test_an_unprepared_tfds_data_dir_ends_in_one_line_saying_how_to_prepare_it(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _run(tmp_path / "out", "--tfds_name=conll2003", f"--tfds_data_dir={empty}", "--context=sentence",
                "--do_predict", timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_ner.py: error: ") and "'conll2003' is not prepared in data_dir" in last, last
    assert "tfds build conll2003" in last, last


def test_a_tfds_tag_outside_the_labels_is_named_by_record_and_word_not_by_a_line_number(prepared):
    from bert_tf.tasks.ner.conll import ConllDataError, check_tags

    _, tfds_dir = prepared
    sentences = TfdsConllSource("conll2003", tfds_dir).examples("eval")
    row, word = next((i, w) for i, s in enumerate(sentences) for w, tag in enumerate(s.tags) if tag == "B-LOC")
    labels = [label for label in LABELS.split(",") if label != "B-LOC"]
    with pytest.raises(ConllDataError, match=rf"valid: record {sentences[row].line}, word {word + 1}: tag 'B-LOC'"):
        check_tags(sentences[row:], labels, "valid")

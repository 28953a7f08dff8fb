"""bert_tf.tasks.ner.conlleval: conlleval.pl's entity scores on the real CoNLL-2003 tags.

Predictions are the real valid/test gold tags, corrupted deterministically the ways taggers err
(missed or mistyped entities, a dropped B- so that an I- starts the chunk, shifted boundaries, a
type change inside an entity, spurious I-X after O); the figures are checked against seqeval's
conlleval-compatible default mode, against themselves in IOB1, and on hand-counted small cases.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import warnings

import pytest
from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities

from bert_tf.errors import BertTfError
from bert_tf.tasks.ner import conlleval as ce
from shared_data import REPO_ROOT, shared_path

PROG = "python -m bert_tf.tasks.ner.conlleval"
TYPES = ("PER", "LOC", "ORG", "MISC")
# From the shared data's conll2003/README.md: valid.txt's entities per type, tokens and documents.
VALID_ENTITIES = {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
VALID_TOKENS, VALID_DOCUMENTS = 51_362, 216


@functools.lru_cache(maxsize=None)
def _groups(split: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """The file's blank-line-separated groups of lines, each line split into its fields."""
    text = shared_path("conll2003", split).read_text(encoding="utf-8")
    return tuple(tuple(tuple(line.split()) for line in block.splitlines())
                 for block in text.split("\n\n") if block.strip())


def _gold(split: str) -> list[list[str]]:
    """The IOB2 NER tags of every sentence (document lines left out)."""
    return [[fields[-1] for fields in group] for group in _groups(split) if group[0][0] != "-DOCSTART-"]


def _corrupt(gold: list[str], rng: random.Random) -> list[str]:
    """Realistic imperfect IOB2 predictions for one sentence (often malformed, as taggers' are)."""
    pred = list(gold)
    spans = []  # [type, start, end) of the gold entities
    for i, tag in enumerate(gold):
        if tag.startswith("B-"):
            spans.append([tag[2:], i, i + 1])
        elif tag.startswith("I-"):
            spans[-1][2] = i + 1
    for kind, start, end in spans:
        other = rng.choice([t for t in TYPES if t != kind])
        r = rng.random()
        if r < 0.08:  # missed
            pred[start:end] = ["O"] * (end - start)
        elif r < 0.16:  # wrong type
            pred[start:end] = [f"B-{other}"] + [f"I-{other}"] * (end - start - 1)
        elif r < 0.24:  # B- dropped: the I- starts the chunk (or merges it with a same-type neighbour)
            pred[start] = f"I-{kind}"
        elif r < 0.30 and end < len(gold) and gold[end] == "O":  # one token too long
            pred[end] = f"I-{kind}"
        elif r < 0.36 and end - start > 1:  # one token too short
            pred[end - 1] = "O"
        elif r < 0.42 and end - start > 1:  # I-Y inside an X entity
            pred[rng.randrange(start + 1, end)] = f"I-{other}"
    for i, tag in enumerate(gold):
        if tag == "O" and pred[i] == "O" and rng.random() < 0.015:  # spurious, mostly a bare I-X
            pred[i] = f"{rng.choice('BII')}-{rng.choice(TYPES)}"
    return pred


@functools.lru_cache(maxsize=None)
def _gold_and_predictions(split: str) -> tuple[list[list[str]], list[list[str]]]:
    gold = _gold(split)
    rng = random.Random(2003)
    return gold, [_corrupt(tags, rng) for tags in gold]


def _pairs(gold: list[list[str]], pred: list[list[str]]) -> list[list[tuple[str, str]]]:
    return [list(zip(g, p)) for g, p in zip(gold, pred)]


def _to_iob1(tags: list[str]) -> list[str]:
    """IOB2 -> IOB1: B-X stays only right after a token of the same type X."""
    return [f"I-{tag[2:]}" if tag.startswith("B-") and not (
        i > 0 and tags[i - 1] != "O" and tags[i - 1][2:] == tag[2:]) else tag
        for i, tag in enumerate(tags)]


def _malformed_starts(sentences: list[list[str]]) -> int:
    """I-X tags that start a chunk: after O, at a sentence start, or after another type."""
    return sum(tag.startswith("I-") and (i == 0 or tags[i - 1] == "O" or tags[i - 1][2:] != tag[2:])
               for tags in sentences for i, tag in enumerate(tags))


def _write_predictions(path, split: str, pred: list[list[str]] | None, *, keep_features: bool):
    """A conlleval input file from the real split: `token [POS chunk] gold pred` lines, with the
    `-DOCSTART-` lines (tagged `O O`) and the blank lines where the split has them."""
    sentences = iter(pred) if pred is not None else None
    lines = []
    for group in _groups(split):
        tags = next(sentences) if sentences is not None and group[0][0] != "-DOCSTART-" else None
        for i, fields in enumerate(group):
            first = list(fields[:-1]) if keep_features else [fields[0]]
            lines.append(" ".join([*first, fields[-1], tags[i] if tags else fields[-1]]))
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)


# ------------------------------------------------------------------------- real CoNLL-2003 tags

def test_valid_gold_against_itself_finds_the_readme_entities_and_counts_docstart_lines_as_tokens(tmp_path):
    path = _write_predictions(tmp_path / "valid_self.txt", "valid.txt", None, keep_features=True)
    result = ce.evaluate(ce.read_predictions(str(path)))
    assert result.phrases == result.found == result.correct == sum(VALID_ENTITIES.values()) == 5942
    assert result.precision == result.recall == result.f1 == result.accuracy == 100.0
    assert {name: s.found for name, s in result.per_type.items()} == VALID_ENTITIES
    assert result.phrases_per_type == VALID_ENTITIES
    assert all(s[:3] == (100.0, 100.0, 100.0) for s in result.per_type.values())
    # conlleval.pl reads a `-DOCSTART- -X- -X- O O` line as a token: it prints "processed 51578 tokens".
    assert result.tokens == result.correct_tags == VALID_TOKENS + VALID_DOCUMENTS


@pytest.mark.parametrize("split", ["valid.txt", "test.txt"])
def test_overall_and_per_type_scores_equal_seqevals_on_imperfect_real_predictions(split):
    gold, pred = _gold_and_predictions(split)
    assert _malformed_starts(pred) > 100 > _malformed_starts(gold) == 0  # the cases conlleval rules decide
    result = ce.evaluate(_pairs(gold, pred))
    assert 60 < result.f1 < 90, "predictions should be imperfect, not hopeless"

    gold_entities, pred_entities = set(get_entities(gold)), set(get_entities(pred))
    assert (result.phrases, result.found, result.correct) == (
        len(gold_entities), len(pred_entities), len(gold_entities & pred_entities))
    assert result.tokens == sum(map(len, gold))
    assert result.accuracy == pytest.approx(100 * accuracy_score(gold, pred), rel=1e-9)
    assert result.precision == pytest.approx(100 * precision_score(gold, pred), rel=1e-9)
    assert result.recall == pytest.approx(100 * recall_score(gold, pred), rel=1e-9)
    assert result.f1 == pytest.approx(100 * f1_score(gold, pred), rel=1e-9)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval's zero-division warnings
        by_type = classification_report(gold, pred, output_dict=True)
    assert list(result.per_type) == sorted(k for k in by_type if not k.endswith(" avg")) == sorted(TYPES)
    for name, scores in result.per_type.items():
        theirs = by_type[name]
        assert scores.precision == pytest.approx(100 * theirs["precision"], rel=1e-9), name
        assert scores.recall == pytest.approx(100 * theirs["recall"], rel=1e-9), name
        assert scores.f1 == pytest.approx(100 * theirs["f1-score"], rel=1e-9), name
        assert result.phrases_per_type[name] == theirs["support"]
        assert scores.found == sum(kind == name for kind, _, _ in pred_entities)


@pytest.mark.parametrize("split", ["valid.txt", "test.txt"])
def test_iob1_and_iob2_give_identical_figures_without_a_scheme_flag(split):
    gold, pred = _gold_and_predictions(split)
    gold1, pred1 = [_to_iob1(t) for t in gold], [_to_iob1(t) for t in pred]
    n_b = sum(tag.startswith("B-") for tags in gold for tag in tags)
    assert 0 < sum(tag.startswith("B-") for tags in gold1 for tag in tags) < n_b / 100  # really IOB1
    iob2 = ce.evaluate(_pairs(gold, pred))
    for gold_tags, pred_tags in ((gold1, pred1), (gold1, pred), (gold, pred1)):  # mixed schemes too
        other = ce.evaluate(_pairs(gold_tags, pred_tags))
        # Entity figures are identical; tag accuracy compares the tags themselves, which differ.
        assert dataclasses.replace(other, correct_tags=0, accuracy=0.0) == dataclasses.replace(
            iob2, correct_tags=0, accuracy=0.0)
        assert other.correct_tags == sum(
            g == p for gs, ps in zip(gold_tags, pred_tags) for g, p in zip(gs, ps))


# ------------------------------------------------------------------------- hand-counted cases

MALFORMED = {
    # name: (sentences of (gold, pred), (phrases, found, correct, correct_tags), found per type)
    "I- without B- after O starts the chunk": (
        [[("B-PER", "I-PER"), ("I-PER", "I-PER"), ("O", "O")]], (1, 1, 1, 2), {"PER": 1}),
    "I- at the sentence start starts the chunk": (
        [[("O", "O")], [("I-ORG", "I-ORG"), ("I-ORG", "I-ORG")]], (1, 1, 1, 3), {"ORG": 1}),
    "I-PER after B-LOC is a new PER chunk": (
        [[("B-LOC", "B-LOC"), ("I-LOC", "I-PER")]], (1, 2, 0, 1), {"LOC": 1, "PER": 1}),
    "malformed gold I-PER after B-LOC is a chunk too": (
        [[("B-LOC", "B-LOC"), ("I-PER", "B-PER")]], (2, 2, 2, 1), {"LOC": 1, "PER": 1}),
    "spurious I- after O is a found chunk": (
        [[("O", "I-LOC"), ("O", "O")]], (0, 1, 0, 1), {"LOC": 1}),
    "an entity at the sentence end ends at the blank line": (
        [[("O", "O"), ("B-ORG", "B-ORG"), ("I-ORG", "I-ORG")], [("I-ORG", "I-ORG"), ("O", "O")]],
        (2, 2, 2, 5), {"ORG": 2}),
    "without the blank line it is one entity": (
        [[("O", "O"), ("B-ORG", "B-ORG"), ("I-ORG", "I-ORG"), ("I-ORG", "I-ORG"), ("O", "O")]],
        (1, 1, 1, 5), {"ORG": 1}),
    "an entity at the very end of the input counts": (
        [[("O", "O"), ("B-MISC", "B-MISC")]], (1, 1, 1, 2), {"MISC": 1}),
    "a prediction ending one token early at the sentence end is wrong": (
        [[("B-ORG", "B-ORG"), ("I-ORG", "O")]], (1, 1, 0, 1), {"ORG": 1}),
    "a prediction running to the sentence end past the gold is wrong": (
        [[("B-ORG", "B-ORG"), ("O", "I-ORG")]], (1, 1, 0, 1), {"ORG": 1}),
    "adjacent same-type B-X B-X are two chunks; B-X I-X is one": (
        [[("B-PER", "B-PER"), ("B-PER", "I-PER")]], (2, 1, 0, 1), {"PER": 1}),
    "adjacent same-type B-X B-X both right": (
        [[("B-PER", "B-PER"), ("B-PER", "B-PER")]], (2, 2, 2, 2), {"PER": 2}),
    "IOB1 adjacent entities I-X B-X I-X": (
        [[("I-PER", "I-PER"), ("B-PER", "B-PER"), ("I-PER", "I-PER")]], (2, 2, 2, 3), {"PER": 2}),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_and_boundary_cases_count_as_conlleval_counts_them(name):
    sentences, (phrases, found, correct, correct_tags), found_per_type = MALFORMED[name]
    result = ce.evaluate(sentences)
    assert (result.phrases, result.found, result.correct, result.correct_tags) == (
        phrases, found, correct, correct_tags)
    assert result.tokens == sum(map(len, sentences))
    assert {t: s.found for t, s in result.per_type.items()} == found_per_type
    # seqeval's conlleval-compatible chunking agrees on every one of them
    gold = [[g for g, _ in s] for s in sentences]
    pred = [[p for _, p in s] for s in sentences]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns on I- tags in its validation
        assert (len(get_entities(gold)), len(get_entities(pred)),
                len(set(get_entities(gold)) & set(get_entities(pred)))) == (phrases, found, correct)


def test_nothing_found_or_nothing_to_find_scores_zero_as_conlleval_does():
    missed = ce.evaluate([[("B-PER", "O"), ("I-PER", "O")]])
    assert (missed.phrases, missed.found, missed.correct) == (1, 0, 0)
    assert (missed.precision, missed.recall, missed.f1) == (0.0, 0.0, 0.0)
    assert missed.per_type == {"PER": (0.0, 0.0, 0.0, 0)}
    invented = ce.evaluate([[("O", "B-LOC")]])
    assert (invented.precision, invented.recall, invented.f1, invented.accuracy) == (0.0, 0.0, 0.0, 0.0)
    assert invented.per_type == {"LOC": (0.0, 0.0, 0.0, 1)}
    empty = ce.evaluate([])
    assert (empty.tokens, empty.phrases, empty.accuracy, empty.f1, empty.per_type) == (0, 0, 0.0, 0.0, {})
    # conlleval prints no accuracy line without tokens
    assert ce.report(empty) == "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"


def test_report_is_conlleval_text_with_its_printf_widths():
    # PER: gold B-PER B-PER (2 chunks), predicted B-PER I-PER (1, wrong); LOC: 1 right.
    result = ce.evaluate([[("B-PER", "B-PER"), ("B-PER", "I-PER")], [("B-LOC", "B-LOC")]])
    assert ce.report(result) == (
        "processed 3 tokens with 3 phrases; found: 2 phrases; correct: 1.\n"
        "accuracy:  66.67%; precision:  50.00%; recall:  33.33%; FB1:  40.00\n"
        "              LOC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
        "              PER: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n")
    assert result.to_dict() == {
        "tokens": 3, "phrases": 3, "found": 2, "correct": 1, "accuracy": 200 / 3,
        "precision": 50.0, "recall": 100 / 3, "f1": 2 * 50.0 * (100 / 3) / (50.0 + 100 / 3),
        "per_type": {"LOC": {"precision": 100.0, "recall": 100.0, "f1": 100.0, "found": 1},
                     "PER": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "found": 1}}}


def test_tags_split_at_the_first_dash_and_a_tag_without_one_is_its_own_prefix():
    assert ce.split_tag("B-PER") == ("B", "PER")
    assert ce.split_tag("I-MISC-X") == ("I", "MISC-X")  # conlleval 2004: hyphens allowed in types
    assert ce.split_tag("O") == ("O", "")
    assert ce.split_tag("PER") == ("PER", "")
    assert ce.split_tag("B-0") == ("B", "")  # Perl reads the type "0" as false
    # a typeless tag other than B/I/E/[/] never starts a chunk: "PER" alone is not an entity
    assert ce.evaluate([[("PER", "PER"), ("O", "O")]]).phrases == 0
    # conlleval never ends a typeless chunk "B X" at a blank line or an O token, only at the end of input
    assert ce.evaluate([[("B", "B"), ("X", "X")]]).correct == 1
    assert ce.evaluate([[("B", "B"), ("X", "X")], [("O", "O")]]).correct == 1


# ------------------------------------------------------------------------- reading files

def test_read_predictions_takes_the_last_two_fields_by_sentence(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(b"-DOCSTART- -X- O O\n\nEU NNP B-ORG B-ORG\nrejects VBZ O I-ORG\r\n\n\n"
                     b"German\tJJ B-MISC O\n-X- -X- O O\nPeter NNP B-PER B-PER")
    assert ce.read_predictions(str(path)) == [
        [("O", "O")], [("B-ORG", "B-ORG"), ("O", "I-ORG")], [("B-MISC", "O")], [("B-PER", "B-PER")]]


@pytest.mark.parametrize("content, message", [
    (b"EU B-ORG B-ORG\nrejects O\n", "line 2: unexpected number of fields: 2 (line 1 has 3"),
    (b"\nEU NNP B-ORG B-ORG\n\nrejects O O\n", "line 4: unexpected number of fields: 3 (line 2 has 4"),
    (b"EU B-ORG\nrejects O\n", "line 1: 2 field(s); a line needs at least 3"),
    (b"", "holds no tokens"),
    (b"\n\n  \n", "holds no tokens"),
    (b"EU B-ORG B-ORG\nM\xfcnchen B-LOC B-LOC\n", "line 2: not valid UTF-8"),
])
def test_read_predictions_rejects_bad_files_in_one_line_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(ce.ConllevalError) as info:
        ce.read_predictions(str(path))
    assert isinstance(info.value, BertTfError)
    assert str(info.value).startswith(f"{path} ") and message in str(info.value)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------- command line

def test_cli_prints_the_json_of_evaluate_on_a_real_predictions_file(tmp_path):
    gold, pred = _gold_and_predictions("test.txt")
    path = _write_predictions(tmp_path / "test_pred.txt", "test.txt", pred, keep_features=False)
    proc = _cli(path)
    assert proc.returncode == 0, proc.stderr
    expected = ce.evaluate(ce.read_predictions(str(path)))
    assert json.loads(proc.stdout) == expected.to_dict()
    assert proc.stdout == json.dumps(expected.to_dict(), indent=2) + "\n"
    # the file holds the in-memory predictions (and one `O O` token per document line)
    in_memory = ce.evaluate(_pairs(gold, pred))
    assert (expected.phrases, expected.found, expected.correct, expected.f1, expected.per_type) == (
        in_memory.phrases, in_memory.found, in_memory.correct, in_memory.f1, in_memory.per_type)
    assert expected.tokens - in_memory.tokens == sum(g[0][0] == "-DOCSTART-" for g in _groups("test.txt"))

    proc = _cli(path, "--report")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ce.report(expected)


def test_cli_reads_standard_input_as_conlleval_pl_does(tmp_path):
    _, pred = _gold_and_predictions("valid.txt")
    path = _write_predictions(tmp_path / "valid_pred.txt", "valid.txt", pred, keep_features=False)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    with open(path, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval", "--report"], stdin=stdin,
                              capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ce.report(ce.evaluate(ce.read_predictions(str(path))))
    bad = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval"], input="w x B-PER\nv y\n",
                         capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert bad.returncode == 1 and bad.stderr.splitlines()[-1].endswith(
        "error: standard input line 2: unexpected number of fields: 2 (line 1 has 3; conlleval needs the same "
        "in every line)")


@pytest.mark.parametrize("case", ["wrong field count", "too few fields", "empty", "not utf-8", "missing"])
def test_cli_bad_input_ends_as_one_error_line_and_status_1(tmp_path, case):
    path = tmp_path / "pred.txt"
    where = {"wrong field count": "line 3", "too few fields": "line 1", "not utf-8": "line 1"}.get(case, "")
    if case == "wrong field count":
        path.write_text("EU B-ORG B-ORG\n\nrejects VBZ O O\n", encoding="utf-8")
    elif case == "too few fields":
        path.write_text("B-ORG\n", encoding="utf-8")
    elif case == "empty":
        path.write_text("", encoding="utf-8")
    elif case == "not utf-8":
        path.write_bytes(b"\xff B-ORG B-ORG\n")
    proc = _cli(path)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{PROG}: error: {path}") or lines[0].startswith(
        f"{PROG}: error: cannot read {path}: "), lines[0]
    assert where in lines[0]


# ------------------------------------------------------------------------- the Perl original

CONLLEVAL_PL = os.environ.get("BERT_TF_CONLLEVAL_PL")
ODD_TAGS = ("x B-A B-A\ny I-A I-B\nz E-A S-A\n\nw [-A ]-A\nv . B\nu B-0 I-A-B\nt I-A-B I-A-B\n"
            "-X- -X- O\ns PER I-PER\nr O-A B-\n\nq B-É B-É\np I-日本 I-日本\n\no B B\nn X X\n\n")


@pytest.mark.skipif(not CONLLEVAL_PL or shutil.which("perl") is None,
                    reason="set BERT_TF_CONLLEVAL_PL to a copy of conlleval.pl (not vendored: "
                           "it states no licence) and have perl")
@pytest.mark.parametrize("which", ["valid.txt", "test.txt", "odd tags"])
def test_report_is_byte_for_byte_what_conlleval_pl_prints(tmp_path, which):
    path = tmp_path / "pred.txt"
    if which == "odd tags":
        path.write_text(ODD_TAGS, encoding="utf-8")
    else:
        _write_predictions(path, which, _gold_and_predictions(which)[1], keep_features=which == "valid.txt")
    with open(path, "rb") as f:
        perl = subprocess.run(["perl", CONLLEVAL_PL], stdin=f, capture_output=True, timeout=120)
    assert perl.returncode == 0, perl.stderr
    ours = _cli(path, "--report")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.encode("utf-8") == perl.stdout

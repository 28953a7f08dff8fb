"""Multiple-choice data: the SWAG-layout proxy set built from a real held-back book, the SWAG and generic
JSONL/CSV readers (and their one-line errors), and each choice packed as the paper's SWAG setup."""
import csv
import json

import pytest

from shared_data import shared_path

from bert_tf.tasks.multiple_choice import proxy_set
from bert_tf.tasks.multiple_choice.data import MultipleChoiceDataError, read_examples, split_file
from bert_tf.tasks.multiple_choice.proxy_set import ProxySetOptions, build, read_chapters
from bert_tf.text.tokenization import FullTokenizer

BOOK = "1399-0.txt"  # Anna Karenina: 239 chapters


def _book():
    return str(shared_path("corpus", "books", BOOK))


def _build(folder, seed=12345):
    return build(ProxySetOptions(input=_book(), output_dir=str(folder), random_seed=seed))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(folder, splits.json summary, {file: rows as dicts}) of the proxy set built from the book."""
    folder = tmp_path_factory.mktemp("proxy")
    summary = _build(folder)
    rows = {}
    for name in ("train.csv", "val.csv", "test.csv"):
        with open(folder / name, encoding="utf-8", newline="") as f:
            rows[name] = list(csv.DictReader(f))
    return folder, summary, rows


def test_the_builder_writes_swags_csv_layout_with_four_endings_and_one_true_label(built):
    folder, summary, rows = built
    for name, split in rows.items():
        header = (folder / name).read_text(encoding="utf-8").splitlines()[0]
        assert header == ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
        assert len(split) == summary["splits"][name]["examples"] > 500
        for row in split:
            endings = [row[f"ending{i}"] for i in range(4)]
            assert len(set(endings)) == 4 and row["label"] in {"0", "1", "2", "3"}
            assert row["startphrase"] == row["sent1"] and row["sent2"] == "" and row["gold-source"] == "gold"
    labels = [row["label"] for split in rows.values() for row in split]
    assert all(labels.count(str(i)) / len(labels) > 0.2 for i in range(4))  # the answer's position is random


def test_the_true_ending_is_the_next_sentence_and_the_distractors_are_sentences_of_other_chapters_of_the_split(
        built):
    _, summary, rows = built
    chapters = {c.number: c.sentences for c in read_chapters(_book())}
    home: dict[str, set[int]] = {}
    for number, sentences in chapters.items():
        for sentence in sentences:
            home.setdefault(sentence, set()).add(number)
    for name, split in rows.items():
        own = set(summary["splits"][name]["chapters"])
        for row in split:
            chapter, position = map(int, row["fold-ind"].split("."))
            assert row["video-id"] == f"1399-0-chapter{chapter}" and chapter in own
            sentences = chapters[chapter]
            assert row["sent1"] == sentences[position]
            label = int(row["label"])
            assert row[f"ending{label}"] == sentences[position + 1]
            for i in {0, 1, 2, 3} - {label}:
                homes = home.get(row[f"ending{i}"], set())
                assert homes and not homes - own and chapter not in homes, (name, row["fold-ind"], i)


def test_no_chapter_is_in_two_splits_and_every_chapter_is_in_one(built):
    _, summary, rows = built
    assigned = [set(split["chapters"]) for split in summary["splits"].values()]
    assert sum(map(len, assigned)) == len(set().union(*assigned)) == len(read_chapters(_book())) == 239
    seen = {name: {row["video-id"] for row in split} for name, split in rows.items()}
    assert not seen["train.csv"] & seen["val.csv"] and not seen["train.csv"] & seen["test.csv"]
    assert not seen["val.csv"] & seen["test.csv"]


def test_the_set_is_the_same_under_the_same_seed_and_differs_under_another(built, tmp_path):
    folder, _, _ = built
    _build(tmp_path / "again")
    _build(tmp_path / "other", seed=7)
    for name in ("train.csv", "val.csv", "test.csv", "splits.json"):
        assert (tmp_path / "again" / name).read_bytes() == (folder / name).read_bytes(), name
        assert (tmp_path / "other" / name).read_bytes() != (folder / name).read_bytes(), name


def test_the_swag_reader_takes_sent1_as_context_sent2_as_question_and_fold_ind_as_id(built):
    folder, _, rows = built
    examples = read_examples(str(folder / "val.csv"), "swag", 4)
    assert len(examples) == len(rows["val.csv"])
    for example, row in zip(examples, rows["val.csv"]):
        assert (example.guid, example.context, example.question) == (row["fold-ind"], row["sent1"], row["sent2"])
        assert example.endings == tuple(row[f"ending{i}"] for i in range(4))
        assert example.label == int(row["label"])
    assert examples[2].source == f"{folder / 'val.csv'}:4"


def test_a_swag_test_file_without_labels_and_without_the_index_column_reads_unlabelled(built, tmp_path):
    folder, _, rows = built
    fields = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source"] + [f"ending{i}" for i in range(4)]
    with open(tmp_path / "test.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows["test.csv"])
    unlabelled = read_examples(split_file(str(tmp_path), "swag", "predict"), "swag", 4)
    labelled = read_examples(str(folder / "test.csv"), "swag", 4)
    assert [e.label for e in unlabelled] == [None] * len(labelled)
    assert [(e.guid, e.context, e.endings) for e in unlabelled] == [(e.guid, e.context, e.endings) for e in labelled]


def _own_files(folder, examples):
    """The examples as users' own dev.jsonl and dev.csv (a question taken from the true ending's first word)."""
    folder.mkdir()
    records = [{"id": e.guid, "context": e.context, "question": "Then", "choices": list(e.endings),
                "label": e.label} for e in examples]
    (folder / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with open(folder / "dev.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "context", "question", "choice0", "choice1", "choice2", "choice3", "label"])
        writer.writerows([r["id"], r["context"], r["question"], *r["choices"], r["label"]] for r in records)
    return records


def test_the_generic_jsonl_and_csv_readers_give_the_same_examples(built, tmp_path):
    folder, _, _ = built
    records = _own_files(tmp_path / "own", read_examples(str(folder / "val.csv"), "swag", 4)[:50])
    from_jsonl = read_examples(str(tmp_path / "own" / "dev.jsonl"), "multiple_choice", 4)
    from_csv = read_examples(str(tmp_path / "own" / "dev.csv"), "multiple_choice", 4)
    strip = [(e.guid, e.context, e.question, e.endings, e.label) for e in from_jsonl]
    assert strip == [(e.guid, e.context, e.question, e.endings, e.label) for e in from_csv]
    assert strip == [(r["id"], r["context"], "Then", tuple(r["choices"]), r["label"]) for r in records]
    with pytest.raises(MultipleChoiceDataError, match=r"both dev\.jsonl and dev\.csv"):
        split_file(str(tmp_path / "own"), "multiple_choice", "eval")


JSONL_ERRORS = {
    "not json": ('{"context": "a", "choices": ["b", "c"]\n', r"dev\.jsonl:2: not a JSON object"),
    "three choices": ('{"context": "a", "choices": ["b", "c", "d"], "label": 0}\n',
                      r"dev\.jsonl:2: 3 choices, not --num_choices=2"),
    "label out of range": ('{"context": "a", "choices": ["b", "c"], "label": 2}\n',
                           r"dev\.jsonl:2: label '2' is not a choice index 0\.\.1"),
    "no context": ('{"choices": ["b", "c"], "label": 1}\n', r'dev\.jsonl:2: "context" must be a string'),
    "choices not a list": ('{"context": "a", "choices": "b c"}\n', r'dev\.jsonl:2: "choices" must be a list'),
}


@pytest.mark.parametrize("case", sorted(JSONL_ERRORS))
def test_a_bad_jsonl_line_is_named_by_file_and_line(tmp_path, case):
    line, message = JSONL_ERRORS[case]
    path = tmp_path / "dev.jsonl"
    path.write_text('{"context": "It rained.", "choices": ["We stayed in.", "We swam."], "label": 0}\n' + line)
    with pytest.raises(MultipleChoiceDataError, match=message):
        read_examples(str(path), "multiple_choice", 2)


CSV_ERRORS = {
    "short row": ("context,choice0,choice1,label\nIt rained.,We stayed in.\n", r"dev\.csv:2: 2 comma-separated "
                  r"fields where the header has 4"),
    "missing choice column": ("context,choice0,choice2,label\n", r"dev\.csv: the header's choice columns are "
                              r"choice0, choice2; --num_choices=2 needs choice0, choice1"),
    "no context column": ("text,choice0,choice1\n", r"dev\.csv: no column 'context'"),
    "label not a number": ("context,choice0,choice1,label\nIt rained.,a,b,yes\n", r"dev\.csv:2: label 'yes'"),
    "empty": ("", r"dev\.csv: empty file"),
    "header only": ("context,choice0,choice1\n", r"dev\.csv: no examples"),
}


@pytest.mark.parametrize("case", sorted(CSV_ERRORS))
def test_a_bad_csv_row_is_named_by_file_and_line(tmp_path, case):
    text, message = CSV_ERRORS[case]
    path = tmp_path / "dev.csv"
    path.write_text(text)
    with pytest.raises(MultipleChoiceDataError, match=message):
        read_examples(str(path), "multiple_choice", 2)


def _original_truncation(tokens_a, tokens_b, max_length):
    """The original's _truncate_seq_pair, as run_swag applied it to [context] and [question + ending]."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


@pytest.mark.parametrize("max_seq_length", [128, 24])
def test_each_choice_is_packed_as_cls_context_sep_question_and_ending_sep(built, max_seq_length):
    from bert_tf.tasks.multiple_choice.task import MultipleChoiceTask

    folder, _, _ = built
    vocab = shared_path("vocab", "uncased", "vocab.txt")
    tokenizer = FullTokenizer(str(vocab), do_lower_case=True)
    task = MultipleChoiceTask("swag", str(folder), tokenizer, max_seq_length, 4)
    examples = read_examples(str(folder / "val.csv"), "swag", 4)[:40]
    examples = [type(e)(e.guid, e.context, "And then", e.endings, e.label, e.source) for e in examples]
    cut = 0
    for example in examples:
        row = task.row(example)
        assert row["label_ids"] == example.label
        for i, (packed, ending) in enumerate(zip(task.choices(example), example.endings)):
            a = tokenizer.tokenize(example.context)
            b = tokenizer.tokenize("And then") + tokenizer.tokenize(ending)
            whole = len(a) + len(b)
            _original_truncation(a, b, max_seq_length - 3)
            cut += len(a) + len(b) < whole
            assert packed.tokens == ["[CLS]", *a, "[SEP]", *b, "[SEP]"]
            n = len(packed.tokens)
            assert row["segment_ids"][i] == [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * (max_seq_length - n)
            assert row["input_mask"][i] == [1] * n + [0] * (max_seq_length - n)
            assert row["input_ids"][i][:n] == tokenizer.convert_tokens_to_ids(packed.tokens)
    assert cut > 0 or max_seq_length == 128


def test_the_builder_refuses_a_book_too_small_for_three_splits_in_one_line(tmp_path):
    options = ProxySetOptions(input=str(shared_path("corpus", "books", "1661-0.txt")), output_dir=str(tmp_path),
                              dev_fraction=0.5, test_fraction=0.5)
    with pytest.raises(MultipleChoiceDataError, match=r"14 chapters are too few"):
        proxy_set.build(options)

"""Sentence(-pair) classification data as the original run_classifier.py's processors read it.

Every GLUE task, XNLI for any language, and users' own tsv/csv files with named columns come out
as the same `InputExample`s. A `TextFormat` says, per split, which file to read and where a row
keeps its id, texts and label; `read_examples` applies it and names the file and line of any row
that does not fit. Split names: train, eval, predict, and for MNLI's second dev/test pair
eval_mismatched, predict_mismatched.
"""
from __future__ import annotations

import csv
import dataclasses
import os
from typing import Iterator, Mapping

from bert_tf.errors import BertTfError


class ClassifierDataError(BertTfError, ValueError):
    """A data file that is missing or does not have the task's format (the message names file and line)."""


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One row: its id ("split-ID"), one or two texts, and its label (None when unlabelled)."""

    guid: str
    text_a: str
    text_b: str | None
    label: str | None


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a row keeps its fields (indices; -1 is the last column); label None: unlabelled; index
    None: the id is the row's line number. `language` keeps only rows whose column holds the value."""

    text_a: int
    text_b: int | None
    label: int | None
    index: int | None = 0
    skip_header: bool = True
    language: tuple[int, str] | None = None


@dataclasses.dataclass(frozen=True)
class SplitFile:
    """The file (relative to --data_dir) a split is read from, and its layout."""

    path: str
    columns: Columns
    delimiter: str = "\t"


@dataclasses.dataclass(frozen=True)
class TextFormat:
    """A task's labels (None: regression), its files per split, the GLUE score it reports, the
    label spellings it normalises (XNLI's "contradictory"), and its leaderboard file per split."""

    labels: tuple[str, ...] | None
    files: Mapping[str, SplitFile]
    score: str = "accuracy"
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    submissions: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("eval"))

    @property
    def predict_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("predict"))


NLI = ("contradiction", "entailment", "neutral")  # the original's MNLI / XNLI label order
BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")


def _glue(labels, train: Columns, test: Columns, submission: str, score: str = "accuracy") -> TextFormat:
    return TextFormat(labels, {"train": SplitFile("train.tsv", train), "eval": SplitFile("dev.tsv", train),
                               "predict": SplitFile("test.tsv", test)}, score,
                      submissions={"predict": submission})


def _mnli() -> TextFormat:
    labelled, test = Columns(8, 9, -1), Columns(8, 9, None)
    files = {"train": SplitFile("train.tsv", labelled), "eval": SplitFile("dev_matched.tsv", labelled),
             "eval_mismatched": SplitFile("dev_mismatched.tsv", labelled),
             "predict": SplitFile("test_matched.tsv", test),
             "predict_mismatched": SplitFile("test_mismatched.tsv", test)}
    return TextFormat(NLI, files, submissions={"predict": "MNLI-m", "predict_mismatched": "MNLI-mm"})


GLUE: dict[str, TextFormat] = {
    "cola": _glue(BINARY, Columns(3, None, 1, index=None, skip_header=False), Columns(1, None, None), "CoLA",
                  "matthews_corrcoef"),
    "sst-2": _glue(BINARY, Columns(0, None, 1, index=None), Columns(1, None, None), "SST-2"),
    "mrpc": _glue(BINARY, Columns(3, 4, 0, index=None), Columns(3, 4, None), "MRPC", "f1"),
    "sts-b": _glue(None, Columns(7, 8, 9), Columns(7, 8, None), "STS-B", "pearson_spearman"),
    "qqp": _glue(BINARY, Columns(3, 4, 5), Columns(1, 2, None), "QQP", "f1"),
    "mnli": _mnli(),
    "qnli": _glue(ENTAILMENT, Columns(1, 2, 3), Columns(1, 2, None), "QNLI"),
    "rte": _glue(ENTAILMENT, Columns(1, 2, 3), Columns(1, 2, None), "RTE"),
    "wnli": _glue(BINARY, Columns(1, 2, 3), Columns(1, 2, None), "WNLI"),
}
OWN_DATA = ("tsv", "csv")


def xnli_format(language: str) -> TextFormat:
    """XNLI for `language`: MultiNLI's machine-translated train file, and the XNLI dev/test rows of
    that language (the original hard-coded "zh" and had no test split)."""
    xnli = Columns(6, 7, 1, index=None, language=(0, language))
    return TextFormat(NLI, {"train": SplitFile(f"multinli/multinli.train.{language}.tsv",
                                               Columns(0, 1, 2, index=None)),
                            "eval": SplitFile("XNLI-1.0/xnli.dev.tsv", xnli),
                            "predict": SplitFile("XNLI-1.0/xnli.test.tsv", xnli)},
                      aliases={"contradictory": "contradiction"})


def own_data_format(data_dir: str, kind: str, text_a: str, text_b: str | None, label: str,
                    labels: tuple[str, ...] | None) -> TextFormat:
    """Users' own train/dev/test.{tsv,csv} in `data_dir`, each with a header row naming its columns;
    `labels` the label list (None: regression). The test file may lack the label column."""
    delimiter = "\t" if kind == "tsv" else ","
    files = {}
    for split, name in (("train", "train"), ("eval", "dev"), ("predict", "test")):
        path = os.path.join(data_dir, f"{name}.{kind}")
        columns = Columns(0, None, None, index=None)  # a missing file is named when a split reads it
        if os.path.isfile(path):
            header = read_header(path, delimiter)
            columns = Columns(_column(header, text_a, "text_a_column", path),
                              _column(header, text_b, "text_b_column", path),
                              _column(header, label, "label_column", path, optional=split == "predict"),
                              index=None)
        files[split] = SplitFile(f"{name}.{kind}", columns, delimiter)
    return TextFormat(labels, files)


def _column(header: list[str], name: str | None, flag: str, path: str, optional: bool = False) -> int | None:
    if name is None or (optional and name not in header):
        return None
    if name not in header:
        raise ClassifierDataError(f"{path}: no column {name!r} (--{flag}); its header has "
                                  f"{', '.join(map(repr, header))}")
    return header.index(name)


def rows(path: str, delimiter: str = "\t") -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a tsv file read as the original's _read_tsv (no quoting), or of a
    csv file with standard quoting."""
    quotechar = None if delimiter == "\t" else '"'
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter=delimiter, quotechar=quotechar)
            for fields in reader:
                yield reader.line_num, fields
    except UnicodeDecodeError as e:
        raise ClassifierDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise ClassifierDataError(f"{path}: {e}") from None


def read_examples(data_dir: str, fmt: TextFormat, split: str) -> list[InputExample]:
    """The examples of `split` under `fmt`, in file order; a label outside fmt.labels is an error."""
    spec = fmt.files[split]
    path = os.path.join(data_dir, spec.path)
    if not os.path.isfile(path):
        raise ClassifierDataError(f"--data_dir: no {spec.path} in {data_dir}")
    columns = spec.columns
    wanted = [c for c in (columns.text_a, columns.text_b, columns.label, columns.index) if c is not None]
    if columns.language:
        wanted.append(columns.language[0])
    width = max(c if c >= 0 else -c - 1 for c in wanted) + 1
    kind = "tab" if spec.delimiter == "\t" else "comma"
    examples = []
    for number, line in rows(path, spec.delimiter):
        if columns.skip_header and number == 1:
            continue
        if len(line) < width:
            raise ClassifierDataError(f"{path}:{number}: expected at least {width} {kind}-separated columns, "
                                      f"found {len(line)}")
        if columns.language and line[columns.language[0]] != columns.language[1]:
            continue
        label = line[columns.label] if columns.label is not None else None
        label = fmt.aliases.get(label, label)
        if label is not None and fmt.labels is not None and label not in fmt.labels:
            raise ClassifierDataError(f"{path}:{number}: label {label!r} is not one of the task's labels "
                                      f"{', '.join(fmt.labels)}")
        if label is not None and fmt.labels is None and not _is_number(label):
            raise ClassifierDataError(f"{path}:{number}: label {label!r} is not a number (a regression task)")
        index = line[columns.index] if columns.index is not None else str(number)
        examples.append(InputExample(f"{split}-{index}", line[columns.text_a],
                                     line[columns.text_b] if columns.text_b is not None else None, label))
    return examples


def read_header(path: str, delimiter: str) -> list[str]:
    """The first row of a tsv/csv file (its column names)."""
    for _, fields in rows(path, delimiter):
        return fields
    raise ClassifierDataError(f"{path}: empty file (expected a header row)")


def _is_number(text: str) -> bool:
    try:
        return float(text) == float(text)  # not NaN
    except ValueError:
        return False

"""CoNLL-format token-tagging files: CoNLL-2003's `token POS chunk NER` lines, or users' `token tag`.

One token per line, fields separated by white space, the tag in the last field; a blank line ends a
sentence; a `-DOCSTART-` line starts a document (its group is not a sentence). Every line of a file
has the same number of fields (the first token line decides it); a one-field file is untagged text
to predict. Tags are read as they are, so IOB1 (CoNLL-2003's original release) and IOB2 files both
train and score correctly (conlleval's chunk rules read both). A file without `-DOCSTART-` lines is
one document: its sentences are each other's context (`--context=sentence` if they are unrelated).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Sequence

from bert_tf.errors import BertTfError

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"


class ConllDataError(BertTfError, ValueError):
    """A token-tagging file or label set that cannot be used; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence: its words, their tags (None for untagged text), its document and first line
    (`is_record`: `line` is a record number instead, its words on no lines of their own: tfds)."""

    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    document: int
    line: int
    is_record: bool = False

    def word_location(self, offset: int) -> str:
        """Where word `offset` is, for an error after the file name: "LINE" or " record N, word M"."""
        return f" record {self.line}, word {offset + 1}" if self.is_record else str(self.line + offset)


def read_conll(path: str) -> list[Sentence]:
    """The sentences of a CoNLL-format file, in file order; errors name the file and line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except UnicodeDecodeError as e:
        raise ConllDataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    sentences = list(_sentences(path, lines))
    if not sentences:
        raise ConllDataError(f"{path}: no sentences (an empty file, or only -DOCSTART- lines)")
    return sentences


def _sentences(path: str, lines: Sequence[str]) -> Iterable[Sentence]:
    width = None
    document, words, tags, first = 0, [], [], 0
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if fields and fields[0] == DOCSTART:
            if words:
                yield _sentence(words, tags, document, first)
                words, tags = [], []
            document += 1
            continue
        if not fields:
            if words:
                yield _sentence(words, tags, document, first)
                words, tags = [], []
            continue
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise ConllDataError(f"{path}:{number}: {len(fields)} fields where the file's lines have {width} "
                                 f"({_layout(width)}): {line.strip()[:80]!r}")
        if not words:
            first = number
        words.append(fields[0])
        tags.append(fields[-1] if width > 1 else None)
    if words:
        yield _sentence(words, tags, document, first)


def _layout(width: int) -> str:
    return {1: "token", 2: "token tag", 4: "token POS chunk NER"}.get(width, "token ... tag")


def _sentence(words: list[str], tags: list[str | None], document: int, line: int) -> Sentence:
    return Sentence(tuple(words), None if tags[0] is None else tuple(tags), document, line)


def label_list(sentences: Sequence[Sentence], source: str) -> tuple[str, ...]:
    """The tags of a training file in output order: "O" first, then by entity type, B- before I-
    (CoNLL-2003: O, B-LOC, I-LOC, B-MISC, I-MISC, B-ORG, I-ORG, B-PER, I-PER)."""
    tags = {tag for s in sentences for tag in (s.tags or ())}
    if not tags:
        raise ConllDataError(f"{source}: the training file has no tags (a token-only file)")
    if len(tags) < 2:
        raise ConllDataError(f"{source}: needs at least two distinct tags, found {sorted(tags)}")
    return tuple(sorted(tags, key=_tag_order))


def _tag_order(tag: str) -> tuple:
    if tag == OUTSIDE:
        return (0, "", "")
    prefix, _, kind = tag.partition("-")
    return (1, kind, prefix) if kind else (1, tag, "")


def check_tags(sentences: Sequence[Sentence], labels: Sequence[str], source: str) -> None:
    """A tag outside the training labels is an error naming the file's line (it could never be predicted)."""
    known = set(labels)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags or ()):
            if tag not in known:
                raise ConllDataError(f"{source}:{sentence.word_location(offset)}: tag {tag!r} is not among the "
                                     f"training labels ({', '.join(labels)})")


def split_file(data_dir: str, split: str) -> str:
    """The file of a split in --data_dir: train.txt; dev.txt or valid.txt (CoNLL-2003's eng.testa);
    test.txt. The original names eng.train / eng.testa / eng.testb are accepted too."""
    names = {"train": ("train.txt", "eng.train"), "eval": ("dev.txt", "valid.txt", "eng.testa"),
             "predict": ("test.txt", "eng.testb")}[split]
    for name in names:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise ConllDataError(f"--data_dir={data_dir}: no {' or '.join(names)} for the {split} split")

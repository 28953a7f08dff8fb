"""A SWAG-layout multiple-choice set built from one book: a PROXY for SWAG, not SWAG.

SWAG itself cannot be fetched here, so this builds a set of the same shape from real text that
nothing else in the project trains on (hold the chosen book out of any pre-training corpus that
the comparison uses). For each passage of two consecutive sentences of a chapter it writes:

    sent1      the context sentence
    sent2      "" (SWAG keeps the start of the next sentence here; the endings below are whole sentences)
    ending0-3  the true next sentence and three distractor sentences, in a random order
    label      the index of the true next sentence

The distractors are real sentences of the same book, from other chapters of the same split, so
that topic alone does not give the answer away and no text crosses splits. Chapters (as
bert_tf.pretraining.corpus finds them) are assigned whole to train/dev/test, so no chapter is in
two splits. Every sentence used is between --min_words and --max_words words long. The output
folder gets SWAG's file names (train.csv, val.csv, test.csv, all labelled) and splits.json
(the book, seed, chapters and example counts of each split). Everything is decided by
--random_seed: the same inputs and seed give the same files.

    python data_prep/make_multiple_choice.py --input=BOOK.txt --output_dir=DIR
    python run_swag.py --data_dir=DIR ...
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import random
from typing import Iterator, Sequence

from bert_tf.data import output_lock
from bert_tf.data.atomic_io import atomic_write
from bert_tf.options import OptionError, Options, option
from bert_tf.pretraining import corpus
from bert_tf.tasks.multiple_choice.data import SWAG_FILES, MultipleChoiceDataError

SWAG_HEADER = ("", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1",
               "ending2", "ending3", "label")
NUM_DISTRACTORS = 3
SPLITS = ("train", "eval", "predict")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProxySetOptions(Options):
    """The book, the output folder, the split fractions, the sentence filter and the seed."""

    input: str | None = option(None, "The book: a Project Gutenberg or plain text file (chapters are found by "
                               "their headings).", required=True, path=True)
    output_dir: str | None = option(None, "Where train.csv, val.csv, test.csv and splits.json are written "
                                    "(created if needed).", required=True, path=True)
    dev_fraction: float = option(0.1, "The share of chapters in the dev split (val.csv); at least 2 chapters.",
                                 positive=True, maximum=0.5)
    test_fraction: float = option(0.1, "The share of chapters in the test split (test.csv); at least 2 "
                                  "chapters.", positive=True, maximum=0.5)
    min_words: int = option(5, "Use only sentences of at least this many words (context, answer, distractors).",
                            positive=True)
    max_words: int = option(50, "Use only sentences of at most this many words.", positive=True)
    random_seed: int = option(12345, "Seed for the chapter split, the distractors and the answer positions.")

    def validate(self) -> None:
        if self.min_words > self.max_words:
            raise OptionError(f"--min_words={self.min_words} is above --max_words={self.max_words}")
        super().validate()


@dataclasses.dataclass(frozen=True)
class Chapter:
    """A chapter's number in the book (from 1) and its sentences."""

    number: int
    sentences: tuple[str, ...]


def read_chapters(path: str) -> list[Chapter]:
    """The book's chapters, numbered in order (bert_tf.pretraining.corpus.book_documents)."""
    documents = corpus.book_documents(path, corpus.read_lines(path))
    return [Chapter(number, tuple(doc.sentences)) for number, doc in enumerate(documents, 1)]


def split_chapters(numbers: Sequence[int], dev_fraction: float, test_fraction: float,
                   rng: random.Random) -> dict[str, list[int]]:
    """Chapter numbers per split ("train", "eval", "predict"), shuffled by `rng`, each list sorted."""
    order = list(numbers)
    rng.shuffle(order)
    dev, test = (max(2, round(len(order) * fraction)) for fraction in (dev_fraction, test_fraction))
    if len(order) - dev - test < 2:
        raise MultipleChoiceDataError(f"{len(order)} chapters are too few for train, dev and test splits of at "
                                      "least 2 chapters each")
    return {"eval": sorted(order[:dev]), "predict": sorted(order[dev:dev + test]),
            "train": sorted(order[dev + test:])}


def usable(sentence: str, min_words: int, max_words: int) -> bool:
    """Whether a sentence is long enough to carry meaning and short enough to pack whole."""
    return min_words <= len(sentence.split()) <= max_words


def passages(chapter: Chapter, min_words: int, max_words: int) -> Iterator[tuple[int, str, str]]:
    """(position, context sentence, next sentence) of non-overlapping consecutive usable pairs."""
    sentences, i = chapter.sentences, 0
    while i + 1 < len(sentences):
        if usable(sentences[i], min_words, max_words) and usable(sentences[i + 1], min_words, max_words):
            yield i, sentences[i], sentences[i + 1]
            i += 2
        else:
            i += 1


def split_rows(chapters: Sequence[Chapter], book: str, options: ProxySetOptions,
               rng: random.Random) -> list[list[str]]:
    """SWAG rows (without the index column) of one split's chapters."""
    pool = [(c.number, s) for c in chapters for s in c.sentences if usable(s, options.min_words, options.max_words)]
    largest = max((sum(1 for number, _ in pool if number == c.number) for c in chapters), default=0)
    if len(pool) - largest < NUM_DISTRACTORS + 2:
        raise MultipleChoiceDataError(f"{options.input}: chapters {[c.number for c in chapters]} have too few "
                                      "usable sentences outside any one chapter to draw distractors from")
    rows = []
    for chapter in chapters:
        for position, context, answer in passages(chapter, options.min_words, options.max_words):
            endings = distractors(pool, chapter.number, {context, answer}, rng) + [answer]
            rng.shuffle(endings)
            rows.append([f"{book}-chapter{chapter.number}", f"{chapter.number}.{position}", context, context, "",
                         "gold", *endings, str(endings.index(answer))])
    return rows


def distractors(pool: Sequence[tuple[int, str]], chapter: int, exclude: set[str],
                rng: random.Random) -> list[str]:
    """NUM_DISTRACTORS distinct sentences of `pool` from chapters other than `chapter`, none in `exclude`
    (`pool` must hold enough of them: split_rows checks)."""
    chosen: list[str] = []
    while len(chosen) < NUM_DISTRACTORS:
        number, sentence = pool[rng.randrange(len(pool))]
        if number != chapter and sentence not in exclude and sentence not in chosen:
            chosen.append(sentence)
    return chosen


def write_swag_csv(path: str, rows: Sequence[Sequence[str]]) -> None:
    """SWAG's CSV layout: its header and a leading index column."""
    with atomic_write(path, newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(SWAG_HEADER)
        writer.writerows([str(index), *row] for index, row in enumerate(rows))


def build(options: ProxySetOptions) -> dict:
    """Reads the book, writes the three SWAG files and splits.json; returns the splits.json content."""
    options.validate()
    chapters = {c.number: c for c in read_chapters(options.input)}
    rng = random.Random(options.random_seed)
    assignment = split_chapters(sorted(chapters), options.dev_fraction, options.test_fraction, rng)
    book = os.path.splitext(os.path.basename(options.input))[0]
    summary = {"book": os.path.basename(options.input), "random_seed": options.random_seed,
               "min_words": options.min_words, "max_words": options.max_words, "splits": {}}
    rows = {}
    for split in SPLITS:
        rows[split] = split_rows([chapters[n] for n in assignment[split]], book, options, rng)
        if not rows[split]:
            raise MultipleChoiceDataError(f"{options.input}: no passages for the {split} split")
        summary["splits"][SWAG_FILES[split]] = {"chapters": assignment[split], "examples": len(rows[split])}
    output_lock.make_output_dir(options.output_dir, "--output_dir")
    with output_lock.lock_folder(options.output_dir, "--output_dir"):
        for split in SPLITS:
            write_swag_csv(os.path.join(options.output_dir, SWAG_FILES[split]), rows[split])
        with atomic_write(os.path.join(options.output_dir, "splits.json")) as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    return summary


def run(options: ProxySetOptions) -> None:
    """Builds the set and prints one line per split."""
    summary = build(options)
    for name, split in summary["splits"].items():
        print(f"{os.path.join(options.output_dir, name)}: {split['examples']} examples from "
              f"{len(split['chapters'])} chapters of {summary['book']}")


def main(argv: list[str] | None = None) -> None:
    """data_prep/make_multiple_choice.py."""
    from bert_tf import cli

    cli.run_program(run, ProxySetOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

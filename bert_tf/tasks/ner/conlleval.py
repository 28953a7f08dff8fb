"""Entity-level NER scores exactly as the CoNLL shared tasks' `conlleval` Perl script computes them.

Published CoNLL-2003 F1 scores are what conlleval.pl (version 2004-01-26) prints, so this module
reproduces its chunk rules (`endOfChunk`/`startOfChunk`), its counting and its printf formats line
for line: IOB1 and IOB2 need no scheme flag, a malformed `I-X` (after `O` or after another type)
starts a chunk, a tag `P-T` splits at the first dash into prefix P and type T (a tag without a
dash is prefix only, type ""), and a chunk is correct when gold and prediction start and end it
together with the same type. Input is read as conlleval reads it: the last two fields of a line are
the gold and predicted tags; a blank line (or one whose first field is `-X-`) is a sentence
boundary; a `-DOCSTART-` line is a token like any other (tagged `O O` it ends any chunk, and it
counts in `tokens` and accuracy, as conlleval counts it). Run it as
`python -m bert_tf.tasks.ner.conlleval FILE [--report]` (console script `bert-tf-conlleval`).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
from typing import Iterable, NamedTuple, Sequence

from bert_tf.errors import BertTfError, run_or_exit

_BOUNDARY = "-X-"  # conlleval's sentence-boundary first field


class ConllevalError(BertTfError):
    """A predictions file conlleval cannot score; the message names the file and line."""


class TypeScores(NamedTuple):
    """One entity type's line of the report: percentages and the number of predicted chunks."""
    precision: float
    recall: float
    f1: float
    found: int


@dataclasses.dataclass(frozen=True)
class ConllevalResult:
    """conlleval's counts and scores; percentages are 0-100 floats, unrounded (the report rounds)."""
    tokens: int          # tokens processed (boundaries excluded)
    phrases: int         # gold chunks
    found: int           # predicted chunks
    correct: int         # predicted chunks equal to a gold chunk (same start, end and type)
    correct_tags: int    # tokens whose predicted tag equals the gold tag
    accuracy: float
    precision: float
    recall: float
    f1: float
    per_type: dict[str, TypeScores] = dataclasses.field(hash=False)  # sorted by type name
    phrases_per_type: dict[str, int] = dataclasses.field(hash=False)  # gold chunks per type

    def to_dict(self) -> dict:
        """The JSON object the command line prints."""
        return {"tokens": self.tokens, "phrases": self.phrases, "found": self.found,
                "correct": self.correct, "accuracy": self.accuracy, "precision": self.precision,
                "recall": self.recall, "f1": self.f1,
                "per_type": {name: s._asdict() for name, s in self.per_type.items()}}


def split_tag(tag: str) -> tuple[str, str]:
    """conlleval's `/^([^-]*)-(.*)$/` split into (prefix, type); a type Perl reads as false ("0") is ""."""
    prefix, dash, kind = tag.partition("-")
    if not dash:
        return tag, ""
    return prefix, "" if kind == "0" else kind


def end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's endOfChunk: whether a chunk ended between the previous and the current token."""
    return ((prev_tag, tag) in _ENDS
            or (prev_tag not in ("O", ".") and prev_type != type_)
            or prev_tag in ("[", "]"))


def start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's startOfChunk: whether a chunk started between the previous and the current token."""
    return ((prev_tag, tag) in _STARTS
            or (tag not in ("O", ".") and prev_type != type_)
            or tag in ("[", "]"))


_ENDS = frozenset({("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")})
_STARTS = frozenset({("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")})


def evaluate(sentences: Iterable[Sequence[tuple[str, str]]]) -> ConllevalResult:
    """Scores `(gold_tag, predicted_tag)` sentences as conlleval scores a file of them, each sentence
    followed by a blank line (a boundary: both sides `O`, not a token). A file whose last line is not
    blank gets the same counts from conlleval, except with typeless or odd tags (`X`, `.`, `O-A`)."""
    tokens = correct_tags = correct = phrases = found = 0
    correct_by: collections.Counter[str] = collections.Counter()
    phrases_by: collections.Counter[str] = collections.Counter()
    found_by: collections.Counter[str] = collections.Counter()
    last_c, last_ct, last_g, last_gt = "O", "", "O", ""
    in_correct = False
    for sentence in sentences:
        for pair in [*sentence, None]:  # None: the boundary after the sentence
            if pair is None:
                (c, ct), (g, gt) = ("O", ""), ("O", "")
            else:
                (c, ct), (g, gt) = split_tag(pair[0]), split_tag(pair[1])
            if in_correct:
                end_c = end_of_chunk(last_c, c, last_ct, ct)
                end_g = end_of_chunk(last_g, g, last_gt, gt)
                if end_c and end_g and last_gt == last_ct:
                    in_correct = False
                    correct += 1
                    correct_by[last_ct] += 1
                elif end_c != end_g or gt != ct:
                    in_correct = False
            start_c = start_of_chunk(last_c, c, last_ct, ct)
            start_g = start_of_chunk(last_g, g, last_gt, gt)
            if start_c and start_g and gt == ct:
                in_correct = True
            if start_c:
                phrases += 1
                phrases_by[ct] += 1
            if start_g:
                found += 1
                found_by[gt] += 1
            if pair is not None:
                correct_tags += c == g and ct == gt
                tokens += 1
            last_c, last_ct, last_g, last_gt = c, ct, g, gt
    if in_correct:  # conlleval's end-of-input rule
        correct += 1
        correct_by[last_ct] += 1
    precision, recall, f1 = _scores(correct, found, phrases)
    per_type = {name: TypeScores(*_scores(correct_by[name], found_by[name], phrases_by[name]),
                                 found_by[name])
                for name in sorted(set(phrases_by) | set(found_by))}
    return ConllevalResult(tokens=tokens, phrases=phrases, found=found, correct=correct,
                           correct_tags=correct_tags,
                           accuracy=100 * correct_tags / tokens if tokens else 0.0,
                           precision=precision, recall=recall, f1=f1, per_type=per_type,
                           phrases_per_type={name: phrases_by[name] for name in per_type})


def _scores(correct: int, found: int, phrases: int) -> tuple[float, float, float]:
    """Precision, recall, FB1 with conlleval's operation order and its zeros for empty denominators."""
    precision = 100 * correct / found if found > 0 else 0.0
    recall = 100 * correct / phrases if phrases > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


def report(result: ConllevalResult) -> str:
    """The text conlleval.pl prints for `result`, byte for byte: its printf widths, no accuracy line
    when there are no tokens, and (a quirk of its sort) the line of the empty type "", which tags
    without a type make, twice when both gold and predictions have it."""
    lines = [f"processed {result.tokens} tokens with {result.phrases} phrases; "
             f"found: {result.found} phrases; correct: {result.correct}.\n"]
    if result.tokens > 0:
        lines.append(f"accuracy: {result.accuracy:6.2f}%; precision: {result.precision:6.2f}%; "
                     f"recall: {result.recall:6.2f}%; FB1: {result.f1:6.2f}\n")
    for name, s in result.per_type.items():
        if name == "" and result.phrases_per_type[name] and s.found:
            lines.append(" " * 17 + _type_line(s))
        padding = " " * max(0, 17 - len(name.encode("utf-8")))  # Perl's %17s counts bytes
        lines.append(f"{padding}{name}{_type_line(s)}")
    return "".join(lines)


def _type_line(s: TypeScores) -> str:
    return f": precision: {s.precision:6.2f}%; recall: {s.recall:6.2f}%; FB1: {s.f1:6.2f}  {s.found}\n"


def read_predictions(path: str) -> list[list[tuple[str, str]]]:
    """Reads a predictions file as conlleval does: per line, whitespace-separated fields whose last
    two are the gold and predicted tags (`token gold pred`, `token POS chunk gold pred`, ...); every
    line has the same number of fields, at least 3; a blank line or a first field `-X-` ends a
    sentence. Raises ConllevalError naming the file and line. `path` "-" reads standard input."""
    try:
        if path == "-":
            raw_lines = sys.stdin.buffer.read().split(b"\n")
            path = "standard input"
        else:
            with open(path, "rb") as f:
                raw_lines = f.read().split(b"\n")
    except OSError as e:
        raise ConllevalError(f"cannot read {path}: {e.strerror or e}") from None
    sentences: list[list[tuple[str, str]]] = []
    sentence: list[tuple[str, str]] = []
    width = first_line = 0
    for number, raw in enumerate(raw_lines, start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConllevalError(f"{path} line {number}: not valid UTF-8 (byte {e.start + 1} of "
                                 "the line)") from None
        fields = [field.decode("utf-8") for field in raw.split()]  # split at ASCII whitespace only
        if not fields:
            if sentence:
                sentences.append(sentence)
            sentence = []
            continue
        if not width:
            if len(fields) < 3:
                raise ConllevalError(f"{path} line {number}: {len(fields)} field(s); a line needs at "
                                     "least 3: token ... gold-tag predicted-tag")
            width, first_line = len(fields), number
        elif len(fields) != width:
            raise ConllevalError(f"{path} line {number}: unexpected number of fields: {len(fields)} "
                                 f"(line {first_line} has {width}; conlleval needs the same in every line)")
        if fields[0] == _BOUNDARY:
            if sentence:
                sentences.append(sentence)
            sentence = []
        else:
            sentence.append((fields[-2], fields[-1]))
    if sentence:
        sentences.append(sentence)
    if not sentences:
        raise ConllevalError(f"{path} holds no tokens (expected lines `token ... gold-tag predicted-tag`)")
    return sentences


def main(argv: Sequence[str] | None = None) -> int:
    """CLI (`bert-tf-conlleval [FILE] [--report]`, FILE or standard input): prints conlleval's scores of FILE as JSON, or its
    text with --report; a bad file ends as one `PROG: error: ...` line and exit status 1."""
    from bert_tf import cli  # absl, not TensorFlow: kept out of the library import

    parser = argparse.ArgumentParser(prog=cli.program_name(),
                                     description="Entity-level NER scores exactly as CoNLL's conlleval.")
    parser.add_argument("file", nargs="?", default="-",
                        help="predictions: per line `token ... gold-tag predicted-tag`; a blank line "
                             "ends a sentence (default, or `-`: standard input, as `conlleval.pl < FILE`)")
    parser.add_argument("--report", action="store_true",
                        help="print conlleval's own text instead of JSON")
    args = parser.parse_args(argv)
    result = run_or_exit(lambda: evaluate(read_predictions(args.file)), parser.prog)
    if args.report:
        sys.stdout.write(report(result))
    else:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

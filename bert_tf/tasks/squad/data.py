"""SQuAD examples and features exactly as the original `run_squad.py` makes them.

`read_squad_examples` splits each context on whitespace (space, tab, CR, LF, U+202F) into the
"original words" that answers and predictions are expressed in; `convert_examples_to_features`
WordPiece-tokenizes question and context and cuts the context into overlapping windows of
`max_seq_length` (`[CLS] question [SEP] window [SEP]`), `doc_stride` apart, recording for each
window position its original word and whether this window gives the token its most context.
Same unique ids (from 1000000000), same order, same fields as the original's `InputFeatures`.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Iterable, Iterator, NamedTuple

from bert_tf.errors import BertTfError
from bert_tf.text import tokenization

FIRST_UNIQUE_ID = 1000000000
_log = logging.getLogger(__name__)


class SquadDataError(BertTfError, ValueError):
    """A SQuAD file that cannot be read as the original reads it."""


@dataclasses.dataclass
class SquadExample:
    """One question on one context; positions are indexes into `doc_tokens` (training only)."""
    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeatures:
    """One window of one example, as fed to the model (the original's `InputFeatures`)."""
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]
    token_is_max_context: dict[int, bool]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


class DocSpan(NamedTuple):
    start: int
    length: int


def _is_whitespace(char: str) -> bool:
    return char in " \t\r\n" or ord(char) == 0x202F


def split_context(text: str) -> tuple[list[str], list[int]]:
    """(whitespace-separated words, word index of every character) of a context."""
    words: list[str] = []
    char_to_word: list[int] = []
    previous_is_space = True
    for char in text:
        if _is_whitespace(char):
            previous_is_space = True
        else:
            if previous_is_space:
                words.append(char)
            else:
                words[-1] += char
            previous_is_space = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def load_squad_json(input_file: str | os.PathLike) -> list[dict]:
    """The "data" list of a SQuAD json file, with one readable error naming the file (and the bad field)."""
    try:
        with open(input_file, encoding="utf-8") as f:
            dataset = json.load(f)["data"]
        check_squad_shape(dataset, str(input_file))
        return dataset
    except FileNotFoundError:
        raise SquadDataError(f"SQuAD file not found: {input_file}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SquadDataError(f"{input_file} is not a SQuAD json file: {e}") from None
    except (KeyError, TypeError):
        raise SquadDataError(f"{input_file} has no top-level \"data\" list; is it a SQuAD file?") from None


_FIELDS = {"article": (("paragraphs", list),), "paragraph": (("context", str), ("qas", list)),
           "qa": (("id", str), ("question", str)), "answer": (("text", str), ("answer_start", int))}


def check_squad_shape(dataset, input_file: str) -> None:
    """SquadDataError naming the file and the path of the first field that is not as SQuAD has it
    (e.g. `data[0].paragraphs[2].qas[1].question`)."""
    def need(obj, kind: str, path: str) -> None:
        if not isinstance(obj, dict):
            raise SquadDataError(f"{input_file}: {path} should be an object, found {type(obj).__name__}")
        for name, expected in _FIELDS[kind]:
            value = obj.get(name)
            if not isinstance(value, expected) or isinstance(value, bool):
                found = "nothing" if name not in obj else type(value).__name__
                raise SquadDataError(f"{input_file}: {path}.{name} should be a {expected.__name__}, found {found}")

    if not isinstance(dataset, list):
        raise SquadDataError(f"{input_file}: data should be a list of articles, found {type(dataset).__name__}")
    for a, article in enumerate(dataset):
        need(article, "article", f"data[{a}]")
        for p, paragraph in enumerate(article["paragraphs"]):
            need(paragraph, "paragraph", f"data[{a}].paragraphs[{p}]")
            if not paragraph["context"].strip():
                raise SquadDataError(f"{input_file}: data[{a}].paragraphs[{p}].context is empty")
            for q, qa in enumerate(paragraph["qas"]):
                need(qa, "qa", f"data[{a}].paragraphs[{p}].qas[{q}]")
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise SquadDataError(f"{input_file}: data[{a}].paragraphs[{p}].qas[{q}].answers should be a "
                                         f"list, found {type(answers).__name__}")
                for n, answer in enumerate(answers):
                    need(answer, "answer", f"data[{a}].paragraphs[{p}].qas[{q}].answers[{n}]")


def read_squad_examples(input_file: str | os.PathLike, is_training: bool,
                        version_2_with_negative: bool = False) -> list[SquadExample]:
    """The original's `read_squad_examples` (its FLAGS.version_2_with_negative is an argument here).

    For training, every answerable question needs exactly one answer (else ValueError, as the
    original), and answers whose text cannot be found in their words are skipped with a warning.
    """
    examples, skipped, questions = [], 0, 0
    for entry in load_squad_json(input_file):
        for paragraph in entry["paragraphs"]:
            doc_tokens, char_to_word = split_context(paragraph["context"])
            for qa in paragraph["qas"]:
                questions += 1
                example = SquadExample(qas_id=qa["id"], question_text=qa["question"], doc_tokens=doc_tokens)
                if is_training and not _add_training_answer(example, qa, char_to_word, version_2_with_negative,
                                                            str(input_file)):
                    skipped += 1
                    continue
                examples.append(example)
    if skipped:
        _log.warning("%s: skipped %d of %d training questions whose answer text is not at its answer_start",
                     input_file, skipped, questions)
    return examples


def _add_training_answer(example: SquadExample, qa: dict, char_to_word: list[int], version_2: bool,
                         input_file: str = "the SQuAD file") -> bool:
    """Sets the example's answer span; False when the answer text is not found (example skipped)."""
    example.is_impossible = bool(qa.get("is_impossible", False)) if version_2 else False
    if example.is_impossible:
        example.start_position = example.end_position = -1
        example.orig_answer_text = ""
        return True
    if len(qa["answers"]) != 1:
        raise SquadDataError(f"{input_file}: for training, each question should have exactly 1 answer "
                             f"(question {qa['id']} has {len(qa['answers'])})")
    answer = qa["answers"][0]
    text, offset = answer["text"], answer["answer_start"]
    if not text or not 0 <= offset <= offset + len(text) - 1 < len(char_to_word):
        _log.warning("Could not find answer: %r at %d (the context has %d characters)", text, offset,
                     len(char_to_word))
        return False
    example.orig_answer_text = text
    example.start_position = char_to_word[offset]
    example.end_position = char_to_word[offset + len(text) - 1]
    actual = " ".join(example.doc_tokens[example.start_position:example.end_position + 1])
    cleaned = " ".join(tokenization.whitespace_tokenize(text))
    if actual.find(cleaned) == -1:
        _log.warning("Could not find answer: '%s' vs. '%s'", actual, cleaned)
        return False
    return True


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[DocSpan]:
    """The original's sliding windows over a context of `num_tokens` wordpieces."""
    spans: list[DocSpan] = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def is_max_context(spans: list[DocSpan], span_index: int, position: int) -> bool:
    """True when window `span_index` gives the token at `position` its most context (the original's score)."""
    best_score, best_index = None, None
    for index, span in enumerate(spans):
        end = span.start + span.length - 1
        if position < span.start or position > end:
            continue
        score = min(position - span.start, end - position) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def improve_answer_span(doc_tokens: list[str], start: int, end: int, tokenizer, answer_text: str) -> tuple[int, int]:
    """The smallest wordpiece span inside [start, end] whose text equals the tokenized answer."""
    answer = " ".join(tokenizer.tokenize(answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def convert_examples_to_features(examples: Iterable[SquadExample], tokenizer, max_seq_length: int,
                                 doc_stride: int, max_query_length: int, is_training: bool) -> Iterator[SquadFeatures]:
    """Yields the original's features for each example, window by window, in unique-id order."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3")
    unique_id = FIRST_UNIQUE_ID
    for example_index, example in enumerate(examples):
        for feature in _example_features(example, example_index, tokenizer, max_seq_length, doc_stride,
                                         max_query_length, is_training):
            feature.unique_id = unique_id
            unique_id += 1
            yield feature


def _example_features(example, example_index, tokenizer, max_seq_length, doc_stride, max_query_length,
                      is_training) -> Iterator[SquadFeatures]:
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    tok_to_orig, orig_to_tok, all_doc_tokens = [], [], []
    for i, word in enumerate(example.doc_tokens):
        orig_to_tok.append(len(all_doc_tokens))
        for piece in tokenizer.tokenize(word):
            tok_to_orig.append(i)
            all_doc_tokens.append(piece)
    answer_span = None
    if is_training and not example.is_impossible:
        start = orig_to_tok[example.start_position]
        if example.end_position < len(example.doc_tokens) - 1:
            end = orig_to_tok[example.end_position + 1] - 1
        else:
            end = len(all_doc_tokens) - 1
        answer_span = improve_answer_span(all_doc_tokens, start, end, tokenizer, example.orig_answer_text)
    spans = doc_spans(len(all_doc_tokens), max_seq_length - len(query_tokens) - 3, doc_stride)
    for span_index, span in enumerate(spans):
        tokens = ["[CLS]", *query_tokens, "[SEP]"]
        segment_ids = [0] * len(tokens)
        token_to_orig_map, token_is_max_context = {}, {}
        for position in range(span.start, span.start + span.length):
            token_to_orig_map[len(tokens)] = tok_to_orig[position]
            token_is_max_context[len(tokens)] = is_max_context(spans, span_index, position)
            tokens.append(all_doc_tokens[position])
            segment_ids.append(1)
        tokens.append("[SEP]")
        segment_ids.append(1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = max_seq_length - len(input_ids)
        feature = SquadFeatures(
            unique_id=0, example_index=example_index, doc_span_index=span_index, tokens=tokens,
            token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
            input_ids=input_ids + [0] * padding, input_mask=[1] * len(input_ids) + [0] * padding,
            segment_ids=segment_ids + [0] * padding, is_impossible=example.is_impossible)
        if is_training:
            feature.start_position, feature.end_position = _window_answer(answer_span, span, len(query_tokens))
        yield feature


def _window_answer(answer_span, span: DocSpan, query_length: int) -> tuple[int, int]:
    """Answer start/end inside one window; (0, 0) ([CLS]) when unanswerable or outside the window."""
    if answer_span is None:
        return 0, 0
    start, end = answer_span
    if not (start >= span.start and end <= span.start + span.length - 1):
        return 0, 0
    offset = query_length + 2 - span.start
    return start + offset, end + offset

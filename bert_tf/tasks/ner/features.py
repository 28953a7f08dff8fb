"""Token-tagging windows: each sentence's words labelled on their first sub-token, inside as much of
their document as fits (the paper's "maximal document context", section 5.3).

A sentence's words are scored in one window, or, when its sub-tokens exceed --max_seq_length - 2,
in consecutive pieces that each get a window: every word is scored exactly once, none dropped.
Around the scored piece, a window holds the surrounding tokens of its document (`context="document"`)
or of its own sentence (`context="sentence"`), split evenly before and after it, the side that
runs out giving its share to the other. Context tokens, [CLS] and [SEP] have label weight 0, as do
a word's later sub-tokens: they are neither trained nor predicted. Segment ids are all 0 (one text).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from bert_tf.tasks.ner.conll import Sentence

CONTEXTS = ("document", "sentence")


@dataclasses.dataclass(frozen=True)
class TagWindow:
    """One model row: its ids, and which words of which sentence it scores at which positions."""

    input_ids: list[int]
    label_ids: list[int]
    sentence: int
    words: tuple[int, ...]
    positions: tuple[int, ...]

    def row(self, max_seq_length: int) -> dict[str, Any]:
        """The feature row, padded to max_seq_length (label_weights mark the scored positions)."""
        pad = max_seq_length - len(self.input_ids)
        labels, weights = [0] * len(self.input_ids), [0.0] * len(self.input_ids)
        for position, label in zip(self.positions, self.label_ids):
            labels[position], weights[position] = label, 1.0
        return {"input_ids": self.input_ids + [0] * pad, "input_mask": [1] * len(self.input_ids) + [0] * pad,
                "segment_ids": [0] * max_seq_length, "label_ids": labels + [0] * pad,
                "label_weights": weights + [0.0] * pad}


@dataclasses.dataclass
class _Token:
    piece: str
    sentence: int
    word: int  # -1 for a word's later sub-tokens


def tag_windows(sentences: Sequence[Sentence], labels: Sequence[str], tokenizer, max_seq_length: int,
                context: str = "document") -> list[TagWindow]:
    """The windows of `sentences` (in order: by sentence, then piece), labels by index in `labels`
    (untagged sentences get label 0)."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    budget = max_seq_length - 2
    label_index = {label: i for i, label in enumerate(labels)}
    windows: list[TagWindow] = []
    for group in _groups(sentences, context):
        stream = [token for s in group for token in _tokens(sentences[s], s, tokenizer, budget)]
        starts = _sentence_starts(stream)
        for s in group:
            for begin, end in _pieces(stream, starts[s], budget):
                windows.append(_window(stream, begin, end, budget, sentences, label_index, tokenizer))
    return windows


def _groups(sentences: Sequence[Sentence], context: str) -> list[list[int]]:
    """Indices of the sentences that share a context stream: a document's, or each sentence alone."""
    if context == "sentence":
        return [[i] for i in range(len(sentences))]
    groups: list[list[int]] = []
    for i, sentence in enumerate(sentences):
        if groups and sentences[groups[-1][-1]].document == sentence.document:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _tokens(sentence: Sentence, index: int, tokenizer, budget: int) -> list[_Token]:
    """A sentence's sub-tokens; a word that tokenizes to nothing becomes [UNK] (it is still scored),
    and a word longer than a whole window keeps its first `budget` sub-tokens."""
    tokens = []
    for w, word in enumerate(sentence.words):
        pieces = tokenizer.tokenize(word)[:budget] or ["[UNK]"]
        tokens.extend(_Token(piece, index, w if k == 0 else -1) for k, piece in enumerate(pieces))
    return tokens


def _sentence_starts(stream: Sequence[_Token]) -> dict[int, tuple[int, int]]:
    """sentence index -> (first, end) token offsets in the stream."""
    spans: dict[int, tuple[int, int]] = {}
    for i, token in enumerate(stream):
        first, _ = spans.get(token.sentence, (i, i))
        spans[token.sentence] = (first, i + 1)
    return spans


def _pieces(stream: Sequence[_Token], span: tuple[int, int], budget: int) -> list[tuple[int, int]]:
    """The sentence's token range cut at word starts into pieces of at most `budget` tokens."""
    first, end = span
    pieces, begin = [], first
    while begin < end:
        stop = min(begin + budget, end)
        while stop < end and stream[stop].word < 0:  # never split a word
            stop -= 1
        if stop == begin:  # cannot happen: a word has at most `budget` sub-tokens
            raise AssertionError("a word longer than the window")
        pieces.append((begin, stop))
        begin = stop
    return pieces


def _window(stream: Sequence[_Token], begin: int, end: int, budget: int, sentences: Sequence[Sentence],
            label_index: dict[str, int], tokenizer) -> TagWindow:
    room = budget - (end - begin)
    left = min(begin, room // 2)
    right = min(len(stream) - end, room - left)
    left = min(begin, room - right)
    tokens = stream[begin - left:end + right]
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + [t.piece for t in tokens] + ["[SEP]"])
    scored = [(1 + left + k, token) for k, token in enumerate(stream[begin:end]) if token.word >= 0]
    sentence = sentences[stream[begin].sentence]
    tags = sentence.tags
    return TagWindow(
        input_ids=ids, label_ids=[label_index[tags[t.word]] if tags else 0 for _, t in scored],
        sentence=stream[begin].sentence, words=tuple(t.word for _, t in scored),
        positions=tuple(p for p, _ in scored))

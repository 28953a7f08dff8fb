"""SpanBERT's span masking (Joshi et al. 2020, section 3.1), per instance, for data preparation.

Until the masking budget is used: draw a span length in words from a geometric distribution (p = 0.2)
clipped to 1..10 and renormalised (mean 3.79 words, as SpanBERT's `PairWithSpanMaskingScheme`), an
anchor token uniformly among the maskable tokens (so a word is chosen in proportion to its pieces, as
SpanBERT's), and mask whole words from the anchor's word on. Each span is replaced as one: all its
tokens become [MASK], or all keep their token, or all become random words (the paper: "we perform this
replacement at the span level"). Where this differs from SpanBERT's code, and why:
  * the budget is the original BERT's (`min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))`,
    so a record holds all its predictions) and only whole words are masked: a word that would overflow it
    ends the span instead of being cut (SpanBERT cuts the last word);
  * a span stays within its segment (never across the middle [SEP]); spans never contain [CLS] or [SEP];
  * the number of draws is bounded (`max_span_draws`), so that a row whose remaining budget fits no
    unmasked word ends (SpanBERT's loop would not; the original's whole-word masking skips such words too).
The same algorithm, vectorised over a batch with stateless random ops, is dynamic masking's
(bert_tf.pretraining.dynamic_masking); both read the constants here. No TensorFlow is imported.
"""
from __future__ import annotations

import bisect
from typing import Sequence

GEOMETRIC_P = 0.2
MAX_SPAN_WORDS = 10
# P(length = l) for l = 1..10: p (1 - p)^(l - 1), renormalised over the clipped range.
_WEIGHTS = [GEOMETRIC_P * (1 - GEOMETRIC_P) ** (length - 1) for length in range(1, MAX_SPAN_WORDS + 1)]
SPAN_LENGTH_PROBS = tuple(w / sum(_WEIGHTS) for w in _WEIGHTS)
# Cumulative, with the last bound exactly 1 so that a uniform draw in [0, 1) always finds a length.
SPAN_LENGTH_CDF = tuple(min(sum(SPAN_LENGTH_PROBS[:k + 1]), 1.0) for k in range(MAX_SPAN_WORDS - 1)) + (1.0,)
MEAN_SPAN_WORDS = sum(length * p for length, p in enumerate(SPAN_LENGTH_PROBS, start=1))


def max_span_draws(max_predictions_per_seq: int) -> int:
    """The most span draws per sequence: enough for the budget many times over (a draw whose anchor is
    already masked adds nothing), and a bound where the remaining budget fits no word."""
    return 4 * max_predictions_per_seq + 16


def span_length(uniform: float) -> int:
    """The span length (words) of a uniform draw in [0, 1): the clipped geometric distribution's inverse CDF."""
    return bisect.bisect_right(SPAN_LENGTH_CDF, uniform) + 1


def choose_spans(groups: Sequence[Sequence[int]], num_a: int, budget: int, max_predictions_per_seq: int,
                 rng) -> list[list[int]]:
    """Spans of whole words (lists of positions, one per draw that masked something) covering at most
    `budget` tokens. `groups` are the words (positions, in order) as whole-word masking groups them;
    `num_a` tells A's words (start <= num_a) from B's; `rng` has `random()` and `randint()`."""
    positions = [p for group in groups for p in group]
    word_of = {p: w for w, group in enumerate(groups) for p in group}
    segment = [int(group[0] > num_a) for group in groups]
    masked = [False] * len(groups)
    count, spans = 0, []
    for _ in range(max_span_draws(max_predictions_per_seq)):
        if count >= budget or count == len(positions):
            break
        length = span_length(rng.random())
        anchor = word_of[positions[rng.randint(0, len(positions) - 1)]]
        if masked[anchor]:
            continue
        span: list[int] = []
        for w in range(anchor, min(anchor + length, len(groups))):
            if segment[w] != segment[anchor]:
                break
            if masked[w]:  # covered by an earlier span: costs nothing, the span goes on
                continue
            if count + len(groups[w]) > budget:
                break
            masked[w] = True
            count += len(groups[w])
            span.extend(groups[w])
        if span:
            spans.append(span)
    return spans


def replace_spans(ids: Sequence[int], spans: list[list[int]], mask_id: int, random_word_ids: Sequence[int],
                  thresholds: tuple[float, float, float], rng) -> list[int]:
    """`ids` with each span replaced as one: all [MASK], all kept, or each token a random word, with the
    shares of `InstanceOptions.replacement_thresholds()` (drawn as the faithful mode's per-token masking)."""
    output = list(ids)
    mask, _, keep = thresholds
    num_words = len(random_word_ids)
    for span in spans:
        if rng.random() < mask:
            for index in span:
                output[index] = mask_id
        elif rng.random() >= keep:  # else: the span keeps its tokens
            for index in span:
                output[index] = random_word_ids[rng.randint(0, num_words - 1)]
    return output

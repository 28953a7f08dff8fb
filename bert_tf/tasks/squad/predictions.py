"""SQuAD post-processing exactly as the original `run_squad.py` does it: logits -> answer texts.

`write_predictions` takes the per-window start/end logits of every feature, keeps the best valid
spans of each example, maps them back to the original context text (`get_final_text`) and writes
`predictions.json`, `nbest_predictions.json` and, for SQuAD 2.0, `null_odds.json`, byte for byte
as the original writes them (`json.dumps(obj, indent=4) + "\\n"`, keys in example order). All the
arithmetic is Python float64 arithmetic in the original's order, so the numbers are identical too.
The original's FLAGS (`version_2_with_negative`, `null_score_diff_threshold`, `verbose_logging`)
are arguments here. No TensorFlow is imported.
"""
from __future__ import annotations

import collections
import logging
import math
import os
from typing import Iterable, NamedTuple, Sequence

from bert_tf.text import tokenization
from bert_tf.data.atomic_io import write_json_atomic
from bert_tf.tasks.squad.data import SquadExample, SquadFeatures

_log = logging.getLogger(__name__)

NONCE_TEXT = "empty"  # the original's placeholder answer when an example has no valid span
_INITIAL_NULL_SCORE = 1000000  # the original's "large and positive" start for the minimum null score


class RawResult(NamedTuple):
    """The model's output for one feature (one window)."""
    unique_id: int
    start_logits: Sequence[float]
    end_logits: Sequence[float]


class Predictions(NamedTuple):
    """What `write_predictions` writes, as the dicts it serialises (null_odds empty for v1.1)."""
    predictions: "collections.OrderedDict[str, str]"
    nbest: "collections.OrderedDict[str, list[collections.OrderedDict]]"
    null_odds: "collections.OrderedDict[str, float]"


class _Candidate(NamedTuple):
    feature_index: int
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float


class _NbestEntry(NamedTuple):
    text: str
    start_logit: float
    end_logit: float


def _compute_softmax(scores: Sequence[float]) -> list[float]:
    """Softmax with math.exp after subtracting the maximum; sums in order, as the original."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total = 0.0
    for x in exp_scores:  # not sum(): Python 3.12+ sums floats with compensation
        total += x
    return [x / total for x in exp_scores]


def _get_best_indexes(logits: Sequence[float], n_best_size: int) -> list[int]:
    """Indexes of the `n_best_size` largest logits, best first; ties keep index order."""
    order = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return order[:n_best_size]


def _strip_spaces(text: str) -> tuple[str, list[int]]:
    """`text` without its " " characters, and each kept character's position in `text`."""
    positions = [i for i, c in enumerate(text) if c != " "]
    return "".join(text[i] for i in positions), positions


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool, verbose_logging: bool = False) -> str:
    """The part of `orig_text` (original words) that the normalised `pred_text` covers.

    E.g. pred "steve smith", orig "Steve Smith's" -> "Steve Smith". Re-tokenizes `orig_text` with
    the BasicTokenizer, finds `pred_text` in it and maps its ends back character by character,
    spaces ignored. Whenever that alignment fails (text not found, different lengths without
    spaces, an end that falls on a space) it returns `orig_text` unchanged, as the original.
    """
    tok_text = " ".join(tokenization.BasicTokenizer(do_lower_case=do_lower_case).tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        if verbose_logging:
            _log.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return orig_text
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            _log.info("Length not equal after stripping spaces: '%s' vs '%s'", orig_ns_text, tok_ns_text)
        return orig_text

    # Equal lengths without spaces: the characters are taken to be aligned one to one.
    tok_s_to_ns = {s: ns for ns, s in enumerate(tok_ns_to_s)}
    if start_position not in tok_s_to_ns:
        if verbose_logging:
            _log.info("Couldn't map start position")
        return orig_text
    if end_position not in tok_s_to_ns:
        if verbose_logging:
            _log.info("Couldn't map end position")
        return orig_text
    orig_start = orig_ns_to_s[tok_s_to_ns[start_position]]
    orig_end = orig_ns_to_s[tok_s_to_ns[end_position]]
    return orig_text[orig_start:orig_end + 1]


def _span_candidates(feature_index: int, feature: SquadFeatures, start_logits: list[float],
                     end_logits: list[float], n_best_size: int, max_answer_length: int) -> list[_Candidate]:
    """Valid spans among the top start x top end indexes of one window, in the original's order."""
    candidates = []
    num_tokens = len(feature.tokens)
    for start in _get_best_indexes(start_logits, n_best_size):
        for end in _get_best_indexes(end_logits, n_best_size):
            if start >= num_tokens or end >= num_tokens:
                continue
            if start not in feature.token_to_orig_map or end not in feature.token_to_orig_map:
                continue
            if not feature.token_is_max_context.get(start, False):
                continue
            if end < start or end - start + 1 > max_answer_length:
                continue
            candidates.append(_Candidate(feature_index, start, end, start_logits[start], end_logits[end]))
    return candidates


def _span_text(example: SquadExample, feature: SquadFeatures, cand: _Candidate, do_lower_case: bool,
               verbose_logging: bool) -> str:
    """The answer text of a non-null span, in the example's original words."""
    tok_text = " ".join(feature.tokens[cand.start_index:cand.end_index + 1])
    tok_text = tok_text.replace(" ##", "").replace("##", "")  # undo WordPiece splits
    tok_text = " ".join(tok_text.strip().split())
    first_word = feature.token_to_orig_map[cand.start_index]
    last_word = feature.token_to_orig_map[cand.end_index]
    orig_text = " ".join(example.doc_tokens[first_word:last_word + 1])
    return get_final_text(tok_text, orig_text, do_lower_case, verbose_logging)


def write_predictions(examples: Sequence[SquadExample], features: Iterable[SquadFeatures],
                      results: Iterable[RawResult], n_best_size: int, max_answer_length: int,
                      do_lower_case: bool, output_prediction_file: str | os.PathLike,
                      output_nbest_file: str | os.PathLike,
                      output_null_log_odds_file: str | os.PathLike | None = None,
                      version_2_with_negative: bool = False, null_score_diff_threshold: float = 0.0,
                      verbose_logging: bool = False) -> Predictions:
    """The original's `write_predictions`: writes the json files (each atomically) and returns them.

    Per example: every valid span of every window (see `_span_candidates`) plus, for v2.0, the null
    span of the window with the lowest null score `start_logits[0] + end_logits[0]`, sorted by
    start + end logit; the first `n_best_size` distinct texts form the n-best list, with softmax
    probabilities. v1.1 predicts the best text (the nonce "empty" when no valid span exists); v2.0
    predicts "" when null score - best non-null score > `null_score_diff_threshold`, and writes
    that difference to `output_null_log_odds_file` (skipped when that path is None).

    Deviation: with v2.0, when an example's n-best holds no non-null text (no valid span among
    the top start x top end indexes), the original crashes (AttributeError on `None.start_logit`).
    Here the nonce `{"text": "empty", "start_logit": 0.0, "end_logit": 0.0}` is put first in its
    n-best, as HuggingFace's port of this code does, and serves as the best non-null answer: the
    null odds are the null score itself and the prediction is "" unless that score is at most the
    threshold (then "empty"). All examples on which the original completes are unaffected.
    """
    _log.info("Writing predictions to: %s", output_prediction_file)
    _log.info("Writing nbest to: %s", output_nbest_file)
    features_by_example = collections.defaultdict(list)
    for feature in features:
        features_by_example[feature.example_index].append(feature)
    result_by_id = {result.unique_id: result for result in results}

    all_predictions: collections.OrderedDict[str, str] = collections.OrderedDict()
    all_nbest: collections.OrderedDict[str, list] = collections.OrderedDict()
    null_odds: collections.OrderedDict[str, float] = collections.OrderedDict()
    for example_index, example in enumerate(examples):
        example_features = features_by_example[example_index]
        candidates: list[_Candidate] = []
        score_null = _INITIAL_NULL_SCORE
        null = _Candidate(0, 0, 0, 0, 0)  # the window with the minimum null score, its logits
        for feature_index, feature in enumerate(example_features):
            result = result_by_id[feature.unique_id]
            # Python floats, as the original receives them (float32 values convert exactly).
            start_logits = [float(x) for x in result.start_logits]
            end_logits = [float(x) for x in result.end_logits]
            if version_2_with_negative and start_logits[0] + end_logits[0] < score_null:
                score_null = start_logits[0] + end_logits[0]
                null = _Candidate(feature_index, 0, 0, start_logits[0], end_logits[0])
            candidates += _span_candidates(feature_index, feature, start_logits, end_logits,
                                           n_best_size, max_answer_length)
        if version_2_with_negative:
            candidates.append(null)
        candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)  # stable, as sorted()

        nbest: list[_NbestEntry] = []
        seen: set[str] = set()
        for cand in candidates:
            if len(nbest) >= n_best_size:
                break
            if cand.start_index > 0:
                text = _span_text(example, example_features[cand.feature_index], cand, do_lower_case,
                                  verbose_logging)
                if text in seen:
                    continue
            else:
                text = ""  # the null answer; the original does not check it against `seen`
            seen.add(text)
            nbest.append(_NbestEntry(text, cand.start_logit, cand.end_logit))
        if version_2_with_negative and "" not in seen:
            nbest.append(_NbestEntry("", null.start_logit, null.end_logit))
        if not nbest:  # no valid span at all (reached with v1.1 only)
            nbest.append(_NbestEntry(NONCE_TEXT, 0.0, 0.0))
        best_non_null = next((entry for entry in nbest if entry.text), None)
        if version_2_with_negative and best_non_null is None:  # only "": the original crashes here
            best_non_null = _NbestEntry(NONCE_TEXT, 0.0, 0.0)
            nbest.insert(0, best_non_null)

        probs = _compute_softmax([entry.start_logit + entry.end_logit for entry in nbest])
        all_nbest[example.qas_id] = [
            collections.OrderedDict([("text", entry.text), ("probability", prob),
                                     ("start_logit", entry.start_logit), ("end_logit", entry.end_logit)])
            for entry, prob in zip(nbest, probs)]
        if not version_2_with_negative:
            all_predictions[example.qas_id] = nbest[0].text
        else:
            score_diff = score_null - best_non_null.start_logit - best_non_null.end_logit
            null_odds[example.qas_id] = score_diff
            all_predictions[example.qas_id] = "" if score_diff > null_score_diff_threshold else best_non_null.text

    _write_json(output_prediction_file, all_predictions)
    _write_json(output_nbest_file, all_nbest)
    if version_2_with_negative and output_null_log_odds_file is not None:
        _write_json(output_null_log_odds_file, null_odds)
    return Predictions(all_predictions, all_nbest, null_odds)


def _write_json(path: str | os.PathLike, obj) -> None:
    """The original's `json.dumps(obj, indent=4) + "\\n"`, keys in insertion order, written atomically."""
    write_json_atomic(path, obj, indent=4, sort_keys=False)

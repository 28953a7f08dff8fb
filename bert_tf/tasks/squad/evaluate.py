"""The official SQuAD v1.1 and v2.0 evaluation, reproduced value for value, stdlib only.

Published SQuAD scores are what the official `evaluate-v1.1.py` / `evaluate-v2.0.py` print, so a
reproduction must compute them the same way: the same normalisation (lower case, strip ASCII
punctuation, drop a/an/the, collapse whitespace), the same token-overlap F1 and max over gold
answers, the v2.0 no-answer threshold and best-threshold search, and the same order of float
operations, so the printed numbers are identical, not merely close. Run it as
`python -m bert_tf.tasks.squad.evaluate DATA PRED [--na-prob-file F] [--na-prob-thresh T] [--out-file F]`.
One deliberate difference: a question missing from the predictions scores 0 in v2.0 as in v1.1
(the official v2.0 script crashes with a KeyError); such messages go to stderr, so stdout stays JSON.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import string
import sys
from typing import Iterator

from bert_tf.data.atomic_io import atomic_write
from bert_tf.errors import BertTfError


class SquadEvaluationError(BertTfError, ValueError):
    """A dataset, prediction or na-prob file the evaluation cannot read; the message names it."""


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower case, remove punctuation, remove articles, collapse whitespace (official order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _questions(dataset: list) -> Iterator[dict]:
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


# ----------------------------------------------------------------------------------- v1.1


def f1_score_v1(prediction: str, ground_truth: str) -> float:
    """v1.1 token F1: 0 when nothing overlaps (also when either side normalises to nothing)."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(ground_truth).split()
    num_same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_v1(prediction: str, ground_truth: str) -> bool:
    """v1.1 exact match of the normalised strings."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def evaluate_v1(dataset: list, predictions: dict) -> dict:
    """Official v1.1 scores of `predictions` (id -> text) on `dataset` (the file's "data" list)."""
    exact_match = f1 = total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            print(f"Unanswered question {qa['id']} will receive score 0.", file=sys.stderr)
            continue
        prediction = predictions[qa["id"]]
        golds = [answer["text"] for answer in qa["answers"]]
        exact_match += max(exact_match_v1(prediction, gold) for gold in golds)
        f1 += max(f1_score_v1(prediction, gold) for gold in golds)
    if total == 0:
        raise ValueError("the dataset holds no questions")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ----------------------------------------------------------------------------------- v2.0


def get_tokens(text: str) -> list[str]:
    """Normalised tokens; the empty answer has none."""
    return normalize_answer(text).split() if text else []


def compute_exact(a_gold: str, a_pred: str) -> int:
    """1 if the normalised strings are equal, else 0."""
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
    """v2.0 token F1; when either side is empty it is 1 only if both are."""
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset: list, preds: dict) -> tuple[dict, dict]:
    """Per-question exact and F1 (max over gold answers; [''] for unanswerable); missing -> 0."""
    exact_scores, f1_scores = {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in preds:
            print(f"Missing prediction for {qid}; it will receive score 0.", file=sys.stderr)
            exact_scores[qid] = f1_scores[qid] = 0
            continue
        exact_scores[qid] = max(compute_exact(gold, preds[qid]) for gold in golds)
        f1_scores[qid] = max(compute_f1(gold, preds[qid]) for gold in golds)
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores: dict, na_probs: dict, qid_has_ans: dict, preds: dict,
                           na_prob_thresh: float) -> dict:
    """Questions whose na_prob exceeds the threshold count as answered "" (right iff unanswerable)."""
    new_scores = {}
    for qid, score in scores.items():
        if qid in preds and na_probs[qid] > na_prob_thresh:
            new_scores[qid] = float(not qid_has_ans[qid])
        else:
            new_scores[qid] = score
    return new_scores


def make_eval_dict(exact_scores: dict, f1_scores: dict, qid_list: list | None = None) -> dict:
    """exact / f1 (percent) / total over all questions or over `qid_list`."""
    if not qid_list:
        total = len(exact_scores)
        exact_sum, f1_sum = sum(exact_scores.values()), sum(f1_scores.values())
    else:
        total = len(qid_list)
        exact_sum = sum(exact_scores[k] for k in qid_list)
        f1_sum = sum(f1_scores[k] for k in qid_list)
    return collections.OrderedDict(
        [("exact", 100.0 * exact_sum / total), ("f1", 100.0 * f1_sum / total), ("total", total)])


def find_best_thresh(preds: dict, scores: dict, na_probs: dict, qid_has_ans: dict) -> tuple:
    """Best score (percent) and threshold, walking questions by rising na_prob (official search)."""
    # Threshold below every na_prob: all predicted "", so every unanswerable one (with a prediction) is right.
    cur_score = sum(1 for qid, has in qid_has_ans.items() if not has and qid in preds)
    best_score, best_thresh = cur_score, 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores or qid not in preds:
            continue
        if qid_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score, best_thresh = cur_score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset: list, predictions: dict, na_probs: dict | None = None,
                na_prob_thresh: float = 1.0) -> dict:
    """Official v2.0 scores (OrderedDict in the official key order); best_* only with na_probs."""
    qid_has_ans = {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}
    if not qid_has_ans:
        raise ValueError("the dataset holds no questions")
    if na_probs is None:
        probs = {k: 0.0 for k in predictions}
    else:
        probs = na_probs
        absent = [qid for qid in qid_has_ans if qid in predictions and qid not in na_probs]
        if absent:
            raise ValueError(f"the na-prob file has no entry for question {absent[0]} "
                             f"({len(absent)} predicted questions lack one)")
    exact_raw, f1_raw = get_raw_scores(dataset, predictions)
    exact_thresh = apply_no_ans_threshold(exact_raw, probs, qid_has_ans, predictions, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, probs, qid_has_ans, predictions, na_prob_thresh)
    out = make_eval_dict(exact_thresh, f1_thresh)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in qid_has_ans.items() if has == wanted]
        if qids:
            for key, value in make_eval_dict(exact_thresh, f1_thresh, qids).items():
                out[f"{prefix}_{key}"] = value
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = find_best_thresh(
            predictions, exact_raw, na_probs, qid_has_ans)
        out["best_f1"], out["best_f1_thresh"] = find_best_thresh(
            predictions, f1_raw, na_probs, qid_has_ans)
    return out


# ----------------------------------------------------------------------------------- CLI


def _load_json(path: str, what: str, expect: type):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except OSError as e:
        raise SquadEvaluationError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SquadEvaluationError(f"{what} {path} is not valid JSON: {e}") from None
    if not isinstance(value, expect):
        raise SquadEvaluationError(f"{what} {path} must hold a JSON object, "
                         f"got {type(value).__name__}")
    return value


def main(argv: list[str] | None = None) -> int:
    """CLI (`bert-tf-squad-evaluate`): scores PRED_FILE against DATA_FILE and prints the JSON like the
    official script; returns the exit status (1 after one `PROG: error: ...` line on a bad file)."""
    from bert_tf import cli

    parser = argparse.ArgumentParser(prog=cli.program_name(),
                                     description="Official SQuAD v1.1 / v2.0 evaluation.")
    parser.add_argument("data_file", help="SQuAD dataset JSON (v1.1 or v2.0)")
    parser.add_argument("pred_file", help="predictions JSON: question id -> answer text")
    parser.add_argument("--na-prob-file", "-n", help="v2.0: question id -> no-answer probability")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                        help='v2.0: predict "" when the no-answer probability exceeds this')
    parser.add_argument("--out-file", "-o", help="write the JSON result here instead of stdout")
    return cli.run_argparse(_evaluate_files, parser, argv)


def _evaluate_files(args: argparse.Namespace) -> None:
    dataset_json = _load_json(args.data_file, "dataset file", dict)
    dataset = dataset_json.get("data")
    if not isinstance(dataset, list):
        raise SquadEvaluationError(f'dataset file {args.data_file} has no "data" list')
    predictions = _load_json(args.pred_file, "prediction file", dict)
    if not all(isinstance(v, str) for v in predictions.values()):
        raise SquadEvaluationError(f"prediction file {args.pred_file} must map ids to strings")
    na_probs = _load_json(args.na_prob_file, "na-prob file", dict) if args.na_prob_file else None
    if na_probs is not None and not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in na_probs.values()):
        raise SquadEvaluationError(f"na-prob file {args.na_prob_file} must map ids to numbers")
    version = str(dataset_json.get("version", ""))
    try:
        is_v2 = version.lstrip("v").startswith("2") or any(
            qa.get("is_impossible") for qa in _questions(dataset))
        if is_v2:
            result = evaluate_v2(dataset, predictions, na_probs, args.na_prob_thresh)
            text = json.dumps(result, indent=2)  # the official v2.0 script prints with indent=2
        else:
            if na_probs is not None:
                raise ValueError("--na-prob-file applies only to a SQuAD v2.0 dataset")
            if version != "1.1":  # the official v1.1 script warns and goes on
                print(f"Evaluation expects v-1.1, but got dataset with v-{version}", file=sys.stderr)
            result = evaluate_v1(dataset, predictions)
            text = json.dumps(result)
    except (KeyError, TypeError, AttributeError) as e:
        raise SquadEvaluationError(f"dataset file {args.data_file} is not in SQuAD format "
                                   f"({type(e).__name__}: {e})") from None
    except ValueError as e:
        raise SquadEvaluationError(f"{args.data_file}: {e}") from None
    if args.out_file:
        try:
            with atomic_write(args.out_file) as f:
                json.dump(result, f)
        except OSError as e:
            raise SquadEvaluationError(f"cannot write {args.out_file}: {e.strerror or e}") from None
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())

"""SQuAD v1.1 / v2.0 span prediction (the original run_squad.py) as a fine-tuning Task.

Training rows are the original's windows with answer positions (`data.convert_examples_to_features`
with is_training); prediction rows the windows of --predict_file, whose start/end logits become
the original's predictions.json, nbest_predictions.json and (v2.0) null_odds.json
(`predictions.write_predictions`), plus raw_logits.jsonl (one `{"unique_id", "start_logits",
"end_logits"}` line per window, the format of the shared goldens' logits files) from which
`predict_from_raw_logits` rebuilds everything without a model. When the predict file has answers,
eval_results.json holds the official evaluation (`evaluate.evaluate_v1` / `evaluate_v2`; for v2.0
with the null odds as the no-answer probabilities, so it also reports the best threshold).

Batches keep the original's fixed length (no dynamic padding): the original's span softmax and its
top-n_best_size start/end positions run over every position of the window, padding included, so
cutting the padding would change the loss and, on some examples, the n-best lists.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from absl import logging

from bert_tf.data.atomic_io import atomic_write, write_json_atomic
from bert_tf.tasks.base import FeatureSpec, Task, text_inputs
from bert_tf.tasks.squad import data, evaluate
from bert_tf.tasks.squad.data import SquadDataError, SquadExample, SquadFeatures
from bert_tf.tasks.squad.predictions import RawResult, write_predictions
from bert_tf.training.objectives import Objective, count_denominator, span_terms

RAW_LOGITS_FILE = "raw_logits.jsonl"
EVAL_RESULTS_FILE = "eval_results.json"
BEST_THRESHOLD = "best"


@dataclasses.dataclass(frozen=True)
class SquadSettings:
    """What decides the windows and the answers (the original's flags of the same names)."""

    train_file: str | None
    predict_file: str | None
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    version_2_with_negative: bool = False
    do_lower_case: bool = True
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float | str = 0.0  # or BEST_THRESHOLD (v2.0)
    verbose_logging: bool = False


class SquadTask(Task):
    """Question answering by start/end logits over each window's tokens."""

    name = "squad"
    init_allow_missing = ("cls/squad/output_weights", "cls/squad/output_bias")
    prediction_keys = ("start_logits", "end_logits")
    passthrough_keys = ("unique_ids",)
    eval_splits = ()
    predict_splits = ("predict",)
    dynamic_padding = False  # see the module doc

    def __init__(self, settings: SquadSettings, tokenizer):
        self.settings_, self.tokenizer = settings, tokenizer
        self.name = "squad_v2" if settings.version_2_with_negative else "squad"
        self._windows: dict[str, list[SquadFeatures]] = {}
        self.figures: dict[str, float] = {}  # the last official evaluation

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        return {"unique_ids": FeatureSpec("int"), **text_inputs(self.settings_.max_seq_length),
                "start_positions": FeatureSpec("int"), "end_positions": FeatureSpec("int")}

    @property
    def objective(self) -> Objective:
        return Objective(_span_terms, _denominators, ("span_loss",))

    def settings(self) -> dict[str, Any]:
        s = self.settings_
        return {"max_seq_length": s.max_seq_length, "doc_stride": s.doc_stride,
                "max_query_length": s.max_query_length, "version_2_with_negative": s.version_2_with_negative}

    def input_files(self, split: str) -> list[str]:
        path = self.settings_.train_file if split == "train" else self.settings_.predict_file
        if path is None:
            raise SquadDataError(f"--{'train' if split == 'train' else 'predict'}_file is required for this run")
        return [path]

    def examples(self, split: str) -> list[SquadExample]:
        examples = data.read_squad_examples(self.input_files(split)[0], is_training=split == "train",
                                            version_2_with_negative=self.settings_.version_2_with_negative)
        if not examples:
            raise SquadDataError(f"{self.input_files(split)[0]}: no questions to {split} on")
        return examples

    def windows(self, split: str, examples: Sequence[SquadExample]) -> list[SquadFeatures]:
        """The original's windows of the examples (made once per split in this process)."""
        if split not in self._windows:
            s = self.settings_
            self._windows[split] = list(data.convert_examples_to_features(
                examples, self.tokenizer, s.max_seq_length, s.doc_stride, s.max_query_length,
                is_training=split == "train"))
        return self._windows[split]

    def features(self, split: str, examples: Sequence[SquadExample]) -> list[dict[str, Any]]:
        return [{"unique_ids": w.unique_id, "input_ids": w.input_ids, "input_mask": w.input_mask,
                 "segment_ids": w.segment_ids, "start_positions": w.start_position or 0,
                 "end_positions": w.end_position or 0} for w in self.windows(split, examples)]

    def build_model(self, config):
        from bert_tf.model.heads import BertSpanModel

        return BertSpanModel(config)

    def results_file(self, split: str) -> str | None:
        return None  # eval_results.json, written by `answers`

    def postprocess(self, split: str, examples: Sequence[SquadExample], predictions: Mapping[str, np.ndarray],
                    output_dir: str) -> dict[str, float]:
        windows = self.windows(split, examples)
        ids = [int(i) for i in predictions["unique_ids"]]
        if ids != [w.unique_id for w in windows]:
            raise SquadDataError("the predicted windows are not the predict file's windows (stale features?)")
        results = [RawResult(uid, start, end) for uid, start, end in
                   zip(ids, predictions["start_logits"].tolist(), predictions["end_logits"].tolist())]
        write_raw_logits(os.path.join(output_dir, RAW_LOGITS_FILE), results)
        return self.answers(examples, windows, results, output_dir)

    def answers(self, examples: Sequence[SquadExample], windows: Sequence[SquadFeatures],
                results: Sequence[RawResult], output_dir: str) -> dict[str, float]:
        """predictions.json, nbest_predictions.json, null_odds.json (v2.0) and, when the predict file has
        answers, eval_results.json; returns the official figures (empty without answers)."""
        s = self.settings_
        threshold = 0.0 if s.null_score_diff_threshold == BEST_THRESHOLD else float(s.null_score_diff_threshold)
        written = self._write_answers(examples, windows, results, output_dir, threshold)
        dataset = _answered_dataset(s.predict_file)
        if dataset is None:
            return {}
        if not s.version_2_with_negative:
            self.figures = _save_eval(output_dir, evaluate.evaluate_v1(dataset, dict(written.predictions)))
            return self.figures
        figures = evaluate.evaluate_v2(dataset, dict(written.predictions), dict(written.null_odds))
        if s.null_score_diff_threshold == BEST_THRESHOLD:
            threshold = float(figures["best_f1_thresh"])
            written = self._write_answers(examples, windows, results, output_dir, threshold)
            figures = evaluate.evaluate_v2(dataset, dict(written.predictions), dict(written.null_odds))
            logging.info("Predictions re-derived with the best null score threshold by F1: %g", threshold)
        self.figures = _save_eval(output_dir, {**figures, "null_score_diff_threshold": threshold})
        return self.figures

    def _write_answers(self, examples, windows, results, output_dir: str, threshold: float):
        s = self.settings_
        return write_predictions(
            examples, windows, results, s.n_best_size, s.max_answer_length, s.do_lower_case,
            os.path.join(output_dir, "predictions.json"), os.path.join(output_dir, "nbest_predictions.json"),
            os.path.join(output_dir, "null_odds.json") if s.version_2_with_negative else None,
            version_2_with_negative=s.version_2_with_negative, null_score_diff_threshold=threshold,
            verbose_logging=s.verbose_logging)

    def predict_from_raw_logits(self, raw_logits_file: str, output_dir: str) -> dict[str, float]:
        """Predictions, n-best, null odds and evaluation from a raw_logits.jsonl(.gz) of --predict_file's
        windows, without a model."""
        examples = self.examples("predict")
        windows = self.windows("predict", examples)
        results = read_raw_logits(raw_logits_file)
        expected = [w.unique_id for w in windows]
        found = [r.unique_id for r in results]
        if found != expected:
            raise SquadDataError(
                f"--raw_logits_file={raw_logits_file}: its {len(found)} windows (unique ids {_id_range(found)}) are "
                f"not the {len(expected)} windows of --predict_file (unique ids {_id_range(expected)}) at "
                f"--max_seq_length={self.settings_.max_seq_length} --doc_stride={self.settings_.doc_stride} "
                f"--max_query_length={self.settings_.max_query_length}")
        for result, window in zip(results, windows):
            if not len(result.start_logits) == len(result.end_logits) >= len(window.tokens):
                raise SquadDataError(f"--raw_logits_file={raw_logits_file}: unique_id {result.unique_id} has "
                                     f"{len(result.start_logits)}/{len(result.end_logits)} start/end logits for "
                                     f"{len(window.tokens)} tokens")
        return self.answers(examples, windows, results, output_dir)


def _span_terms(model, batch, training):
    outputs = model(batch, training=training)
    return {"span_loss": span_terms(outputs["start_logits"], outputs["end_logits"], batch["start_positions"],
                                    batch["end_positions"])}, {}


def _denominators(batch):
    return [count_denominator(batch, "start_positions")]


def _id_range(ids: Sequence[int]) -> str:
    return f"{ids[0]}..{ids[-1]}" if ids else "none"


def _answered_dataset(predict_file: str | None) -> list | None:
    """The predict file's "data" list when any of its questions has answers (or is marked impossible)."""
    if predict_file is None:
        return None
    dataset = data.load_squad_json(predict_file)
    answered = any(qa.get("answers") or qa.get("is_impossible") for article in dataset
                   for paragraph in article.get("paragraphs", ()) for qa in paragraph.get("qas", ()))
    return dataset if answered else None


def _save_eval(output_dir: str, figures: Mapping[str, Any]) -> dict[str, float]:
    write_json_atomic(os.path.join(output_dir, EVAL_RESULTS_FILE), dict(figures), indent=2, sort_keys=False)
    logging.info("Official evaluation (%s): %s", EVAL_RESULTS_FILE,
                 ", ".join(f"{key} = {value:.4f}" for key, value in figures.items()))
    return {key: float(value) for key, value in figures.items() if isinstance(value, (int, float))}


def write_raw_logits(path: str, results: Iterable[RawResult]) -> None:
    """One compact JSON line per window, floats as Python writes them (float32 values round-trip exactly)."""
    with atomic_write(path) as f:
        for r in results:
            f.write(json.dumps({"unique_id": int(r.unique_id), "start_logits": [float(x) for x in r.start_logits],
                                "end_logits": [float(x) for x in r.end_logits]}, separators=(",", ":")) + "\n")


def read_raw_logits(path: str) -> list[RawResult]:
    """The windows' logits of a raw_logits.jsonl (or .jsonl.gz) file; errors name the file and line."""
    opener = gzip.open if path.endswith(".gz") else open
    results = []
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
                results.append(RawResult(int(record["unique_id"]), [float(x) for x in record["start_logits"]],
                                         [float(x) for x in record["end_logits"]]))
            except (ValueError, KeyError, TypeError) as e:
                raise SquadDataError(f"{path}:{number}: not a raw-logits line "
                                     f"({{\"unique_id\", \"start_logits\", \"end_logits\"}}): {e}") from None
    return results

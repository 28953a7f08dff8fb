"""Multiple choice (SWAG, or users' own questions) as a fine-tuning Task: the paper's section 4.4.

Each example becomes num_choices packed rows, one per choice,

    [CLS] context [SEP] question + ending [SEP]

truncated as the original's sentence pairs (the longer side first; bert_tf.text.packing), so a
feature row holds [num_choices, max_seq_length] ids. The model scores each choice's pooled vector
with one learned vector and a softmax runs over the choices (BertMultipleChoiceModel); the loss is
the mean cross-entropy of the right choice.

Per labelled split: eval_accuracy and eval_loss in eval_results.txt (test_results.txt for the test
file); per split, every example's predicted choice and the choices' probabilities in
eval_predictions.tsv / test_predictions.tsv.

Dynamic padding: the shared batcher (bert_tf.tasks.batching) trims [batch, seq] rows, so this task
keeps it off and trims each batch to its longest choice itself (`batch_map`): the same outputs on the
real tokens, less work on short choices. Prediction batches are still length-sorted (by an example's
tokens over all its choices) by the shared batcher.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from bert_tf.data.atomic_io import atomic_write
from bert_tf.model.heads import MULTIPLE_CHOICE_SCOPE
from bert_tf.tasks.base import FeatureSpec, Task
from bert_tf.tasks.multiple_choice.data import (MultipleChoiceDataError, MultipleChoiceExample, read_examples,
                                                split_file)
from bert_tf.text.packing import PackedInput, pack
from bert_tf.training import metrics
from bert_tf.training.objectives import Objective, count_denominator, softmax_terms

PREDICTIONS_FILE = {"eval": "eval_predictions.tsv", "predict": "test_predictions.tsv"}
RESULTS_FILE = {"eval": "eval_results.txt", "predict": "test_results.txt"}


class MultipleChoiceTask(Task):
    """SWAG-style questions from --data_dir: `fmt` "swag" or "multiple_choice" (bert_tf.tasks.multiple_choice.data)."""

    init_allow_missing = (f"{MULTIPLE_CHOICE_SCOPE}/output_weights", f"{MULTIPLE_CHOICE_SCOPE}/output_bias")
    prediction_keys = ("logits",)
    dynamic_padding = False  # see the module doc: `batch_map` trims instead

    def __init__(self, fmt: str, data_dir: str, tokenizer, max_seq_length: int, num_choices: int,
                 trim_batches: bool = True):
        self.name, self.format, self.data_dir = fmt, fmt, data_dir
        self.tokenizer, self.max_seq_length, self.num_choices = tokenizer, max_seq_length, num_choices
        self.trim_batches = trim_batches
        self._read: dict[str, list[MultipleChoiceExample]] = {}

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        rows = (self.num_choices, self.max_seq_length)
        return {**{name: FeatureSpec("int", rows, sequence=True) for name in ("input_ids", "input_mask",
                                                                              "segment_ids")},
                "label_ids": FeatureSpec("int")}

    @property
    def objective(self) -> Objective:
        return Objective(_choice_terms, _denominators, ("multiple_choice_loss",), ("accuracy",))

    def settings(self) -> dict[str, Any]:
        return {"format": self.format, "num_choices": self.num_choices, "max_seq_length": self.max_seq_length}

    def input_files(self, split: str) -> list[str]:
        return [split_file(self.data_dir, self.format, split)]

    def examples(self, split: str) -> list[MultipleChoiceExample]:
        """The split's examples (read once); every training example must have a label."""
        if split not in self._read:
            examples = read_examples(self.input_files(split)[0], self.format, self.num_choices)
            unlabelled = next((e for e in examples if e.label is None), None) if split == "train" else None
            if unlabelled is not None:
                raise MultipleChoiceDataError(f"{unlabelled.source}: no label (training needs the right choice "
                                              "of every example)")
            self._read[split] = examples
        return self._read[split]

    def features(self, split: str, examples: Sequence[MultipleChoiceExample]) -> list[dict[str, Any]]:
        return [self.row(example) for example in examples]

    def choices(self, example: MultipleChoiceExample) -> list[PackedInput]:
        """Each choice packed as `[CLS] context [SEP] question + ending [SEP]`, truncated as a pair."""
        context = self.tokenizer.tokenize(example.context)
        question = self.tokenizer.tokenize(example.question)
        return [pack(context, question + self.tokenizer.tokenize(ending), self.max_seq_length, self.tokenizer)
                for ending in example.endings]

    def row(self, example: MultipleChoiceExample) -> dict[str, Any]:
        """The feature row of one example: [num_choices, max_seq_length] inputs and the right choice."""
        packed = self.choices(example)
        return {"input_ids": [p.input_ids for p in packed], "input_mask": [p.input_mask for p in packed],
                "segment_ids": [p.segment_ids for p in packed],
                "label_ids": example.label if example.label is not None else 0}

    def build_model(self, config):
        from bert_tf.model.heads import BertMultipleChoiceModel

        return BertMultipleChoiceModel(config)

    def batch_map(self, split: str):
        if not self.trim_batches:
            return None
        from bert_tf.tasks import batching

        keys = batching.sequence_keys(self.feature_spec)
        return lambda batch: batching.trim_to_longest(batch, keys)

    def results_file(self, split: str) -> str | None:
        return RESULTS_FILE.get(split, f"{split}_results.txt")

    def postprocess(self, split: str, examples: Sequence[MultipleChoiceExample],
                    predictions: Mapping[str, np.ndarray], output_dir: str) -> dict[str, float]:
        logits = predictions["logits"].astype(np.float64)
        if logits.shape != (len(examples), self.num_choices):
            raise MultipleChoiceDataError(f"{logits.shape} predicted scores for the {len(examples)} examples of "
                                          f"the {split} split (stale features?)")
        log_probs = metrics.log_softmax(logits)
        write_predictions(os.path.join(output_dir, PREDICTIONS_FILE.get(split, f"{split}_predictions.tsv")),
                          examples, np.exp(log_probs))
        if not all(example.label is not None for example in examples):
            return {}
        return scores(log_probs, np.array([example.label for example in examples]))


def scores(log_probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The accuracy of the most likely choice and the mean NLL of the right one (the training loss)."""
    return {"eval_accuracy": metrics.accuracy(labels, np.argmax(log_probs, axis=-1)),
            "eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels]))}


def write_predictions(path: str, examples: Sequence[MultipleChoiceExample], probabilities: np.ndarray) -> None:
    """A header, then per example `id, label (empty when unlabelled), predicted choice, probability_0..N-1`."""
    columns = [f"probability_{i}" for i in range(probabilities.shape[1])]
    with atomic_write(path) as f:
        f.write("\t".join(["id", "label", "prediction", *columns]) + "\n")
        for example, row in zip(examples, probabilities):
            label = "" if example.label is None else str(example.label)
            f.write("\t".join([example.guid, label, str(int(np.argmax(row))), *map(repr, map(float, row))]) + "\n")


def _choice_terms(model, batch, training):
    loss, accuracy = softmax_terms(model(batch, training=training)["logits"], batch["label_ids"])
    return {"multiple_choice_loss": loss}, {"accuracy": accuracy}


def _denominators(batch):
    return [count_denominator(batch, "label_ids")]

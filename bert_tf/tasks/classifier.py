"""Sentence and sentence-pair classification (the original run_classifier.py), the first task on the
fine-tuning skeleton: `[CLS] A [SEP] B [SEP]`, the pooled vector, one softmax layer (one linear
output and squared error for the regression task STS-B).

GLUE tsv formats as the original's processors read them (MRPC, CoLA, SST-2, STS-B here; the
remaining GLUE tasks, XNLI, users' own tsv/csv and tfds sources come with the classifier issue).
Metrics over all dev predictions: eval_accuracy and eval_loss as the original, plus the task's
GLUE score (F1 for MRPC, Matthews correlation for CoLA, Pearson/Spearman for STS-B).
Predictions: predict_results.tsv, the class probabilities per line as the original's
test_results.tsv (the predicted score for STS-B).
"""
from __future__ import annotations

import csv
import dataclasses
import os
from typing import Any, Mapping, Sequence

import numpy as np

from bert_tf.data.atomic_io import atomic_write
from bert_tf.errors import BertTfError
from bert_tf.options import option
from bert_tf.tasks import finetune
from bert_tf.tasks.finetune import FinetuningOptions
from bert_tf.tasks.base import FeatureSpec, Task
from bert_tf.text.packing import pack
from bert_tf.training import metrics
from bert_tf.training.objectives import Objective, count_denominator, softmax_terms, squared_error_term

SPLIT_FILES = {"train": "train.tsv", "eval": "dev.tsv", "predict": "test.tsv"}


class ClassifierDataError(BertTfError, ValueError):
    """A data file that does not have the task's format (the message names the file and line)."""


@dataclasses.dataclass(frozen=True)
class Columns:
    """Where a tsv file keeps its texts and label; label None: unlabelled (the test split)."""

    skip_header: bool
    text_a: int
    text_b: int | None
    label: int | None


@dataclasses.dataclass(frozen=True)
class GlueFormat:
    """A GLUE task's labels (None: regression) and its labelled and test file layouts."""

    labels: tuple[str, ...] | None
    labelled: Columns
    test: Columns
    score: str


GLUE = {
    "mrpc": GlueFormat(("0", "1"), Columns(True, 3, 4, 0), Columns(True, 3, 4, None), "f1"),
    "cola": GlueFormat(("0", "1"), Columns(False, 3, None, 1), Columns(True, 1, None, None), "matthews_corrcoef"),
    "sst-2": GlueFormat(("0", "1"), Columns(True, 0, None, 1), Columns(True, 1, None, None), "accuracy"),
    "sts-b": GlueFormat(None, Columns(True, 7, 8, 9), Columns(True, 7, 8, None), "pearson_spearman"),
}


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One line: its id, one or two texts, and its label (None when unlabelled)."""

    guid: str
    text_a: str
    text_b: str | None
    label: str | None


def read_glue_tsv(path: str, columns: Columns, split: str) -> list[InputExample]:
    """The examples of a GLUE tsv file (tab-separated, no quoting, as the original's _read_tsv)."""
    examples = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        for number, line in enumerate(csv.reader(f, delimiter="\t", quotechar=None), start=1):
            if columns.skip_header and number == 1:
                continue
            wanted = [c for c in (columns.text_a, columns.text_b, columns.label) if c is not None]
            if len(line) <= max(wanted):
                raise ClassifierDataError(f"{path}:{number}: expected at least {max(wanted) + 1} tab-separated "
                                          f"columns, found {len(line)}")
            examples.append(InputExample(f"{split}-{number}", line[columns.text_a],
                                         line[columns.text_b] if columns.text_b is not None else None,
                                         line[columns.label] if columns.label is not None else None))
    return examples


class ClassifierTask(Task):
    """A GLUE-format classification (or regression) task on tsv files in `data_dir`."""

    init_allow_missing = ("output_weights", "output_bias")
    prediction_keys = ("logits",)
    passthrough_keys = ("label_ids",)

    def __init__(self, task_name: str, data_dir: str, tokenizer, max_seq_length: int):
        if task_name.lower() not in GLUE:
            raise ClassifierDataError(f"--task_name={task_name!r} is not one of {', '.join(sorted(GLUE))}")
        self.name = task_name.lower()
        self.format = GLUE[self.name]
        self.data_dir, self.tokenizer, self.max_seq_length = data_dir, tokenizer, max_seq_length

    @property
    def regression(self) -> bool:
        return self.format.labels is None

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        length = (self.max_seq_length,)
        return {"input_ids": FeatureSpec("int", length), "input_mask": FeatureSpec("int", length),
                "segment_ids": FeatureSpec("int", length),
                "label_ids": FeatureSpec("float" if self.regression else "int")}

    @property
    def objective(self) -> Objective:
        if self.regression:
            return Objective(_regression_terms, _denominators, ("mean_squared_error",))
        return Objective(_classification_terms, _denominators, ("classification_loss",), ("accuracy",))

    def settings(self) -> dict[str, Any]:
        return {"labels": self.format.labels, "max_seq_length": self.max_seq_length}

    def input_files(self, split: str) -> list[str]:
        return [os.path.join(self.data_dir, SPLIT_FILES[split])]

    def examples(self, split: str) -> list[InputExample]:
        columns = self.format.test if split == "predict" else self.format.labelled
        path = self.input_files(split)[0]
        if not os.path.isfile(path):
            raise ClassifierDataError(f"--data_dir: no {SPLIT_FILES[split]} in {self.data_dir}")
        return read_glue_tsv(path, columns, split)

    def features(self, examples: Sequence[InputExample]) -> list[dict[str, Any]]:
        return [self._row(example) for example in examples]

    def _row(self, example: InputExample) -> dict[str, Any]:
        tokens_b = self.tokenizer.tokenize(example.text_b) if example.text_b is not None else None
        packed = pack(self.tokenizer.tokenize(example.text_a), tokens_b, self.max_seq_length, self.tokenizer)
        return {"input_ids": packed.input_ids, "input_mask": packed.input_mask,
                "segment_ids": packed.segment_ids, "label_ids": self._label_id(example)}

    def _label_id(self, example: InputExample) -> int | float:
        if self.regression:
            return float(example.label) if example.label is not None else 0.0
        if example.label is None:  # unlabelled: the original uses the first label
            return 0
        if example.label not in self.format.labels:
            raise ClassifierDataError(f"{example.guid}: label {example.label!r} is not one of "
                                      f"{', '.join(self.format.labels)}")
        return self.format.labels.index(example.label)

    def build_model(self, config):
        from bert_tf.model.heads import BertClassifierModel

        return BertClassifierModel(config, num_labels=1 if self.regression else len(self.format.labels))

    def postprocess(self, split: str, examples: Sequence[InputExample], predictions: Mapping[str, np.ndarray],
                    output_dir: str) -> dict[str, float]:
        logits = predictions["logits"].astype(np.float64)
        self._write_predictions(os.path.join(output_dir, f"{split}_results.tsv"), logits)
        if split == "predict":
            return {}
        return self.scores(logits, predictions["label_ids"])

    def scores(self, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """The original's eval_accuracy/eval_loss (mean squared error for regression) and the GLUE score."""
        if self.regression:
            scores = logits[:, 0]
            return {"eval_loss": float(np.mean((scores - labels) ** 2)), "pearson": metrics.pearson(scores, labels),
                    "spearman": metrics.spearman(scores, labels)}
        log_probs = logits - _logsumexp(logits)
        predicted = np.argmax(logits, axis=-1)
        results = {"eval_accuracy": metrics.accuracy(labels, predicted),
                   "eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels.astype(int)]))}
        if self.format.score == "f1":
            results["f1"] = metrics.f1(labels, predicted)
        elif self.format.score == "matthews_corrcoef":
            results["matthews_corrcoef"] = metrics.matthews_corrcoef(labels, predicted)
        return results

    def _write_predictions(self, path: str, logits: np.ndarray) -> None:
        values = logits if self.regression else np.exp(logits - _logsumexp(logits))
        with atomic_write(path) as f:
            for row in values:
                f.write("\t".join(str(float(v)) for v in row) + "\n")


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(axis=-1, keepdims=True)
    return top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def _classification_terms(model, batch, training):
    loss, accuracy = softmax_terms(model(batch, training=training)["logits"], batch["label_ids"])
    return {"classification_loss": loss}, {"accuracy": accuracy}


def _regression_terms(model, batch, training):
    return {"mean_squared_error": squared_error_term(model(batch, training=training)["logits"],
                                                     batch["label_ids"])}, {}


def _denominators(batch):
    return [count_denominator(batch, "label_ids")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierOptions(FinetuningOptions):
    """run_classifier.py's flags: the fine-tuning options plus the task and its data."""

    task_name: str | None = option(None, f"The name of the task to train: {', '.join(sorted(GLUE))}.",
                                   required=True)
    data_dir: str | None = option(None, "The input data dir: the task's train.tsv, dev.tsv and test.tsv.",
                                  required=True, path=True)


def make_task(options: ClassifierOptions) -> ClassifierTask:
    """The task the options name, with the tokenizer of --vocab_file and --do_lower_case."""
    from bert_tf.text.tokenization import FullTokenizer, validate_case_matches_checkpoint

    validate_case_matches_checkpoint(options.do_lower_case, options.init_checkpoint)
    tokenizer = FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)
    return ClassifierTask(options.task_name, options.data_dir, tokenizer, options.max_seq_length)


def run(options: ClassifierOptions) -> dict[str, float]:
    """Fine-tunes / evaluates / predicts the task the options name."""
    options.validate()
    return finetune.run(options, make_task(options))


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-classifier` / run_classifier.py."""
    from bert_tf import cli

    cli.run_program(run, ClassifierOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

"""Sentence and sentence-pair classification (the original run_classifier.py) on the fine-tuning
skeleton: `[CLS] A [SEP] B [SEP]`, the pooled vector, one softmax layer (one linear output and
squared error for the regression task STS-B).

Data: every GLUE task and XNLI as the original's processors read them, users' own tsv/csv files
with named columns, or a GLUE task through TensorFlow Datasets (bert_tf.tasks.glue_data,
bert_tf.tasks.tfds_data). Per eval split: the original's eval_accuracy/eval_loss plus the task's
GLUE score (F1, Matthews correlation, Pearson/Spearman) in eval_results.txt (MNLI's mismatched dev
set in eval_mismatched_results.txt) and the per-line probabilities in eval_results.tsv. Per
predict split: test_results.tsv (class probabilities per line, as the original; the score for
STS-B) and the GLUE leaderboard file (MRPC.tsv, MNLI-m.tsv, ...: `index<TAB>prediction`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

import numpy as np

from bert_tf.checkpoints.model_folder import LABELS_FILE, labels_text
from bert_tf.data.atomic_io import atomic_write
from bert_tf.options import OptionError, option
from bert_tf.tasks import finetune, glue_data
from bert_tf.tasks.base import FeatureSpec, Task, text_inputs
from bert_tf.tasks.finetune import FinetuningOptions
from bert_tf.tasks.glue_data import ClassifierDataError, InputExample, TextFormat
from bert_tf.text.packing import pack
from bert_tf.training import metrics
from bert_tf.training.objectives import Objective, count_denominator, softmax_terms, squared_error_term

TASK_NAMES = tuple(sorted(glue_data.GLUE)) + ("xnli",) + glue_data.OWN_DATA

__all__ = ["ClassifierDataError", "ClassifierTask", "ClassifierOptions", "InputExample", "make_task", "run",
           "main"]


class TsvSource:
    """A task's examples from its files in --data_dir."""

    def __init__(self, data_dir: str, fmt: TextFormat):
        self.data_dir, self.format = data_dir, fmt

    def examples(self, split: str) -> list[InputExample]:
        return glue_data.read_examples(self.data_dir, self.format, split)

    def input_files(self, split: str) -> list[str]:
        return [glue_data.split_path(self.data_dir, self.format, split)]


class TfdsSource:
    """A GLUE task's examples through TensorFlow Datasets (--tfds_name), labels spelled as the tsv files."""

    def __init__(self, tfds_name: str, data_dir: str | None):
        self.tfds_name, self.data_dir = tfds_name, data_dir

    def examples(self, split: str) -> list[InputExample]:
        from bert_tf.tasks.tfds_data import read_tfds_examples

        return read_tfds_examples(self.tfds_name, split, self.data_dir)

    def input_files(self, split: str) -> list[str]:
        from bert_tf.tasks.tfds_data import tfds_input_files

        return tfds_input_files(self.tfds_name, split, self.data_dir)


class ClassifierTask(Task):
    """A classification (or regression) task: its format, where its examples come from, the tokenizer."""

    init_allow_missing = ("output_weights", "output_bias")
    prediction_keys = ("logits",)
    passthrough_keys = ("label_ids",)

    def __init__(self, name: str, fmt: TextFormat, source, tokenizer, max_seq_length: int,
                 classifier_dropout: float = 0.1):
        self.name, self.format, self.source = name, fmt, source
        self.tokenizer, self.max_seq_length = tokenizer, max_seq_length
        self.classifier_dropout = classifier_dropout
        self.eval_splits, self.predict_splits = fmt.eval_splits, fmt.predict_splits

    @property
    def regression(self) -> bool:
        return self.format.labels is None

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        return {**text_inputs(self.max_seq_length), "label_ids": FeatureSpec("float" if self.regression else "int")}

    @property
    def objective(self) -> Objective:
        if self.regression:
            return Objective(_regression_terms, _denominators, ("mean_squared_error",))
        return Objective(_classification_terms, _denominators, ("classification_loss",), ("accuracy",))

    def export_files(self) -> dict[str, str]:
        return {} if self.regression else {LABELS_FILE: labels_text(self.format.labels)}

    def settings(self) -> dict[str, Any]:
        return {"labels": self.format.labels, "max_seq_length": self.max_seq_length,
                "columns": repr(self.format.files)}

    def input_files(self, split: str) -> list[str]:
        return self.source.input_files(split)

    def examples(self, split: str) -> list[InputExample]:
        return self.source.examples(split)

    def features(self, split: str, examples: Sequence[InputExample]) -> list[dict[str, Any]]:
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
        return self.format.labels.index(example.label)

    def build_model(self, config):
        from bert_tf.model.heads import BertClassifierModel

        return BertClassifierModel(config, num_labels=1 if self.regression else len(self.format.labels),
                                   dropout_rate=self.classifier_dropout)

    def postprocess(self, split: str, examples: Sequence[InputExample], predictions: Mapping[str, np.ndarray],
                    output_dir: str) -> dict[str, float]:
        logits = predictions["logits"].astype(np.float64)
        self._write_probabilities(os.path.join(output_dir, f"{split.replace('predict', 'test')}_results.tsv"),
                                  logits)
        if split in self.format.submissions:
            self._write_submission(os.path.join(output_dir, f"{self.format.submissions[split]}.tsv"), examples,
                                   logits)
        if split.startswith("predict") and not all(example.label is not None for example in examples):
            return {}
        return self.scores(logits, predictions["label_ids"])

    def scores(self, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """The original's eval_accuracy/eval_loss (mean squared error for regression) and the GLUE score."""
        if self.regression:
            scores = logits[:, 0]
            return {"eval_loss": float(np.mean((scores - labels) ** 2)), "pearson": metrics.pearson(scores, labels),
                    "spearman": metrics.spearman(scores, labels)}
        log_probs = metrics.log_softmax(logits)
        predicted = np.argmax(logits, axis=-1)
        results = {"eval_accuracy": metrics.accuracy(labels, predicted),
                   "eval_loss": float(-np.mean(log_probs[np.arange(len(labels)), labels.astype(int)]))}
        if self.format.score == "f1":
            results["f1"] = metrics.f1(labels, predicted)
        elif self.format.score == "matthews_corrcoef":
            results["matthews_corrcoef"] = metrics.matthews_corrcoef(labels, predicted)
        return results

    def _write_probabilities(self, path: str, logits: np.ndarray) -> None:
        values = logits if self.regression else np.exp(metrics.log_softmax(logits))
        with atomic_write(path) as f:
            for row in values:
                f.write("\t".join(str(float(v)) for v in row) + "\n")

    def _write_submission(self, path: str, examples: Sequence[InputExample], logits: np.ndarray) -> None:
        """The GLUE leaderboard's file: a header, then `index<TAB>prediction` with its label names."""
        with atomic_write(path) as f:
            f.write("index\tprediction\n")
            for example, row in zip(examples, logits):
                prediction = f"{row[0]:.3f}" if self.regression else self.format.labels[int(np.argmax(row))]
                f.write(f"{example.guid.split('-', 1)[1]}\t{prediction}\n")


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
    """run_classifier.py's flags: the fine-tuning options plus the task and where its data is."""

    task_name: str | None = option(None, f"The name of the task to train: {', '.join(TASK_NAMES)} (case "
                                   "insensitive; tsv/csv: your own files). Implied by --tfds_name.")
    data_dir: str | None = option(None, "The input data dir: the task's train, dev and test files (.tsv; .csv "
                                  "for --task_name=csv).", path=True)
    tfds_name: str | None = option(None, "Read a GLUE task through TensorFlow Datasets instead, e.g. glue/mrpc "
                                   "(prepared data only; nothing is downloaded).")
    tfds_data_dir: str | None = option(None, "TensorFlow Datasets' data dir for --tfds_name (default: its "
                                       "own, ~/tensorflow_datasets).", path=True)
    xnli_language: str = option("zh", "XNLI: the language to train and evaluate on (its MultiNLI translation "
                                "and XNLI dev/test rows).")
    text_a_column: str = option("sentence", "tsv/csv: the header name of the first text's column.")
    text_b_column: str | None = option(None, "tsv/csv: the header name of the second text's column "
                                       "(sentence pairs).")
    label_column: str = option("label", "tsv/csv: the header name of the label's column (the test file may "
                               "lack it).")
    label_list: str | None = option(None, "tsv/csv: the labels, comma-separated, in output order (default: "
                                    "the distinct labels of train.tsv, sorted).")
    regression: bool = option(False, "tsv/csv: the label is a number; one output and squared error.")
    classifier_dropout: float = option(
        0.1, "Dropout on the pooled output before the classifier layer: the original's fixed 0.1 (Hugging Face's "
        "classifier_dropout). 0 with a config's dropout 0 trains without any random mask.", non_negative=True,
        maximum=0.99)

    def validate(self) -> None:
        if self.tfds_name is None and (self.task_name is None or self.data_dir is None):
            raise OptionError("--task_name and --data_dir are required (or --tfds_name)")
        if self.task_name is not None and self.task_name.lower() not in TASK_NAMES:
            raise OptionError(f"--task_name={self.task_name!r} is not one of {', '.join(TASK_NAMES)}")
        super().validate()


def task_format(options: ClassifierOptions) -> tuple[str, TextFormat]:
    """The task's name and format (labels, files, GLUE score) from the options."""
    if options.tfds_name is not None:
        from bert_tf.tasks.tfds_data import glue_task_of

        name = glue_task_of(options.tfds_name)
        if options.task_name is not None and options.task_name.lower() != name:
            raise OptionError(f"--task_name={options.task_name} contradicts --tfds_name={options.tfds_name}")
        return name, glue_data.GLUE[name]
    name = options.task_name.lower()
    if name in glue_data.GLUE:
        return name, glue_data.GLUE[name]
    if name == "xnli":
        return f"xnli-{options.xnli_language}", glue_data.xnli_format(options.xnli_language)
    return name, _own_format(options, name)


def _own_format(options: ClassifierOptions, kind: str) -> TextFormat:
    """Users' own files; the label list from --label_list or the training file."""
    def fmt(labels):
        return glue_data.own_data_format(options.data_dir, kind, options.text_a_column, options.text_b_column,
                                         options.label_column, labels)

    if options.regression:
        return fmt(None)
    if options.label_list:
        return fmt(tuple(label.strip() for label in options.label_list.split(",")))
    train = os.path.join(options.data_dir, f"train.{kind}")
    if not os.path.isfile(train):
        raise ClassifierDataError(f"--data_dir: no train.{kind} in {options.data_dir} to read the labels from; "
                                  f"pass --label_list")
    examples = glue_data.read_examples(options.data_dir, fmt(None), "train", check_labels=False)
    labels = tuple(sorted({example.label for example in examples}))
    if len(labels) < 2:
        raise ClassifierDataError(f"{train}: needs at least two distinct labels in column "
                                  f"{options.label_column!r}, found {list(labels)}")
    return fmt(labels)


def make_task(options: ClassifierOptions) -> ClassifierTask:
    """The task the options name, with the tokenizer of --vocab_file and --do_lower_case."""
    from bert_tf.text.tokenization import FullTokenizer

    name, fmt = task_format(options)
    source = TfdsSource(options.tfds_name, options.tfds_data_dir) if options.tfds_name else \
        TsvSource(options.data_dir, fmt)
    tokenizer = FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)
    return ClassifierTask(name, fmt, source, tokenizer, options.max_seq_length, options.classifier_dropout)


def run(options: ClassifierOptions) -> dict[str, float]:
    """Fine-tunes / evaluates / predicts the task the options name."""
    options = finetune.resolve(options)
    return finetune.run(options, make_task(options))


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-classifier` / run_classifier.py."""
    from bert_tf import cli

    cli.run_program(run, ClassifierOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

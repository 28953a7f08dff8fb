"""What a fine-tuning task provides; `bert_tf.tasks.finetune` runs any task with one program.

A task is the part of a program that is not shared (Model Garden's Task, kept shallow):

    name                    for logs and the feature cache
    feature_spec            the fixed-length int/float features of one model input row
    settings()              what besides the text decides the features (lengths, labels, flags)
    input_files(split)      the files a split is read from (hashed into the feature cache key)
    examples(split)         the split's examples (task-defined objects, kept for post-processing)
    features(split, ex.)    their feature rows (dicts matching feature_spec; a SQuAD example may
                            give several windows, so rows and examples need not pair up)
    build_model(config)     the task model on a BertModel; its head layers name their TF1 variables
    objective               the loss and metric terms (bert_tf.training.objectives)
    init_allow_missing      TF1 names the --init_checkpoint may lack (the new head)
    prediction_keys         model outputs kept when predicting; passthrough_keys: features kept beside
    postprocess(...)        predictions -> metrics (when labelled) and output files
    export_files()          files written beside the original-format export (e.g. label_list.txt:
                            what a server needs to name the outputs; bert-tf-export reads them)
    eval_splits             the splits --do_eval evaluates (the first is eval_results.txt); predict_splits
    dynamic_padding         whether batches may be cut to their longest row (bert_tf.tasks.batching)
    batch_map(split)        an optional map on the split's batches (e.g. looking frozen features up)
    fine_tunes_bert         False for a model on frozen BERT features: --init_checkpoint is the task's
                            to use (not loaded into the model), and no original-format export is written

How the five programs fit it: pre-training is the `PRETRAINING` objective on pre-made records
(steps, not epochs; bert_tf.pretraining.program); the classifier packs one or two texts and
scores the pooled vector; SQuAD makes document windows and post-processes spans to answers;
token tagging labels the first sub-token of each word (label weights mask the rest); multiple
choice packs N rows per example (feature_spec shapes [N, L]) and scores each choice.
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

SPLITS = ("train", "eval", "predict")


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """One fixed-length feature: dtype "int" or "float", and its shape per row ([] for a scalar).

    `sequence`: the last axis is token positions (padded at the end, as `input_mask` says), so
    dynamic padding may cut it to a batch's longest row (bert_tf.tasks.batching).
    """

    dtype: str
    shape: tuple[int, ...] = ()
    sequence: bool = False


def text_inputs(max_seq_length: int) -> dict[str, FeatureSpec]:
    """BertModel's three inputs (input_ids, input_mask, segment_ids) for rows of `max_seq_length` tokens."""
    length = (max_seq_length,)
    return {name: FeatureSpec("int", length, sequence=True) for name in ("input_ids", "input_mask", "segment_ids")}


class Task(abc.ABC):
    """A fine-tuning task; see the module doc for what each member is for."""

    name: str = "task"
    init_allow_missing: tuple[str, ...] = ()
    prediction_keys: tuple[str, ...] = ()
    passthrough_keys: tuple[str, ...] = ()
    eval_splits: tuple[str, ...] = ("eval",)  # e.g. MNLI adds "eval_mismatched"
    predict_splits: tuple[str, ...] = ("predict",)
    dynamic_padding: bool = True
    fine_tunes_bert: bool = True

    @property
    @abc.abstractmethod
    def feature_spec(self) -> dict[str, FeatureSpec]:
        """Name -> FeatureSpec of every feature a row holds (the TFRecord cache's schema)."""

    @property
    @abc.abstractmethod
    def objective(self):
        """The bert_tf.training.objectives.Objective to minimise."""

    @abc.abstractmethod
    def settings(self) -> dict[str, Any]:
        """JSON-able settings that, with the input files and vocab, decide the features."""

    @abc.abstractmethod
    def input_files(self, split: str) -> list[str]:
        """The files `examples(split)` reads (hashed into the feature cache key)."""

    @abc.abstractmethod
    def examples(self, split: str) -> Sequence[Any]:
        """The split's examples, in file order."""

    @abc.abstractmethod
    def features(self, split: str, examples: Sequence[Any]) -> list[dict[str, Any]]:
        """The feature rows of `examples` (the expensive step that the cache saves)."""

    @abc.abstractmethod
    def build_model(self, config):
        """The task model on a BertModel (called inside the strategy's scope)."""

    def export_files(self) -> dict[str, str]:
        """{file name: text} written into OUTPUT_DIR/export beside the checkpoint: what the outputs mean."""
        return {}

    def results_file(self, split: str) -> str | None:
        """The `key = value` results file of a labelled split's metrics (None: the task writes its own)."""
        return "eval_results.txt" if split == "eval" else f"{split}_results.txt"

    def batch_map(self, split: str):
        """A function applied to each batch of the split (after dynamic padding), or None."""
        return None

    @abc.abstractmethod
    def postprocess(self, split: str, examples: Sequence[Any], predictions: Mapping[str, np.ndarray],
                    output_dir: str) -> dict[str, float]:
        """Writes the split's output files; returns its metrics (empty when unlabelled)."""

"""Token tagging (CoNLL-2003 named entities, or users' own tags) as a fine-tuning Task.

The paper's setting (section 5.3): the first sub-token of each word feeds a softmax over the tags
(no CRF), the other sub-tokens are neither trained nor predicted, and each sentence sits in its
document's context (bert_tf.tasks.ner.features). The loss is the mean cross-entropy over the
batch's scored words (label_weights), summed over replicas before dividing like every loss here.

Per labelled split: conlleval's entity-level precision, recall and F1, overall and per type, its
token accuracy and the loss, in eval_results.txt (test_results.txt for the test file); per split,
the predictions in CoNLL format (`token gold predicted`, blank line between sentences,
-DOCSTART- lines kept) in eval_predictions.txt / test_predictions.txt, which
`bert-tf-conlleval FILE` scores again.
"""
from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import numpy as np
from absl import logging

from bert_tf.checkpoints.model_folder import LABELS_FILE, labels_text
from bert_tf.data.atomic_io import atomic_write
from bert_tf.tasks.base import FeatureSpec, Task, text_inputs
from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner.conll import DOCSTART, ConllDataError, Sentence, check_tags
from bert_tf.tasks.ner.features import TagWindow, tag_windows
from bert_tf.training.objectives import Objective, softmax_terms

PREDICTIONS_FILE = {"eval": "eval_predictions.txt", "predict": "test_predictions.txt"}
RESULTS_FILE = {"eval": "eval_results.txt", "predict": "test_results.txt"}


class TaggingTask(Task):
    """Tags per word from the first sub-token's logits; `source(split)` gives a split's sentences."""

    name = "ner"
    prediction_keys = ("logits",)
    passthrough_keys = ()

    def __init__(self, source, labels: Sequence[str], tokenizer, max_seq_length: int, context: str = "document"):
        self.source, self.labels = source, tuple(labels)
        self.tokenizer, self.max_seq_length, self.context = tokenizer, max_seq_length, context
        self._windows: dict[str, list[TagWindow]] = {}

    init_allow_missing = ("cls/token_classification/output_weights", "cls/token_classification/output_bias")

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        length = (self.max_seq_length,)
        return {**text_inputs(self.max_seq_length), "label_ids": FeatureSpec("int", length, sequence=True),
                "label_weights": FeatureSpec("float", length, sequence=True)}

    @property
    def objective(self) -> Objective:
        return Objective(_tagging_terms, _denominators, ("tagging_loss",), ("token_accuracy",))

    def settings(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "max_seq_length": self.max_seq_length, "context": self.context}

    def export_files(self) -> dict[str, str]:
        return {LABELS_FILE: labels_text(self.labels)}

    def input_files(self, split: str) -> list[str]:
        return self.source.input_files(split)

    def examples(self, split: str) -> list[Sentence]:
        sentences = self.source.examples(split)
        check_tags(sentences, self.labels, self.input_files(split)[0])
        return sentences

    def windows(self, split: str, sentences: Sequence[Sentence]) -> list[TagWindow]:
        """The split's windows (made once per split in this process)."""
        if split not in self._windows:
            self._windows[split] = tag_windows(sentences, self.labels, self.tokenizer, self.max_seq_length,
                                               self.context)
        return self._windows[split]

    def features(self, split: str, examples: Sequence[Sentence]) -> list[dict[str, Any]]:
        return [window.row(self.max_seq_length) for window in self.windows(split, examples)]

    def build_model(self, config):
        from bert_tf.model.heads import BertTokenClassifierModel

        return BertTokenClassifierModel(config, num_labels=len(self.labels))

    def results_file(self, split: str) -> str | None:
        return RESULTS_FILE.get(split, f"{split}_results.txt")

    def postprocess(self, split: str, examples: Sequence[Sentence], predictions: Mapping[str, np.ndarray],
                    output_dir: str) -> dict[str, float]:
        windows = self.windows(split, examples)
        logits = predictions["logits"]
        if len(logits) != len(windows):
            raise ConllDataError(f"{len(logits)} predicted rows for the {len(windows)} windows of the {split} "
                                 "split (stale features?)")
        tags, loss = self.word_tags(examples, windows, logits)
        path = os.path.join(output_dir, PREDICTIONS_FILE.get(split, f"{split}_predictions.txt"))
        write_predictions(path, examples, tags)
        if not all(sentence.tags is not None for sentence in examples):
            return {}
        # Scored as conlleval scores the file (its -DOCSTART- lines count as correct "O" tokens), so that
        # `bert-tf-conlleval` and conlleval.pl on the predictions give these figures exactly.
        result = conlleval.evaluate(conlleval.read_predictions(path))
        logging.info("conlleval on the %s split:\n%s", split, conlleval.report(result))
        return {**scores(result), "eval_loss": loss}

    def word_tags(self, sentences: Sequence[Sentence], windows: Sequence[TagWindow],
                  logits: np.ndarray) -> tuple[list[list[str]], float]:
        """Each word's predicted tag (argmax at its first sub-token), and the mean loss over the words."""
        tags: list[list[str | None]] = [[None] * len(s.words) for s in sentences]
        losses, count = [], 0
        for row, window in enumerate(windows):
            scored = logits[row, list(window.positions)].astype(np.float64)
            top = scored.max(axis=-1, keepdims=True)
            log_probs = scored - top - np.log(np.exp(scored - top).sum(axis=-1, keepdims=True))
            losses.append(-float(log_probs[np.arange(len(window.label_ids)), window.label_ids].sum()))
            count += len(window.label_ids)
            for word, label in zip(window.words, np.argmax(scored, axis=-1)):
                tags[window.sentence][word] = self.labels[int(label)]
        missing = [(i, w) for i, t in enumerate(tags) for w, tag in enumerate(t) if tag is None]
        if missing:
            raise AssertionError(f"{len(missing)} words were not predicted, e.g. sentence {missing[0][0]} "
                                 f"word {missing[0][1]}")
        return tags, math.fsum(losses) / max(count, 1)  # fsum: the same in any sentence order


def scores(result: "conlleval.ConllevalResult") -> dict[str, float]:
    """conlleval's figures as eval_results.txt keys: precision, recall, f1, accuracy and per type."""
    figures = {"precision": result.precision, "recall": result.recall, "f1": result.f1,
               "accuracy": result.accuracy}
    for kind, (precision, recall, f1, _) in result.per_type.items():
        figures.update({f"precision_{kind}": precision, f"recall_{kind}": recall, f"f1_{kind}": f1})
    return figures


def write_predictions(path: str, sentences: Sequence[Sentence], tags: Sequence[Sequence[str]]) -> None:
    """CoNLL format: `token gold predicted` per word (`token predicted` for untagged text), a blank line
    after each sentence, and each document's -DOCSTART- line."""
    document = None
    with atomic_write(path) as f:
        for sentence, predicted in zip(sentences, tags):
            if sentence.document != document and sentence.document > 0:
                f.write(f"{DOCSTART} O O\n\n" if sentence.tags is not None else f"{DOCSTART} O\n\n")
            document = sentence.document
            gold = sentence.tags if sentence.tags is not None else [None] * len(predicted)
            for word, g, p in zip(sentence.words, gold, predicted):
                f.write(f"{word} {g} {p}\n" if g is not None else f"{word} {p}\n")
            f.write("\n")


def _tagging_terms(model, batch, training):
    loss, accuracy = softmax_terms(model(batch, training=training)["logits"], batch["label_ids"],
                                   batch["label_weights"])
    return {"tagging_loss": loss}, {"token_accuracy": accuracy}


def _denominators(batch):
    import tensorflow as tf

    return [tf.reduce_sum(tf.cast(batch["label_weights"], tf.float32))]

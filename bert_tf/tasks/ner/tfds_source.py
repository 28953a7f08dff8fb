"""CoNLL-2003 sentences through TensorFlow Datasets (`--tfds_name=conll2003`), for users who have it prepared.

tfds's `conll2003` builder stores one record per sentence (features tokens, pos, chunks, ner; the NER
tags a Sequence(ClassLabel) named as in the CoNLL files). They become the `Sentence`s that read_conll
gives for the same file, with two differences. There are no documents: the builder drops the
`-DOCSTART-` groups and its writer shuffles records by key, so every sentence has document 0 and only
`--context=sentence` applies (program.py refuses document context). There are no lines: a sentence's
`line` is its record number in tfds's file order (index + 1), and an error names "FILE: record N, word M"
(`Sentence.is_record`). The builder also writes an empty
record at the end of each file; sentences without words are skipped. Nothing is downloaded here
(bert_tf.tasks.tfds_data.prepared_builder).
"""
from __future__ import annotations

import functools

from bert_tf.tasks.ner.conll import Sentence
from bert_tf.tasks.tfds_data import TfdsDataError, prepared_builder, read_split, split_files

DATASET = "conll2003"
SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


class TfdsConllSource:
    """A split's sentences from a prepared tfds `conll2003` (read once per split)."""

    def __init__(self, tfds_name: str, data_dir: str | None):
        if tfds_name.split(":")[0] != DATASET:
            raise TfdsDataError(f"--tfds_name={tfds_name}: not a supported TensorFlow Datasets NER dataset; "
                                f"use {DATASET} (optionally {DATASET}:VERSION)")
        self.tfds_name, self.data_dir = tfds_name, data_dir
        self._read: dict[str, list[Sentence]] = {}

    @functools.cached_property
    def builder(self):
        return prepared_builder(self.tfds_name, self.data_dir)

    def input_files(self, split: str) -> list[str]:
        return split_files(self.builder, SPLITS[split])

    def examples(self, split: str) -> list[Sentence]:
        if split not in self._read:
            names = self.builder.info.features["ner"].feature.names
            self._read[split] = [
                Sentence(tuple(token.decode("utf-8") for token in record["tokens"]),
                         tuple(names[int(tag)] for tag in record["ner"]), 0, index + 1, is_record=True)
                for index, record in enumerate(read_split(self.builder, SPLITS[split])) if len(record["tokens"])]
        return self._read[split]

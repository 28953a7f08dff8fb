"""The paper's feature-based NER (section 5.3, Table 7) as a Task: BERT frozen, its activations
into a BiLSTM tagger (bert_tf.tasks.ner.bilstm), trained by the one fine-tuning program.

The encoder runs once per split over the windows fine-tuning uses (document context, first
sub-tokens), and each word's vectors of the chosen layers are cached as a table
(bert_tf.tasks.ner.frozen_features). A model row is then a sentence (or, past --max_words words,
a piece of one): the table indices of its words, their labels and a mask; each batch looks its
words' vectors up in the table (`batch_map`), so the TFRecord cache stays small and the encoder
never runs during training. --init_checkpoint is the frozen encoder's, never loaded into the
tagger; nothing is exported in the original layout (the tagger has no BERT variables).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any, Sequence

import numpy as np

from bert_tf.tasks.base import FeatureSpec
from bert_tf.data.files import file_sha256
from bert_tf.tasks.ner import frozen_features
from bert_tf.tasks.ner.conll import Sentence
from bert_tf.tasks.ner.features import TagWindow
from bert_tf.tasks.ner.task import TaggingTask


class FeatureBasedTask(TaggingTask):
    """Tags per word by a BiLSTM on frozen BERT features of the layers `features` names."""

    name = "ner_frozen"
    fine_tunes_bert = False
    init_allow_missing = ()

    def __init__(self, source, labels: Sequence[str], tokenizer, max_seq_length: int, context: str, *,
                 features: str, encoder, lstm_units: int, max_words: int, cache: "CacheSettings"):
        super().__init__(source, labels, tokenizer, max_seq_length, context)
        self.features_name, self.encoder, self.lstm_units, self.max_words = features, encoder, lstm_units, max_words
        self.layers = frozen_features.layer_indices(features, encoder.config.num_hidden_layers)
        self.cache = cache
        self._tables: dict[str, np.ndarray] = {}
        self._pieces: dict[str, list[TagWindow]] = {}

    @property
    def feature_spec(self) -> dict[str, FeatureSpec]:
        length = (self.max_words,)
        return {"word_index": FeatureSpec("int", length, sequence=True),
                "input_mask": FeatureSpec("int", length, sequence=True),
                "label_ids": FeatureSpec("int", length, sequence=True),
                "label_weights": FeatureSpec("float", length, sequence=True)}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "features": self.features_name, "layers": list(self.layers),
                "encoder": self.encoder.fingerprint, "max_words": self.max_words}

    def windows(self, split: str, sentences: Sequence[Sentence]) -> list[TagWindow]:
        """The model rows as windows over words: position k of a row is its k-th word."""
        if split not in self._pieces:
            self._pieces[split] = [piece for i, s in enumerate(sentences) for piece in self._sentence_pieces(i, s)]
        return self._pieces[split]

    def _sentence_pieces(self, index: int, sentence: Sentence) -> list[TagWindow]:
        labels = [self.labels.index(t) for t in sentence.tags] if sentence.tags else [0] * len(sentence.words)
        return [TagWindow([], labels[start:start + self.max_words], index,
                          tuple(range(start, min(start + self.max_words, len(sentence.words)))),
                          tuple(range(min(self.max_words, len(sentence.words) - start))))
                for start in range(0, len(sentence.words), self.max_words)]

    def features(self, split: str, examples: Sequence[Sentence]) -> list[dict[str, Any]]:
        self.table(split, examples)  # encode now, before training starts, if not cached
        offsets = np.cumsum([0] + [len(s.words) for s in examples])
        rows = []
        for piece in self.windows(split, examples):
            n, pad = len(piece.words), self.max_words - len(piece.words)
            rows.append({"word_index": [int(offsets[piece.sentence]) + w for w in piece.words] + [0] * pad,
                         "input_mask": [1] * n + [0] * pad, "label_ids": list(piece.label_ids) + [0] * pad,
                         "label_weights": [1.0] * n + [0.0] * pad})
        return rows

    def table(self, split: str, examples: Sequence[Sentence] | None = None) -> list[np.ndarray]:
        """The split's frozen word vectors, one [words, hidden] table per layer (encoded once, then cached)."""
        if split not in self._tables:
            os.makedirs(self.cache.folder, exist_ok=True)
            prefix = os.path.join(self.cache.folder, f"{self.name}-{split}-{self._frozen_key(split)}")

            def encode(layers: Sequence[int]) -> np.ndarray:
                sentences = examples if examples is not None else self.examples(split)
                bert_windows = super(FeatureBasedTask, self).windows(f"bert-{split}", sentences)
                return frozen_features.encode_words(self.encoder.model(), bert_windows, layers)

            self._tables[split] = frozen_features.cached_layers(prefix, self.layers, encode)
        return self._tables[split]

    def _frozen_key(self, split: str) -> str:
        """What decides the frozen vectors: the windows (inputs, vocab, case, length, context) and the encoder."""
        parts = {"split": split, "inputs": [file_sha256(path) for path in self.input_files(split)],
                 "vocab": file_sha256(self.cache.vocab_file), "do_lower_case": self.cache.do_lower_case,
                 "max_seq_length": self.max_seq_length, "context": self.context, "encoder": self.encoder.fingerprint}
        if self.encoder.config.causal_attention:  # only then, so that existing caches keep their keys
            parts["causal_attention"] = True
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]

    def batch_map(self, split: str):
        import tensorflow as tf

        tables = self.table(split)
        shape = [None, None, len(tables), tables[0].shape[-1]]

        def look_up(batch):
            vectors = tf.numpy_function(lambda index: np.stack([t[index] for t in tables], axis=-2).astype(np.float32),
                                        [batch["word_index"]], tf.float32, stateful=False)
            vectors.set_shape(shape)
            return {**batch, "word_features": vectors}

        return look_up

    def build_model(self, config):
        from bert_tf.tasks.ner.bilstm import BiLstmTagger

        combine = "sum" if self.features_name.startswith("sum") else \
            "concat" if self.features_name.startswith("concat") else "single"
        return BiLstmTagger(len(self.labels), len(self.layers), config.hidden_size, combine, self.lstm_units)


@dataclasses.dataclass(frozen=True)
class CacheSettings:
    """Where the frozen tables are cached, and the vocab and case that make the windows."""

    folder: str
    vocab_file: str
    do_lower_case: bool


class FrozenEncoder:
    """The pre-trained BertModel of --init_checkpoint, built and loaded only when features are encoded."""

    def __init__(self, config, init_checkpoint: str):
        self.config, self.init_checkpoint = config, init_checkpoint
        self.fingerprint = frozen_features.checkpoint_fingerprint(init_checkpoint)
        self._model = None

    def model(self):
        if self._model is None:
            from bert_tf import checkpoints
            from bert_tf.model.bert import BertModel

            self._model = BertModel(self.config, name="bert")
            checkpoints.load_init_checkpoint(self._model, self.init_checkpoint)
        return self._model

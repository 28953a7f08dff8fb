"""The fill-mask SavedModel: text with `[MASK]` in it, the most likely tokens for each mask out.

    fill = tf.saved_model.load("served/fill_mask")                # import tensorflow_text first
    out = fill.signatures["serving_default"](text=tf.constant(["paris is the [MASK] of france."]))
    out["tokens"]         # string [batch, masks, top_k], best first; out["token_ids"] the same as ids
    out["probabilities"]  # float32 [batch, masks, top_k]: softmax over the whole vocabulary
    out["mask_count"]     # int32 [batch]: rows have fewer masks than the batch's most are padded ("", 0)

The text around each literal `[MASK]` is tokenized as FullTokenizer does and the mask id put between
the pieces (Hugging Face's fill-mask treats `[MASK]` as a special token the same way; FullTokenizer
alone would split it into `[`, `mask`, `]`). A mask cut off by --seq_length is not predicted. The
scores are the pre-trained checkpoint's `cls/predictions` head, as run_pretraining.py computes it.
"""
from __future__ import annotations

import os

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.preprocessor import PreprocessorError
from bert_tf.export.serving import TextModule, string_table
from bert_tf.text import tokenization

MASK = "[MASK]"


class FillMask(TextModule):
    """The SavedModel's root: `__call__` / `serve`, `top_k`, `vocab` and the text settings."""

    def __init__(self, model, vocab_file: str, do_lower_case: bool, seq_length: int, top_k: int):
        super().__init__(vocab_file, do_lower_case, seq_length)
        if "mask_id" not in self.special_ids:
            raise PreprocessorError(f"{vocab_file}: has no {MASK} token to fill")
        self._model = model
        self.model_variables = list(model.variables)
        self._k = int(top_k)
        self.top_k = tf.Variable(self._k, trainable=False, name="top_k")
        vocab = tokenization.load_vocab(vocab_file)
        tokens = [""] * (max(vocab.values()) + 1)
        for token, index in vocab.items():
            tokens[index] = token
        self.vocab = string_table(tokens, "vocab")

    def pieces_with_masks(self, text: tf.Tensor) -> tf.RaggedTensor:
        """Strings [batch] -> ids [batch, (pieces)]: each part between masks tokenized, the mask id between."""
        parts = tf.strings.split(text, sep=MASK)  # [batch, (parts)]
        pieces = self.pieces(parts.values)  # [parts, (pieces)]
        position = tf.range(tf.size(parts.values, tf.int64), dtype=tf.int64) - tf.gather(
            parts.row_starts(), parts.value_rowids())
        masks = tf.cast(position < tf.gather(parts.row_lengths() - 1, parts.value_rowids()), tf.int64)
        mask = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(masks)], self.special_ids["mask_id"]), masks)
        return parts.with_values(tf.concat([pieces, tf.cast(mask, tf.int32)], 1)).merge_dims(1, 2)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def __call__(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        inputs = self.pack(self.pieces_with_masks(text))
        where = tf.where(tf.equal(inputs["input_ids"], self.special_ids["mask_id"]))  # [masks, 2], row-major
        positions = tf.RaggedTensor.from_value_rowids(tf.cast(where[:, 1], tf.int32), where[:, 0],
                                                      nrows=tf.shape(text, out_type=tf.int64)[0])
        found = tf.cast(positions.row_lengths(), tf.int32)
        logits = tf.cast(self._model(inputs | {"masked_lm_positions": positions.to_tensor()}, training=False)[
            "masked_lm_logits"], tf.float32)
        probabilities, token_ids = tf.math.top_k(tf.nn.softmax(logits), k=self._k)
        real = tf.sequence_mask(found, tf.shape(token_ids)[1])[..., tf.newaxis]
        return {"tokens": tf.where(real, tf.gather(self.vocab, token_ids), ""),
                "token_ids": tf.where(real, token_ids, 0), "probabilities": tf.where(real, probabilities, 0.0),
                "mask_count": found}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text: tf.Tensor) -> dict[str, tf.Tensor]:
        return self(text)


def save_fill_mask(folder: str, model, vocab_file: str, do_lower_case: bool, seq_length: int, top_k: int) -> None:
    """Writes the fill-mask SavedModel of a BertPretrainingModel into `folder` (made atomic by the caller)."""
    module = FillMask(model, vocab_file, do_lower_case, seq_length, top_k)
    tf.saved_model.save(module, os.fspath(folder), signatures={"serving_default": module.serve.get_concrete_function()})

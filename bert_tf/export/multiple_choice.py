"""The multiple-choice SavedModel (run_swag.py's model): a context, a question and N endings in, the answer out.

    chooser = tf.saved_model.load("served/multiple_choice")       # import tensorflow_text first
    out = chooser.signatures["serving_default"](
        context=tf.constant(["She opened the door."]), question=tf.constant([""]),
        choices=tf.constant([["She walked in.", "The sea froze.", "He sang.", "It was Tuesday."]]))
    out["probabilities"]  # float32 [batch, choices]: softmax over each row's choices
    out["choice"]         # int32 [batch]: the best choice; out["answer"]: its text

Each choice is packed as run_swag.py packs it, `[CLS] context [SEP] question + ending [SEP]` (the question's
pieces then the ending's, truncated as a pair by the original's rule), with FullTokenizer's ids in the graph;
every row of a request has the same number of choices (a [batch, choices] string tensor).
"""
from __future__ import annotations

import os

from bert_tf._env import tf  # TensorFlow, imported quietly

from bert_tf.export.serving import TextModule, call_in_chunks


class MultipleChoice(TextModule):
    """The SavedModel's root: `__call__` / `serve` and the text settings."""

    def __init__(self, model, vocab_file: str, do_lower_case: bool, seq_length: int):
        super().__init__(vocab_file, do_lower_case, seq_length)
        self._model = model
        self.model_variables = list(model.variables)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string),
                                                   tf.TensorSpec([None], tf.string),
                                                   tf.TensorSpec([None, None], tf.string)])
    def __call__(self, context: tf.Tensor, question: tf.Tensor, choices: tf.Tensor) -> dict[str, tf.Tensor]:
        shape = tf.shape(choices)  # [batch, choices]
        row_of = tf.repeat(tf.range(shape[0]), shape[1])  # each choice's example
        context_pieces = tf.gather(self.pieces(context), row_of)
        second = tf.concat([tf.gather(self.pieces(question), row_of), self.pieces(tf.reshape(choices, [-1]))], 1)
        rows = self.pack(context_pieces, second)  # [batch * choices, seq]
        inputs = {name: tf.reshape(value, tf.concat([shape, [-1]], 0)) for name, value in rows.items()}
        probabilities = call_in_chunks(self._model, inputs, {"probabilities": 2})["probabilities"]
        choice = tf.argmax(probabilities, -1, output_type=tf.int32)
        return {"probabilities": probabilities, "choice": choice,
                "answer": tf.gather(choices, choice, batch_dims=1)}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="context"),
                                                   tf.TensorSpec([None], tf.string, name="question"),
                                                   tf.TensorSpec([None, None], tf.string, name="choices")])
    def serve(self, context: tf.Tensor, question: tf.Tensor, choices: tf.Tensor) -> dict[str, tf.Tensor]:
        return self(context, question, choices)


def save_multiple_choice(folder: str, model, vocab_file: str, do_lower_case: bool, seq_length: int) -> None:
    """Writes the multiple-choice SavedModel of a BertMultipleChoiceModel into `folder` (made atomic by the caller)."""
    module = MultipleChoice(model, vocab_file, do_lower_case, seq_length)
    tf.saved_model.save(module, os.fspath(folder), signatures={"serving_default": module.serve.get_concrete_function()})

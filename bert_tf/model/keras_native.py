"""What our models need to work with Keras' own tools: `model.export(...)` and `model.fit(dataset)`.

    model.export("served")                      # a SavedModel: `serve` / serving_default, no call first
    model.compile(optimizer=keras.optimizers.AdamW(2e-5))   # no loss: the model has its own
    model.fit(dataset)                          # batches of our feature dicts, labels inside

Export. Keras infers a subclassed model's input signature from the shapes its first call recorded;
ours build their weights in the constructor (so checkpoints load at once), so Keras finds none and
says the model was "never called". `KerasNative.export` hands Keras the inputs instead: int32
[batch, seq] `input_ids`, `input_mask`, `segment_ids` (plus what a head needs, e.g.
`masked_lm_positions`), batch and length both dynamic. A SavedModel signature takes only a flat
dict of tensors, and BertModel's `encoder_outputs` is a list (one per layer), so the served outputs
are flattened: a list output `name` becomes `name_0`, `name_1`, ... in layer order. The model's own
call keeps its list (feature extraction, the feature-based tagger and users rely on it).

Fit. A task model computes its training loss from the labels in the features it is given, named
as our feature caches name them (`label_ids`, `label_weights`, `start_positions`/`end_positions`,
`masked_lm_ids`/`masked_lm_weights`/`next_sentence_labels`): no renaming, no dummy targets for the
outputs that are not trained. The losses are the original's (`bert_tf.training.objectives` on one
batch: mean NLL, weighted NLL, squared error for a one-output regression classifier). A `loss`
given to `compile()` takes precedence; labels may also come as `(features, {"label_ids": ...})`.
"""
from __future__ import annotations

from typing import Any, Mapping

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

TEXT_INPUTS = ("input_ids", "input_mask", "segment_ids")


def input_spec(names: tuple[str, ...] = TEXT_INPUTS) -> dict[str, keras.InputSpec]:
    """int32 [batch, seq] (both dynamic) input specs by name: what our models take."""
    return {name: keras.InputSpec(shape=(None, None), dtype="int32", name=name) for name in names}


def flat_outputs(outputs: Mapping[str, Any]) -> dict[str, tf.Tensor]:
    """`outputs` with each list output `name` spread into `name_0`, `name_1`, ... (SavedModel
    signatures take only tensors)."""
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{name}_{i}": tensor for i, tensor in enumerate(value)})
        else:
            flat[name] = value
    return flat


def nll(logits: tf.Tensor, labels: tf.Tensor, weights: tf.Tensor | None = None,
        epsilon: float = 0.0) -> tf.Tensor:
    """sum(w * -log softmax(logits)[label]) / (sum(w) + epsilon); the mean NLL without weights.

    The kernel and the arithmetic of `bert_tf.training.objectives.softmax_terms`, on one batch.
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    per_row = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, tf.reshape(logits, [-1, logits.shape[-1]]))
    w = tf.ones_like(per_row) if weights is None else tf.reshape(tf.cast(weights, tf.float32), [-1])
    return tf.reduce_sum(w * per_row) / (tf.reduce_sum(w) + epsilon)


def squared_error(predictions: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Mean squared error (a regression classifier such as STS-B)."""
    predictions = tf.reshape(tf.cast(predictions, tf.float32), [-1])
    return tf.reduce_mean(tf.square(predictions - tf.reshape(tf.cast(targets, tf.float32), [-1])))


class KerasNative:
    """Mixin (before keras.Model) giving a model `export` and `fit` without setup (see the module doc).

    A model sets `extra_inputs` (input names beyond the text's) and implements `fit_loss` (and
    `metric_targets` for compiled metrics) when it can be trained with `fit`.
    """

    extra_inputs: tuple[str, ...] = ()
    label_keys: tuple[str, ...] = ()  # the features fit_loss reads; all present means "labelled"

    def serving_input_spec(self) -> dict[str, keras.InputSpec]:
        """The model's inputs as Keras export wants them."""
        return input_spec(TEXT_INPUTS + tuple(self.extra_inputs))

    def export(self, filepath, format: str = "tf_saved_model", verbose: bool | None = None,
               input_signature=None, **kwargs) -> None:
        """keras.Model.export with our inputs by default; a SavedModel serves the flat outputs."""
        signature = input_signature if input_signature is not None else [self.serving_input_spec()]
        if format != "tf_saved_model":
            return super().export(filepath, format=format, verbose=verbose, input_signature=signature, **kwargs)
        archive = keras.export.ExportArchive()
        archive.track(self)
        archive.add_endpoint("serve", lambda inputs: flat_outputs(self(inputs, training=False)), signature,
                             **kwargs)
        archive.write_out(filepath, verbose=True if verbose is None else verbose)

    def fit_loss(self, features: Mapping[str, tf.Tensor], outputs: Mapping[str, Any]) -> tf.Tensor:
        """The training loss from the labels in `features` (a model trainable with `fit` overrides it)."""
        raise NotImplementedError(f"{type(self).__name__} has no loss of its own; pass loss= to compile()")

    def metric_targets(self, features: Mapping[str, tf.Tensor], outputs: Mapping[str, Any]):
        """(labels, predictions, sample weights or None) for the metrics given to compile(), or None."""
        return None

    def _labelled(self, x, y) -> Mapping[str, tf.Tensor] | None:
        """The features holding every label the loss needs (from x, or from y when it is a dict)."""
        if not isinstance(x, Mapping) or not self.label_keys:
            return None
        features = {**x, **y} if isinstance(y, Mapping) else dict(x)
        return features if all(key in features for key in self.label_keys) else None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The model's own loss when the features carry its labels and compile() was given no loss."""
        features = self._labelled(x, y)
        if features is None or getattr(self, "loss", None) is not None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        if sample_weight is not None:
            raise ValueError(f"{type(self).__name__} takes its weights from the features "
                             "(e.g. label_weights), not from fit's sample_weight")
        loss = self.fit_loss(features, y_pred)
        for extra in self.losses:  # e.g. regularizers added by a user
            loss = loss + tf.cast(extra, loss.dtype)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Compiled metrics on (labels, predictions) from `metric_targets` when the labels are in the features."""
        features = self._labelled(x, y)
        targets = self.metric_targets(features, y_pred) if features is not None else None
        if targets is None:
            return super().compute_metrics(x, y, y_pred, sample_weight)
        labels, predictions, weights = targets
        return super().compute_metrics(x, labels, predictions, weights)

"""Layers held in a list attribute, in `tf.train.Checkpoint`'s object graph.

Keras 3 (TensorFlow backend) wraps a list attribute in its own `TrackedList`, which TensorFlow does
not see as a dependency: Keras hands such lists to SavedModel only, so a checkpoint of the model
alone (`tf.train.Checkpoint(model=model)`) leaves out every layer in a list, BertModel's
transformer layers among them. A trainer's checkpoint still held their values, reached through the
optimizer's variable list, which is why resuming worked while reading the model alone (evaluation
of a finished run, a run's ckpt-N as --init_checkpoint) silently kept the layers as initialised.
`ListsInCheckpoints` adds each such list as a child under its attribute name (`encoder_layers/0/...`).
"""
from __future__ import annotations

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf
from keras.src.utils.tracking import TrackedList


class ListsInCheckpoints:
    """Mixin (before keras.Layer / keras.Model): each list attribute of layers becomes a checkpoint dependency."""

    @tf.__internal__.tracking.no_automatic_dependency_tracking
    def _trackable_children(self, save_type="checkpoint", **kwargs):
        children = super()._trackable_children(save_type, **kwargs)
        if save_type == "checkpoint":
            for name in self._tracked:
                value = getattr(self, name, None)
                if (isinstance(value, TrackedList) and value and name not in children
                        and all(isinstance(item, keras.layers.Layer) for item in value)):
                    children[name] = self._checkpoint_list(name, value)
        return children

    def _checkpoint_list(self, name: str, layers) -> tf.__internal__.tracking.Trackable:
        # One wrapper per list for as long as it holds the same layers: a save asks for the children
        # more than once and matches them by identity. Kept out of Keras' attribute tracking.
        wrappers = self.__dict__.setdefault("_checkpoint_lists", {})
        if name not in wrappers or list(wrappers[name]) != list(layers):
            wrappers[name] = tf.__internal__.tracking.wrap(list(layers))
        return wrappers[name]

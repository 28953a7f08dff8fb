"""Our Dropout layer's masks, drawn in a torch process: the Hugging Face side trains with the very masks our run drew.

With dropout on, a seed's EM/F1 gap between the frameworks mixes their arithmetic with their different random masks,
and a new seed moves either side by several points. Our `bert_tf.model.layers.Dropout` draws its mask at step t from
TensorFlow's counter-based `stateless_uniform` with the seed pair [layer key, t] (the layer's Keras SeedGenerator
state), so the same mask can be recomputed anywhere from the layer's key alone. This module does that for
transformers: `torch.nn.functional.dropout` (which transformers' BERT calls for every dropout: embeddings, attention
probabilities, attention output, layer output; eager attention) is replaced by a function that draws call k of step
t with our k-th layer's key and counter t, and applies it as ours does (kept values times 65536 / (65536 - threshold)).

The keys come from our run's checkpoint (`keys_from_checkpoint`), read into a model of the run's class, whose
training-mode forward pass tells the order of the calls (tests/test_dropout_parity.py).
"""
from __future__ import annotations

import json

import numpy as np
import torch


def keys_in_call_order(model) -> list[int]:
    """The keys of `model`'s Dropout layers in the order a training-mode forward pass calls them, found by running
    one on a tiny batch (it advances the generators' counters: use a model built for the purpose)."""
    import tensorflow as tf

    from bert_tf.model.layers import Dropout

    keys, original = [], Dropout.call

    def traced(layer, x, training=False):
        keys.append(int(layer.seed_generator.state.numpy()[0]))
        return original(layer, x, training=training)

    ids = tf.ones([1, 8], tf.int32)
    Dropout.call = traced
    try:
        model({"input_ids": ids, "input_mask": ids, "segment_ids": tf.zeros_like(ids)}, training=True)
    finally:
        Dropout.call = original
    return keys


def keys_from_checkpoint(checkpoint: str, model) -> list[int]:
    """Our run's dropout keys in the order its forward pass calls the layers (embeddings, then per layer: attention
    probabilities, attention output, layer output). `model`: a fresh model of the run's class and config, into
    which the checkpoint's `rng_states` are read (their list order follows Keras's layer nesting, not the calls)."""
    import tensorflow as tf

    from bert_tf.training.trainer import dropout_rng_states

    tf.train.Checkpoint(rng_states=dropout_rng_states(model)).read(checkpoint).expect_partial()
    return keys_in_call_order(model)


class SharedMasks:
    """Installs itself as torch.nn.functional.dropout; `begin_step(t)` before each training step's forward pass."""

    def __init__(self, keys: list[int]):
        import tensorflow as tf  # here: the HF process loads TensorFlow only to draw our masks

        from bert_tf.model.layers import Dropout

        self._tf, self._layer = tf, Dropout
        self.keys = keys
        self.step = 0
        self.calls = 0
        self._torch_dropout = torch.nn.functional.dropout

    @classmethod
    def from_file(cls, path: str) -> "SharedMasks":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def install(self) -> None:
        torch.nn.functional.dropout = self.dropout

    def uninstall(self) -> None:
        torch.nn.functional.dropout = self._torch_dropout

    def begin_step(self, step: int) -> None:
        if self.calls not in (0, len(self.keys)):
            raise RuntimeError(f"step {self.step} drew {self.calls} dropout masks, our model draws {len(self.keys)}")
        self.step, self.calls = step, 0

    def keep_mask(self, key: int, shape: tuple[int, ...], threshold: int) -> np.ndarray:
        """Our Dropout's keep mask for the seed pair [key, step]: bool, `shape`."""
        seed = self._tf.constant([key, self.step], self._tf.int64)
        return self._layer.keep_mask(seed, self._tf.constant(shape, self._tf.int32), threshold).numpy()

    def dropout(self, input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False):
        if not training or p == 0.0:
            return input
        if self.calls >= len(self.keys):
            raise RuntimeError(f"more dropout calls in step {self.step} than our model's {len(self.keys)}")
        levels = self._layer._LEVELS
        threshold = int(round(p * levels))  # as our Dropout's
        keep = torch.from_numpy(self.keep_mask(self.keys[self.calls], tuple(input.shape), threshold))
        self.calls += 1
        scale = torch.tensor(levels / (levels - threshold), dtype=input.dtype)  # rounded once, as ours
        return torch.where(keep, input * scale, torch.zeros((), dtype=input.dtype))

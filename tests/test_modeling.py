"""BertModel and heads against the ORIGINAL code's outputs (shared reference.json files)."""
import json

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.checkpoints import load_tf1_checkpoint
from bert_tf.model.configs import BertConfig
from bert_tf.model.bert import BertModel
from bert_tf.model.heads import BertClassifierModel, BertPretrainingModel, BertSpanModel
from bert_tf.pretraining.objective import PRETRAINING
from bert_tf.training.objectives import cross_entropy, softmax_terms, span_terms, total_loss

ATOL = 1e-5  # float32; the original's own float64 check agrees to < 1e-6
PRETRAIN = "tf1_tiny_from_original_bert_code"


def _load(folder):
    d = shared_path("checkpoints", folder)
    ref = json.loads((d / "reference.json").read_text())
    inputs = {k: np.asarray(v) for k, v in ref["inputs"].items()
              if k not in ("tokens", "tokens_after_masking", "note")}
    return d, BertConfig.from_json_file(d / "bert_config.json"), inputs, ref["outputs"]


def _close(actual, expected, atol=ATOL):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64).reshape(actual.shape)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


@pytest.fixture(scope="module")
def pretraining():
    d, config, inputs, outputs = _load(PRETRAIN)
    model = BertPretrainingModel(config)
    load_tf1_checkpoint(model, d / "bert_model.ckpt")
    return model, inputs, outputs


def test_encoder_outputs_match_the_original(pretraining):
    model, inputs, ref = pretraining
    out = model.bert(inputs)
    _close(out["embedding_output"], ref["embedding_output"])
    assert len(out["encoder_outputs"]) == 2
    _close(np.stack(out["encoder_outputs"]), ref["all_encoder_layers"])
    _close(out["sequence_output"], ref["sequence_output"])
    _close(out["pooled_output"], ref["pooled_output"])


def test_pretraining_heads_and_losses_match_the_original(pretraining):
    model, inputs, ref = pretraining
    out = model(inputs)
    _close(tf.reshape(out["masked_lm_log_probs"], [-1, 1024]), ref["masked_lm_log_probs"])
    _close(out["next_sentence_log_probs"], ref["next_sentence_log_probs"])
    losses, _ = PRETRAINING.terms_fn(model, inputs, False)
    _close(losses["masked_lm_loss"].value(), ref["masked_lm_loss"])
    _close(losses["next_sentence_loss"].value(), ref["next_sentence_loss"])
    _close(total_loss(list(losses.values())), ref["total_loss"])
    _close(cross_entropy(out["masked_lm_logits"], inputs["masked_lm_ids"]), ref["masked_lm_example_loss"])
    _close(cross_entropy(out["next_sentence_logits"], inputs["next_sentence_labels"]),
           ref["next_sentence_example_loss"])


def test_classifier_outputs_and_loss_match_the_original():
    d, config, inputs, ref = _load("tf1_tiny_classifier_from_original_bert_code")
    model = BertClassifierModel(config, num_labels=3)
    load_tf1_checkpoint(model, d)
    out = model(inputs)
    loss, _ = softmax_terms(out["log_probs"], inputs["label_ids"])
    _close(out["logits"], ref["logits"])
    _close(out["probabilities"], ref["probabilities"])
    _close(cross_entropy(out["log_probs"], inputs["label_ids"]), ref["per_example_loss"])
    _close(loss.value(), ref["loss"])


@pytest.mark.parametrize("causal", [False, True])
def test_pooled_output_alone_equals_the_full_pass_with_its_gradients(causal):
    """BertModel.pooled_output (the last layer run at the pooled row only; the classifier's and multiple
    choice's path) gives the full pass's pooled output and the same gradient for every variable, on the
    original's classifier weights with padded rows; for a causal model at the last real token."""
    d, config, inputs, _ = _load("tf1_tiny_classifier_from_original_bert_code")
    config = BertConfig.from_dict({**config.to_dict(), "causal_attention": causal})
    model = BertClassifierModel(config, num_labels=3)
    load_tf1_checkpoint(model, d)
    inputs = dict(inputs)
    mask = np.array(inputs["input_mask"])
    mask[0, mask[0].sum() // 2:] = 0  # a shorter row: padding must not reach the pooled row
    inputs["input_mask"] = mask
    weights = tf.random.stateless_normal([config.hidden_size], seed=[1, 2])

    def pooled_and_gradients(pool):
        with tf.GradientTape() as tape:
            pooled = pool(inputs)
            loss = tf.reduce_sum(pooled * weights)
        return pooled, tape.gradient(loss, model.bert.trainable_variables)

    full, full_grads = pooled_and_gradients(lambda x: model.bert(x)["pooled_output"])
    alone, alone_grads = pooled_and_gradients(model.bert.pooled_output)
    _close(alone, full, atol=1e-6)
    assert len(alone_grads) == len(full_grads)
    for variable, a, f in zip(model.bert.trainable_variables, alone_grads, full_grads):
        assert (a is None) == (f is None), variable.path
        if f is not None:
            # gradients reach |5|: relative to their size (float32 round-off of different matmul shapes)
            np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(f), rtol=1e-5, atol=1e-6)


def test_squad_start_end_logits_match_the_original():
    d, config, inputs, ref = _load("tf1_tiny_squad_from_original_bert_code")
    model = BertSpanModel(config)
    load_tf1_checkpoint(model, d / "bert_model.ckpt.index")
    out = model(inputs)
    _close(out["start_logits"], ref["start_logits"])
    _close(out["end_logits"], ref["end_logits"])
    loss = span_terms(out["start_logits"], out["end_logits"], [1, 2, 3], [4, 5, 6]).value()
    start = cross_entropy(out["start_logits"], [1, 2, 3]).numpy().mean()
    end = cross_entropy(out["end_logits"], [4, 5, 6]).numpy().mean()
    _close(loss, (start + end) / 2)  # run_squad's (start_loss + end_loss) / 2 of batch means


@pytest.mark.parametrize("causal", [False, True])
def test_inference_skips_keys_past_the_longest_row_and_keeps_every_positions_logits(causal, monkeypatch):
    """At inference no query attends past the batch's last real token, so attention runs over the keys
    before it only (`trims_keys`): SQuAD's logits at every position, the padding's included (the n-best
    search reads them), equal those of attention over all keys, for the original's span weights."""
    import bert_tf.model.bert as bert_module
    from bert_tf.model.layers import attended_length

    d, config, inputs, _ = _load("tf1_tiny_squad_from_original_bert_code")
    config = BertConfig.from_dict({**config.to_dict(), "causal_attention": causal})
    model = BertSpanModel(config)
    load_tf1_checkpoint(model, d / "bert_model.ckpt.index")
    seq_length = inputs["input_ids"].shape[1]
    mask = np.zeros_like(inputs["input_mask"])
    for row, length in enumerate([5, 7, 3][:len(mask)]):
        mask[row, :length] = 1
    inputs = {**inputs, "input_mask": mask}
    assert int(attended_length(tf.constant(mask))) == 8 < seq_length  # 7, rounded up to a multiple of 8
    trimmed = model(inputs)
    monkeypatch.setattr(bert_module, "trims_keys", lambda training: False)
    full = model(inputs)
    for key in ("start_logits", "end_logits"):
        assert np.abs(full[key].numpy()[mask == 0]).max() > 0.01  # the padding's own logits, compared too
        _close(trimmed[key], full[key], atol=1e-6)
    _close(model.bert.pooled_output(inputs), full_pooled := model.bert(inputs)["pooled_output"], atol=1e-6)
    monkeypatch.undo()
    _close(model.bert.pooled_output(inputs), full_pooled, atol=1e-6)


def test_attended_length_is_one_past_the_last_key_any_row_attends_to_rounded_up():
    from bert_tf.model.layers import attended_length

    for rows, expected in [([[1, 1, 0] + [0] * 29, [1] * 9 + [0] * 23], 16), ([[1] * 32], 32),
                           ([[1, 0, 0, 1] + [0] * 16], 8), ([[1] * 18 + [0, 0]], 20),
                           ([[1] * 3 + [0] * 13, [0] * 16], 16)]:  # a row of padding alone: every key, as the original
        assert int(attended_length(tf.constant(rows))) == expected, rows


def test_missing_mask_and_segments_default_to_ones_and_zeros(pretraining):
    model, inputs, _ = pretraining
    ids = inputs["input_ids"]
    implicit = model.bert({"input_ids": ids})["sequence_output"]
    explicit = model.bert({"input_ids": ids, "input_mask": np.ones_like(ids),
                           "segment_ids": np.zeros_like(ids)})["sequence_output"]
    np.testing.assert_array_equal(implicit, explicit)


def test_padding_tokens_do_not_change_real_token_outputs(pretraining):
    model, inputs, _ = pretraining
    mask = inputs["input_mask"]
    other_ids = np.where(mask == 1, inputs["input_ids"], 7)  # change only padded tokens
    a = model.bert(inputs)["sequence_output"].numpy()
    b = model.bert({**inputs, "input_ids": other_ids})["sequence_output"].numpy()
    assert (mask == 0).any()
    np.testing.assert_allclose(a[mask == 1], b[mask == 1], atol=1e-5)


def test_dropout_only_in_training(pretraining):
    model, inputs, _ = pretraining
    eval_a = model.bert(inputs)["pooled_output"]
    eval_b = model.bert(inputs, training=False)["pooled_output"]
    train = model.bert(inputs, training=True)["pooled_output"]
    np.testing.assert_array_equal(eval_a, eval_b)
    assert np.abs(train - eval_a).max() > 1e-3


def test_every_variable_gets_a_gradient_in_a_pretraining_step(pretraining):
    model, inputs, _ = pretraining
    with tf.GradientTape() as tape:
        losses, _ = PRETRAINING.terms_fn(model, inputs, True)
        loss = total_loss(list(losses.values()))
    grads = tape.gradient(loss, model.trainable_variables)
    assert len(grads) == 46 - 2 * 4  # per layer, 2 fused q/k/v variables stand for 6 TF1 ones
    names = [v.path for v, g in zip(model.trainable_variables, grads) if g is None]
    assert names == []


@pytest.mark.parametrize("policy, atol", [("mixed_float16", 5e-3), ("mixed_bfloat16", 5e-2)])
def test_mixed_precision_under_xla_keeps_float32_outputs_close(policy, atol):
    d, config, inputs, ref = _load(PRETRAIN)
    model = BertPretrainingModel(config, dtype=policy)
    load_tf1_checkpoint(model, d)
    out = tf.function(lambda x: model(x), jit_compile=True)(inputs)
    assert out["sequence_output"].dtype == tf.as_dtype(policy.split("_")[1])
    assert out["masked_lm_log_probs"].dtype == tf.float32
    assert out["next_sentence_log_probs"].dtype == tf.float32
    _close(tf.reshape(out["masked_lm_log_probs"], [-1, 1024]), ref["masked_lm_log_probs"],
           atol=atol)
    mlm, _ = softmax_terms(out["masked_lm_logits"], inputs["masked_lm_ids"], inputs["masked_lm_weights"], 1e-5)
    nsp, _ = softmax_terms(out["next_sentence_logits"], inputs["next_sentence_labels"])
    loss = total_loss([mlm, nsp])
    assert loss.dtype == tf.float32
    _close(loss, ref["total_loss"], atol=atol)


def test_xla_float32_matches_eager(pretraining):
    model, inputs, _ = pretraining
    eager = model(inputs)["masked_lm_log_probs"]
    jit = tf.function(lambda x: model(x), jit_compile=True)(inputs)["masked_lm_log_probs"]
    np.testing.assert_allclose(jit, eager, atol=2e-5)


def test_keras_save_and_load_model_give_the_same_outputs(pretraining, tmp_path):
    model, inputs, _ = pretraining
    path = tmp_path / "pretraining.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, BertPretrainingModel)
    assert loaded.bert_config == model.bert_config
    a, b = model(inputs), loaded(inputs)
    np.testing.assert_array_equal(a["masked_lm_log_probs"], b["masked_lm_log_probs"])
    np.testing.assert_array_equal(a["pooled_output"], b["pooled_output"])


@pytest.mark.parametrize("make", [
    lambda c: BertModel(c, dtype="mixed_bfloat16"),
    lambda c: BertClassifierModel(c, num_labels=5, dropout_rate=0.2),
    BertSpanModel,
    BertPretrainingModel,
])
def test_get_config_from_config_round_trip(make):
    _, config, _, _ = _load(PRETRAIN)
    model = make(config)
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    assert clone.dtype_policy.name == model.dtype_policy.name
    assert [tuple(v.shape) for v in clone.weights] == [tuple(v.shape) for v in model.weights]
    for layer in model._flatten_layers(include_self=False):
        assert type(layer).from_config(layer.get_config()).get_config() == layer.get_config()


def test_dropout_drops_the_configured_fraction_and_keeps_the_expectation():
    from bert_tf.model.layers import Dropout

    layer = Dropout(0.1, seed=3)
    x = tf.ones([1000, 1000])
    assert layer(x, training=False) is x
    first, second = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    dropped = (first == 0).mean()
    assert abs(dropped - 6554 / 65536) < 0.002  # 1M draws: ±0.0003 is one standard deviation
    assert abs(first.mean() - 1.0) < 0.003  # kept values are scaled by 1 / keep probability
    assert set(np.unique(first)) == {0.0, np.float32(65536 / (65536 - 6554))}
    assert (first != second).any()  # a fresh mask every call
    restored = Dropout.from_config(layer.get_config())
    assert restored.rate == 0.1 and restored.threshold == 6554


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_dropout_runs_under_xla_in_any_policy(policy):
    from bert_tf.model.layers import Dropout

    layer = Dropout(0.25, dtype=policy)
    x = tf.ones([7, 33], dtype=layer.compute_dtype)
    out = tf.function(lambda t: layer(t, training=True), jit_compile=True)(x)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert 0 < float(tf.reduce_mean(tf.cast(out == 0, tf.float32))) < 0.6

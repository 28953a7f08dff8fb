"""The building blocks of the BERT encoder: LayerNorm, embeddings, transformer layer, pooler.

Semantics follow the original modeling.py (post-LN blocks, LayerNorm epsilon 1e-12, additive
attention mask (1 - mask) * -10000, tanh-GELU, truncated-normal init). Two choices are ours,
for speed, and do not change values beyond float round-off:
  * the query/key/value projections are stored as ONE fused [H, 3H] kernel (one big matmul);
    `bert_tf.checkpoints.mapping` splits it into the original's query/key/value variables;
  * the encoder works on [batch*seq, hidden] matrices between layers, like the original's
    `reshape_to_matrix`, so every dense layer is a plain 2-D matmul.
Mixed precision: LayerNorm, the attention softmax and the embedding sums run in the policy's
variable dtype (float32 under mixed_float16/mixed_bfloat16; float64 under a float64 policy).
"""
from __future__ import annotations

import math

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

from bert_tf.model import custom_ops
from bert_tf.model.activations import get_activation

_PACKAGE = "bert_tf"


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The original's create_initializer: truncated normal (cut at 2 stddev)."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LayerNorm(keras.layers.Layer):
    """Layer normalisation over the last axis, computed in the variable dtype (float32 under mixed precision).

    Same arithmetic as the original's tf.nn.moments + tf.nn.batch_normalization:
    y = x * (gamma * rsqrt(var + eps)) + (beta - mean * gamma * rsqrt(var + eps)).
    """

    def __init__(self, size: int, epsilon: float = 1e-12, **kwargs):
        # No input autocast: a float32 residual sum must reach the normalisation unrounded.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.size = size
        self.epsilon = epsilon

    def build(self, input_shape=None):
        self.gamma = self.add_weight(name="gamma", shape=(self.size,), initializer="ones",
                                     dtype=self.variable_dtype, autocast=False)
        self.beta = self.add_weight(name="beta", shape=(self.size,), initializer="zeros",
                                    dtype=self.variable_dtype, autocast=False)
        self.built = True

    def call(self, x):
        out_dtype = x.dtype
        x = tf.cast(x, self.variable_dtype)
        if custom_ops.fused_ops_apply(x):  # training on CPU: one pass each way
            y = custom_ops.fused_layer_norm(x, tf.convert_to_tensor(self.gamma), tf.convert_to_tensor(self.beta),
                                            self.epsilon)
            return tf.cast(y, out_dtype)
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        inv = tf.math.rsqrt(variance + self.epsilon) * self.gamma
        y = x * inv + (self.beta - mean * inv)
        return tf.cast(y, out_dtype)

    def compute_output_spec(self, x):
        return keras.KerasTensor(x.shape, dtype=x.dtype)

    def get_config(self):
        return {**super().get_config(), "size": self.size, "epsilon": self.epsilon}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Dropout(keras.layers.Layer):
    """Inverted dropout that draws 16 random bits per element instead of a float.

    Half the random numbers of keras.layers.Dropout, which makes it about 1.8x faster on CPU, where
    dropout is ~10% of a BERT training step. The drop probability is `rate` rounded to a multiple of
    1/65536 (0.1 -> 0.100006); kept values are scaled by 1 / (1 - that probability), so the
    expectation of every output equals its input exactly, as with the original's tf.nn.dropout.
    """

    _LEVELS = 65536

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        self.rate = rate
        self.seed = seed
        self.threshold = int(round(rate * self._LEVELS))
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, x, training=False):
        if not training or self.threshold == 0:
            return x
        keep = self.keep_mask(tf.cast(self.seed_generator.next(), tf.int64), tf.shape(x), self.threshold)
        # In x's dtype straight from the Python float (tf.cast would pass through float32 under float64).
        scale = tf.constant(self._LEVELS / (self._LEVELS - self.threshold), dtype=x.dtype)
        return tf.where(keep, x * scale, tf.zeros_like(x))

    @classmethod
    def keep_mask(cls, seed: tf.Tensor, shape: tf.Tensor, threshold: int) -> tf.Tensor:
        """The bool keep mask over `shape` for the seed pair [key, counter] (int64): 16 counter-based random bits
        per element, kept where they reach `threshold`. A pure function of the pair, so that a step's masks can be
        recomputed elsewhere from the layer's key (bench/_shared_masks.py gives them to transformers)."""
        size = tf.reduce_prod(shape)
        bits = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, dtype=tf.uint32,
                                           minval=None, maxval=None)
        draws = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:size]
        return tf.reshape(draws >= tf.constant(threshold, tf.uint16), shape)

    def compute_output_spec(self, x, training=False):
        return keras.KerasTensor(x.shape, dtype=x.dtype)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbeddings(keras.layers.Layer):
    """word + token-type + learned position embeddings, then LayerNorm and dropout.

    The sums and the LayerNorm are float32 (the tables are float32 variables); the output is
    cast to the layer's compute dtype.
    """

    def __init__(self, vocab_size: int, hidden_size: int, type_vocab_size: int,
                 max_position_embeddings: int, initializer_range: float = 0.02,
                 dropout_rate: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.layer_norm = LayerNorm(hidden_size, name="LayerNorm", dtype=self.dtype_policy)
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = truncated_normal(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size),
            initializer=init, dtype=self.variable_dtype, autocast=False)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
            initializer=init, dtype=self.variable_dtype, autocast=False)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init, dtype=self.variable_dtype, autocast=False)
        self.layer_norm.build()
        self.built = True

    def call(self, input_ids, segment_ids, training=False):
        seq_length = tf.shape(input_ids)[1]
        x = tf.gather(self.word_embeddings, input_ids)
        # Same summation order as the original: (word + token_type) + position.
        x = x + tf.gather(self.token_type_embeddings, segment_ids)
        x = x + self.position_embeddings[tf.newaxis, :seq_length, :]
        x = self.layer_norm(x)
        x = tf.cast(x, self.compute_dtype)
        return self.dropout(x, training=training)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size, "type_vocab_size": self.type_vocab_size,
                "max_position_embeddings": self.max_position_embeddings,
                "initializer_range": self.initializer_range, "dropout_rate": self.dropout_rate}


def attention_mask_adder(input_mask: tf.Tensor, causal: bool = False) -> tf.Tensor:
    """[B, T] mask (1 = real token) -> additive float32 bias, -10000 where attention is not allowed.

    Bidirectional (the original): [B, 1, 1, T], -10000 on padding. causal: [B, 1, T, T], query i may
    attend to key j only when j <= i and j is a real token (the left-to-right model of the paper's
    ablation); the bias is the same -10000, so any dtype policy softmaxes it as the original's padding.
    """
    mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
    if causal:
        seq_length = tf.shape(input_mask)[1]
        lower = tf.linalg.band_part(tf.ones([seq_length, seq_length], tf.float32), -1, 0)  # [i, j]: j <= i
        mask = mask * lower[tf.newaxis, tf.newaxis, :, :]
    return (1.0 - mask) * -10000.0


def attended_length(input_mask: tf.Tensor, multiple: int = 8) -> tf.Tensor:
    """int32 scalar: one past the last position that any row of the [B, T] mask attends to, rounded up to
    `multiple` (at most T). Keys and values past it are masked for every query of the batch, so attention
    over the first `attended_length` keys alone gives the same values: exp(-10000 + s) is exactly 0 in
    float32, float16 and bfloat16. A row with no real token attends evenly to every key (the original's
    softmax of equal scores), so a batch holding one keeps them all."""
    mask = tf.cast(input_mask, tf.int32)
    seq_length = tf.shape(mask)[1]
    last = tf.reduce_max(tf.reduce_max(mask, axis=0) * tf.range(1, seq_length + 1))
    empty_row = tf.reduce_any(tf.equal(tf.reduce_max(mask, axis=1), 0))
    return tf.where(empty_row, seq_length, tf.minimum(seq_length, (last + multiple - 1) // multiple * multiple))


def trims_keys(training) -> bool:
    """Whether attention may skip the keys past `attended_length`: at inference, outside XLA (which needs
    static shapes). Training keeps every key, so that dropout draws over the same [B, N, T, T] shapes.

    It is what makes fixed-length windows cheap: a SQuAD window keeps the original's 384 positions,
    padding included (its n-best search reads the padding's logits), but no query attends to the
    padding, so its keys and values are neither projected nor multiplied."""
    return not isinstance(training, tf.Tensor) and not training and not custom_ops.in_xla_context()


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerLayer(keras.layers.Layer):
    """One post-LN transformer block of the original (attention, then feed-forward).

    Works on a [batch*seq, hidden] matrix; `batch_size`/`seq_length` give the 4-D view that
    attention needs. Variables: fused qkv kernel/bias, attention output dense + LayerNorm,
    intermediate dense, output dense + LayerNorm (TF1 names in checkpoints.mapping).
    """

    def __init__(self, hidden_size: int, num_attention_heads: int, intermediate_size: int,
                 hidden_act: str = "gelu", hidden_dropout_prob: float = 0.1,
                 attention_probs_dropout_prob: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of "
                             f"num_attention_heads {num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.activation = get_activation(hidden_act)
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        policy = self.dtype_policy
        self.attention_dropout = Dropout(attention_probs_dropout_prob, dtype=policy)
        self.attention_output_dropout = Dropout(hidden_dropout_prob, dtype=policy)
        self.output_dropout = Dropout(hidden_dropout_prob, dtype=policy)
        self.attention_layer_norm = LayerNorm(hidden_size, name="attention_LayerNorm",
                                              dtype=policy)
        self.output_layer_norm = LayerNorm(hidden_size, name="output_LayerNorm", dtype=policy)

    def _dense_weights(self, name: str, n_in: int, n_out: int):
        kernel = self.add_weight(name=f"{name}_kernel", shape=(n_in, n_out),
                                 initializer=truncated_normal(self.initializer_range))
        bias = self.add_weight(name=f"{name}_bias", shape=(n_out,), initializer="zeros")
        return kernel, bias

    def build(self, input_shape=None):
        h, i = self.hidden_size, self.intermediate_size
        self.qkv_kernel, self.qkv_bias = self._dense_weights("qkv", h, 3 * h)
        self.attention_output_kernel, self.attention_output_bias = self._dense_weights(
            "attention_output", h, h)
        self.intermediate_kernel, self.intermediate_bias = self._dense_weights(
            "intermediate", h, i)
        self.output_kernel, self.output_bias = self._dense_weights("output", i, h)
        self.attention_layer_norm.build()
        self.output_layer_norm.build()
        self.built = True

    def _split_heads(self, projected, batch_size, length, parts):
        """[B*T, parts*H] -> `parts` tensors [B, N, T, d]."""
        projected = tf.reshape(projected, [batch_size, length, parts, self.num_attention_heads, self.head_size])
        return tf.unstack(tf.transpose(projected, [2, 0, 3, 1, 4]), num=parts)

    def _attend(self, q, k, v, adder, training):
        """Scaled dot-product attention of q [B, N, Q, d] over k, v [B, N, T, d] -> [B*Q, H]."""
        scores = tf.matmul(q, k, transpose_b=True)
        # Softmax in float32 (mixed precision); scale after the matmul like the original.
        stable = self.variable_dtype  # float32 under mixed precision, float64 under float64
        scores = (tf.cast(scores, stable) * (1.0 / math.sqrt(float(self.head_size)))
                  + tf.cast(adder, stable))
        probs = tf.cast(tf.nn.softmax(scores), v.dtype)
        probs = self.attention_dropout(probs, training=training)
        context = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])  # [B, Q, N, d]
        return tf.reshape(context, [-1, self.hidden_size])

    def _feed_forward(self, context, x, training):
        """Attention output dense + LayerNorm, intermediate, output dense + LayerNorm, on rows [M, H]."""
        attn = tf.nn.bias_add(tf.matmul(context, self.attention_output_kernel),
                              self.attention_output_bias)
        attn = self.attention_output_dropout(attn, training=training)
        attn = self.attention_layer_norm(attn + x)
        inter = self.activation(tf.nn.bias_add(tf.matmul(attn, self.intermediate_kernel),
                                               self.intermediate_bias))
        out = tf.nn.bias_add(tf.matmul(inter, self.output_kernel), self.output_bias)
        out = self.output_dropout(out, training=training)
        return self.output_layer_norm(out + attn)

    def call(self, x, adder, batch_size, seq_length, training=False, positions=None, key_length=None):
        """x [B*T, H] -> [B*T, H]; with `positions` [B], only those rows of it, [B, H].

        One position per row is all a pooled head reads from the last layer: its query alone attends
        over every key and value, and the feed-forward runs on B rows instead of B*T, the same values
        for 1/L less work (`adder` must then be the row's own [B, 1, 1, T] bias).
        With `key_length` (`attended_length`), keys and values come from the first `key_length`
        positions only, and `adder` must be cut to them (its last axis).
        """
        if positions is None and key_length is None:
            return self._all_keys(x, adder, batch_size, seq_length, training)
        if positions is None:  # the fused projection where no key is skipped (one matmul, no kernel slices)
            return tf.cond(key_length < seq_length,
                           lambda: self._some_keys(x, adder, batch_size, seq_length, training, positions, key_length),
                           lambda: self._all_keys(x, adder, batch_size, seq_length, training))
        return self._some_keys(x, adder, batch_size, seq_length, training, positions, key_length)

    def _all_keys(self, x, adder, batch_size, seq_length, training):
        qkv = tf.nn.bias_add(tf.matmul(x, self.qkv_kernel), self.qkv_bias)
        q, k, v = self._split_heads(qkv, batch_size, seq_length, 3)
        return self._feed_forward(self._attend(q, k, v, adder, training), x, training)

    def _some_keys(self, x, adder, batch_size, seq_length, training, positions, key_length):
        """Queries of `positions` (else all rows) over keys and values of the first `key_length` (else all)."""
        h = self.hidden_size
        kernel, bias = tf.convert_to_tensor(self.qkv_kernel), tf.convert_to_tensor(self.qkv_bias)
        keys_from, key_rows = x, seq_length
        if key_length is not None:
            keys_from = tf.reshape(tf.reshape(x, [batch_size, seq_length, h])[:, :key_length], [-1, h])
            key_rows = key_length
        k, v = self._split_heads(tf.nn.bias_add(tf.matmul(keys_from, kernel[:, h:]), bias[h:]),
                                 batch_size, key_rows, 2)
        rows, query_rows = x, seq_length
        if positions is not None:
            rows, query_rows = tf.gather(tf.reshape(x, [batch_size, seq_length, h]), positions, batch_dims=1), 1
        (q,) = self._split_heads(tf.nn.bias_add(tf.matmul(rows, kernel[:, :h]), bias[:h]), batch_size, query_rows, 1)
        return self._feed_forward(self._attend(q, k, v, adder, training), rows, training)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "num_attention_heads": self.num_attention_heads,
                "intermediate_size": self.intermediate_size, "hidden_act": self.hidden_act,
                "hidden_dropout_prob": self.hidden_dropout_prob,
                "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
                "initializer_range": self.initializer_range}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Pooler(keras.layers.Layer):
    """dense + tanh on the first ([CLS]) token: the original's `pooled_output`."""

    def __init__(self, hidden_size: int, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.kernel = self.add_weight(name="kernel", shape=(self.hidden_size, self.hidden_size),
                                      initializer=truncated_normal(self.initializer_range))
        self.bias = self.add_weight(name="bias", shape=(self.hidden_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output):
        first = sequence_output[:, 0, :]
        return tf.tanh(tf.nn.bias_add(tf.matmul(first, self.kernel), self.bias))

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "initializer_range": self.initializer_range}

"""The original BERT optimizer and learning-rate schedule, as a Keras 3 optimizer.

`AdamWeightDecay` is the original's AdamWeightDecayOptimizer:
  * m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;  p -= lr * (m / (sqrt(v) + eps) + wd * p)
  * NO bias correction by default (the original has none; `bias_correction=True` gives Adam's);
  * weight decay 0.01 on every variable except those whose name matches "LayerNorm",
    "layer_norm" or "bias" (the original's exclusion list, matched against our variable paths,
    which keep those words: `.../attention_LayerNorm/gamma`, `.../qkv_bias`, `.../output_bias`),
    and "scalar_mix" (the feature-based NER tagger's layer weights, which ELMo does not decay;
    no original variable has that name);
  * slots named `adam_m` / `adam_v`, as in the original's checkpoints.
The moment and parameter updates run in TensorFlow's fused `ResourceApplyAdam` kernel (one pass
over each variable instead of a dozen element-wise ops); with beta powers of 0 that kernel's
learning rate is exactly `lr`, i.e. no bias correction. `clip_norm` is the original's
`tf.clip_by_global_norm(grads, 1.0)`, applied to the gradients of the whole (global) batch.

Under tf.distribute, Keras sums the replicas' gradients inside `apply`, after clipping each
replica's own. The training loop instead sums them itself, then clips the global gradient as a
single device would, and sets `aggregate_gradients = False` so they are not summed twice.

`WarmupPolynomialDecay` is the original's schedule: linear warmup to `init_lr` over
`num_warmup_steps`, then polynomial decay (power 1.0) to 0 at `num_train_steps`. The update after
`n` completed steps uses the schedule at step n+1; that is what the original's graph computed
(measured in shared/.../reference.json: its global_step increment runs before the schedule reads
it), and it means the first update does not waste a step at learning rate 0.
"""
from __future__ import annotations

import re
from typing import Iterable

import bert_tf._env  # noqa: F401
import keras
import tensorflow as tf

_PACKAGE = "bert_tf"
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", "scalar_mix")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then polynomial decay to `end_learning_rate` (the original's schedule)."""

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 power: float = 1.0, end_learning_rate: float = 0.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.power = power
        self.end_learning_rate = end_learning_rate

    def __call__(self, step):
        step = tf.cast(step, tf.float32) + 1.0  # see the module docstring
        done = tf.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = ((self.init_lr - self.end_learning_rate) * tf.pow(1.0 - done, self.power)
                   + self.end_learning_rate)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return tf.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "power": self.power,
                "end_learning_rate": self.end_learning_rate}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original BERT AdamWeightDecayOptimizer (see the module docstring)."""

    def __init__(self, learning_rate=5e-5, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Iterable[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 bias_correction: bool = False, clip_norm: float | None = None,
                 name: str = "AdamWeightDecay", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.clip_norm = clip_norm
        self.aggregate_gradients = True
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.bias_correction = bias_correction

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self._v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]

    def decays(self, variable) -> bool:
        """True when `variable` gets weight decay (its path matches no exclusion pattern)."""
        return bool(self.weight_decay_rate) and not self._excluded(variable)

    def _excluded(self, variable) -> bool:
        """True when the variable's path matches an exclusion pattern (LayerNorm, bias, ...)."""
        path = getattr(variable, "path", None) or variable.name
        return any(re.search(pattern, path) for pattern in self.exclude_from_weight_decay)

    def slots(self, variable) -> tuple[keras.Variable, keras.Variable]:
        """(adam_m, adam_v) of a model variable."""
        index = self._get_variable_index(variable)
        return self._m[index], self._v[index]

    def apply(self, grads, trainable_variables=None, *, grad_norm=None):
        """Keras' apply, after densifying and global-norm clipping (`grad_norm`: precomputed norm)."""
        # Sparse gradients (a gather's, e.g. token_type_embeddings) are summed into dense ones
        # first: the global norm for clipping must count a row hit twice once, as the original's
        # one-hot matmul gradient does, and the fused kernel takes dense gradients.
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        if self.clip_norm:
            grads, _ = tf.clip_by_global_norm(grads, self.clip_norm, use_norm=grad_norm)
        return super().apply(grads, trainable_variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Keras' hook (pinned keras 3.15): skipped when the training loop summed them already.
        if not self.aggregate_gradients:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def update_step(self, gradient, variable, learning_rate):
        m, v = self.slots(variable)
        lr = tf.cast(learning_rate, variable.dtype)
        if self.decays(variable):
            # p - lr*wd*p here and p - lr*m/(sqrt(v)+eps) in the kernel: the original's
            # p - lr*(m/(sqrt(v)+eps) + wd*p), up to float rounding.
            variable.assign(variable * (1.0 - lr * self.weight_decay_rate))
        if self.bias_correction:
            step = tf.cast(self.iterations + 1, variable.dtype)
            beta_1_power, beta_2_power = tf.pow(self.beta_1, step), tf.pow(self.beta_2, step)
        else:  # lr_t = lr * sqrt(1 - 0) / (1 - 0) = lr
            beta_1_power = beta_2_power = tf.zeros([], variable.dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(m), v=_handle(v), beta1_power=beta_1_power,
            beta2_power=beta_2_power, lr=lr, beta1=tf.cast(self.beta_1, variable.dtype),
            beta2=tf.cast(self.beta_2, variable.dtype), epsilon=tf.cast(self.epsilon, variable.dtype),
            grad=tf.cast(gradient, variable.dtype), use_locking=False)

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
                "bias_correction": self.bias_correction, "clip_norm": self.clip_norm}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Lamb(AdamWeightDecay):
    """LAMB (You et al., 2019) as NVIDIA's and MLPerf's BERT use it: Adam moments with bias
    correction, update r = m/(sqrt(v)+eps) + wd*p, scaled per variable by the trust ratio
    ||p|| / ||r|| (1 when either is 0, and for variables excluded from weight decay).

    Same slots (adam_m / adam_v), decay exclusions, densifying, global-norm clipping and
    tf.distribute handling as AdamWeightDecay.
    """

    def __init__(self, learning_rate=1e-3, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Iterable[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 bias_correction: bool = True, clip_norm: float | None = None, name: str = "Lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                         beta_2=beta_2, epsilon=epsilon, exclude_from_weight_decay=exclude_from_weight_decay,
                         bias_correction=bias_correction, clip_norm=clip_norm, name=name, **kwargs)

    def adapts(self, variable) -> bool:
        """True when the trust ratio applies (the variables not excluded from weight decay)."""
        return not self._excluded(variable)

    def update_step(self, gradient, variable, learning_rate):
        m, v = self.slots(variable)
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        g = tf.cast(tf.convert_to_tensor(gradient), dtype)
        new_m = self.beta_1 * tf.convert_to_tensor(m) + (1.0 - self.beta_1) * g
        new_v = self.beta_2 * tf.convert_to_tensor(v) + (1.0 - self.beta_2) * tf.square(g)
        self.assign(m, new_m)
        self.assign(v, new_v)
        if self.bias_correction:
            step = tf.cast(self.iterations + 1, dtype)
            new_m = new_m / (1.0 - tf.pow(tf.cast(self.beta_1, dtype), step))
            new_v = new_v / (1.0 - tf.pow(tf.cast(self.beta_2, dtype), step))
        value = tf.convert_to_tensor(variable)
        update = new_m / (tf.sqrt(new_v) + self.epsilon)
        if self.decays(variable):
            update += self.weight_decay_rate * value
        ratio = tf.ones([], dtype)
        if self.adapts(variable):
            w_norm, u_norm = tf.norm(value), tf.norm(update)
            ratio = tf.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, ratio)
        self.assign_sub(variable, lr * ratio * update)


def _handle(variable) -> tf.Tensor:
    """The resource handle of a tf.Variable (what Keras passes under tf.distribute) or a Keras one."""
    if isinstance(variable, tf.Variable):
        return variable.handle
    return variable.value.handle


OPTIMIZERS = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int, *,
                     clip_norm: float | None = 1.0, power: float = 1.0, weight_decay_rate: float = 0.01,
                     optimizer: str = "adamw") -> AdamWeightDecay:
    """The original's create_optimizer: AdamWeightDecay (or "lamb") on the warmup + polynomial
    schedule, gradients clipped to a global norm of `clip_norm` (None: no clipping)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPTIMIZERS)}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps, power=power)
    return OPTIMIZERS[optimizer](learning_rate=schedule, weight_decay_rate=weight_decay_rate, clip_norm=clip_norm)

"""One custom training loop for pre-training and fine-tuning, under any tf.distribute strategy.

`Trainer` runs `steps_per_loop` steps inside one tf.function, then logs (loss, metrics, seq/s,
ETA), writes TensorBoard scalars and saves a checkpoint every `save_checkpoints_steps`. A rerun
with the same output_dir resumes from the latest checkpoint: weights, optimizer slots, step and
the input iterator's position; a checkpoint that is unreadable or was written for another model
(another config in the same output_dir) stops the run with one line naming it.

Losses are an `Objective`'s `Term`s (bert_tf.training.objectives): denominators are summed over replicas
before dividing, and the gradients are summed over replicas here, then clipped to a global norm,
so N replicas compute exactly the single-device update of the same global batch (the original
clipped each TPU shard's gradient separately). With `num_accumulation_steps` = k each step runs k
micro-batches per replica and sums their gradients, with the denominators of all k: the update is
that of one k-times larger batch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import math
import os
import re
import shutil
import signal
import time
from typing import Callable, Sequence

import bert_tf._env  # noqa: F401
from bert_tf.checkpoints.restore import CheckpointMismatch, CheckpointUnreadable, restore_checkpoint
from bert_tf.data.atomic_io import write_failure
from bert_tf.errors import BertTfError
import keras
import tensorflow as tf
from absl import logging

from bert_tf.training.options import STRATEGIES
from bert_tf.training.preemption import CHECK_SECONDS, ClusterStop, Preempted, StopRequests
from bert_tf.training.objectives import Objective, pooled_ratios, sum_keys, term_sums, total_loss

PROGRESS_SECONDS = 30.0  # the longest silence of a training run


class TrainingError(BertTfError, RuntimeError):
    """Training cannot go on (a non-finite loss, a bad setting); the message says what to do."""


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    output_dir: str
    num_train_steps: int
    global_batch_size: int
    steps_per_loop: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    num_accumulation_steps: int = 1
    jit_compile: bool = False
    eval_every_steps: int = 0  # 0: no evaluation during training

    def validate(self) -> None:
        require_positive(self, ("num_train_steps", "global_batch_size", "steps_per_loop", "save_checkpoints_steps",
                                "keep_checkpoint_max", "num_accumulation_steps"))


def require_positive(settings, names: Sequence[str]) -> None:
    """TrainingError naming the first flag among `names` whose value in `settings` is not > 0."""
    for name in names:
        if getattr(settings, name) <= 0:
            raise TrainingError(f"--{name} must be positive, got {getattr(settings, name)}")


def make_strategy(name: str, tpu: str | None = None, collective_timeout: float = 0.0) -> tf.distribute.Strategy:
    """The tf.distribute strategy for a --strategy flag value; `collective_timeout` (seconds, 0: none) bounds a
    multi-worker all-reduce."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.OneDeviceStrategy(devices[0].name)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker_mirrored":
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout or None)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if name == "tpu":
        if tpu is None:
            raise TrainingError("--strategy=tpu needs --tpu (a TPU name, grpc:// address or 'local')")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise TrainingError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes summaries and final exports (task 0 / the chief)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


class Trainer:
    """Trains `model` (built, created under `strategy.scope()`) on `dataset_fn(input_context)`."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model, optimizer,
                 objective: Objective, config: LoopConfig, dataset_fn: Callable,
                 evaluate: Callable[[int], None] | None = None):
        config.validate()
        self.strategy, self.model, self.optimizer = strategy, model, optimizer
        self._evaluate = evaluate  # called with the step every config.eval_every_steps and at the end
        self.objective, self.config = objective, config
        with strategy.scope():
            # Keras 3: optimizer variables must exist before the first distributed step.
            if not optimizer.built:  # (LossScaleOptimizer.build would make new variables)
                optimizer.build(model.trainable_variables)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # mixed_float16: a keras LossScaleOptimizer around ours scales the loss, skips the update
        # (and halves the scale) when the gradients overflow, and doubles it after 2000 good steps.
        self._loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        inner = optimizer.inner_optimizer if self._loss_scaled else optimizer
        # Sum the replicas' gradients here (then clip globally) when the optimizer lets us.
        self._reduce_here = hasattr(inner, "aggregate_gradients")
        if self._reduce_here:
            inner.aggregate_gradients = False
        self._dataset_fn = dataset_fn
        self._restored = False
        self._step_seconds: float | None = None
        self.iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        # A plain tf.data iterator is saved in the checkpoint. tf.distribute's iterators are not
        # trackable: on resume those skip the batches the finished steps consumed (exact when the
        # pipeline is deterministic, as `pretraining_dataset(deterministic=True, seed=...)`).
        saved_iterator = isinstance(self.iterator, tf.__internal__.tracking.Trackable)
        self._skip_on_resume = not saved_iterator
        # Dropout's random-number states are not Keras-tracked for tf.train.Checkpoint; add them,
        # so that a resumed run draws the masks an uninterrupted one would.
        tracked = dict(model=model, optimizer=optimizer, global_step=self.global_step,
                       rng_states=dropout_rng_states(model))
        if self._loss_scaled:  # not tracked through the Keras wrapper either
            tracked["loss_scale"] = [optimizer.dynamic_scale, optimizer.step_counter]
        if saved_iterator:
            tracked["iterator"] = self.iterator
        self.checkpoint = tf.train.Checkpoint(**tracked)
        self.chief = is_chief(strategy)
        # Every worker takes part in saving; only the chief's copy is kept (the others write to a
        # private folder that is deleted right after), and every worker restores the chief's.
        self._save_dir = config.output_dir if self.chief else os.path.join(
            config.output_dir, f".worker-{strategy.cluster_resolver.task_id}-tmp")
        self.manager = tf.train.CheckpointManager(self.checkpoint, self._save_dir,
                                                  max_to_keep=config.keep_checkpoint_max,
                                                  checkpoint_name="ckpt")
        self.writer = (tf.summary.create_file_writer(os.path.join(config.output_dir, "train"))
                       if self.chief else tf.summary.create_noop_writer())
        self._keys = ["loss", "grad_norm"] + sum_keys(self._term_names)
        self._loop = tf.function(self._loop_fn)
        self._chief_value = tf.function(self._chief_value_fn)
        self._gradients = tf.function(self._gradients_fn, jit_compile=True) if config.jit_compile \
            else self._gradients_fn

    @property
    def _evaluating(self) -> bool:
        return self._evaluate is not None and self.config.eval_every_steps > 0

    @property
    def _term_names(self) -> list[str]:
        return list(self.objective.loss_names) + list(self.objective.metric_names)

    # ---- the compiled part -----------------------------------------------------------------

    def _gradients_fn(self, batch, global_denominators):
        """(gradients, this micro-batch's loss share, term sums); XLA-compilable (no collectives)."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            losses, metrics = self.objective.terms_fn(self.model, batch, True)
            loss = total_loss([losses[name] for name in self.objective.loss_names], global_denominators)
            scaled = self.optimizer.scale_loss(loss) if self._loss_scaled else loss
        # None for a variable the loss does not reach (run_squad's unused pooler): left out of the
        # update, as the original's optimizer skips it (no weight decay either).
        grads = [None if g is None else tf.cast(tf.convert_to_tensor(g), tf.float32)
                 for g in tape.gradient(scaled, variables)]
        return grads, loss, term_sums({**losses, **metrics})

    def _replica_step(self, batches):
        ctx = tf.distribute.get_replica_context()
        variables = self.model.trainable_variables
        accumulated, reached = None, None
        out = {key: tf.zeros([]) for key in self._keys}
        # Denominators of the whole step (all micro-batches, all replicas) first: the summed
        # gradients are then exactly those of the global batch's loss.
        local = [tf.add_n([tf.cast(d, tf.float32) for d in parts]) for parts in
                 zip(*[self.objective.denominators_fn(batch) for batch in batches])]
        totals = ctx.all_reduce(tf.distribute.ReduceOp.SUM, local)
        for batch in batches:
            grads, loss, sums = self._gradients(batch, totals)
            if reached is None:
                reached = [i for i, g in enumerate(grads) if g is not None]
                variables = [variables[i] for i in reached]
            grads = [grads[i] for i in reached]
            accumulated = grads if accumulated is None else [a + g for a, g in zip(accumulated, grads)]
            out["loss"] += loss
            for key, value in sums.items():
                out[key] += value
        if self._reduce_here:
            accumulated = ctx.all_reduce(tf.distribute.ReduceOp.SUM, accumulated)
        norm = tf.linalg.global_norm(accumulated)
        if self._loss_scaled:  # the wrapper unscales, checks for overflow, then calls ours
            self.optimizer.apply(accumulated, variables)
            norm = norm / tf.cast(self.optimizer.dynamic_scale, tf.float32)
        elif self._reduce_here:
            self.optimizer.apply(accumulated, variables, grad_norm=norm)
        else:
            self.optimizer.apply_gradients(zip(accumulated, variables))
        self.global_step.assign_add(1)
        out["grad_norm"] = norm / tf.cast(ctx.num_replicas_in_sync, tf.float32)  # summed below
        return out

    def _loop_fn(self, iterator, steps):
        strategy = self.strategy
        totals = {key: tf.zeros([]) for key in self._keys}
        for _ in tf.range(steps):
            batches = [next(iterator) for _ in range(self.config.num_accumulation_steps)]
            out = strategy.run(self._replica_step, args=(batches,))
            totals = {key: totals[key] + strategy.reduce(tf.distribute.ReduceOp.SUM, out[key], axis=None)
                      for key in self._keys}
        return totals

    def _chief_value_fn(self, value):
        """`value` as the first replica (the chief's) has it, on every worker."""
        def first_only(v):
            first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
            return tf.where(first, v, tf.zeros_like(v))

        per_replica = self.strategy.run(first_only, args=(value,))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    # ---- the Python driver -----------------------------------------------------------------

    def restore(self) -> int:
        """Resumes from the latest checkpoint in output_dir, if any; returns the step.

        Done once per Trainer (train() calls it unless it ran already).
        """
        self._restored = True
        path = latest_checkpoint(self.config.output_dir)
        if path:
            self._restore_from(path)
        step = int(self.global_step.numpy())
        if path:
            logging.info("Resumed from %s at step %d", path, step)
            if self._skip_on_resume and step:
                self.iterator = iter(self.strategy.distribute_datasets_from_function(self._skipping_dataset_fn(step)))
        return step

    def _restore_from(self, path: str) -> None:
        """Restores the checkpoint at `path`: one TrainingError when it is unreadable or was written
        for another model (a variable of another shape, or one it lacks)."""
        try:
            restore_checkpoint(self.checkpoint, path, partial=False)
        except CheckpointMismatch as e:
            raise TrainingError(f"{e}; use a new --output_dir") from None
        except CheckpointUnreadable as e:
            raise TrainingError(f"{e}; name an earlier one in {os.path.join(self.config.output_dir, 'checkpoint')}, "
                                f"or use a new --output_dir") from None

    def _skipping_dataset_fn(self, steps_done: int):
        accumulation = self.config.num_accumulation_steps

        def dataset_fn(context: tf.distribute.InputContext):
            per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
            return self._dataset_fn(context).skip(steps_done * accumulation * per_pipeline)

        return dataset_fn

    def train(self) -> dict[str, float]:
        """Runs to num_train_steps; returns the last loop's scalars. A SIGTERM meanwhile saves at the next step
        boundary and raises Preempted (bert_tf.training.preemption)."""
        config = self.config
        step = int(self.global_step.numpy()) if self._restored else self.restore()
        start_step, start_time, scalars = step, time.perf_counter(), {}
        cluster = ClusterStop(self.strategy, config.output_dir, save=lambda: self._save(self._step()),
                              stopped=self._cluster_stopped) if self._multi_worker else None
        stop = cluster.requests if cluster else StopRequests()
        with stop, self._peers_lost_as_one_line(lambda: step):
            while step < config.num_train_steps:
                to_save = config.save_checkpoints_steps - step % config.save_checkpoints_steps
                steps = min(config.steps_per_loop, config.num_train_steps - step, to_save)
                if self._evaluating:
                    steps = min(steps, config.eval_every_steps - step % config.eval_every_steps)
                loop_start = time.perf_counter()
                totals, steps = self._run_steps(steps, start_step, start_time, stop, cluster)
                seconds = time.perf_counter() - loop_start
                step = self._step()
                if steps:  # none when a stop came before the loop's first chunk
                    scalars = self._scalars(totals, steps, seconds)
                    self._check_finite(scalars, step)
                    self._write_summaries(scalars, step)
                    self._log(scalars, step, start_step, start_time)
                stopping = bool(stop.signum) and cluster is None  # a cluster stops in cluster.check()
                if step % config.save_checkpoints_steps == 0 or step == config.num_train_steps or stopping:
                    self._save(step)
                if stopping:
                    self.writer.flush()
                    raise Preempted(f"stopped by {stop.name} at step {step}/{config.num_train_steps}: saved "
                                    f"{self.manager.latest_checkpoint}; the same command resumes from it",
                                    stop.signum)
                if self._evaluating and (step % config.eval_every_steps == 0 or step == config.num_train_steps):
                    self.writer.flush()
                    self._evaluate(step)
        self.writer.flush()
        logging.info("Weights fingerprint at step %d: %s", step, weights_fingerprint(self.model))
        return scalars

    def _step(self) -> int:
        return int(self.global_step.numpy())

    def _cluster_stopped(self) -> None:
        """What every worker of a cluster does once it saved at the step agreed after a SIGTERM to one of them."""
        self.writer.flush()
        step = self._step()
        raise Preempted(f"stopped by a SIGTERM to a worker at step {step}/{self.config.num_train_steps}: saved "
                        f"{os.path.join(self.config.output_dir, f'ckpt-{step}')}; restart every worker with the "
                        f"same command to resume from it", signal.SIGTERM)

    def _check_finite(self, scalars: dict[str, float], step: int) -> None:
        if not math.isfinite(scalars["loss"]):
            raise TrainingError(
                f"loss is {scalars['loss']} in the steps up to {step}; stopped without saving. "
                f"Last good checkpoint: {self.manager.latest_checkpoint or 'none'}. Lower "
                f"--learning_rate or check the input.")

    @property
    def _multi_worker(self) -> bool:
        """Whether other worker processes train with this one: a SIGTERM to one then stops all at one step
        (ClusterStop), and a lost worker ends the run with one line."""
        return getattr(self.strategy.extended, "_in_multi_worker_mode", lambda: False)()

    @contextlib.contextmanager
    def _peers_lost_as_one_line(self, step: Callable[[], int]):
        """A multi-worker run whose peer died or hangs (TensorFlow's coordination service stops hearing its
        heartbeats within about 10 s; an all-reduce waits at most --collective_timeout) ends in one TrainingError
        naming the last complete checkpoint, from which the whole cluster, restarted, resumes."""
        try:
            yield
        except PEER_ERRORS as e:
            if not self._multi_worker:
                raise
            latest = tf.train.latest_checkpoint(self.config.output_dir)
            raise TrainingError(f"lost contact with another worker after step {step()} ({peer_failure(e)}); the "
                                f"last complete checkpoint is {latest or 'none'}: restart every worker with the "
                                f"same command to resume from it") from None

    def _save(self, step: int) -> None:
        """Saves ckpt-`step` (unless it is the latest already); a write that fails (a full disk, a file-size limit)
        leaves no part of it and ends with one TrainingError naming it and the last complete checkpoint."""
        latest = self.manager.latest_checkpoint
        if latest and latest.endswith(f"ckpt-{step}"):
            return
        target = os.path.join(self._save_dir, f"ckpt-{step}")
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as e:
            for leftover in glob.glob(glob.escape(target) + "_temp*") + glob.glob(glob.escape(target) + ".*"):
                if os.path.isdir(leftover):
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    os.remove(leftover)
            raise TrainingError(f"cannot write the checkpoint {target}: {write_failure(e)}; the last complete "
                                f"one is {latest or 'none'} (free some space, then run the same command)") from None
        if self.chief:
            logging.info("Saved checkpoint %s", path)
        else:
            shutil.rmtree(self._save_dir, ignore_errors=True)

    def _run_steps(self, steps: int, start_step: int, start_time: float, stop: StopRequests,
                   cluster: ClusterStop | None) -> tuple[dict[str, float], int]:
        """Runs `steps` steps, or fewer once `stop` has a signal; returns their summed scalars and how many ran.

        The compiled loop is called in chunks sized from the last chunk's step time: at most CHECK_SECONDS each,
        so that a stop is noticed soon, and a progress line comes at least every PROGRESS_SECONDS even with a long
        --steps_per_loop (chunking changes nothing in the arithmetic: the same steps run in the same order).
        In a cluster every worker takes the chief's chunk sizes and calls `cluster.check()` after each chunk.
        """
        totals: dict[str, float] = {}
        done = 0
        loop_start = chunk_start = time.perf_counter()
        while done < steps and not (stop.signum and cluster is None):
            chunk = steps - done
            if self._step_seconds:
                chunk = min(chunk, max(1, int(min(CHECK_SECONDS, PROGRESS_SECONDS) / self._step_seconds)))
            elif steps > 1:
                chunk = 1  # the first call also traces: time one step before sizing chunks
            if cluster:
                chunk = int(self._chief_value(tf.constant(float(chunk))).numpy())
            call_start = time.perf_counter()
            out = self._loop(self.iterator, tf.constant(chunk))
            totals = {k: totals.get(k, 0.0) + float(v) for k, v in out.items()}
            self._step_seconds = (time.perf_counter() - call_start) / chunk
            done += chunk
            if cluster:
                cluster.check()
            if done < steps and time.perf_counter() - chunk_start >= PROGRESS_SECONDS:
                chunk_start = time.perf_counter()
                self._log(self._scalars(totals, done, chunk_start - loop_start),
                          int(self.global_step.numpy()), start_step, start_time)
        return totals, done

    def _scalars(self, totals: dict[str, float], steps: int, seconds: float) -> dict[str, float]:
        scalars = {"loss": totals["loss"] / steps, "grad_norm": totals["grad_norm"] / steps,
                   **pooled_ratios(totals, self._term_names)}
        scalars["learning_rate"] = float(self._learning_rate())
        if self._loss_scaled:
            scalars["loss_scale"] = float(self.optimizer.dynamic_scale.numpy())
        scalars["examples_per_second"] = steps * self.config.global_batch_size * \
            self.config.num_accumulation_steps / seconds
        return scalars

    def _learning_rate(self):
        lr = self.optimizer.learning_rate
        return lr.numpy() if hasattr(lr, "numpy") else lr

    def _write_summaries(self, scalars: dict[str, float], step: int) -> None:
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)

    def _log(self, scalars: dict[str, float], step: int, start_step: int, start_time: float) -> None:
        if not self.chief:
            return
        done = step - start_step
        rate = done / max(time.perf_counter() - start_time, 1e-9)
        eta = (self.config.num_train_steps - step) / rate if rate else float("inf")
        parts = [f"step {step}/{self.config.num_train_steps}", f"loss {scalars['loss']:.4f}"]
        parts += [f"{name} {scalars[name]:.4f}" for name in self._term_names if name != "loss"]
        parts += [f"lr {scalars['learning_rate']:.3g}", f"grad_norm {scalars['grad_norm']:.3f}",
                  f"{scalars['examples_per_second']:.1f} seq/s", f"ETA {format_duration(eta)}"]
        logging.info(" | ".join(parts))


PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
               tf.errors.CancelledError)
_NOISE = ("Graph execution error", "Detected at node", "File ", "The error could be", "Additional GRPC error")


def peer_failure(error: tf.errors.OpError) -> str:
    """A lost peer in a few words: which task stopped sending heartbeats, else the error's first telling line."""
    found = re.search(r"unhealthy \(stopped sending heartbeats\):\s*(\S+)", error.message)
    if found:
        return f"{found[1]} stopped sending heartbeats"
    lines = [line.strip() for line in error.message.splitlines() if line.strip()]
    telling = [line for line in lines if not line.startswith(_NOISE)] or lines or [type(error).__name__]
    return telling[0].split(" [[")[0][:200]


def dropout_rng_states(model: keras.Model) -> list[keras.Variable]:
    """The states ([key, counter]) of every random-number generator in `model` (its Dropout layers'), in
    `_flatten_layers` order: what checkpoints save as `rng_states`, so that a resumed run draws the masks an
    uninterrupted one would."""
    return [generator.state for layer in model._flatten_layers()
            for generator in getattr(layer, "_seed_generators", [])]


def latest_checkpoint(output_dir: str) -> str | None:
    """The latest checkpoint's prefix in `output_dir`, or None when it holds none; TrainingError when
    its `checkpoint` file names one whose files are gone (a fresh start would silently begin again)."""
    path = tf.train.latest_checkpoint(output_dir)
    state = None if path else tf.train.get_checkpoint_state(output_dir)
    if state is not None and state.model_checkpoint_path:
        raise TrainingError(f"{os.path.join(output_dir, 'checkpoint')} names {state.model_checkpoint_path}, whose "
                            f".index file is missing; put it back or name an earlier checkpoint there, or use "
                            f"a new --output_dir")
    return path


def weights_fingerprint(model: keras.Model) -> str:
    """sha256 (first 16 hex digits) of every weight's bytes: equal on workers that stay in sync."""
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(keras.ops.convert_to_numpy(variable.value).tobytes())
    return digest.hexdigest()[:16]


def format_duration(seconds: float) -> str:
    """H:MM:SS ("?" when unknown), for ETAs in progress lines."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

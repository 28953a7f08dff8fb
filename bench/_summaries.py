"""Scalar series from a run's TensorBoard summaries (what the docs' curves plot)."""
from __future__ import annotations


def scalar_series(logdir: str, tag: str) -> list[tuple[int, float]]:
    """(step, value) of `tag` in the event files under `logdir`, by step; where a resumed run wrote a step again
    (the steps after its last checkpoint), the later value."""
    from bert_tf._env import tf  # TensorFlow, imported quietly
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(logdir, size_guidance={"tensors": 0}).Reload()
    if tag not in events.Tags().get("tensors", []):
        return []
    by_step = {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)}
    return sorted(by_step.items())

"""Restoring our own training checkpoints (`tf.train.Checkpoint`: model/..., optimizer/...) with one
readable line for every way it can fail, shared by the trainer's resume, eval-only runs and
`--init_checkpoint`.

TensorFlow reports a cut data file as a bare `IndexError` ("Read less bytes than requested"), a
variable of another shape as a long ValueError, and a missing variable as an AssertionError listing
objects; each becomes a `CheckpointError` naming the checkpoint: `CheckpointMismatch` when it was
written for another model (`CheckpointLacksVariables` when only variables are missing),
`CheckpointUnreadable` when its files are damaged or missing.
"""
from __future__ import annotations

import re

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.checkpoints.tf1 import CheckpointError


class CheckpointMismatch(CheckpointError):
    """The checkpoint was written for another model (another config)."""


class CheckpointLacksVariables(CheckpointMismatch):
    """The checkpoint has no values for some of the model's variables (e.g. a head it was not trained with)."""


class CheckpointUnreadable(CheckpointError):
    """The checkpoint's files are cut, damaged or missing."""


_SHAPE_MISMATCH = re.compile(r"incompatible tensor with shape (?P<saved>\(.*?\)) when attempting to restore "
                             r"variable with shape (?P<here>\(.*?\)) and name (?P<name>[^\s:]+)")


def first_line(error: BaseException) -> str:
    """The first line of a TensorFlow error's message, without its `{{function_node ...}}` prefix."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message.strip().splitlines()[0])


def restore_checkpoint(checkpoint: tf.train.Checkpoint, prefix: str, *, partial: bool) -> None:
    """Restores `prefix` into `checkpoint`'s objects (`partial`: only the model is wanted, e.g. for
    evaluation, so the file's optimizer state is ignored). Every object of `checkpoint` must be in the
    file with its shape; otherwise, or when the files cannot be read, one CheckpointError line."""
    try:
        status = checkpoint.read(prefix) if partial else checkpoint.restore(prefix)
        (status.expect_partial() if partial else status).assert_existing_objects_matched()
    except ValueError as e:
        found = _SHAPE_MISMATCH.search(str(e))
        detail = (f"shape {found['saved']} in the checkpoint vs {found['here']} here for {found['name']}"
                  if found else first_line(e))
        raise CheckpointMismatch(f"{prefix} was written for a different model ({detail})") from None
    except AssertionError as e:
        raise CheckpointLacksVariables(f"{prefix} was written for a different model (it lacks some of this "
                                       f"model's variables: {first_line(e)[:300]})") from None
    except (tf.errors.OpError, IndexError) as e:  # IndexError: the reader's "Read less bytes than requested"
        reason = "truncated data file" if isinstance(e, IndexError) else first_line(e)
        raise CheckpointUnreadable(f"{prefix}: cannot read this checkpoint ({reason})") from None

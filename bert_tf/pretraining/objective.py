"""The pre-training objectives, as `Term`s: the original masked LM + next sentence prediction, and the
paper's ablations of it (Table 5), chosen by run_pretraining.py's --objective:

  mlm_nsp  masked LM + next sentence prediction: the original, unchanged.
  mlm      masked LM alone ("No NSP"): the next-sentence head is left out of the loss, so it and the
           pooler get no gradient and are not updated (the trainer skips variables the loss does not reach).
  ltr      a left-to-right LM from the same records ("LTR & No NSP"; bert_tf.pretraining.objective_ltr):
           the causal attention mask, the next token predicted at every position.

What made a checkpoint is recorded (`record_text`): the export's bert_config.json says
"causal_attention": true for ltr, and OUTPUT_DIR/pretraining.json and OUTPUT_DIR/export/pretraining.json
name the objective (the export's only for mlm and ltr: an export without one is the original's MLM + NSP,
like every released checkpoint, and stays byte-identical to what it was).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Mapping

import bert_tf._env  # noqa: F401
import tensorflow as tf

from bert_tf.data.atomic_io import json_text, write_json_atomic
from bert_tf.model.configs import BertConfig
from bert_tf.options import OptionError
from bert_tf.pretraining.objective_ltr import LEFT_TO_RIGHT
from bert_tf.training.objectives import Objective, Term, count_denominator, softmax_terms

RECORD_FILE = "pretraining.json"
DEFAULT_OBJECTIVE = "mlm_nsp"
OBJECTIVE_NAMES = (DEFAULT_OBJECTIVE, "mlm", "ltr")
_DESCRIPTIONS = {"mlm_nsp": "masked LM + next sentence prediction (the original)",
                 "mlm": "masked LM only (the paper's \"No NSP\")",
                 "ltr": "left-to-right LM, next token at every position, causal attention (\"LTR & No NSP\")"}


def _masked_lm_terms(outputs: Mapping[str, tf.Tensor], batch: Mapping[str, tf.Tensor]) -> tuple[Term, Term]:
    return softmax_terms(outputs["masked_lm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"],
                         epsilon=1e-5)


def pretraining_terms(model, batch: Mapping[str, tf.Tensor], training: bool
                      ) -> tuple[dict[str, Term], dict[str, Term]]:
    """(loss terms, metric terms) of the original MLM + NSP objective for one batch.

    Loss terms: masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5) and the mean next_sentence_loss
    (the total loss is their sum). Metric terms: masked_lm_accuracy (weighted by
    masked_lm_weights) and next_sentence_accuracy.
    """
    outputs = model(batch, training=training)
    mlm_loss, mlm_accuracy = _masked_lm_terms(outputs, batch)
    nsp_loss, nsp_accuracy = softmax_terms(outputs["next_sentence_logits"], batch["next_sentence_labels"])
    return ({"masked_lm_loss": mlm_loss, "next_sentence_loss": nsp_loss},
            {"masked_lm_accuracy": mlm_accuracy, "next_sentence_accuracy": nsp_accuracy})


def pretraining_denominators(batch: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """Denominators of pretraining_terms' losses from the inputs: sum of masked_lm_weights, batch size."""
    return [_weight_sum(batch), count_denominator(batch, "next_sentence_labels")]


def _weight_sum(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    return tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))


def masked_lm_terms(model, batch: Mapping[str, tf.Tensor], training: bool
                    ) -> tuple[dict[str, Term], dict[str, Term]]:
    """(loss terms, metric terms) of the masked LM alone ("No NSP"): masked_lm_loss and masked_lm_accuracy,
    the same numbers as in pretraining_terms."""
    mlm_loss, mlm_accuracy = _masked_lm_terms(model(batch, training=training), batch)
    return {"masked_lm_loss": mlm_loss}, {"masked_lm_accuracy": mlm_accuracy}


def masked_lm_denominators(batch: Mapping[str, tf.Tensor]) -> list[tf.Tensor]:
    """The denominator of masked_lm_loss: the sum of masked_lm_weights."""
    return [_weight_sum(batch)]


PRETRAINING = Objective(pretraining_terms, pretraining_denominators,
                        ("masked_lm_loss", "next_sentence_loss"),
                        ("masked_lm_accuracy", "next_sentence_accuracy"))
MASKED_LM = Objective(masked_lm_terms, masked_lm_denominators, ("masked_lm_loss",), ("masked_lm_accuracy",))
OBJECTIVES = {"mlm_nsp": PRETRAINING, "mlm": MASKED_LM, "ltr": LEFT_TO_RIGHT}


def model_config(objective: str, config: BertConfig, source: str) -> BertConfig:
    """The config the objective trains: causal attention for ltr; a masked LM needs the bidirectional
    encoder, so a `source` config asking for the causal mask is refused for mlm_nsp and mlm."""
    if objective not in OBJECTIVES:
        raise OptionError(f"--objective={objective!r} is not one of {', '.join(OBJECTIVE_NAMES)}")
    if config.causal_attention and objective != "ltr":
        raise OptionError(f"{source} asks for 'causal_attention' (a left-to-right model): a masked LM "
                          f"(--objective={objective}) needs bidirectional attention; use --objective=ltr")
    return dataclasses.replace(config, causal_attention=objective == "ltr")


def record(objective: str) -> dict:
    """What pretraining.json says about a checkpoint: the objective that trained it and what that means."""
    return {"objective": objective, "description": _DESCRIPTIONS[objective],
            "losses": list(OBJECTIVES[objective].loss_names), "causal_attention": objective == "ltr",
            "next_sentence_head_trained": objective == "mlm_nsp"}


def record_text(objective: str) -> str:
    """The text of pretraining.json (as write_json_atomic writes it)."""
    return json_text(record(objective))


def export_files(objective: str) -> dict[str, str]:
    """The export's extra files: pretraining.json for mlm and ltr, none for the original objective."""
    return {} if objective == DEFAULT_OBJECTIVE else {RECORD_FILE: record_text(objective)}


def recorded_objective(folder: str) -> str:
    """The objective folder/pretraining.json names; the original's when there is none (runs before it)."""
    try:
        with open(os.path.join(folder, RECORD_FILE), encoding="utf-8") as f:
            record = json.load(f)
        return str(record["objective"])
    except FileNotFoundError:
        return DEFAULT_OBJECTIVE
    except (OSError, ValueError, KeyError, TypeError):
        raise OptionError(f"{os.path.join(folder, RECORD_FILE)}: not the JSON record this program writes; put "
                          f"it back or use a new --output_dir") from None


def check_and_record(output_dir: str, objective: str, *, resuming: bool, write: bool) -> None:
    """Refuses to resume checkpoints another objective made (one line); records this run's objective in
    OUTPUT_DIR/pretraining.json (`write`: the chief)."""
    if resuming:
        previous = recorded_objective(output_dir)
        if previous != objective:
            raise OptionError(f"{output_dir} holds checkpoints of --objective={previous}, not {objective}; use a "
                              f"new --output_dir (with --init_checkpoint={output_dir} to start from them)")
    if write:
        write_json_atomic(os.path.join(output_dir, RECORD_FILE), record(objective))

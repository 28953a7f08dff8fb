"""bert-tf-export: SavedModels for serving, from an original folder, a Hugging Face folder or a fine-tuning run.

    bert-tf-export --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=served
    bert-tf-export --init_checkpoint=path/to/hf_bert_folder --output_dir=served --seq_length=64
    bert-tf-export --init_checkpoint=/tmp/mrpc --output_dir=/tmp/mrpc/served    # a fine-tuning run: its export/

writes into OUTPUT_DIR:
- encoder/ (TF Hub's encoder signature: bert_tf.export.encoder; with an `mlm` sub-object where the
  checkpoint has the masked-LM head) and preprocessor/ (strings in, `input_word_ids`/`input_mask`/
  `input_type_ids` of --seq_length out: bert_tf.export.preprocessor);
- the end-to-end model of the checkpoint's task head (bert_tf.export.task_models), strings in,
  answers out: classifier/ (probabilities and label), squad/ (answer text, score, character offsets),
  tagger/ (a tag per word), multiple_choice/ (the best of N endings) or fill_mask/ (the --top_k tokens for each [MASK]).
All load with TensorFlow and tensorflow-text alone (`import tensorflow_text; tf.saved_model.load`),
without bert_tf. The config and vocab are the --init_checkpoint folder's (bert_config.json or
config.json, vocab.txt); --do_lower_case is checked against the folder as the fine-tuning programs
check it. Each folder is written under a temporary name and renamed when complete; --output_dir is
locked while they are written; --overwrite replaces a folder only when all in it is a SavedModel's.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable

from bert_tf import cli
from bert_tf.errors import BertTfError
from bert_tf.options import Options, option

ENCODER, PREPROCESSOR, TASK = "encoder", "preprocessor", "task"
_SAVED_MODEL_NAMES = frozenset({"saved_model.pb", "fingerprint.pb", "variables", "assets"})
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16"}  # --precision -> the Keras dtype policy
_DEFAULT_SEQ_LENGTH = {"squad": 384}  # run_squad.py's --max_seq_length; the others' is 128


class ExportError(BertTfError, ValueError):
    """An --init_checkpoint or --output_dir the exporter cannot use (the message names it)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportOptions(Options):
    """bert-tf-export's flags."""

    init_checkpoint: str | None = option(
        None, "The model to export: an original folder (bert_config.json, bert_model.ckpt.*, vocab.txt) or its "
        "checkpoint prefix, a Hugging Face BERT folder, or a fine-tuning run's --output_dir (its export/).",
        required=True, path=True)
    output_dir: str | None = option(None, "Where the SavedModels' folders are written.", required=True, path=True)
    saved_models: str = option("encoder,preprocessor,task", "Which SavedModels to write, comma-separated: "
                               "encoder, preprocessor, task (the end-to-end model of the checkpoint's task head).")
    seq_length: int | None = option(None, "The longest packed input of the preprocessor and the task model "
                                    "(default 384 for a SQuAD model, as run_squad.py, else 128; the encoder takes "
                                    "any length up to the config's max_position_embeddings).", minimum=3)
    do_lower_case: bool = option(True, "Lower-case the input: True for uncased models, False for cased models.")
    doc_stride: int = option(128, "SQuAD: the stride between document windows, as run_squad.py.", positive=True)
    max_query_length: int = option(64, "SQuAD: question tokens kept, as run_squad.py.", positive=True)
    n_best_size: int = option(20, "SQuAD: start and end candidates per window, as run_squad.py.", positive=True)
    max_answer_length: int = option(30, "SQuAD: the longest answer in tokens, as run_squad.py.", positive=True)
    version_2_with_negative: bool = option(False, "SQuAD 2.0: the model may answer that there is no answer.")
    null_score_diff_threshold: float = option(0.0, "SQuAD 2.0: no answer when the null score beats the best "
                                              "answer's by more than this (run_squad.py's flag).")
    top_k: int = option(5, "fill_mask: the tokens given for each [MASK].", positive=True)
    precision: str = option("float32", "What the SavedModels compute in: float32, or bfloat16 (matmuls and "
                            "attention products in bfloat16; LayerNorm, softmax and every output in float32; the "
                            "same signatures), faster on CPUs with AVX512_BF16 or AMX and on TPUs and recent GPUs.",
                            enum=tuple(PRECISIONS))
    overwrite: bool = option(False, "Replace the SavedModel folders if they exist.")

    def wanted(self) -> tuple[str, ...]:
        """The --saved_models names, checked."""
        names = tuple(n.strip() for n in self.saved_models.split(",") if n.strip())
        unknown = [n for n in names if n not in (ENCODER, PREPROCESSOR, TASK)]
        if unknown or not names:
            raise ExportError(f"--saved_models={self.saved_models!r}: choose among {ENCODER}, {PREPROCESSOR}, {TASK}")
        return names


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """Where the exported model's weights, config and vocab come from."""

    checkpoint: str
    config_file: str
    vocab_file: str


def model_source(init_checkpoint: str, do_lower_case: bool) -> ModelSource:
    """The checkpoint, config and vocab --init_checkpoint names (a run's export/ for a fine-tuning run)."""
    from bert_tf.checkpoints.model_folder import CONFIG_NAMES, resolve_model_files

    path = init_checkpoint
    if not (os.path.exists(path) or os.path.isfile(path + ".index")):
        raise ExportError(f"--init_checkpoint {path}: no such folder or checkpoint")
    from bert_tf.training.run_setup import EXPORT_DIR  # a fine-tuning run's original-format export

    run_export = os.path.join(path, EXPORT_DIR)
    if os.path.isdir(run_export) and not any(os.path.isfile(os.path.join(path, n)) for n in CONFIG_NAMES):
        path = run_export
    files = resolve_model_files(path, None, None, do_lower_case)
    if files.bert_config_file is None:
        raise ExportError(f"--init_checkpoint {init_checkpoint}: no bert_config.json or config.json beside it "
                          f"(a fine-tuning run has them in {EXPORT_DIR}/ once its training ends)")
    if files.vocab_file is None:
        raise ExportError(f"--init_checkpoint {init_checkpoint}: no vocab.txt beside it")
    return ModelSource(path, files.bert_config_file, files.vocab_file)


def load_config(source: ModelSource, seq_length: int):
    """The source's BertConfig, checked against its vocab and the --seq_length asked for."""
    from bert_tf.model.configs import BertConfig

    config = BertConfig.from_json_file(source.config_file)
    config.validate(vocab_file=source.vocab_file, source=source.config_file)
    if seq_length > config.max_position_embeddings:
        raise ExportError(f"--seq_length={seq_length} is longer than the model's positions: {source.config_file} "
                          f"'max_position_embeddings' is {config.max_position_embeddings}")
    return config


def load_model(source: ModelSource, seq_length: int, head=None, precision: str = "float32"):
    """The model to export, its weights loaded: the task model of `head` (a task_models.Head), else
    the BertModel alone (a task head in the checkpoint is then left out); built to compute in `precision`
    (a --precision value)."""
    import bert_tf._env  # noqa: F401
    from bert_tf import checkpoints
    from bert_tf.export.task_models import build_task_model
    from bert_tf.model.bert import BertModel
    from bert_tf.model.precision import dtype_policy

    config = load_config(source, seq_length)
    with dtype_policy(PRECISIONS[precision]):
        model, allow_missing = build_task_model(head, config) if head else (BertModel(config), ())
    checkpoints.load_init_checkpoint(model, source.checkpoint, allow_missing=allow_missing)
    return model


def _already_exists(folder: str) -> ExportError:
    return ExportError(f"--output_dir: {os.path.abspath(folder)} already exists (pass --overwrite)")


def write_saved_model(folder: str, overwrite: bool, fill: Callable[[str], None]) -> None:
    """`fill(tmp)` writes a SavedModel into a temporary folder, renamed to `folder` when complete."""
    from bert_tf.data.atomic_io import ForeignFilesError, atomic_folder

    try:
        atomic_folder(folder, overwrite, fill, owned=_SAVED_MODEL_NAMES.__contains__, program="bert-tf-export",
                      log=lambda line: print(line, file=sys.stderr))
    except FileExistsError:
        raise _already_exists(folder) from None
    except ForeignFilesError as e:
        raise ExportError(f"--output_dir {e}") from None


def _writers(options: ExportOptions, source: ModelSource, head, model, seq_length: int) -> dict[str, Callable]:
    """{folder name: fill(tmp)} of the SavedModels asked for."""
    from bert_tf.export.encoder import save_encoder
    from bert_tf.export.preprocessor import save_preprocessor
    from bert_tf.model.bert import encoder_of

    wanted = options.wanted()
    encoder = encoder_of(model)
    mlm = model if head is not None and head.task == "fill_mask" else None
    writers = {}
    if ENCODER in wanted:
        writers[ENCODER] = lambda tmp: save_encoder(tmp, encoder, source.vocab_file, options.do_lower_case, mlm=mlm)
    if PREPROCESSOR in wanted:
        writers[PREPROCESSOR] = lambda tmp: save_preprocessor(tmp, source.vocab_file, options.do_lower_case,
                                                              seq_length)
    if TASK in wanted and head is not None:
        writers[head.task] = lambda tmp: _save_task(tmp, options, source, head, model, seq_length)
    return writers


def _save_task(folder: str, options: ExportOptions, source: ModelSource, head, model, seq_length: int) -> None:
    """The end-to-end SavedModel of the checkpoint's task head."""
    text = (source.vocab_file, options.do_lower_case, seq_length)
    if head.task == "classifier":
        from bert_tf.export.classifier import save_classifier

        save_classifier(folder, model, *text, head.labels)
    elif head.task == "squad":
        from bert_tf.export.squad import save_squad

        save_squad(folder, model, source.vocab_file, options.do_lower_case, seq_length=seq_length,
                   doc_stride=options.doc_stride, max_query_length=options.max_query_length,
                   n_best_size=options.n_best_size, max_answer_length=options.max_answer_length,
                   version_2_with_negative=options.version_2_with_negative,
                   null_score_diff_threshold=options.null_score_diff_threshold)
    elif head.task == "tagger":
        from bert_tf.export.tagger import save_tagger

        save_tagger(folder, model, *text, head.labels)
    elif head.task == "multiple_choice":
        from bert_tf.export.multiple_choice import save_multiple_choice

        save_multiple_choice(folder, model, *text)
    else:
        from bert_tf.export.fill_mask import save_fill_mask

        save_fill_mask(folder, model, *text, options.top_k)


def run(options: ExportOptions) -> int:
    """Writes the SavedModels the options ask for; returns 0."""
    from bert_tf.data import output_lock
    from bert_tf.export.task_models import find_head

    options.validate()
    output_lock.check_output_dir(options.output_dir, "--output_dir")
    source = model_source(options.init_checkpoint, options.do_lower_case)
    head = find_head(source.checkpoint)
    seq_length = options.seq_length or _DEFAULT_SEQ_LENGTH.get(head.task if head else "", 128)
    wanted = options.wanted()
    if TASK in wanted and head is None and len(wanted) == 1:
        raise ExportError(f"--saved_models=task: {source.checkpoint} has no task head (classifier, SQuAD, tagger "
                          "or masked LM) to serve")
    names = [n for n in wanted if n != TASK] + ([head.task] if head and TASK in wanted else [])
    for name in names:  # said before the model is loaded
        if os.path.lexists(os.path.join(options.output_dir, name)) and not options.overwrite:
            raise _already_exists(os.path.join(options.output_dir, name))
    model = load_model(source, seq_length, head, options.precision)  # bad input fails before anything is created
    if options.precision == "bfloat16":
        from bert_tf.model.precision import warn_if_emulated

        warn_if_emulated("bert-tf-export --precision=bfloat16")
    writers = _writers(options, source, head, model, seq_length)
    folders = {name: os.path.join(options.output_dir, name) for name in writers}
    with output_lock.lock_folder(options.output_dir, "--output_dir"):
        for name, fill in writers.items():
            write_saved_model(folders[name], options.overwrite, fill)
    config = model.bert_config
    task = f"a {head.task} model" if head else "no task head"
    print(f"bert-tf-export: wrote {', '.join(folders.values())} ({config.num_hidden_layers} layers, hidden "
          f"{config.hidden_size}, {task}, {options.precision}, from {source.checkpoint})")
    return 0


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-export` / `python -m bert_tf.export.program`."""
    from absl import logging as absl_logging

    # WARNING: TensorFlow's INFO lines while saving (assets written, fingerprint) are not the user's business.
    cli.run_program(run, ExportOptions, doc=__doc__, argv=argv, verbosity=absl_logging.WARNING)


if __name__ == "__main__":
    main()

"""bert-tf-export: SavedModels for serving, from an original folder, a Hugging Face folder or a fine-tuning run.

    bert-tf-export --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=served
    bert-tf-export --init_checkpoint=path/to/hf_bert_folder --output_dir=served --seq_length=64
    bert-tf-export --init_checkpoint=/tmp/mrpc --output_dir=/tmp/mrpc/served    # a fine-tuning run: its export/

writes OUTPUT_DIR/encoder/ (TF Hub's encoder signature: bert_tf.export.encoder) and, where the
in-graph tokenizer is available (bert_tf.export.preprocessor), OUTPUT_DIR/preprocessor/ (strings in,
`input_word_ids`/`input_mask`/`input_type_ids` of --seq_length out). Both load with TensorFlow alone
(`tf.saved_model.load`), without bert_tf. The config and vocab are the --init_checkpoint folder's
(bert_config.json or config.json, vocab.txt); --do_lower_case is checked against the folder as the
fine-tuning programs check it. Each folder is written under a temporary name and renamed when
complete; --output_dir is locked while they are written; --overwrite replaces a folder only when
all in it is a SavedModel's.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Callable

from bert_tf import cli
from bert_tf.errors import BertTfError
from bert_tf.options import Options, option

ENCODER, PREPROCESSOR = "encoder", "preprocessor"
_SAVED_MODEL_NAMES = frozenset({"saved_model.pb", "fingerprint.pb", "variables", "assets"})


class ExportError(BertTfError, ValueError):
    """An --init_checkpoint or --output_dir the exporter cannot use (the message names it)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportOptions(Options):
    """bert-tf-export's flags."""

    init_checkpoint: str | None = option(
        None, "The model to export: an original folder (bert_config.json, bert_model.ckpt.*, vocab.txt) or its "
        "checkpoint prefix, a Hugging Face BERT folder, or a fine-tuning run's --output_dir (its export/).",
        required=True, path=True)
    output_dir: str | None = option(None, "Where OUTPUT_DIR/encoder (and OUTPUT_DIR/preprocessor) are written.",
                                    required=True, path=True)
    seq_length: int = option(128, "The preprocessor's default sequence length (the encoder takes any length up "
                             "to the config's max_position_embeddings).", minimum=3)
    do_lower_case: bool = option(True, "Lower-case the input: True for uncased models, False for cased models.")
    overwrite: bool = option(False, "Replace OUTPUT_DIR/encoder and OUTPUT_DIR/preprocessor if they exist.")


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


def load_model(source: ModelSource, seq_length: int):
    """The BertModel of `source`, its weights loaded (a task head in the checkpoint is left out)."""
    import bert_tf._env  # noqa: F401
    from bert_tf import checkpoints
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig

    config = BertConfig.from_json_file(source.config_file)
    config.validate(vocab_file=source.vocab_file, source=source.config_file)
    if seq_length > config.max_position_embeddings:
        raise ExportError(f"--seq_length={seq_length} is longer than the model's positions: {source.config_file} "
                          f"'max_position_embeddings' is {config.max_position_embeddings}")
    model = BertModel(config)
    checkpoints.load_init_checkpoint(model, source.checkpoint)
    return model


def preprocessor_saver() -> Callable[[str, str, bool, int], None] | None:
    """bert_tf.export.preprocessor.save_preprocessor(folder, vocab_file, do_lower_case, seq_length), or None
    where this installation has no in-graph tokenizer yet."""
    name = f"{__package__}.preprocessor"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name:
            return None
        raise
    return getattr(module, "save_preprocessor", None)


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


def run(options: ExportOptions) -> int:
    """Writes the SavedModels the options ask for; returns 0."""
    from bert_tf.data import output_lock

    options.validate()
    output_lock.check_output_dir(options.output_dir, "--output_dir")
    source = model_source(options.init_checkpoint, options.do_lower_case)
    save_preprocessor = preprocessor_saver()
    encoder, preprocessor = (os.path.join(options.output_dir, name) for name in (ENCODER, PREPROCESSOR))
    for folder in (encoder, preprocessor) if save_preprocessor else (encoder,):
        if os.path.lexists(folder) and not options.overwrite:  # said before the model is loaded
            raise _already_exists(folder)
    model = load_model(source, options.seq_length)  # bad input fails before anything is created
    with output_lock.lock_folder(options.output_dir, "--output_dir"):
        from bert_tf.export.encoder import save_encoder

        write_saved_model(encoder, options.overwrite,
                          lambda tmp: save_encoder(tmp, model, source.vocab_file, options.do_lower_case))
        written = [encoder]
        if save_preprocessor is not None:
            write_saved_model(preprocessor, options.overwrite, lambda tmp: save_preprocessor(
                tmp, source.vocab_file, options.do_lower_case, options.seq_length))
            written.append(preprocessor)
    config = model.bert_config
    print(f"bert-tf-export: wrote {' and '.join(written)} ({config.num_hidden_layers} layers, hidden "
          f"{config.hidden_size}, from {source.checkpoint})")
    if save_preprocessor is None:
        print("note: no preprocessor written: this bert_tf has no in-graph tokenizer (bert_tf.export.preprocessor)")
    return 0


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-export` / `python -m bert_tf.export.program`."""
    from absl import logging as absl_logging

    # WARNING: TensorFlow's INFO lines while saving (assets written, fingerprint) are not the user's business.
    cli.run_program(run, ExportOptions, doc=__doc__, argv=argv, verbosity=absl_logging.WARNING)


if __name__ == "__main__":
    main()

"""bert-tf-convert: Hugging Face BERT folder <-> original BERT folder.

    bert-tf-convert hf-to-tf1 --input_dir=HF_DIR --output_dir=ORIG_DIR
    bert-tf-convert tf1-to-hf --input_dir=ORIG_DIR --output_dir=HF_DIR [--do_lower_case=false]

A Hugging Face folder holds config.json, model.safetensors (or pytorch_model.bin, read without
torch.load) and vocab.txt; an original folder holds bert_config.json, bert_model.ckpt.index /
.data-* and vocab.txt. The output is assembled in a temporary folder beside --output_dir and
renamed into place only when complete; --overwrite replaces an existing folder only when it holds
nothing but files this program writes, and never one that is or holds --input_dir. Activation
numerics are kept: Hugging Face "gelu" (erf) becomes "gelu_exact", the original's "gelu" (tanh)
becomes Hugging Face "gelu_new".
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from typing import Callable, Sequence

from safetensors.numpy import save_file

import bert_tf._env  # noqa: F401  (before bert_tf.checkpoints, which imports keras)
from bert_tf.errors import BertTfError
from bert_tf.checkpoints import hf
from bert_tf.data import output_lock
from bert_tf.data.atomic_io import ForeignFilesError, atomic_folder, atomic_path
from bert_tf import cli
from bert_tf.cli import parse_bool
from bert_tf.checkpoints.tf1 import read_tf1_checkpoint, write_tf1_checkpoint
from bert_tf.model.configs import BertConfig
from bert_tf.checkpoints.model_folder import LABELS_FILE as LABELS, labels_text, read_labels

VOCAB = "vocab.txt"
CHECKPOINT_PREFIX = "bert_model.ckpt"
# Everything either direction writes: an existing --output_dir holding anything else is never replaced.
_OUTPUT_NAMES = frozenset({"bert_config.json", CHECKPOINT_PREFIX + ".index", VOCAB, LABELS, "config.json",
                           "model.safetensors", "tokenizer_config.json"})
_CHECKPOINT_DATA = re.compile(re.escape(CHECKPOINT_PREFIX) + r"\.data-\d{5}-of-\d{5}")


class ConversionError(BertTfError, ValueError):
    """A folder that cannot be converted (the message names the file)."""


def _written_by_converter(name: str) -> bool:
    return name in _OUTPUT_NAMES or bool(_CHECKPOINT_DATA.fullmatch(name))


def _check_folders(input_dir: str, output_dir: str) -> None:
    """Refuses an --output_dir that is --input_dir or holds it: replacing it would delete the input."""
    source, target = os.path.realpath(input_dir), os.path.realpath(output_dir)
    if source == target or source.startswith(target.rstrip(os.sep) + os.sep):
        raise ConversionError(f"--output_dir {output_dir} is or holds --input_dir {input_dir}; "
                              "choose a new or empty folder")


def _write_folder(output_dir: str, overwrite: bool, fill: Callable[[str], None]) -> None:
    try:
        atomic_folder(output_dir, overwrite, fill, owned=_written_by_converter, program="bert-tf-convert",
                      log=lambda line: print(line, file=sys.stderr))  # what a killed run left, put right
    except FileExistsError:
        raise ConversionError(f"--output_dir {os.path.abspath(output_dir)} already exists (pass --overwrite)") from None
    except ForeignFilesError as e:
        raise ConversionError(f"--output_dir {e}") from None


def _copy_vocab(input_dir: str, out: str) -> None:
    src = os.path.join(input_dir, VOCAB)
    if not os.path.isfile(src):
        raise ConversionError(f"{src}: vocab file missing (both folder formats carry {VOCAB})")
    shutil.copyfile(src, os.path.join(out, VOCAB))


def convert_hf_to_tf1(input_dir: str, output_dir: str, *, overwrite: bool = False) -> dict:
    """Hugging Face BERT folder -> original folder (bert_config.json, bert_model.ckpt.*, vocab.txt)."""
    _check_folders(input_dir, output_dir)
    config_dict = hf.read_hf_config(input_dir)
    config = BertConfig.from_dict(config_dict, source=os.path.join(input_dir, "config.json"))
    state = hf.read_hf_state_dict(input_dir)
    weights = hf.hf_to_tf1(state, source=input_dir, architecture=hf.folder_architecture(input_dir))
    absent = hf.check_against_config(weights, config_dict, source=input_dir)

    labels = hf.head_labels(weights, hf.folder_labels(input_dir))

    def fill(out: str) -> None:
        config.to_json_file(os.path.join(out, "bert_config.json"))
        write_tf1_checkpoint(weights, os.path.join(out, CHECKPOINT_PREFIX))
        _copy_vocab(input_dir, out)
        if labels is not None and not labels[0].startswith("LABEL_"):
            with open(os.path.join(out, LABELS), "w", encoding="utf-8") as f:
                f.write(labels_text(labels))

    _write_folder(output_dir, overwrite, fill)
    return {"variables": len(weights), "hidden_act": config.hidden_act, "absent": absent}


def convert_tf1_to_hf(input_dir: str, output_dir: str, *, overwrite: bool = False,
                      do_lower_case: bool = True) -> dict:
    """Original folder -> Hugging Face folder (config.json, model.safetensors, vocab.txt, tokenizer)."""
    _check_folders(input_dir, output_dir)
    config_path = os.path.join(input_dir, "bert_config.json")
    config = BertConfig.from_json_file(config_path)
    weights = read_tf1_checkpoint(os.path.join(input_dir, CHECKPOINT_PREFIX))
    absent = hf.check_against_config(weights, config.to_dict(), source=input_dir)
    architecture = hf.infer_hf_architecture(weights)
    hf_config = hf.original_config_to_hf(config.to_dict(), architecture=architecture, source=config_path,
                                         labels=hf.head_labels(weights, read_labels(input_dir)))
    state = hf.tf1_to_hf(weights, source=input_dir)

    def fill(out: str) -> None:
        with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf_config, f, indent=2)
            f.write("\n")
        with atomic_path(os.path.join(out, "model.safetensors")) as tmp:  # save_file's own rename gives 0600
            save_file(state, tmp, metadata={"format": "pt"})
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": do_lower_case}, f,
                      indent=2)
            f.write("\n")
        _copy_vocab(input_dir, out)

    _write_folder(output_dir, overwrite, fill)
    return {"variables": len(state), "architecture": architecture,
            "hidden_act": hf_config["hidden_act"], "absent": absent}



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=cli.program_name(), description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("hf-to-tf1", "Hugging Face folder -> original TF1 folder"),
                            ("tf1-to-hf", "original TF1 folder -> Hugging Face folder")):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--input_dir", required=True)
        sub.add_argument("--output_dir", required=True)
        sub.add_argument("--overwrite", action="store_true",
                         help="replace --output_dir if it exists")
        if name == "tf1-to-hf":
            sub.add_argument("--do_lower_case", type=parse_bool, default=True,
                             help="written to tokenizer_config.json (default true)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status (1 after one `PROG: error: ...` line on bad input)."""
    return cli.run_argparse(_convert, build_parser(), argv)


def _convert(args: argparse.Namespace) -> None:
    if not os.path.isdir(args.input_dir):
        raise ConversionError(f"--input_dir {args.input_dir} is not a folder")
    output_lock.check_output_dir(args.output_dir, "--output_dir")
    with output_lock.lock_output(args.output_dir, "--output_dir", create_folder=True):  # beside it: it is replaced
        if args.command == "hf-to-tf1":
            summary = convert_hf_to_tf1(args.input_dir, args.output_dir, overwrite=args.overwrite)
        else:
            summary = convert_tf1_to_hf(args.input_dir, args.output_dir, overwrite=args.overwrite,
                                        do_lower_case=args.do_lower_case)
    absent = summary.pop("absent")
    details = ", ".join(f"{k}={v}" for k, v in summary.items())
    print(f"bert-tf-convert {args.command}: wrote {args.output_dir} ({details})")
    if absent:
        print(f"note: the source has no pooler ({', '.join(absent)})")


if __name__ == "__main__":
    sys.exit(main())

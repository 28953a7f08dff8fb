"""A write the disk refuses (a file-size limit here: RLIMIT_FSIZE in the child, whose EFBIG is what a full disk's
ENOSPC looks like to a writer; Python ignores SIGXFSZ) ends in one line naming what could not be written, keeps
the last complete artifact byte for byte and leaves no temp file. Real programs and data: a checkpoint and the
export of run_pretraining, records of create_pretraining_data, extract_features' output, a converted folder and
a SavedModel export."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import resource
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

BIN = os.path.dirname(sys.executable)
TINY = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 256,
        "num_attention_heads": 2, "num_hidden_layers": 1, "type_vocab_size": 2, "vocab_size": 30522}
TEMP_MARKS = (".tmp", "_temp", "tempstate")


def run(args: list[str], limit: int | None = None) -> subprocess.CompletedProcess:
    """`args` in a child process whose files may not grow beyond `limit` bytes (None: no limit)."""
    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([str(a) for a in args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=limit_file_size if limit else None)


def snapshot(folder: pathlib.Path) -> dict[str, str]:
    """sha256 of every file below `folder` (its lock files aside), by relative path."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".bert_tf.lock")}


def assert_refused(done: subprocess.CompletedProcess, prog: str, names: str) -> None:
    """One `PROG: error: cannot write NAMES...: File too large` line, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[-1].startswith(f"{prog}: error: cannot write {names}") and "File too large" in lines[-1], lines[-1]


def temp_files(folder: pathlib.Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if any(mark in p.name for mark in TEMP_MARKS)]


def vocab() -> pathlib.Path:
    return shared_path("vocab", "uncased", "vocab.txt")


@pytest.mark.slow
def test_a_refused_checkpoint_or_export_keeps_the_last_complete_one_and_names_it(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "out"
    records = shared_path("golden", "create_pretraining_data", "default_uncased", "default_uncased.tfrecord")
    command = [sys.executable, "run_pretraining.py", f"--bert_config_file={config}", f"--input_file={records}",
               f"--output_dir={out}", "--train_batch_size=8", "--num_warmup_steps=2", "--learning_rate=1e-3",
               "--save_checkpoints_steps=6", "--steps_per_loop=3", "--do_train", f"--vocab_file={vocab()}"]
    first = run([*command, "--num_train_steps=6"])
    assert first.returncode == 0, first.stderr[-3000:]
    complete = snapshot(out)
    # a checkpoint is bigger than 300 KB, each event file and json far smaller
    done = run([*command, "--num_train_steps=12"], limit=300_000)
    assert_refused(done, "run_pretraining.py", f"the checkpoint {out / 'ckpt-12'}: File too large; the last "
                   f"complete one is {out / 'ckpt-6'}")
    assert not temp_files(out) and not list(out.glob("ckpt-12*"))
    assert {k: v for k, v in snapshot(out).items() if not k.startswith("train/")} == \
        {k: v for k, v in complete.items() if not k.startswith("train/")}
    # a finished run asked again only exports: the export refused, the last one stays
    done = run([*command, "--num_train_steps=6"], limit=300_000)
    assert_refused(done, "run_pretraining.py", str(out / "export" / "bert_model.ckpt"))
    assert not temp_files(out) and snapshot(out / "export") == {k[len("export/"):]: v for k, v in complete.items()
                                                                 if k.startswith("export/")}


def test_refused_records_keep_the_earlier_file(tmp_path):
    output = tmp_path / "records.tfrecord"
    command = [sys.executable, "-m", "bert_tf.pretraining.create_pretraining_data", f"--output_file={output}",
               f"--input_file={shared_path('golden', 'create_pretraining_data', 'input', 'wiki_sample.txt')}",
               f"--vocab_file={vocab()}", "--dupe_factor=1"]
    assert run(command).returncode == 0
    before = snapshot(tmp_path)
    done = run([*command, "--random_seed=7"], limit=100_000)
    assert_refused(done, "python -m bert_tf.pretraining.create_pretraining_data", str(output))
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)


def test_refused_features_keep_the_earlier_output(tmp_path):
    checkpoint = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    text = tmp_path / "input.txt"
    text.write_text("the first sentence ||| a second one\nanother line of text\n" * 40, encoding="utf-8")
    output = tmp_path / "features.jsonl"
    command = [sys.executable, "extract_features.py", f"--input_file={text}", f"--output_file={output}",
               f"--init_checkpoint={checkpoint / 'bert_model.ckpt'}", f"--vocab_file={checkpoint / 'vocab.txt'}",
               f"--bert_config_file={checkpoint / 'bert_config.json'}", "--layers=-1", "--max_seq_length=32"]
    assert run(command).returncode == 0
    before = snapshot(tmp_path)
    done = run([*command, "--layers=-1,-2"], limit=50_000)
    assert_refused(done, "extract_features.py", str(output))
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)


@pytest.mark.slow
def test_a_refused_conversion_or_saved_model_export_keeps_the_earlier_folder(tmp_path):
    checkpoint = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    converted, exported = tmp_path / "hf", tmp_path / "saved_models"
    convert = [os.path.join(BIN, "bert-tf-convert"), "tf1-to-hf", f"--input_dir={checkpoint}",
               f"--output_dir={converted}", "--overwrite"]
    export = [os.path.join(BIN, "bert-tf-export"), f"--init_checkpoint={checkpoint}", f"--output_dir={exported}",
              "--saved_models=encoder", "--overwrite"]
    assert run(convert).returncode == 0 and run(export).returncode == 0
    before = snapshot(tmp_path)
    assert_refused(run(convert, limit=100_000), "bert-tf-convert", str(converted))
    assert_refused(run(export, limit=100_000), "bert-tf-export", str(exported / "encoder"))
    assert snapshot(tmp_path) == before and not temp_files(tmp_path)

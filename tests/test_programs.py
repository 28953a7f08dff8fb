"""Every program, one shape: a bad input ends as exactly one `PROG: error: MESSAGE` line and exit status 1."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MISSING = "/nonexistent/bert_tf_input"


def _run(args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": ROOT})


# (how the user typed it, arguments, PROG in the error line, words of the message)
PROGRAMS = [
    (["run_pretraining.py"], ["--bert_config_file=c.json", "--output_dir=o", f"--input_file={MISSING}",
                              "--do_train"], "run_pretraining.py", "config file not found"),
    (["extract_features.py"], [f"--input_file={MISSING}", "--output_file=o", "--vocab_file=v",
                               "--bert_config_file=c", "--init_checkpoint=i"], "extract_features.py", "c"),
    (["data_prep/create_pretraining_data.py"], [f"--input_file={MISSING}", "--output_file=o",
                                                f"--vocab_file={MISSING}"],
     "create_pretraining_data.py", "--vocab_file"),
    (["data_prep/beam_create_pretraining_data.py"], [f"--input_file={MISSING}", "--output_file=o",
                                                     "--vocab_file=v", "--dupe_factor=0"],
     "beam_create_pretraining_data.py", "dupe_factor"),
    (["data_prep/prepare_corpus.py"], [f"--input={MISSING}", "--output_dir=o"], "prepare_corpus.py",
     "matches no file"),
    (["data_prep/create_vocab.py"], [f"--input={MISSING}", "--output=o"], "create_vocab.py",
     "matches no file"),
    (["-m", "bert_tf.checkpoints.convert"], ["hf-to-tf1", f"--input_dir={MISSING}", "--output_dir=o"],
     "python -m bert_tf.checkpoints.convert", "is not a folder"),
    (["-m", "bert_tf.tasks.squad.evaluate"], [MISSING, MISSING], "python -m bert_tf.tasks.squad.evaluate",
     "cannot read dataset file"),
    (["-m", "bert_tf.pretraining.program"], ["--output_dir=o", "--do_train"], "python -m bert_tf.pretraining.program",
     "--bert_config_file is required"),
    (["run_squad.py"], [f"--predict_file={MISSING}", "--vocab_file=v", "--output_dir=o",
                        f"--raw_logits_file={MISSING}"], "run_squad.py", "not found"),
]


@pytest.mark.parametrize("command, args, prog, words", PROGRAMS, ids=[p[2] for p in PROGRAMS])
def test_a_bad_input_is_one_error_line_naming_the_program(command, args, prog, words, tmp_path):
    if command[0].endswith(".py"):
        command = [os.path.join(ROOT, command[0])]
    done = _run([*command, *args], cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr[-2000:]
    assert len([line for line in lines if ": error: " in line]) == 1 and "Traceback" not in done.stderr
    assert lines[-1].startswith(f"{prog}: error: ") and words in lines[-1], lines[-1]


def test_a_bad_flag_value_and_an_unknown_flag_are_one_line_too(tmp_path):
    for flag, words in [("--train_batch_size=many", "--train_batch_size"), ("--no_such_flag=1", "no_such_flag"),
                        ("--strategy=gpu", "--strategy")]:
        done = _run([os.path.join(ROOT, "run_pretraining.py"), flag], cwd=tmp_path)
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [done.stderr.strip()] and \
            done.stderr.startswith("run_pretraining.py: error: ") and words in done.stderr, done.stderr


def test_help_lists_the_program_flags_with_their_defaults(tmp_path):
    done = _run([os.path.join(ROOT, "data_prep", "create_pretraining_data.py"), "--help"], cwd=tmp_path)
    assert "--dupe_factor: Number of times to duplicate the input data" in done.stdout
    assert "(default: '10')" in done.stdout and "record-for-record the original's output" in done.stdout


def test_no_program_exits_with_a_message_of_its_own():
    sources = []
    for folder, _, names in os.walk(os.path.join(ROOT, "bert_tf")):
        sources += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    offenders = []
    for path in sources + [os.path.join(ROOT, "run_pretraining.py"), os.path.join(ROOT, "extract_features.py")]:
        text = open(path, encoding="utf-8").read()
        if 'sys.exit(f"' in text or "raise SystemExit(f" in text or 'sys.exit("' in text:
            offenders.append(os.path.relpath(path, ROOT))
    assert offenders == []


@pytest.mark.slow
def test_a_short_pretraining_run_logs_no_per_save_chatter_or_private_names(tmp_path):
    import json

    from shared_data import shared_path
    from test_run_pretraining import TINY

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    records = shared_path("golden", "create_pretraining_data", "default_uncased", "default_uncased.tfrecord")
    done = _run([os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={tmp_path / 'config.json'}",
                 f"--input_file={records}", f"--output_dir={tmp_path / 'out'}", "--do_train", "--do_eval",
                 "--train_batch_size=8", "--eval_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=1",
                 "--save_checkpoints_steps=3", "--steps_per_loop=3", "--max_eval_steps=2"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Saved checkpoint" in done.stderr and "Strategy default with 1 replica(s)" in done.stderr
    assert "Sharding callback duration" not in done.stderr and "_DefaultDistributionStrategy" not in done.stderr
    assert "bert/encoder/layer_0" not in done.stderr  # no variable-by-variable load report

"""Output locks and unusable output folders: a second run on an output in use is refused naming the
first, a lock left by a killed run blocks nothing, and an output path that cannot be a folder (or
file) is one error line before any work. Real programs in real processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from shared_data import REPO_ROOT, shared_path

ROOT = str(REPO_ROOT)
HOST = socket.gethostname()
TINY = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 256,
        "num_attention_heads": 2, "num_hidden_layers": 1, "type_vocab_size": 2, "vocab_size": 30522}
# A stand-in for another run: takes the lock of one output (as the programs name it) and waits.
HOLDER = """import sys, time
from bert_tf.data import output_lock
with output_lock.lock_output(sys.argv[1], "--output_file"):
    print("holding", flush=True)
    time.sleep(600)
"""


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT}, **kwargs)


def _error_lines(done: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return [line for line in done.stderr.splitlines() if ": error: " in line]


def _files(folder) -> dict[str, bytes]:
    return {name: open(os.path.join(folder, name), "rb").read() for name in sorted(os.listdir(folder))}


def _kill9(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


# ----------------------------------------------------------------------------- run_pretraining

def _pretraining_args(tmp_path, out, *extra) -> list[str]:
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY))
    records = shared_path("golden", "create_pretraining_data", "default_uncased", "default_uncased.tfrecord")
    return [os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}", f"--input_file={records}",
            f"--output_dir={out}", f"--vocab_file={shared_path('vocab', 'uncased', 'vocab.txt')}",
            "--train_batch_size=8", "--eval_batch_size=8", "--num_warmup_steps=2", "--learning_rate=1e-3",
            "--save_checkpoints_steps=3", "--steps_per_loop=3", "--max_eval_steps=2", *extra]


def _wait_for(path, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.time() + seconds
    while not os.path.exists(path):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_second_pretraining_run_on_a_folder_in_use_is_refused_and_a_killed_holder_blocks_nothing(tmp_path):
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, *_pretraining_args(tmp_path, out, "--do_train",
                                                                 "--num_train_steps=100000")],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / "checkpoint", first)  # it holds the lock and has saved
        second = _run(_pretraining_args(tmp_path, out, "--do_train", "--num_train_steps=6"))
        assert second.returncode == 1
        (line,) = _error_lines(second)
        assert line.startswith(f"run_pretraining.py: error: --output_dir {out} is in use by run_pretraining.py "
                               f"(pid {first.pid} on {HOST}, since ")
        assert line.endswith("); wait for it or choose another --output_dir")
        assert "Strategy" not in second.stderr  # refused before configuring anything
        assert first.poll() is None  # the first run goes on
        _kill9(first)
        lock = out / ".bert_tf.lock"
        assert json.loads(lock.read_text())["pid"] == first.pid  # left behind by the killed run
        third = _run(_pretraining_args(tmp_path, out, "--do_eval"))
        assert third.returncode == 0, third.stderr[-3000:]
        assert "global_step = " in third.stderr and not lock.exists()  # it evaluated the first's checkpoint
    finally:
        _kill9(first)


# ----------------------------------------------------------------------------- create_pretraining_data

def _data_prep(out, mode: str, *extra) -> subprocess.CompletedProcess:
    corpus = shared_path("golden", "create_pretraining_data", "input", "single_document.txt")
    return _run([os.path.join(ROOT, "data_prep", "create_pretraining_data.py"), f"--input_file={corpus}",
                 f"--output_file={out}", f"--vocab_file={shared_path('vocab', 'uncased', 'vocab.txt')}",
                 "--dupe_factor=1", "--num_workers=1", f"--mode={mode}", *extra])


def _start_holder(tmp_path, output) -> subprocess.Popen:
    script = tmp_path / "hold_output.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), str(output)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert holder.stdout.readline().strip() == "holding"
    return holder


@pytest.mark.parametrize("mode", ["faithful", "sharded"])
def test_a_second_data_prep_run_on_outputs_in_use_is_refused_naming_the_holder_and_leaves_them_intact(
        tmp_path, mode):
    out = tmp_path / "out"
    out.mkdir()
    assert _data_prep(out / "data.tfrecord", mode).returncode == 0
    before = _files(out)
    holder = _start_holder(tmp_path, out / "data")  # both modes lock the outputs' stem
    try:
        second = _data_prep(out / "data.tfrecord", mode, "--overwrite", "--random_seed=7")
        assert second.returncode == 1
        (line,) = _error_lines(second)
        assert line.startswith(f"create_pretraining_data.py: error: --output_file {out / 'data.tfrecord'} is in use "
                               f"by hold_output.py (pid {holder.pid} on {HOST}, since ")
        assert {k: v for k, v in _files(out).items() if not k.endswith(".lock")} == before
    finally:
        _kill9(holder)


def test_a_lock_left_by_a_killed_holder_does_not_block_the_next_data_prep_run(tmp_path):
    holder = _start_holder(tmp_path, tmp_path / "data")
    _kill9(holder)
    lock = tmp_path / ".data.bert_tf.lock"
    assert json.loads(lock.read_text())["pid"] == holder.pid
    done = _data_prep(tmp_path / "data.tfrecord", "faithful")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "data.tfrecord").stat().st_size > 0 and not lock.exists()


# ----------------------------------------------------------------------------- the other writers

def test_prepare_corpus_and_extract_features_are_refused_on_an_output_another_process_holds(tmp_path):
    from bert_tf.data import output_lock

    corpus = shared_path("golden", "create_pretraining_data", "input", "single_document.txt")
    with output_lock.lock_output(tmp_path / "corpus", "--output_dir"):
        done = _run([os.path.join(ROOT, "data_prep", "prepare_corpus.py"), f"--input={corpus}",
                     f"--output_dir={tmp_path}"])
    assert done.returncode == 1
    assert _error_lines(done)[0].startswith(f"prepare_corpus.py: error: --output_dir {tmp_path} (shards corpus-*) "
                                            f"is in use by ")
    assert f"(pid {os.getpid()} on {HOST}, since " in done.stderr
    output = tmp_path / "features.jsonl"
    with output_lock.lock_output(output, "--output_file"):
        done = _run([os.path.join(ROOT, "extract_features.py"), f"--input_file={corpus}", f"--output_file={output}",
                     "--vocab_file=v", "--bert_config_file=c", "--init_checkpoint=i"])
    assert done.returncode == 1 and f"error: --output_file {output} is in use by " in done.stderr
    assert sorted(os.listdir(tmp_path)) == []  # the holder's lock files are gone with it; nothing else written


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a folder\n")
    return path


@pytest.mark.parametrize("program, flags, message", [
    ("data_prep/create_pretraining_data.py", ["--mode=faithful", "--output_file={f}/data.tfrecord"],
     "--output_file {f}/data.tfrecord: {f} is a file, not a folder"),
    ("data_prep/create_pretraining_data.py", ["--mode=sharded", "--output_file={f}/data"],
     "--output_file {f}/data: {f} is a file, not a folder"),
    ("data_prep/create_pretraining_data.py", ["--output_file={d}"], "--output_file {d} is a folder; name a file"),
    ("data_prep/prepare_corpus.py", ["--output_dir={f}"],
     "--output_dir {f} is a file, not a folder; choose another --output_dir"),
    ("extract_features.py", ["--output_file={f}/x.jsonl", "--vocab_file=v", "--bert_config_file=c",
                             "--init_checkpoint=i"], "--output_file {f}/x.jsonl: {f} is a file, not a folder"),
], ids=["faithful", "sharded", "faithful-folder", "prepare_corpus", "extract_features"])
def test_an_output_path_blocked_by_a_file_or_folder_is_one_error_line_naming_flag_and_path(
        a_file, tmp_path, program, flags, message):
    corpus = shared_path("golden", "create_pretraining_data", "input", "single_document.txt")
    vocab = shared_path("vocab", "uncased", "vocab.txt")
    inputs = {"data_prep/prepare_corpus.py": [f"--input={corpus}"]}.get(
        program, [f"--input_file={corpus}", f"--vocab_file={vocab}"])
    done = _run([os.path.join(ROOT, program), *inputs, *(f.format(f=a_file, d=tmp_path) for f in flags)])
    assert done.returncode == 1
    assert _error_lines(done) == [f"{os.path.basename(program)}: error: {message.format(f=a_file, d=tmp_path)}"]
    assert sorted(os.listdir(tmp_path)) == ["a_file"]


def _read_only(folder: str) -> tuple[list[str], str]:
    """A command prefix under which `folder` is read-only, and the reason the system then gives.

    Root ignores permission bits, so as root the folder becomes a read-only tmpfs in a private mount
    namespace of the command (gone with it); skipped where that is not allowed.
    """
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        return [], "Permission denied"
    prefix = ["unshare", "--mount", "--propagation=private", "sh", "-c",
              'mount -t tmpfs -o ro,size=64k tmpfs "$0" && exec "$@"', folder]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=60)
    except OSError:
        probe = None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root, where only a read-only mount makes a folder read-only, and mounting "
                    "in a private namespace is not allowed here")
    return prefix, "Read-only file system"


def test_a_read_only_output_folder_is_one_error_line_before_any_work(tmp_path):
    corpus = shared_path("golden", "create_pretraining_data", "input", "single_document.txt")
    folder = str(tmp_path / "out")
    os.mkdir(folder)
    prefix, reason = _read_only(folder)
    script = os.path.join(ROOT, "data_prep", "prepare_corpus.py")
    for output_dir, message in [
            (folder, f"--output_dir {folder} (shards corpus-*): the folder {folder} is not writable ({reason}); "
                     "choose another --output_dir"),
            (f"{folder}/new", f"--output_dir {folder}/new: cannot create the folder: {reason}")]:
        done = subprocess.run([*prefix, sys.executable, script, f"--input={corpus}", f"--output_dir={output_dir}"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT})
        assert done.returncode == 1
        assert _error_lines(done) == [f"prepare_corpus.py: error: {message}"]
    os.chmod(folder, 0o755)
    assert os.listdir(folder) == []


def test_a_planted_symlink_or_fifo_at_the_lock_file_is_refused_and_never_followed(tmp_path):
    from bert_tf.data import output_lock

    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".bert_tf.lock").symlink_to(target)
    with pytest.raises(output_lock.OutputFolderError, match="is a symbolic link, which is never followed"):
        output_lock.lock_folder(out, "--output_dir").acquire()
    assert target.read_text() == "precious\n"
    (out / ".bert_tf.lock").unlink()
    os.mkfifo(out / ".bert_tf.lock")
    with pytest.raises(output_lock.OutputFolderError, match="is not a regular file; remove it"):
        output_lock.lock_folder(out, "--output_dir").acquire()


def test_the_corpus_write_probe_never_follows_a_planted_symlink(tmp_path):
    from bert_tf.pretraining import corpus

    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    planted = out / f".write-test-{os.getpid()}"  # the fixed name the probe once used
    planted.symlink_to(target)
    corpus.check_output_dir(str(out))
    assert target.read_text() == "precious\n" and planted.is_symlink()
    assert sorted(os.listdir(out)) == [planted.name]


# ----------------------------------------------------------------------------- in-process, TensorFlow programs

def _classifier_options(output_dir):
    from bert_tf.options import parse
    from bert_tf.tasks import classifier

    ckpt = shared_path("checkpoints", "tf1_tiny_from_original_bert_code")
    return parse(classifier.ClassifierOptions, [
        "--task_name=MRPC", f"--data_dir={shared_path('glue', 'MRPC')}", f"--init_checkpoint={ckpt / 'bert_model.ckpt'}",
        f"--vocab_file={ckpt / 'vocab.txt'}", f"--bert_config_file={ckpt / 'bert_config.json'}",
        f"--output_dir={output_dir}", "--do_train", "--max_seq_length=32"])


def test_fine_tuning_is_refused_on_an_output_dir_that_is_a_file_or_in_use(a_file, tmp_path):
    from bert_tf.data import output_lock
    from bert_tf.tasks import classifier

    with pytest.raises(output_lock.OutputFolderError, match=f"^--output_dir {a_file} is a file, not a folder; "):
        classifier.run(_classifier_options(a_file))
    out = tmp_path / "out"
    with output_lock.lock_folder(out, "--output_dir"):
        with pytest.raises(output_lock.OutputInUseError, match=f"^--output_dir {out} is in use by .* \\(pid "
                                                               f"{os.getpid()} on "):
            classifier.run(_classifier_options(out))
    assert os.listdir(out) == []


def test_run_pretraining_and_the_converter_refuse_an_output_dir_that_is_a_file(a_file, tmp_path, capsys):
    from bert_tf.checkpoints import convert
    from bert_tf.data import output_lock
    from bert_tf.options import parse
    from bert_tf.pretraining import program

    args = _pretraining_args(tmp_path, a_file, "--do_train")[1:]
    with pytest.raises(output_lock.OutputFolderError, match=f"^--output_dir {a_file} is a file, not a folder; "):
        program.run(parse(program.PretrainingOptions, args))
    source = tmp_path / "source"
    source.mkdir()
    assert convert.main(["hf-to-tf1", f"--input_dir={source}", f"--output_dir={a_file}"]) == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: --output_dir {a_file} is a file, not a folder; choose another --output_dir")
    assert convert.main(["hf-to-tf1", f"--input_dir={source}", f"--output_dir={a_file}/x"]) == 1
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: --output_dir {a_file}/x: {a_file} is a file, "
                                                             "not a folder")
    assert a_file.read_text() == "not a folder\n"

"""run_pretraining.py end to end, as users run it: real records, real processes, a real tensorboard."""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from kill_points import assert_stopped_and_saved, kill_once_recorded, latest_recorded_step, stop_with_sigterm
from shared_data import shared_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 256,
        "num_attention_heads": 2, "num_hidden_layers": 1, "type_vocab_size": 2, "vocab_size": 30522}


def golden(name: str) -> str:
    return str(shared_path("golden", "create_pretraining_data", name, f"{name}.tfrecord"))


def run(tmp_path, *extra, check=True, **kwargs) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY))
    args = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
            f"--input_file={golden('default_uncased')}", f"--output_dir={tmp_path / 'out'}",
            "--train_batch_size=8", "--eval_batch_size=8", "--num_train_steps=12", "--num_warmup_steps=2",
            "--learning_rate=1e-3", "--save_checkpoints_steps=6", "--steps_per_loop=3", "--max_eval_steps=4",
            f"--vocab_file={shared_path('vocab', 'uncased', 'vocab.txt')}", *extra]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)
    if check:
        assert done.returncode == 0, done.stderr[-4000:]
    return done


def exported_weights(folder) -> dict[str, np.ndarray]:
    import bert_tf._env  # noqa: F401
    from bert_tf.checkpoints import read_tf1_checkpoint
    return read_tf1_checkpoint(os.path.join(folder, "bert_model.ckpt"))


@pytest.mark.slow
def test_train_eval_export_and_resume(tmp_path):
    done = run(tmp_path, "--do_train", "--do_eval")
    out = tmp_path / "out"
    assert "step 12/12" in done.stderr and "seq/s" in done.stderr and "ETA" in done.stderr
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                               "next_sentence_accuracy", "next_sentence_loss"]
    assert results["global_step"] == "12"
    assert sorted(os.listdir(out / "export")) == ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                                                 "bert_model.ckpt.index", "vocab.txt"]
    weights = exported_weights(out / "export")
    assert "bert/encoder/layer_0/attention/self/query/kernel" in weights
    assert "cls/seq_relationship/output_weights" in weights and weights["cls/seq_relationship/output_weights"].shape == (2, 32)
    # the original-format export evaluates like the training checkpoint it came from
    again = run(tmp_path / "x", "--do_eval", f"--init_checkpoint={out / 'export' / 'bert_model.ckpt'}")
    assert "masked_lm_loss = " + results["masked_lm_loss"] in again.stderr
    # a rerun with more steps resumes from ckpt-12
    done = run(tmp_path, "--do_train", "--num_train_steps=15")
    assert "Resumed from" in done.stderr and "ckpt-12 at step 12" in done.stderr and "step 15/15" in done.stderr


@pytest.mark.slow
def test_stopped_then_killed_run_resumes_to_the_same_weights_as_an_uninterrupted_one(tmp_path):
    """A preemption notice (SIGTERM: saves at the next step, one line, status 143), then a kill -9 of the resumed
    run after a later checkpoint, then the same command once more: the weights of a run never stopped."""
    flags = ("--do_train", "--deterministic", "--seed=5", "--num_train_steps=120", "--save_checkpoints_steps=30",
             "--steps_per_loop=10")
    whole = run(tmp_path / "whole", *flags)
    (tmp_path / "split").mkdir()
    config = tmp_path / "split" / "bert_config.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "split" / "out"
    args = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
            f"--input_file={golden('default_uncased')}", f"--output_dir={out}", "--train_batch_size=8",
            "--num_warmup_steps=2", "--learning_rate=1e-3", *flags]
    lines, code = stop_with_sigterm(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                     text=True, start_new_session=True), "step 10/120")
    stopped = assert_stopped_and_saved(lines, code, "run_pretraining.py", out, 120)
    kill_at = int(os.environ.get("KILL_AT", 0)) or int(np.random.default_rng().choice([60, 90]))
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kill_once_recorded(process, out, kill_at)
    resumed = run(tmp_path / "split", *flags)
    assert "Resumed from" in resumed.stderr, f"stopped at {stopped}, killed after ckpt-{kill_at}"
    fingerprint = re.compile(r"Weights fingerprint at step 120: (\w+)")
    assert fingerprint.search(resumed.stderr)[1] == fingerprint.search(whole.stderr)[1]
    whole, split = exported_weights(tmp_path / "whole" / "out" / "export"), exported_weights(out / "export")
    assert sorted(whole) == sorted(split)
    for name in whole:
        np.testing.assert_array_equal(whole[name], split[name],
                                      err_msg=f"{name} (stopped at {stopped}, killed after ckpt-{kill_at})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_real_tensorboard_serves_the_train_and_eval_scalars(tmp_path):
    run(tmp_path, "--do_train", "--do_eval")
    port = _free_port()
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen([tensorboard, f"--logdir={tmp_path / 'out'}", "--host=127.0.0.1", f"--port={port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tags, deadline = {}, time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as r:
                    tags = json.loads(r.read())
                if {"train", "eval"} <= set(tags):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert {"loss", "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy",
                "learning_rate", "grad_norm", "examples_per_second"} <= set(tags["train"])
        assert {"loss", "masked_lm_accuracy", "next_sentence_accuracy"} <= set(tags["eval"])
        query = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=train&tag=loss"
        with urllib.request.urlopen(query, timeout=5) as r:
            points = json.loads(r.read())
        assert [p[1] for p in points] == [3, 6, 9, 12]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_records_of_another_length_get_one_line_naming_the_file(tmp_path):
    done = run(tmp_path, "--do_train", f"--input_file={golden('wwm_uncased_seq256')}", check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining.py: error: ") and "wwm_uncased_seq256.tfrecord" in last
    assert "expected 128 (--max_seq_length)" in last


def test_bad_flags_get_one_readable_line(tmp_path):
    for extra, message in [((), "at least one of --do_train or --do_eval"),
                           (("--do_train", "--input_file=/nonexistent/*.tfrecord"), "matches no file"),
                           (("--do_train", "--train_batch_size=0"), "--train_batch_size must be positive"),
                           (("--do_eval", "--max_eval_steps=0"), "--max_eval_steps must be positive")]:
        done = run(tmp_path, *extra, check=False)
        assert done.returncode == 1, extra
        assert message in done.stderr.strip().splitlines()[-1], (extra, done.stderr[-500:])


def start_workers(tmp_path, *flags: str) -> list[subprocess.Popen]:
    """Two run_pretraining workers on 127.0.0.1 (TF_CONFIG, fresh ports), each reading one of two record files."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps(TINY))
    files = ",".join(str(p) for p in sorted(shared_path("golden", "create_pretraining_data",
                                                       "two_inputs_two_outputs").glob("*.tfrecord")))
    ports, workers = [_free_port(), _free_port()], []
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
        args = [sys.executable, os.path.join(ROOT, "run_pretraining.py"), f"--bert_config_file={config}",
                f"--input_file={files}", f"--output_dir={tmp_path / 'out'}", "--strategy=multi_worker_mirrored",
                "--do_train", "--train_batch_size=8", "--num_warmup_steps=2", "--learning_rate=1e-3", *flags]
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config)}
        workers.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True))
    return workers


def finish_workers(workers: list[subprocess.Popen]) -> list[str]:
    """Each worker's log, once all ended with status 0."""
    logs = []
    for worker in workers:
        _, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-4000:]
        logs.append(err)
    return logs


def fingerprints(logs: list[str], step: int) -> list[list[str]]:
    return [[line.rsplit(": ", 1)[1] for line in log.splitlines() if f"Weights fingerprint at step {step}:" in line]
            for log in logs]


@pytest.mark.slow
def test_two_worker_processes_train_in_sync_and_only_the_chief_writes(tmp_path):
    logs = finish_workers(start_workers(tmp_path, "--num_train_steps=6", "--save_checkpoints_steps=3",
                                        "--steps_per_loop=3"))
    prints = fingerprints(logs, 6)
    assert len(prints[0]) == len(prints[1]) == 1 and prints[0] == prints[1]
    assert "with 2 replica(s)" in logs[0]
    out = tmp_path / "out"
    assert (out / "ckpt-6.index").exists() and (out / "export" / "bert_model.ckpt.index").exists()
    assert not [p for p in os.listdir(out) if p.startswith(".worker-")]  # the other worker's copies are gone
    assert "step 6/6" in logs[0] and "step 6/6" not in logs[1]  # only the chief logs progress


# Steps enough that a stop asked for after the first checkpoint comes well before the end: TensorFlow's handler
# polls for a notice each second, and the tiny model runs tens of steps a second.
STEPS, SAVE_EVERY = 200, 50
CLUSTER_FLAGS = (f"--num_train_steps={STEPS}", f"--save_checkpoints_steps={SAVE_EVERY}", "--steps_per_loop=10",
                 "--deterministic", "--seed=5")


@pytest.fixture(scope="module")
def uninterrupted_cluster(tmp_path_factory) -> list[list[str]]:
    """Both workers' fingerprint lines at the last step of a two-worker CLUSTER_FLAGS run that nothing stops."""
    return fingerprints(finish_workers(start_workers(tmp_path_factory.mktemp("whole"), *CLUSTER_FLAGS)), STEPS)


def wait_for_recorded_step(out: pathlib.Path, step: int, workers: list[subprocess.Popen]) -> None:
    deadline = time.time() + 300
    while (latest_recorded_step(out) or 0) < step and time.time() < deadline and all(w.poll() is None for w in workers):
        time.sleep(0.02)


@pytest.mark.slow
def test_a_killed_worker_stops_the_other_with_one_line_and_the_restarted_cluster_resumes_bit_exact(
        tmp_path, uninterrupted_cluster):
    """SIGKILL to one of two workers mid-run: the other ends within a bounded time (TensorFlow's heartbeats) with
    one line naming the last complete checkpoint; both restarted with the same command end with the weights of
    a cluster that was never interrupted."""
    out = tmp_path / "out"
    workers = start_workers(tmp_path, *CLUSTER_FLAGS)
    try:
        wait_for_recorded_step(out, SAVE_EVERY, workers)
        os.killpg(workers[1].pid, signal.SIGKILL)
        killed = time.monotonic()
        _, err = workers[0].communicate(timeout=120)
        waited = time.monotonic() - killed
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
    last = err.strip().splitlines()[-1]
    assert workers[0].returncode == 1 and "Traceback" not in err, err[-3000:]
    found = re.fullmatch(r"run_pretraining\.py: error: lost contact with another worker after step (\d+) \(.+\); "
                         r"the last complete checkpoint is (\S+): restart every worker with the same command to "
                         r"resume from it", last)
    assert found and found[2] == str(out / f"ckpt-{latest_recorded_step(out)}"), last
    assert waited < 60, f"the surviving worker took {waited:.0f} s to stop"
    logs = finish_workers(start_workers(tmp_path, *CLUSTER_FLAGS))
    assert "Resumed from" in logs[0] and fingerprints(logs, STEPS) == uninterrupted_cluster


@pytest.mark.slow
def test_a_sigterm_to_one_worker_saves_every_worker_at_one_step_and_the_restarted_cluster_resumes_bit_exact(
        tmp_path, uninterrupted_cluster):
    """A preemption notice to the non-chief worker: both workers save at the step TensorFlow's handler agreed,
    each ends with one line (status 143) naming that checkpoint, and the restarted cluster ends with the weights
    of one that was never stopped."""
    out = tmp_path / "out"
    workers = start_workers(tmp_path, *CLUSTER_FLAGS)
    try:
        wait_for_recorded_step(out, SAVE_EVERY, workers)
        workers[1].send_signal(signal.SIGTERM)
        errs = [worker.communicate(timeout=120)[1] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
    steps = []
    for worker, err in zip(workers, errs):
        last = err.strip().splitlines()[-1]
        found = re.fullmatch(rf"run_pretraining\.py: error: stopped by a SIGTERM to a worker at step (\d+)/{STEPS}: "
                             r"saved (\S+); restart every worker with the same command to resume from it", last)
        assert worker.returncode == 143 and found and "Traceback" not in err, err[-3000:]
        steps.append(int(found[1]))
        assert found[2] == str(out / f"ckpt-{found[1]}")
    assert steps[0] == steps[1] == latest_recorded_step(out) and SAVE_EVERY <= steps[0] < STEPS
    assert not [p for p in os.listdir(out) if p.startswith((".worker-", ".never"))]  # no private copy left
    logs = finish_workers(start_workers(tmp_path, *CLUSTER_FLAGS))
    assert f"Resumed from {out / f'ckpt-{steps[0]}'}" in logs[0]
    assert fingerprints(logs, STEPS) == uninterrupted_cluster


def test_every_shipped_config_and_flagfile_is_valid_from_any_directory(tmp_path, monkeypatch):
    import glob

    import bert_tf._env  # noqa: F401
    from bert_tf.model.configs import BertConfig
    from bert_tf.options import parse
    from bert_tf.pretraining.program import PretrainingOptions

    sizes = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512), "base": (12, 768),
             "large": (24, 1024)}
    for name, (layers, hidden) in sizes.items():
        config = BertConfig.from_json_file(os.path.join(ROOT, "configs", f"bert_{name}_config.json"))
        config.validate(max_seq_length=512)
        assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                config.intermediate_size) == (layers, hidden, hidden // 64, 4 * hidden)
    table_6 = [(3, 768, 12), (6, 768, 3), (6, 768, 12), (12, 1024, 16)]  # the paper's sizes besides Base/Large
    miniature = [(2, 256, 4), (6, 256, 4)]  # Google's miniature BERTs that Table 6's machine scale adds
    for layers, hidden, heads in table_6 + miniature:
        config = BertConfig.from_json_file(os.path.join(ROOT, "configs", f"bert_L{layers}_H{hidden}_A{heads}_config.json"))
        config.validate(max_seq_length=512)
        assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                config.intermediate_size) == (layers, hidden, heads, 4 * hidden)
    flagfiles = sorted(glob.glob(os.path.join(ROOT, "configs", "*.flags")))
    assert len(flagfiles) == 12 + 2 * len(table_6)  # phase 1 and phase 2 of every size
    monkeypatch.chdir(tmp_path)
    for path in flagfiles:
        options = parse(PretrainingOptions, [f"--flagfile={path}", "--input_file=x", "--output_dir=y"])
        options.validate()
        assert os.path.isfile(options.bert_config_file), path
        assert options.input_file == "x" and options.output_dir == "y"  # command-line paths stay as typed
        assert options.max_seq_length in (128, 512) and options.do_train and options.do_eval
    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "strategies", "*.flags"))):
        options = parse(PretrainingOptions, [f"--flagfile={path}", "--input_file=x", "--output_dir=y", "--do_train",
                                              "--bert_config_file=c.json"])
        options.validate()
        assert os.path.basename(path) == f"{options.strategy}.flags"


@pytest.mark.slow
def test_phase_two_at_a_longer_length_starts_from_phase_one(tmp_path):
    common = ["--flagfile=" + os.path.join(ROOT, "configs", "bert_tiny_phase1.flags"),
              "--train_batch_size=8", "--num_train_steps=3", "--num_warmup_steps=1", "--save_checkpoints_steps=3",
              "--steps_per_loop=3", "--max_eval_steps=2", "--eval_batch_size=8"]
    one = tmp_path / "one"
    run(tmp_path, *common, f"--output_dir={one}")
    two = run(tmp_path, *common, f"--output_dir={tmp_path / 'two'}", "--max_seq_length=256",
              "--max_predictions_per_seq=40", f"--input_file={golden('wwm_uncased_seq256')}",
              f"--init_checkpoint={one}")
    assert f"Initialised from {one} (bert_tf checkpoint)" in two.stderr
    assert (tmp_path / "two" / "eval_results.txt").exists()

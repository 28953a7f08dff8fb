"""Writers killed with SIGKILL (real processes, real data): the final name is absent or as it was, and
the next run removes or puts right what the killed one left, naming it, then writes what an
uninterrupted run writes. Covers create_vocab, extract_features, atomic_folder and the best checkpoint."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shared_data import REPO_ROOT, shared_path

from bert_tf.data.atomic_io import atomic_folder


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


def _temps(folder, name: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith(f".{name}.") and n.endswith(".tmp"))


def _beside(folder) -> list[str]:
    """What is in `folder` besides the lock files of finished runs."""
    return sorted(n for n in os.listdir(folder) if not n.endswith(".bert_tf.lock"))


# ----------------------------------------------------------------------------- create_vocab

_KILL_VOCAB = """
import contextlib, os, signal, sys
from bert_tf.text import vocab_learning
real_atomic_write = vocab_learning.atomic_write
@contextlib.contextmanager
def half_then_die(path, *args, **kwargs):
    with real_atomic_write(path, *args, **kwargs) as f:
        class Dying:
            def writelines(self, lines):
                lines = list(lines)
                f.writelines(lines[:len(lines) // 2]); f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
        yield Dying()
vocab_learning.atomic_write = half_then_die
from bert_tf.text.create_vocab import main
sys.argv[0] = "create_vocab.py"
main(sys.argv)
"""


def _vocab_options(output) -> dict:
    return {"input": str(shared_path("corpus", "wiki") / "*" / "wiki_*"), "output": str(output),
            "vocab_size": 2000, "num_unused": 99, "learner": "tokenizers", "sample_every": 4}


def _create_vocab(output) -> None:
    from bert_tf.text import create_vocab

    create_vocab.run(create_vocab.CreateVocabOptions(**_vocab_options(output)))


def _killed_create_vocab(output) -> None:
    killed = _run_python(_KILL_VOCAB, *(f"--{k}={v}" for k, v in _vocab_options(output).items()))
    assert killed.returncode == -9, killed.stderr[-2000:]


def test_killed_create_vocab_leaves_no_partial_vocab_and_its_rerun_removes_the_temp_file(tmp_path, capsys):
    pytest.importorskip("tokenizers", reason="optional learner --learner=tokenizers")
    reference, out = tmp_path / "reference" / "vocab.txt", tmp_path / "out" / "vocab.txt"
    reference.parent.mkdir()
    out.parent.mkdir()
    _create_vocab(reference)
    _killed_create_vocab(out)
    temps = _temps(out.parent, "vocab.txt")
    assert not out.exists() and len(temps) == 1 and (out.parent / temps[0]).stat().st_size > 0
    capsys.readouterr()
    _create_vocab(out)
    printed = capsys.readouterr().out
    assert f"removed {out.parent / temps[0]}: a temporary file a killed run left" in printed
    assert _beside(out.parent) == ["vocab.txt"]
    assert out.read_bytes() == reference.read_bytes()
    _killed_create_vocab(out)  # over a complete vocab: it stays as it was
    assert out.read_bytes() == reference.read_bytes() and len(_temps(out.parent, "vocab.txt")) == 1


def test_create_vocab_is_refused_while_another_run_holds_its_output(tmp_path):
    from bert_tf.data.output_lock import lock_output

    out = tmp_path / "vocab.txt"
    with lock_output(out, "--output"):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "data_prep" / "create_vocab.py"),
                               *(f"--{k}={v}" for k, v in _vocab_options(out).items())],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.strip().splitlines()[-1].startswith(f"create_vocab.py: error: --output {out} is in use by ")


# ----------------------------------------------------------------------------- extract_features

def _tiny(name: str) -> str:
    return str(shared_path("checkpoints", "tf1_tiny_from_original_bert_code") / name)


def _extract_options(tmp_path) -> dict:
    """MRPC dev sentence pairs (200 lines, ~25 MB of JSON: writing takes a few seconds) through the tiny model."""
    rows = [r.split("\t") for r in
            shared_path("glue", "MRPC", "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:201]]
    (tmp_path / "input.txt").write_text("".join(f"{r[3]} ||| {r[4]}\n" for r in rows), encoding="utf-8")
    return {"input_file": str(tmp_path / "input.txt"), "output_file": str(tmp_path / "out.jsonl"),
            "vocab_file": _tiny("vocab.txt"), "bert_config_file": _tiny("bert_config.json"),
            "init_checkpoint": _tiny("bert_model.ckpt"), "layers": "-1,-2", "batch_size": 8}


def _extract(options: dict) -> None:
    from bert_tf.tasks import extract_features

    assert extract_features.run(extract_features.ExtractFeaturesOptions(**options)) == 0


def _kill_once_writing(options: dict, folder) -> None:
    """Starts extract_features.py and SIGKILLs it as soon as its temporary output holds data."""
    flags = [f"--{k}={v}" for k, v in options.items()]
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "extract_features.py"), *flags], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        while proc.poll() is None and time.time() < deadline:
            if any((folder / t).stat().st_size > 0 for t in _temps(folder, "out.jsonl")):
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -9, proc.stderr.read().decode()[-2000:]  # killed while writing, not finished
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()


def test_killed_extract_features_keeps_the_earlier_output_and_its_rerun_removes_the_temp_file(tmp_path, capsys):
    options, out = _extract_options(tmp_path), tmp_path / "out.jsonl"
    _extract(options)
    complete = out.read_bytes()
    _kill_once_writing(options, tmp_path)
    temps = _temps(tmp_path, "out.jsonl")
    assert out.read_bytes() == complete and len(temps) == 1
    assert 0 < (tmp_path / temps[0]).stat().st_size < len(complete)
    capsys.readouterr()
    _extract(options)
    assert f"removed {tmp_path / temps[0]}: a temporary file a killed run left" in capsys.readouterr().out
    assert out.read_bytes() == complete
    assert _beside(tmp_path) == ["input.txt", "out.jsonl"]


# ----------------------------------------------------------------------------- atomic_folder

_KILL_FOLDER = """
import os, signal, sys
from bert_tf.data.atomic_io import atomic_folder
out, kill_at = os.path.abspath(sys.argv[1]), sys.argv[2]
real_replace = os.replace
def replace(src, dst):
    if kill_at == "move_in" and os.fspath(dst) == out and not os.path.lexists(out):  # the old one set aside
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)
os.replace = replace
def fill(tmp):
    with open(os.path.join(tmp, "a.txt"), "w") as f:
        f.write("killed run's\\n")
    if kill_at == "fill":
        os.kill(os.getpid(), signal.SIGKILL)
atomic_folder(out, True, fill)
"""


def _write_a(text: str):
    def fill(tmp: str) -> None:
        with open(os.path.join(tmp, "a.txt"), "w") as f:
            f.write(text)
    return fill


def _fail(tmp: str) -> None:
    raise RuntimeError("this fill fails")


def _killed_replacing(out, kill_at: str) -> None:
    killed = _run_python(_KILL_FOLDER, out, kill_at)
    assert killed.returncode == -9, killed.stderr[-2000:]


def test_a_replacement_killed_after_moving_the_old_folder_aside_is_restored_by_the_next_call(tmp_path):
    out = tmp_path / "out"
    atomic_folder(out, False, _write_a("old\n"))
    _killed_replacing(out, "move_in")
    assert not out.exists()
    old, = [n for n in os.listdir(tmp_path) if n.startswith(".out.old-")]
    assert (tmp_path / old / "x" / "a.txt").read_text() == "old\n"
    logs: list[str] = []
    with pytest.raises(RuntimeError, match="this fill fails"):  # restored first: a failing call keeps it
        atomic_folder(out, True, _fail, log=logs.append)
    assert (out / "a.txt").read_text() == "old\n" and _beside(tmp_path) == ["out"]
    assert logs[0] == f"restored {out} from {tmp_path / old}, where a killed run had moved it aside"
    assert any(line.startswith(f"removed {tmp_path}/.out.tmp-") for line in logs), logs
    with pytest.raises(FileExistsError):  # and a call without overwrite sees that the output exists
        atomic_folder(out, False, _write_a("new\n"))
    atomic_folder(out, True, _write_a("new\n"))
    assert (out / "a.txt").read_text() == "new\n" and _beside(tmp_path) == ["out"]


def test_a_fill_killed_midway_leaves_the_old_folder_and_the_next_call_removes_its_temp_folder(tmp_path):
    out = tmp_path / "out"
    atomic_folder(out, False, _write_a("old\n"))
    _killed_replacing(out, "fill")
    tmp, = [n for n in os.listdir(tmp_path) if n.startswith(".out.tmp-")]
    assert (out / "a.txt").read_text() == "old\n"
    logs: list[str] = []
    atomic_folder(out, True, _write_a("new\n"), log=logs.append)
    assert logs == [f"removed {tmp_path / tmp}: a temporary folder a killed run left"]
    assert (out / "a.txt").read_text() == "new\n" and _beside(tmp_path) == ["out"]


# ----------------------------------------------------------------------------- best checkpoint

_KILL_BEST = """
import os, shutil, signal, sys
import bert_tf._env
from bert_tf.checkpoints import load_tf1_checkpoint
from bert_tf.model.bert import BertModel
from bert_tf.model.configs import BertConfig
from bert_tf.training.best_checkpoint import BestCheckpoint
out, folder = sys.argv[1], sys.argv[2]
config = BertConfig.from_json_file(os.path.join(folder, "bert_config.json"))
model = BertModel(config)
load_tf1_checkpoint(model, os.path.join(folder, "bert_model.ckpt"), ignore_unexpected=True)
keeper = BestCheckpoint(out, "eval_accuracy", model, config, os.path.join(folder, "vocab.txt"))
assert keeper.update({"eval_accuracy": 0.5}, 100)
best = os.path.abspath(os.path.join(out, "best"))
shutil.copytree(best, os.path.join(out, "..", "kept"))
real_replace = os.replace
def replace(src, dst):
    if os.fspath(dst) == best and not os.path.lexists(best):  # the old best set aside, the new one not in
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(src, dst)
os.replace = replace
keeper.update({"eval_accuracy": 0.75}, 200)
"""


def test_a_best_checkpoint_killed_while_replaced_is_restored_on_resume_and_no_worse_one_replaces_it(tmp_path):
    from bert_tf.training.best_checkpoint import BestCheckpoint, best_checkpoint

    out = tmp_path / "run"
    out.mkdir()
    killed = _run_python(_KILL_BEST, out, shared_path("checkpoints", "tf1_tiny_from_original_bert_code"))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (out / "best").exists() and [n for n in os.listdir(out) if n.startswith(".best.old-")]
    keeper = BestCheckpoint(str(out), "eval_accuracy", None, None, None)  # the resumed run's
    assert not keeper.update({"eval_accuracy": 0.4}, 300)  # worse than the kept 0.5: nothing written
    assert keeper.record == {"metric": "eval_accuracy", "value": 0.5, "step": 100}
    assert best_checkpoint(str(out), "eval_accuracy") == (str(out / "best" / "bert_model.ckpt"), 100)
    kept = tmp_path / "kept"
    assert {n: (out / "best" / n).read_bytes() for n in os.listdir(out / "best")} == {
        n: (kept / n).read_bytes() for n in os.listdir(kept)}
    assert _beside(out) == ["best"]


def test_an_eval_only_run_after_a_killed_best_replacement_evaluates_the_kept_best(tmp_path):
    from bert_tf.training.best_checkpoint import best_checkpoint, recover_best

    out = tmp_path / "run"
    out.mkdir()
    killed = _run_python(_KILL_BEST, out, shared_path("checkpoints", "tf1_tiny_from_original_bert_code"))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert best_checkpoint(str(out), "eval_accuracy") is None  # what an eval-only run saw before recovery
    recover_best(str(out))  # what the fine-tuning program does on the chief before anything else
    assert best_checkpoint(str(out), "eval_accuracy") == (str(out / "best" / "bert_model.ckpt"), 100)
    assert _beside(out) == ["best"]

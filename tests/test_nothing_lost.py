"""Nothing lost, nothing followed: no writer deletes or replaces what it did not write, none writes
through a symlink planted at an output name, and a killed writer leaves nothing a rerun misreads."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

from bert_tf.data import atomic_io
from bert_tf.data.atomic_io import atomic_folder
from bert_tf.data import tfrecord
from bert_tf.pretraining import corpus
from bert_tf.pretraining import create_pretraining_data as cpd
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import prepare_corpus
from bert_tf.pretraining import sharded as spd


def _input(name: str) -> str:
    return str(shared_path("golden", "create_pretraining_data", "input", name))


def _vocab() -> str:
    return str(shared_path("vocab", "uncased", "vocab.txt"))


def _tiny_checkpoint():
    return shared_path("checkpoints", "tf1_tiny_from_original_bert_code")


def _victim(tmp_path, name: str = "victim.txt"):
    """A file outside every output folder that a planted symlink points to."""
    path = tmp_path / "elsewhere" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("a file of someone else's\n")
    return path


def _untouched(path) -> bool:
    return path.read_text() == "a file of someone else's\n"


def _run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


# ----------------------------------------------------------------------------- atomic_folder

def test_an_overwritten_folder_is_replaced_only_when_it_holds_nothing_but_what_the_fill_writes(tmp_path):
    out, fills = tmp_path / "out", []

    def fill(tmp: str) -> None:
        fills.append(tmp)
        with open(os.path.join(tmp, "a.txt"), "w") as f:
            f.write(f"run {len(fills)}\n")

    atomic_folder(out, False, fill)
    atomic_folder(out, True, fill)  # only its own a.txt there: replaced
    assert (out / "a.txt").read_text() == "run 2\n"
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(atomic_io.ForeignFilesError, match=rf"{out} holds files .* did not write \(e\.g\. notes\.txt\)"):
        atomic_folder(out, True, fill)
    assert sorted(os.listdir(out)) == ["a.txt", "notes.txt"] and (out / "notes.txt").read_text() == "mine\n"
    with pytest.raises(atomic_io.ForeignFilesError):  # a caller that names its outputs is refused before any work
        atomic_folder(out, True, fill, owned=lambda name: name == "a.txt")
    assert len(fills) == 3 and os.listdir(tmp_path) == ["out"]  # no temp folder left


def test_an_overwrite_never_replaces_a_file_with_a_folder(tmp_path):
    target = tmp_path / "model"
    target.write_text("a user's file\n")
    with pytest.raises(atomic_io.ForeignFilesError, match=f"{target} is not a folder"):
        atomic_folder(target, True, lambda tmp: None)
    assert target.read_text() == "a user's file\n"


def test_an_output_folder_that_is_a_symlink_is_refused_never_written_through(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, tmp_path / "out")
    with pytest.raises(atomic_io.ForeignFilesError, match=f"{tmp_path / 'out'} is a symbolic link"):
        atomic_folder(tmp_path / "out", True, lambda tmp: open(os.path.join(tmp, "a.txt"), "w").close())
    assert os.path.islink(tmp_path / "out") and os.listdir(target) == []


# ----------------------------------------------------------------------------- the converter

@pytest.fixture(scope="module")
def convert_cli():
    from bert_tf.checkpoints import convert
    return convert


def test_convert_overwrite_refuses_a_folder_holding_files_it_did_not_write(convert_cli, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "vocab_backup.txt").write_text("[PAD]\n")
    (out / "config.json").write_text("{}\n")
    status = convert_cli.main(["tf1-to-hf", f"--input_dir={_tiny_checkpoint()}", f"--output_dir={out}",
                               "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1
    assert f"{out} holds files bert-tf-convert did not write (e.g. vocab_backup.txt)" in err[0]
    assert sorted(os.listdir(out)) == ["config.json", "vocab_backup.txt"]
    assert (out / "config.json").read_text() == "{}\n"


def test_convert_into_or_around_its_own_input_folder_is_refused_and_the_input_kept(convert_cli, tmp_path, capsys):
    work = tmp_path / "work"
    source = work / "tiny"
    shutil.copytree(_tiny_checkpoint(), source)
    before = sorted(os.listdir(source))
    for out in (source, work, tmp_path):
        status = convert_cli.main(["tf1-to-hf", f"--input_dir={source}", f"--output_dir={out}", "--overwrite"])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 1 and len(err) == 1 and "--input_dir" in err[0], err
    assert sorted(os.listdir(source)) == before and sorted(os.listdir(work)) == ["tiny"]


def test_convert_overwrite_replaces_a_folder_of_its_own_outputs(convert_cli, tmp_path):
    out = tmp_path / "hf"
    args = ["tf1-to-hf", f"--input_dir={_tiny_checkpoint()}", f"--output_dir={out}"]
    assert convert_cli.main(args) == 0
    assert convert_cli.main(args + ["--overwrite", "--do_lower_case=false"]) == 0
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is False
    assert sorted(os.listdir(tmp_path)) == ["hf"]


def test_converted_weights_get_the_umask_permissions_of_every_output(convert_cli, tmp_path):
    old = os.umask(0o027)
    try:
        assert convert_cli.main(["tf1-to-hf", f"--input_dir={_tiny_checkpoint()}",
                                 f"--output_dir={tmp_path / 'hf'}"]) == 0
    finally:
        os.umask(old)
    modes = {n: stat.S_IMODE(os.stat(tmp_path / "hf" / n).st_mode) for n in os.listdir(tmp_path / "hf")}
    assert modes == dict.fromkeys(modes, 0o640) and "model.safetensors" in modes


def test_converter_replaces_symlinks_at_its_output_names_without_touching_their_targets(convert_cli, tmp_path):
    out = tmp_path / "hf"
    out.mkdir()
    victims = {}
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"):
        victims[name] = _victim(tmp_path, name)
        os.symlink(victims[name], out / name)
    assert convert_cli.main(["tf1-to-hf", f"--input_dir={_tiny_checkpoint()}", f"--output_dir={out}",
                             "--overwrite"]) == 0
    assert all(_untouched(v) for v in victims.values())
    assert not any(os.path.islink(out / n) for n in os.listdir(out))


def test_killed_converter_leaves_the_old_output_and_its_rerun_removes_the_temp_folder(convert_cli, tmp_path,
                                                                                     capsys):
    out = tmp_path / "hf"
    args = ["tf1-to-hf", f"--input_dir={_tiny_checkpoint()}", f"--output_dir={out}", "--overwrite"]
    assert convert_cli.main(args) == 0
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    code = ("import os, signal, sys\n"
            "from bert_tf.checkpoints import convert\n"
            "real = convert.save_file\n"
            "def save_and_die(*args, **kwargs):\n"
            "    real(*args, **kwargs); os.kill(os.getpid(), signal.SIGKILL)\n"
            "convert.save_file = save_and_die\n"
            "sys.exit(convert.main(sys.argv[1:]))\n")
    killed = _run_python(code, *args)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".hf.tmp-")]  # the killed run's temp folder
    capsys.readouterr()
    assert convert_cli.main(args) == 0
    assert "removed" in capsys.readouterr().err
    assert [n for n in os.listdir(tmp_path) if not n.endswith(".bert_tf.lock")] == ["hf"]


# ----------------------------------------------------------------------------- sharded data prep

def _options(dupe_factor: int = 1) -> spd.ShardOptions:
    return spd.ShardOptions(pd.InstanceOptions(dupe_factor=dupe_factor), _vocab(), True, 12345)


def _sharded(prefix, logs: list | None = None, **kwargs) -> dict:
    kwargs = {"num_workers": 1, "docs_per_shard": 12, **kwargs}
    return spd.run_sharded([_input("wiki_sample.txt")], str(prefix), _options(),
                           log=(logs.append if logs is not None else lambda _: None), **kwargs)


@pytest.mark.parametrize("planted", ["wiki-00009.tfrecord", "wiki-00001.tfrecord.gz", "wiki-00000.tfrecord"])
def test_sharded_refuses_same_prefix_shards_it_did_not_write_and_deletes_nothing(tmp_path, planted):
    (tmp_path / planted).write_bytes(b"a user's records")
    for overwrite in (False, True):
        with pytest.raises(pd.DataPrepError, match=f"{tmp_path / planted}: .*not written by"):
            _sharded(tmp_path / "wiki", overwrite=overwrite)
        assert os.listdir(tmp_path) == [planted]
    assert (tmp_path / planted).read_bytes() == b"a user's records"


def test_sharded_stale_shards_removed_are_only_ours_and_each_is_named(tmp_path):
    big = _sharded(tmp_path / "wiki", max_shard_chars=40_000)
    assert big["shards"] >= 6
    logs: list[str] = []
    small = _sharded(tmp_path / "wiki", logs, docs_per_shard=20)
    assert small["shards"] == 2 and small["stale_files_removed"] == 2 * (big["shards"] - 2)
    for index in range(2, big["shards"]):
        removed = str(tmp_path / f"wiki-{index:05d}.tfrecord")
        assert any(removed in line and "removed" in line for line in logs), (removed, logs)


def test_a_truncated_complete_shard_is_verified_against_its_record_and_redone(tmp_path):
    first = _sharded(tmp_path / "wiki")
    records = [list(tfrecord.read_records(f["file"])) for f in first["files"]]
    shard = tmp_path / "wiki-00001.tfrecord"
    data = shard.read_bytes()
    shard.write_bytes(data[:len(data) // 2])
    logs: list[str] = []
    rerun = _sharded(tmp_path / "wiki", logs)
    assert rerun["shards_skipped_complete"] == first["shards"] - 1
    assert any(str(shard) in line and "size" in line for line in logs), logs
    assert [list(tfrecord.read_records(f["file"])) for f in rerun["files"]] == records
    flipped = bytearray(shard.read_bytes())  # same size, other bytes: the checksum catches it
    flipped[100] ^= 1
    shard.write_bytes(bytes(flipped))
    logs.clear()
    again = _sharded(tmp_path / "wiki", logs)
    assert again["shards_skipped_complete"] == first["shards"] - 1
    assert any(str(shard) in line and "sha256" in line for line in logs), logs


def _cpd_options(input_file: str, output_file: str, **kwargs) -> cpd.CreatePretrainingDataOptions:
    return cpd.CreatePretrainingDataOptions(input_file=input_file, output_file=output_file, vocab_file=_vocab(),
                                            dupe_factor=1, num_workers=1, **kwargs)


def test_sharded_prep_never_writes_through_a_symlink_at_its_output_names(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    summary_victim = _victim(tmp_path, "summary")
    os.symlink(summary_victim, out / "wiki.summary.json")
    options = _cpd_options(_input("wiki_sample.txt"), str(out / "wiki"), mode="sharded", docs_per_shard=12)
    cpd.create(options, log=lambda _: None)
    assert _untouched(summary_victim) and not os.path.islink(out / "wiki.summary.json")
    shard_victim, sidecar_victim = _victim(tmp_path, "shard"), _victim(tmp_path, "sidecar")
    os.symlink(shard_victim, out / "wiki-00007.tfrecord")
    os.symlink(sidecar_victim, out / "wiki-00008.tfrecord.json")
    with pytest.raises(pd.DataPrepError, match="not written by"):  # not ours: refused, never followed
        cpd.create(dataclasses.replace(options, overwrite=True), log=lambda _: None)
    assert _untouched(shard_victim) and _untouched(sidecar_victim)


# ----------------------------------------------------------------------------- faithful data prep

_KILL_FAITHFUL = """
import os, signal, sys
from bert_tf.data import tfrecord
real_write = tfrecord.TFRecordWriter.write
def write_and_die(self, record):
    real_write(self, record)
    if self.count == 200:
        self._stream.flush()
        os.kill(os.getpid(), signal.SIGKILL)
tfrecord.TFRecordWriter.write = write_and_die
from bert_tf.pretraining.create_pretraining_data import main
sys.argv[0] = "create_pretraining_data.py"
main(sys.argv)
"""


def test_a_killed_faithful_run_leaves_a_temp_file_that_the_rerun_removes_and_names(tmp_path):
    output = tmp_path / "wiki.tfrecord"
    flags = [f"--input_file={_input('wiki_sample.txt')}", f"--output_file={output}", f"--vocab_file={_vocab()}",
             "--dupe_factor=1", "--num_workers=1"]
    killed = _run_python(_KILL_FAITHFUL, *flags)
    assert killed.returncode == -9, killed.stderr[-2000:]
    temps = [n for n in os.listdir(tmp_path) if n.startswith(".wiki.tfrecord.") and n.endswith(".tmp")]
    assert len(temps) == 1 and not output.exists()
    logs: list[str] = []
    summary = cpd.create(_cpd_options(_input("wiki_sample.txt"), str(output)), log=logs.append)
    assert not (tmp_path / temps[0]).exists()
    assert any(temps[0] in line and "removed" in line for line in logs), logs
    assert len(list(tfrecord.read_records(str(output)))) == summary["instances"]
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_faithful_output_truncated_after_completion_is_redone_on_rerun(tmp_path):
    output = tmp_path / "one.tfrecord"
    options = _cpd_options(_input("single_document.txt"), str(output))
    cpd.create(options, log=lambda _: None)
    data = output.read_bytes()
    output.write_bytes(data[:len(data) // 3])
    logs: list[str] = []
    cpd.create(options, log=logs.append)
    assert output.read_bytes() == data
    assert not any("already complete" in line for line in logs), logs


def test_faithful_prep_never_writes_through_a_symlink_at_its_output_names(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victims = [_victim(tmp_path, n) for n in ("a", "b", "summary")]
    for name, victim in zip(("a.tfrecord", "b.tfrecord", "a.summary.json"), victims):
        os.symlink(victim, out / name)
    cpd.create(_cpd_options(_input("single_document.txt"), f"{out / 'a.tfrecord'},{out / 'b.tfrecord'}"),
               log=lambda _: None)
    assert all(_untouched(v) for v in victims)
    assert not any(os.path.islink(out / n) for n in os.listdir(out))


# ----------------------------------------------------------------------------- corpus prep

def _books(tmp_path) -> str:
    path = tmp_path / "book.txt"
    chapters = [f"CHAPTER {i}\n\n" + "".join(f"Sentence {j} of chapter {i} is here. And one more.\n\n"
                                              for j in range(30)) for i in range(1, 9)]
    path.write_text("".join(chapters))
    return str(path)


def _prepare(input_file: str, output_dir, **kwargs) -> None:
    prepare_corpus.run(prepare_corpus.PrepareCorpusOptions(input=input_file, output_dir=str(output_dir), **kwargs))


def test_corpus_rerun_with_another_shard_count_refuses_and_keeps_the_old_shards(tmp_path):
    book, out = _books(tmp_path), tmp_path / "out"
    _prepare(book, out, num_shards=3)
    old = {n: (out / n).read_bytes() for n in os.listdir(out) if not n.startswith(".")}
    assert sorted(old) == [f"corpus-{i:05d}-of-00003.txt" for i in range(3)]
    for kwargs in ({"num_shards": 2}, {"shard_size_mb": 0.001}):
        with pytest.raises(corpus.CorpusError, match=f"{out}.*corpus-00000-of-00003.txt"):
            _prepare(book, out, **kwargs)
        assert {n: (out / n).read_bytes() for n in os.listdir(out) if not n.startswith(".")} == old
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
    _prepare(book, out, num_shards=3)  # the same count replaces its own shards


def test_corpus_prep_never_writes_through_a_symlink_at_its_output_names(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim(tmp_path)
    os.symlink(victim, out / "corpus-00000-of-00001.txt")
    _prepare(_books(tmp_path), out)
    assert _untouched(victim) and not os.path.islink(out / "corpus-00000-of-00001.txt")


_KILL_CORPUS = """
import os, signal, sys
from bert_tf.pretraining import corpus
real_write = corpus.ShardWriter.write
def write_and_die(self, doc):
    real_write(self, doc)
    if self.num_documents == 5:
        for pending in self._files:
            pending.file.flush()
        os.kill(os.getpid(), signal.SIGKILL)
corpus.ShardWriter.write = write_and_die
from bert_tf.pretraining.prepare_corpus import main
sys.argv[0] = "prepare_corpus.py"
main(sys.argv)
"""


def test_a_killed_corpus_prep_leaves_no_partial_shard_and_its_rerun_removes_the_temp_files(tmp_path, capsys):
    book, out = _books(tmp_path), tmp_path / "out"
    killed = _run_python(_KILL_CORPUS, f"--input={book}", f"--output_dir={out}", "--num_shards=2")
    assert killed.returncode == -9, killed.stderr[-2000:]
    names = [n for n in os.listdir(out) if not n.endswith(".bert_tf.lock")]
    assert len(names) == 2 and all(n.startswith(".corpus-0000") and n.endswith(".tmp") for n in names)
    _prepare(book, out, num_shards=2)
    assert "removed" in capsys.readouterr().out
    assert sorted(n for n in os.listdir(out) if not n.endswith(".bert_tf.lock")) == [
        "corpus-00000-of-00002.txt", "corpus-00001-of-00002.txt"]

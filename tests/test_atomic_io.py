"""One atomic writer: no reader ever sees a partial file, and outputs get ordinary permissions."""
import json
import os
import stat
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

from bert_tf.data import atomic_io
from bert_tf.data.atomic_io import (PendingFile, atomic_folder, atomic_path, atomic_prefix, atomic_write,
                                    current_umask, write_json_atomic)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_current_umask_is_read_without_changing_it(umask_027):
    assert current_umask() == 0o027
    assert os.umask(0o027) == 0o027


def test_written_files_get_the_permissions_a_plain_open_gives_under_the_umask(tmp_path, umask_027):
    with open(tmp_path / "plain.txt", "w"):
        pass
    with atomic_write(tmp_path / "atomic.txt") as f:
        f.write("x\n")
    pending = PendingFile(tmp_path, "pending")
    pending.commit(tmp_path / "pending.txt")
    with atomic_path(tmp_path / "tool.bin") as tmp:
        assert mode_of(tmp) == 0o600  # private while incomplete
    assert mode_of(tmp_path / "plain.txt") == 0o640
    assert mode_of(tmp_path / "atomic.txt") == mode_of(tmp_path / "pending.txt") == mode_of(tmp_path / "tool.bin") == 0o640
    atomic_folder(tmp_path / "folder", False, lambda tmp: None)
    assert mode_of(tmp_path / "folder") == 0o750


def test_text_is_utf8_with_lf_line_ends_and_replaces_the_old_file(tmp_path):
    line = shared_path("corpus", "multilingual", "zh.txt").read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with atomic_write(path) as f:
        f.write(line + "\n")
    assert path.read_bytes() == (line + "\n").encode("utf-8")


def test_a_failing_block_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("stop")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_a_killed_writer_leaves_the_old_file_under_the_final_name(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    code = ("import os, signal, sys; from bert_tf.data.atomic_io import atomic_write\n"
            "with atomic_write(sys.argv[1]) as f:\n"
            "    f.write('half' * 10000); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n")
    result = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO_ROOT, timeout=120)
    assert result.returncode == -9
    assert path.read_text() == "old\n"
    leftovers = [n for n in os.listdir(tmp_path) if n != "out.txt"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".out.txt.") and leftovers[0].endswith(".tmp")


def test_a_pending_file_takes_its_name_only_when_committed(tmp_path):
    first, second = PendingFile(tmp_path, "shard-0"), PendingFile(tmp_path, "shard-1", "wb")
    first.file.write("a\n")
    second.file.write(b"b\n")
    assert not [n for n in os.listdir(tmp_path) if not n.startswith(".")]
    first.commit(tmp_path / "shard-00000-of-00002.txt")
    first.commit(tmp_path / "ignored.txt")  # a second commit is a no-op
    second.discard()
    assert os.listdir(tmp_path) == ["shard-00000-of-00002.txt"]
    assert (tmp_path / "shard-00000-of-00002.txt").read_text() == "a\n"


def test_a_tool_writing_by_name_publishes_only_on_success(tmp_path):
    with atomic_path(tmp_path / "lib.so", suffix=".so") as tmp:
        with open(tmp, "wb") as f:
            f.write(b"built")
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "broken.so", suffix=".so") as tmp:
            raise RuntimeError("compiler failed")
    assert os.listdir(tmp_path) == ["lib.so"] and (tmp_path / "lib.so").read_bytes() == b"built"


def test_a_prefix_of_several_files_is_published_with_the_index_last(tmp_path, monkeypatch):
    published = []
    real_publish = atomic_io.publish
    monkeypatch.setattr(atomic_io, "publish", lambda src, dst: (published.append(os.path.basename(dst)),
                                                                real_publish(src, dst)))
    with atomic_prefix(tmp_path / "model.ckpt") as tmp:
        for suffix in (".index", ".data-00000-of-00002", ".data-00001-of-00002"):
            with open(tmp + suffix, "w") as f:
                f.write(suffix)
    assert published[-1] == "model.ckpt.index" and len(published) == 3
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt.data-00000-of-00002", "model.ckpt.data-00001-of-00002",
                                            "model.ckpt.index"]
    with pytest.raises(RuntimeError):
        with atomic_prefix(tmp_path / "other.ckpt") as tmp:
            open(tmp + ".data-00000-of-00001", "w").close()
            raise RuntimeError("save failed")
    assert len(os.listdir(tmp_path)) == 3


def test_json_is_written_as_its_readers_expect_and_a_failure_names_the_path(tmp_path):
    summary = json.loads(shared_path("golden", "create_pretraining_data", "default_uncased",
                                     "default_uncased.summary.json").read_text())
    write_json_atomic(tmp_path / "summary.json", summary)
    assert (tmp_path / "summary.json").read_text() == json.dumps(summary, indent=1, sort_keys=True) + "\n"
    with pytest.raises(OSError, match=f"cannot write {tmp_path}/missing/summary.json"):
        write_json_atomic(tmp_path / "missing" / "summary.json", summary)


def test_leftover_temp_files_are_only_those_of_the_named_outputs(tmp_path):
    from bert_tf.data.atomic_io import PendingFile, leftover_temp_files
    ours = PendingFile(tmp_path, "wiki-00003.tfrecord", "wb")  # as a killed writer leaves it
    theirs = PendingFile(tmp_path, "notes.txt", "w")
    (tmp_path / "wiki-00003.tfrecord.tmp").write_text("a user's file")
    found = leftover_temp_files(tmp_path, r"wiki-\d{5}\.tfrecord")
    assert found == [ours.temp_name]
    ours.discard()
    theirs.discard()

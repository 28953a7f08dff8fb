"""The Beam pipeline (DirectRunner) writes the same shards and records as local sharded mode."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

sys.path.insert(0, str(REPO_ROOT))

beam = pytest.importorskip("apache_beam", reason="optional extra apache-beam[tfrecord] not installed")

from bert_tf.pretraining import beam as bpd  # noqa: E402
from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.data import tfrecord  # noqa: E402
from bert_tf.pretraining import sharded as spd  # noqa: E402

SCRIPT = str(REPO_ROOT / "data_prep" / "beam_create_pretraining_data.py")


def _inputs() -> list[str]:
    folder = ("golden", "create_pretraining_data", "input")
    return [str(shared_path(*folder, "wiki_sample.txt")), str(shared_path(*folder, "books_sample.txt"))]


def _vocab() -> str:
    return str(shared_path("vocab", "uncased", "vocab.txt"))


def _parsed(summary: dict) -> list[list[dict]]:
    return [[tfrecord.decode_example(r) for r in tfrecord.read_records(f["file"])] for f in summary["files"]]


def test_beam_cli_writes_the_records_of_local_sharded_mode(tmp_path):
    flags = [f"--input_file={','.join(_inputs())}", f"--vocab_file={_vocab()}", "--dupe_factor=2",
             "--random_seed=7", "--max_shard_chars=60000"]
    (tmp_path / "local").mkdir()
    local = subprocess.run([sys.executable, str(REPO_ROOT / "data_prep" / "create_pretraining_data.py"),
                            "--mode=sharded", f"--output_file={tmp_path / 'local' / 'wiki'}", *flags],
                           capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    (tmp_path / "beam").mkdir()
    result = subprocess.run([sys.executable, SCRIPT, f"--output_file={tmp_path / 'beam' / 'wiki'}", *flags,
                             "--runner=DirectRunner"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    local_summary = json.loads((tmp_path / "local" / "wiki.summary.json").read_text())
    beam_summary = json.loads((tmp_path / "beam" / "wiki.summary.json").read_text())
    assert beam_summary["shards"] == local_summary["shards"] >= 5
    assert [os.path.basename(f["file"]) for f in beam_summary["files"]] == [
        os.path.basename(f["file"]) for f in local_summary["files"]]
    for key in ("instances", "tokens", "masked_positions", "random_next", "documents"):
        assert beam_summary[key] == local_summary[key]
    assert _parsed(beam_summary) == _parsed(local_summary)
    assert beam_summary["instances"] > 500
    modes = {os.stat(tmp_path / side / name).st_mode & 0o777
             for side in ("local", "beam") for name in os.listdir(tmp_path / side)}
    assert len(modes) == 1, "Beam's files (written via mkstemp temp names) get the umask's permissions as local mode's"
    assert not [n for n in os.listdir(tmp_path / "beam") if n.endswith(".tmp") or ".tmp-" in n]


def test_beam_gzip_output_matches_local_bytes_and_removes_only_our_stale_shards(tmp_path):
    options = spd.ShardOptions(pd.InstanceOptions(dupe_factor=1), _vocab(), True, 3)
    inputs = _inputs()[:1]
    local = spd.run_sharded(inputs, str(tmp_path / "local"), options, num_workers=1, docs_per_shard=15,
                            compress=True, log=lambda _: None)
    prefix = str(tmp_path / "beam")
    stale = spd.shard_file(prefix, 7, True)
    open(stale, "wb").close()
    record = json.loads(open(local["files"][0]["file"] + ".json").read())
    with open(stale + ".json", "w") as f:  # an earlier run's shard: it carries our completion record
        json.dump(dict(record, shard=7, file=stale), f)
    foreign = spd.shard_file(prefix, 8, True)
    open(foreign, "wb").close()  # no record: refused, never deleted
    with pytest.raises(pd.DataPrepError, match=f"{foreign}: .*not written by"):
        bpd.build_pipeline(beam.Pipeline(runner="DirectRunner"), inputs, prefix, options, docs_per_shard=15)
    os.remove(foreign)
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        bpd.build_pipeline(pipeline, inputs, prefix, options, docs_per_shard=15, compress=True)
    summary = json.loads(open(prefix + ".summary.json").read())
    assert summary["stale_files_removed"] == 2 and not os.path.exists(stale)
    assert summary["shards"] == local["shards"] == 3
    for ours, theirs in zip(summary["files"], local["files"]):
        assert open(ours["file"], "rb").read() == open(theirs["file"], "rb").read()  # gzip bytes too
        sidecar, local_sidecar = (json.loads(open(f["file"] + ".json").read()) for f in (ours, theirs))
        assert {k: v for k, v in sidecar.items() if k != "file"} == {
            k: v for k, v in local_sidecar.items() if k != "file"}

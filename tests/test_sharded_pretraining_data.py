"""create_pretraining_data, sharded mode: deterministic shards, same statistics as faithful, B never from A's document."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path

sys.path.insert(0, str(REPO_ROOT))

from bert_tf.data import tfrecord  # noqa: E402
from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.pretraining import records as pr  # noqa: E402
from bert_tf.pretraining import sharded as spd  # noqa: E402

SCRIPT = str(REPO_ROOT / "data_prep" / "create_pretraining_data.py")


def _input(name: str) -> str:
    return str(shared_path("golden", "create_pretraining_data", "input", name))


def _vocab() -> str:
    return str(shared_path("vocab", "uncased", "vocab.txt"))


def _options(seed: int = 12345, dupe_factor: int = 1) -> spd.ShardOptions:
    return spd.ShardOptions(pd.InstanceOptions(dupe_factor=dupe_factor), _vocab(), True, seed)


def _run_sharded(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return _run_sharded_with(
        [sys.executable, SCRIPT, "--mode=sharded", f"--input_file={_input('wiki_sample.txt')}",
         f"--vocab_file={_vocab()}", "--dupe_factor=1", "--docs_per_shard=12", *extra], tmp_path)


def _all_records(summary: dict) -> list[bytes]:
    return [r for f in summary["files"] for r in tfrecord.read_records(f["file"])]


def test_process_shard_is_pure_and_seeded_by_shard_index():
    documents = list(pd.iter_text_documents([_input("wiki_sample.txt")]))[:6]
    first = spd.process_shard(documents, 3, _options())
    again = spd.process_shard(documents, 3, _options())
    other_index = spd.process_shard(documents, 4, _options())
    assert first.records == again.records and len(first.records) > 20
    assert first.stats == again.stats and first.stats.instances == len(first.records)
    assert other_index.records != first.records


def test_sharded_cli_reruns_identically_and_skips_complete_shards(tmp_path):
    (tmp_path / "a").mkdir()
    _, summary = _run_sharded(tmp_path / "a")
    assert summary["shards"] == 4 and summary["documents"] == 40  # 40 documents, 12 per shard
    assert [os.path.basename(f["file"]) for f in summary["files"]] == [
        f"wiki-{i:05d}.tfrecord" for i in range(4)]
    records = _all_records(summary)
    assert len(records) == summary["instances"]

    _, rerun = _run_sharded(tmp_path / "a")
    assert rerun["shards_skipped_complete"] == 4 and rerun["instances"] == summary["instances"]

    (tmp_path / "b").mkdir()
    _, fresh = _run_sharded(tmp_path / "b", "--num_workers=1")
    assert fresh["shards_skipped_complete"] == 0
    assert _all_records(fresh) == records  # same seed, other worker count: identical records

    _, redone = _run_sharded(tmp_path / "a", "--overwrite")
    assert redone["shards_skipped_complete"] == 0 and _all_records(redone) == records


def test_sharded_gzip_records_read_with_tensorflow(tmp_path):
    import bert_tf._env  # noqa: F401
    import tensorflow as tf

    _, summary = _run_sharded(tmp_path, "--gzip")
    path = summary["files"][0]["file"]
    assert path.endswith(".tfrecord.gz")
    ds = tf.data.TFRecordDataset(path, compression_type="GZIP").batch(1000).map(
        lambda s: pr.parse_examples(s, 128, 20))
    batch = next(iter(ds.as_numpy_iterator()))
    assert len(batch["input_ids"]) == summary["files"][0]["instances"]
    sidecar = json.loads(open(path + ".json").read())
    assert int(batch["input_mask"].sum()) == sidecar["stats"]["tokens"]
    assert batch["input_ids"][:, 0].tolist() == [101] * len(batch["input_ids"])  # [CLS]
    first = tfrecord.decode_example(next(tfrecord.read_records(path)))
    assert first == {name: batch[name][0].tolist() for name in pr.FEATURE_NAMES}


def test_single_document_shard_makes_no_random_next_pairs():
    documents = list(pd.iter_text_documents([_input("single_document.txt")]))
    assert len(documents) == 1
    result = spd.process_shard(documents, 0, _options(dupe_factor=3))
    assert result.stats.instances > 10
    assert result.stats.random_next == 0
    labels = [tfrecord.decode_example(r)["next_sentence_labels"] for r in result.records]
    assert labels == [[0]] * len(labels)


def _unmasked(example: dict) -> tuple[list, list]:
    """Segments A and B of a record with the masked tokens put back."""
    ids = list(example["input_ids"][:sum(example["input_mask"])])
    for pos, tok, w in zip(example["masked_lm_positions"], example["masked_lm_ids"], example["masked_lm_weights"]):
        if w:
            ids[pos] = tok
    segments = example["segment_ids"][:len(ids)]
    first_b = segments.index(1)
    return ids[1:first_b - 1], ids[first_b:-1]


def _contains(haystack: list, needle: list) -> bool:
    return any(haystack[i:i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


def test_random_next_segment_comes_from_the_other_document():
    documents = list(pd.iter_text_documents([_input("wiki_sample.txt")]))[:2]
    tokenizer = pd.get_line_tokenizer("exact", _vocab(), True)
    flat = [[t for line in tokenizer.tokenize_batch(doc) for t in line] for doc in documents]
    result = spd.process_shard(documents, 0, _options(dupe_factor=2))
    random_next = 0
    for record in result.records:
        example = tfrecord.decode_example(record)
        a, b = _unmasked(example)
        home = 0 if _contains(flat[0], a) else 1
        assert _contains(flat[home], a)
        if example["next_sentence_labels"] == [1]:
            random_next += 1
            assert _contains(flat[1 - home], b) and not _contains(flat[home], b)
    assert random_next > 5


def test_sharded_statistics_match_faithful_mode_on_real_text():
    """NSP balance, masked fraction, mean length and short-sequence fraction within sampling noise.

    Noise is large on 52 documents (the short-target draw is per document and dupe), so the
    bounds below are about 3 standard deviations measured across seeds on this corpus.
    """
    files = [_input("wiki_sample.txt"), _input("books_sample.txt")]
    options = _options(seed=5, dupe_factor=5)
    text_docs = list(pd.iter_text_documents(files))
    tokenizer = pd.get_line_tokenizer("exact", _vocab(), True)
    docs = pd.tokenize_documents(text_docs, tokenizer.tokenize_batch)
    vocab = pd.VocabIds(tokenizer.vocab)
    faithful = pd.InstanceStats()
    pd.create_training_instances(docs, options.instance, vocab, random.Random(5),
                                 transform=pd.record_encoder(options.instance, vocab, faithful))
    sharded = pd.InstanceStats()
    for index, shard in spd.iter_shards(text_docs, 13):
        sharded.merge(spd.process_shard(shard, index, options).stats)
    f, s = faithful.summary(), sharded.summary()
    assert abs(f["random_next_fraction"] - s["random_next_fraction"]) < 0.05
    assert abs(f["masked_fraction"] - s["masked_fraction"]) < 0.003
    assert abs(f["mean_tokens"] / s["mean_tokens"] - 1) < 0.04
    assert abs(f["short_fraction"] - s["short_fraction"]) < 0.06
    assert abs(f["instances"] / s["instances"] - 1) < 0.08


def test_batch_encoder_writes_the_same_bytes_as_the_single_record_encoder():
    import numpy as np

    rng = random.Random(3)
    single, batch = pr.ExampleEncoder(64, 10, 30522), pr.BatchExampleEncoder(64, 10)
    ids, pos, mid = np.zeros((50, 64), np.int64), np.zeros((50, 10), np.int64), np.zeros((50, 10), np.int64)
    lengths, num_a, counts, labels, expected = [], [], [], [], []
    for i in range(50):
        n = rng.randint(5, 64)
        a = rng.randint(1, n - 4)
        row = [rng.choice([0, 1, 127, 128, 16383, 16384, rng.randint(0, 30521)]) for _ in range(n)]
        chosen = sorted(rng.sample(range(1, n), rng.randint(1, min(10, n - 1))))
        masked = [rng.randint(0, 30521) for _ in chosen]
        ids[i, :n], pos[i, :len(chosen)], mid[i, :len(chosen)] = row, chosen, masked
        lengths.append(n), num_a.append(a), counts.append(len(chosen)), labels.append(i % 2)
        expected.append(single.encode(row, [0] * (a + 2) + [1] * (n - a - 2), chosen, masked, i % 2))
    got = batch.encode(ids, np.array(lengths), np.array(num_a), pos, mid, np.array(counts), np.array(labels))
    assert got == expected


def test_rerun_on_smaller_input_removes_stale_higher_numbered_shards(tmp_path):
    prefix = str(tmp_path / "wiki")
    files = [_input("wiki_sample.txt")]
    big = spd.run_sharded(files, prefix, _options(), num_workers=1, max_shard_chars=20_000, log=lambda _: None)
    assert big["shards"] > 5 and os.path.exists(spd.shard_file(prefix, big["shards"] - 1, False) + ".json")
    small = spd.run_sharded(files, prefix, _options(), num_workers=1, docs_per_shard=20, overwrite=True,
                            log=lambda _: None)
    assert small["shards"] == 2 and small["stale_files_removed"] == 2 * (big["shards"] - 2)
    assert sorted(os.listdir(tmp_path)) == ["wiki-00000.tfrecord", "wiki-00000.tfrecord.json",
                                            "wiki-00001.tfrecord", "wiki-00001.tfrecord.json"]


def test_closed_form_truncation_keeps_the_lengths_of_the_original_loop():
    rng = random.Random(0)
    for la in range(1, 140, 3):
        for lb in range(1, 140, 7):
            a, b = list(range(la)), list(range(100, 100 + lb))
            if la + lb > 125:
                a, b = pd.truncate_seq_pair(a, b, 125, random.Random(la * lb))
            out = spd._Layout([], [], [], [], [])
            spd._append_truncated(out, 0, la, 100, 100 + lb, False, 125, rng.getrandbits)
            assert (out.a_len[0], out.b_len[0]) == (len(a), len(b))
            assert 0 <= out.a_start[0] <= la - len(a) and 100 <= out.b_start[0] <= 100 + lb - len(b)


@pytest.mark.slow
def test_killed_run_leaves_only_complete_shards_and_resumes_to_the_same_records(tmp_path):
    """SIGKILL mid-run (a real process), then rerun: finished shards are kept, nothing half-written
    carries a final name, and the resumed output equals an uninterrupted run's."""
    import signal
    import time

    args = [sys.executable, SCRIPT, "--mode=sharded", f"--input_file={_input('wiki_sample.txt')}",
            f"--vocab_file={_vocab()}", "--dupe_factor=10", "--docs_per_shard=2", "--num_workers=1"]
    killed_dir = tmp_path / "killed"
    killed_dir.mkdir()
    proc = subprocess.Popen(args + [f"--output_file={killed_dir / 'wiki'}"], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if any(name.endswith(".tfrecord") for name in os.listdir(killed_dir)):
            break  # at least one shard finished: kill while the others are in flight
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    finished = sorted(n for n in os.listdir(killed_dir) if n.endswith(".tfrecord"))
    assert not (killed_dir / "wiki.summary.json").exists(), "the run finished before it could be killed"
    assert 0 < len(finished) < 20  # 40 documents, 2 per shard
    for name in finished:  # a file with a final name is complete: its sidecar's count, valid CRCs
        meta = json.loads((killed_dir / (name + ".json")).read_text())
        assert len(list(tfrecord.read_records(str(killed_dir / name)))) == meta["stats"]["instances"]

    _, resumed = _run_sharded_with(args, killed_dir)
    assert resumed["shards_skipped_complete"] == len(finished)
    (tmp_path / "clean").mkdir()
    _, clean = _run_sharded_with(args, tmp_path / "clean")
    assert _all_records(resumed) == _all_records(clean)
    assert not [n for n in os.listdir(killed_dir) if ".tmp" in n]


def _run_sharded_with(args: list[str], out_dir) -> tuple[subprocess.CompletedProcess, dict]:
    result = subprocess.run(args + [f"--output_file={out_dir / 'wiki'}"], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result, json.loads((out_dir / "wiki.summary.json").read_text())

"""Scalable pretraining-data creation: independent shards of documents, on all cores, bounded memory.

Documents are streamed from the input in order and cut into shards of `docs_per_shard` consecutive
documents: shard k holds documents [k*D, (k+1)*D). Each shard is processed alone by
`process_shard` — a pure function of (shard documents, shard index, options), so a Beam or other
pipeline calling it gets the same records — with its own `random.Random(shard_seed(seed, k))`,
running the original's algorithm (dupe loop, masking, shuffle) within the shard. Differences from
faithful mode, by design:
  * "random next" B comes from another document of the same shard, never from the same document
    (drawn uniformly among the others; no 10-try loop). A shard of one document cannot make
    random-next pairs: its chunks become actual-next pairs and one-segment chunks are dropped.
  * instances are shuffled within a shard, not globally; shard k is written to its own file.
Memory: the reader holds at most 2 x num_workers shards of raw text; each worker one shard's
instances. Each shard file is written to a temp name and renamed when complete, then a small
`.json` sidecar with its counts; a rerun skips shards whose sidecar matches (`overwrite` redoes).
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import multiprocessing
import os
import random
import time
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from bert_tf import pretraining_data as pd
from bert_tf.pretraining_records import RecordWriter, write_json_atomic


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """Everything `process_shard` depends on besides the documents and the shard index."""
    instance: pd.InstanceOptions
    vocab_file: str
    do_lower_case: bool = True
    random_seed: int = 12345
    tokenizer: str = "exact"

    def fingerprint(self) -> str:
        """Identifies the records these options give (the vocab by content, not path)."""
        from bert_tf.pretraining_records import file_sha256

        fields = {**dataclasses.asdict(self.instance), "do_lower_case": self.do_lower_case,
                  "random_seed": self.random_seed, "vocab_sha256": file_sha256(self.vocab_file)}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


class ShardResult(NamedTuple):
    records: list  # serialized tf.train.Example bytes, in output order
    stats: pd.InstanceStats


def shard_seed(random_seed: int, shard_index: int) -> int:
    """A 64-bit seed per shard, stable across Python versions and processes."""
    digest = hashlib.sha256(f"bert_tf.shard:{random_seed}:{shard_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def process_shard(documents: Sequence[Sequence[str]], shard_index: int, options: ShardOptions) -> ShardResult:
    """One shard: documents (lists of sentence lines) -> serialized records and their counts.

    Pure: the same arguments give the same records in any process.
    """
    tokenizer = pd.get_line_tokenizer(options.tokenizer, options.vocab_file, options.do_lower_case)
    vocab = pd.VocabIds(tokenizer.vocab)
    docs = pd.tokenize_documents(documents, tokenizer.tokenize_batch)
    stats = pd.InstanceStats()
    records = pd.create_training_instances(
        docs, options.instance, vocab, random.Random(shard_seed(options.random_seed, shard_index)),
        transform=pd.record_encoder(options.instance, vocab, stats), avoid_same_document=True)
    return ShardResult(records, stats)


def iter_shards(documents: Iterable[list[str]], docs_per_shard: int) -> Iterator[tuple[int, list]]:
    """(shard index, documents) for consecutive runs of `docs_per_shard` documents."""
    shard: list = []
    index = 0
    for doc in documents:
        shard.append(doc)
        if len(shard) == docs_per_shard:
            yield index, shard
            shard, index = [], index + 1
    if shard:
        yield index, shard


def shard_file(output_prefix: str, shard_index: int, compress: bool) -> str:
    return f"{output_prefix}-{shard_index:05d}.tfrecord" + (".gz" if compress else "")


def _shard_digest(documents: list) -> str:
    h = hashlib.sha256()
    for doc in documents:
        h.update("\n".join(doc).encode("utf-8"))
        h.update(b"\n\n")
    return h.hexdigest()[:16]


def _sidecar(path: str) -> str:
    return path + ".json"


def _is_complete(path: str, fingerprint: str, digest: str) -> dict | None:
    """The sidecar of a finished shard written with the same options and text, else None."""
    try:
        with open(_sidecar(path), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    if os.path.isfile(path) and meta.get("fingerprint") == fingerprint and meta.get("text_sha256") == digest:
        return meta
    return None


def _write_shard(task: tuple) -> dict:
    """Pool worker: process one shard and write its file, then its sidecar."""
    index, documents, options, path, compress, fingerprint, digest = task
    result = process_shard(documents, index, options)
    with RecordWriter(path, compress) as writer:
        for record in result.records:
            writer.write(record)
    meta = {"shard": index, "file": path, "documents": len(documents), "fingerprint": fingerprint,
            "text_sha256": digest, "stats": dataclasses.asdict(result.stats)}
    write_json_atomic(_sidecar(path), meta)
    return meta


def run_sharded(input_files: Sequence[str], output_prefix: str, options: ShardOptions, *,
                num_workers: int | None = None, docs_per_shard: int = 500, compress: bool = False,
                overwrite: bool = False, log: Callable[[str], None] = print,
                log_every_s: float = 10.0) -> dict:
    """Streams the input into shards, processes them on `num_workers` processes, returns the summary."""
    options.instance.validate()
    if docs_per_shard < 1:
        raise pd.DataPrepError(f"--docs_per_shard={docs_per_shard}: must be >= 1")
    pd.check_output_writable(shard_file(output_prefix, 0, compress))
    pd.get_line_tokenizer(options.tokenizer, options.vocab_file, options.do_lower_case)  # fail early
    fingerprint = options.fingerprint()
    num_workers = num_workers or os.cpu_count() or 1
    start, last_log = time.time(), time.time()
    stats, done, skipped, documents_seen = pd.InstanceStats(), [], 0, 0
    pending: collections.deque = collections.deque()

    def collect(meta: dict) -> None:
        nonlocal last_log
        stats.merge(pd.InstanceStats(**meta["stats"]))
        done.append(meta)
        if time.time() - last_log >= log_every_s:
            elapsed = time.time() - start
            log(f"shard {meta['shard']} done: {documents_seen} documents read ({documents_seen / elapsed:.0f}/s), "
                f"{stats.instances} instances ({stats.instances / elapsed:.0f}/s)")
            last_log = time.time()

    with multiprocessing.get_context("fork").Pool(num_workers) as pool:
        for index, documents in iter_shards(pd.iter_text_documents(input_files), docs_per_shard):
            documents_seen += len(documents)
            path = shard_file(output_prefix, index, compress)
            digest = _shard_digest(documents)
            meta = None if overwrite else _is_complete(path, fingerprint, digest)
            if meta is not None:
                skipped += 1
                collect(meta)
                continue
            task = (index, documents, options, path, compress, fingerprint, digest)
            pending.append(pool.apply_async(_write_shard, (task,)))
            while len(pending) >= 2 * num_workers:
                collect(pending.popleft().get())
        while pending:
            collect(pending.popleft().get())
    if not done:
        raise pd.DataPrepError(f"no documents: the input is empty ({', '.join(input_files)})")
    done.sort(key=lambda m: m["shard"])
    files = [{"file": m["file"], "instances": m["stats"]["instances"], "documents": m["documents"]}
             for m in done]
    log(f"{len(done)} shards ({skipped} already complete), {documents_seen} documents, "
        f"{stats.instances} instances in {time.time() - start:.1f} s")
    return {"mode": "sharded", **stats.summary(), "documents": documents_seen, "shards": len(done),
            "shards_skipped_complete": skipped, "files": files,
            "wall_seconds": round(time.time() - start, 2)}

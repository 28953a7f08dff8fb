"""Scalable pretraining-data creation: independent shards of documents, on all cores, bounded memory.

Documents are streamed from the input in order and cut into shards of consecutive documents: a
shard closes at `docs_per_shard` documents or `max_shard_chars` characters of text, whichever comes
first (`iter_shards`). Each shard is processed alone by `process_shard`, a pure function of (shard
documents, shard index, options), so a Beam or other pipeline calling it gets the same records.

Within a shard the original's algorithm runs with its own RNG scheme, seeded by
`shard_seed(seed, k)`: segment packing, target lengths and "random next" choices draw from
`random.Random` exactly as the original does (on token offsets instead of token lists);
truncation removes the same number of tokens per side and draws how many come off the front as one
binomial; masking and the instance shuffle are vectorized with numpy's PCG64 (uniform choice of
the same number of positions, 80/10/10 replacement, uniform random words). The statistics are those
of faithful mode (tested); the records differ. Whole-word and span masking use the per-instance path.
--masking=none makes the same draws and writes the instances unmasked.
Other differences from faithful mode, by design:
  * "random next" B comes from another document of the same shard, never from the same document
    (drawn uniformly among the others; no 10-try loop). A shard of one document cannot make
    random-next pairs: its chunks become actual-next pairs and one-segment chunks are dropped.
  * instances are shuffled within a shard, not globally; shard k is written to its own file.
Memory: the reader holds at most 2 x num_workers shards of raw text; each worker one shard's
instances. Each shard file is written to a temp name, its `.json` sidecar (completion record: counts,
size, sha256) written, then the shard renamed; a rerun skips shards that still match their record
(`overwrite` redoes). Output files are handled by bert_tf.pretraining.shard_files: files of this
prefix that carry no record of ours are refused before any work, never deleted; after a run, our
shard files beyond the last shard (an earlier run on a larger input) are deleted and named in the
log, so `PREFIX-*` globs only this run's output.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import random
import time
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import shard_files
from bert_tf.pretraining.shard_files import remove_stale_shards, shard_file
from bert_tf.data.atomic_io import PendingFile, write_json_atomic
from bert_tf.data.files import file_sha256


# Bump when the records for the same options change (RNG scheme, block size, packing rules).
SCHEME_VERSION = "numpy-blocks-1"


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """Everything `process_shard` depends on besides the documents and the shard index."""
    instance: pd.InstanceOptions
    vocab_file: str
    do_lower_case: bool = True
    random_seed: int = 12345
    tokenizer: str = "exact"

    def fingerprint(self, vocab_sha256: str | None = None) -> str:
        """Identifies the records these options give (the vocab by content, not path; the RNG
        scheme by version, so shards of an older scheme are redone). `vocab_sha256` if known."""
        fields = {**dataclasses.asdict(self.instance), "do_lower_case": self.do_lower_case,
                  "random_seed": self.random_seed, "scheme": SCHEME_VERSION,
                  "vocab_sha256": vocab_sha256 or file_sha256(self.vocab_file)}
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
    seed = shard_seed(options.random_seed, shard_index)
    if options.instance.unit != "wordpiece":  # word and span masking: the per-instance path
        stats = pd.InstanceStats()
        records = pd.create_training_instances(
            docs, options.instance, vocab, pd.StreamRandom(seed),
            transform=pd.record_encoder(options.instance, vocab, stats), avoid_same_document=True)
        return ShardResult(records, stats)
    return _vectorized_shard(docs, options.instance, vocab, seed)


class _Layout(NamedTuple):
    """Instances as token ranges of the shard's flat token array: A = [a_start, +a_len), B likewise."""
    a_start: list
    a_len: list
    b_start: list
    b_len: list
    is_random_next: list


def _pack_documents(cumulative: list, options: pd.InstanceOptions,
                    rng: random.Random) -> _Layout:
    """The original's segment packing, truncation and "random next" choice, on token offsets.

    `cumulative[d]` holds document d's sentence boundaries as offsets into the shard's flat token
    array. B is drawn from another document; truncation trims the longer side by as many tokens as
    the original and draws how many come off the front as a binomial (popcount of random bits), the
    distribution of the original's one coin flip per trimmed token.
    """
    out = _Layout([], [], [], [], [])
    max_num_tokens = options.max_seq_length - 3
    num_docs = len(cumulative)
    rand, randint, bits = rng.random, rng.randint, rng.getrandbits
    order = list(range(num_docs))
    rng.shuffle(order)
    for _ in range(options.dupe_factor):
        for d in order:
            cum = cumulative[d]
            num_sentences = len(cum) - 1
            target = max_num_tokens
            if rand() < options.short_seq_prob:
                target = randint(2, max_num_tokens)
            first = i = 0
            while i < num_sentences:
                if i == num_sentences - 1 or cum[i + 1] - cum[first] >= target:
                    num_segments = i - first + 1
                    a_end = first + (randint(1, num_segments - 1) if num_segments >= 2 else 1)
                    a0, a1 = cum[first], cum[a_end]
                    if num_docs > 1 and (num_segments == 1 or rand() < 0.5):
                        other = randint(0, num_docs - 2)
                        other += other >= d
                        rcum = cumulative[other]
                        j = randint(0, len(rcum) - 2)
                        k = bisect.bisect_left(rcum, rcum[j] + target - (a1 - a0), j + 1)
                        b0, b1, random_next = rcum[j], rcum[min(k, len(rcum) - 1)], True
                        i = a_end - 1  # put the unused segments back
                    else:
                        b0, b1, random_next = a1, cum[i + 1], False
                    if b1 > b0:
                        _append_truncated(out, a0, a1, b0, b1, random_next, max_num_tokens, bits)
                    first = i + 1
                i += 1
    return out


def _append_truncated(out: _Layout, a0: int, a1: int, b0: int, b1: int, random_next: bool,
                      max_num_tokens: int, bits) -> None:
    la, lb = a1 - a0, b1 - b0
    excess = la + lb - max_num_tokens
    if excess > 0:  # the original trims the longer side, B on ties: closed form of that loop
        fa, fb = la, lb
        if fa > fb:
            cut = min(excess, fa - fb)
            fa, excess = fa - cut, excess - cut
        elif fb > fa:
            cut = min(excess, fb - fa)
            fb, excess = fb - cut, excess - cut
        fb, fa = fb - (excess + 1) // 2, fa - excess // 2
        a0 += bin(bits(la - fa)).count("1")
        b0 += bin(bits(lb - fb)).count("1")
        la, lb = fa, fb
    out.a_start.append(a0)
    out.a_len.append(la)
    out.b_start.append(b0)
    out.b_len.append(lb)
    out.is_random_next.append(random_next)


# Instances masked and serialized per numpy pass: bounds a worker's memory whatever the shard size.
# Part of the RNG scheme (the draws are made block by block), so changing it changes the records.
_MASK_BLOCK = 2048


@functools.lru_cache(maxsize=4)
def _batch_encoder(max_seq_length: int, max_predictions_per_seq: int):
    from bert_tf.pretraining.records import BatchExampleEncoder

    return BatchExampleEncoder(max_seq_length, max_predictions_per_seq)


def _vectorized_shard(docs: list, options: pd.InstanceOptions, vocab: pd.VocabIds, seed: int) -> ShardResult:
    """Packing in Python on offsets, then masking and serialization with numpy, a block at a time."""
    import numpy as np

    flat: list = []
    cumulative = []
    for doc in docs:
        cum = [len(flat)]
        for sentence in doc:
            flat.extend(sentence)
            cum.append(len(flat))
        cumulative.append(cum)
    layout = _pack_documents(cumulative, options, random.Random(seed))
    stats = pd.InstanceStats()
    records: list = []
    if not layout.a_start:
        return ShardResult(records, stats)
    tokens = np.asarray(flat, dtype=np.int32)
    del flat, cumulative
    gen = np.random.Generator(np.random.PCG64(seed))
    perm = gen.permutation(len(layout.a_start))  # the shard's instance shuffle
    columns = [np.asarray(x, dtype=np.int32)[perm] for x in layout]
    for start in range(0, len(perm), _MASK_BLOCK):
        block = [c[start:start + _MASK_BLOCK] for c in columns]
        records.extend(_mask_and_encode(tokens, *block, options, vocab, gen, stats))
    return ShardResult(records, stats)


def _mask_and_encode(tokens, a0, la, b0, lb, random_next, options: pd.InstanceOptions, vocab: pd.VocabIds,
                     gen, stats: pd.InstanceStats) -> list[bytes]:
    """[CLS] A [SEP] B [SEP] rows for a block of instances, masked (80/10/10 by default) and serialized."""
    import numpy as np

    L, P = options.max_seq_length, options.max_predictions_per_seq
    n = la + lb + 3
    col = np.arange(L, dtype=np.int32)[None, :]
    in_a = (col >= 1) & (col <= la[:, None])
    in_b = (col >= la[:, None] + 2) & (col < n[:, None] - 1)
    ids = np.zeros((len(n), L), dtype=np.int32)
    ids[in_a] = tokens[(a0[:, None] + col - 1)[in_a]]
    ids[in_b] = tokens[(b0[:, None] - la[:, None] - 2 + col)[in_b]]
    rows = np.arange(len(n))
    ids[:, 0] = vocab.cls_id
    ids[rows, la + 1] = vocab.sep_id
    ids[rows, n - 1] = vocab.sep_id
    positions, num_masked = _choose_masked_positions(in_a | in_b, n, options, gen)
    valid = np.arange(P)[None, :] < num_masked[:, None]
    originals = np.where(valid, np.take_along_axis(ids, positions, axis=1), 0)
    draw = gen.random(positions.shape)
    random_words = np.asarray(vocab.random_word_ids, dtype=np.int32)[
        gen.integers(0, len(vocab.random_word_ids), positions.shape)]
    mask, keep, _ = options.replacement_thresholds()
    replaced = np.where(draw < mask, vocab.mask_id, np.where(draw < keep, originals, random_words))
    if options.masking == "none":  # the same draws, then the true tokens and no predictions
        valid[:] = False
        num_masked = np.zeros_like(num_masked)
    r, c = np.nonzero(valid)
    ids[r, positions[r, c]] = replaced[r, c]
    positions = np.where(valid, positions, 0)
    originals = np.where(valid, originals, 0)
    records = _batch_encoder(L, P).encode(ids, n, la, positions, originals, num_masked, random_next)
    stats.instances += len(records)
    stats.tokens += int(n.sum())
    stats.segment_b_tokens += int((lb + 1).sum())
    stats.masked_positions += int(num_masked.sum())
    stats.random_next += int(random_next.sum())
    stats.shorter_than_max += int((n < L).sum())
    return records


def _choose_masked_positions(candidates, lengths, options: pd.InstanceOptions, gen) -> tuple:
    """Per row, min(max_predictions, max(1, round(length * masked_lm_prob))) random candidate
    positions (uniform without replacement, as the original's shuffle-and-take), ascending, padded
    to max_predictions_per_seq; and their count."""
    import numpy as np

    L, P = options.max_seq_length, options.max_predictions_per_seq
    want = np.minimum(P, np.maximum(1, np.rint(lengths * options.masked_lm_prob).astype(np.int64)))
    keys = np.where(candidates, gen.random(candidates.shape, dtype=np.float32), np.float32(2.0))
    k = min(P, L)
    smallest = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < L else np.argsort(keys, axis=1)
    smallest_keys = np.take_along_axis(keys, smallest, axis=1)
    by_key = np.argsort(smallest_keys, axis=1)
    smallest, smallest_keys = (np.take_along_axis(x, by_key, axis=1) for x in (smallest, smallest_keys))
    chosen = (np.arange(k)[None, :] < want[:, None]) & (smallest_keys < 2.0)
    positions = np.sort(np.where(chosen, smallest, L), axis=1)
    if k < P:
        positions = np.pad(positions, ((0, 0), (0, P - k)), constant_values=L)
    count = chosen.sum(axis=1)
    return np.where(positions < L, positions, 0), count


DEFAULT_MAX_SHARD_CHARS = 500_000


def iter_shards(documents: Iterable[list[str]], docs_per_shard: int,
                max_shard_chars: int = DEFAULT_MAX_SHARD_CHARS) -> Iterator[tuple[int, list]]:
    """(shard index, documents) for consecutive runs of documents; a shard closes when it holds
    `docs_per_shard` documents or `max_shard_chars` characters (so shards cost about the same)."""
    shard: list = []
    index = chars = 0
    for doc in documents:
        shard.append(doc)
        chars += sum(map(len, doc))
        if len(shard) >= docs_per_shard or chars >= max_shard_chars:
            yield index, shard
            shard, index, chars = [], index + 1, 0
    if shard:
        yield index, shard


def _check_only_ours(output_prefix: str) -> None:
    """Refuses (before any work) files of this prefix's shard names that carry no record of ours."""
    foreign = shard_files.local_foreign_files(output_prefix)
    if foreign:
        raise pd.DataPrepError(
            f"{foreign[0]}: a file of this run's output names not written by create_pretraining_data (no "
            f"completion record of ours{f'; {len(foreign)} such files' if len(foreign) > 1 else ''}); a later "
            f"{os.path.basename(output_prefix)}-* glob would read it: move it away or choose another --output_file")


def _complete_record(path: str, fingerprint: str, digest: str, log: Callable[[str], None]) -> dict | None:
    """The completion record of a finished shard written with the same options and text that the
    file still matches, else None (a file that no longer matches is named in the log)."""
    meta = shard_files.local_record(path)
    if not shard_files.is_our_record(meta, path):
        return None
    if meta["fingerprint"] != fingerprint or meta["text_sha256"] != digest:
        return None
    reason = shard_files.mismatch(path, meta)
    if reason is None:
        return meta
    if os.path.lexists(path):
        log(f"{path}: redoing this shard: {reason}")
    return None


def _write_shard(task: tuple) -> dict:
    """Pool worker: process one shard; write it under a temp name, then its sidecar (completion
    record), then give the file its final name.

    In that order a shard file under its final name always has its sidecar; a kill in between
    leaves a sidecar without its file, which a rerun redoes.
    """
    index, documents, options, path, compress, fingerprint, digest = task
    result = process_shard(documents, index, options)
    pending = PendingFile.beside(path, "wb")
    try:
        size, sha256 = shard_files.write_records(pending.file, result.records, compress)
        meta = shard_files.completion_record(index, path, len(documents), fingerprint, digest,
                                             dataclasses.asdict(result.stats), size, sha256)
        write_json_atomic(shard_files.sidecar(path), meta)
        pending.commit(path)
    except BaseException:
        pending.discard()
        raise
    return meta


def run_sharded(input_files: Sequence[str], output_prefix: str, options: ShardOptions, *,
                num_workers: int | None = None, docs_per_shard: int = 500,
                max_shard_chars: int = DEFAULT_MAX_SHARD_CHARS, compress: bool = False,
                overwrite: bool = False, log: Callable[[str], None] = print,
                log_every_s: float = 10.0) -> dict:
    """Streams the input into shards, processes them on `num_workers` processes, returns the summary."""
    options.instance.validate()
    if docs_per_shard < 1:
        raise pd.DataPrepError(f"--docs_per_shard={docs_per_shard}: must be >= 1")
    if max_shard_chars < 1:
        raise pd.DataPrepError(f"--max_shard_chars={max_shard_chars}: must be >= 1")
    pd.check_output_writable(shard_file(output_prefix, 0, compress))
    if options.tokenizer == "exact":  # fail early; the forked workers inherit it
        pd.get_line_tokenizer(options.tokenizer, options.vocab_file, options.do_lower_case)
        context = "fork"
    else:  # TensorFlow must not be imported before a fork: fresh workers import it themselves
        pd.VocabIds(pd.load_vocab_checked(options.vocab_file))
        context = "forkserver"
    _check_only_ours(output_prefix)
    shard_files.remove_leftover_temp_files(output_prefix, log)
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

    with multiprocessing.get_context(context).Pool(num_workers) as pool:
        for index, documents in iter_shards(pd.iter_text_documents(input_files), docs_per_shard,
                                                 max_shard_chars):
            documents_seen += len(documents)
            path = shard_file(output_prefix, index, compress)
            digest = shard_files.text_digest(documents)
            meta = None if overwrite else _complete_record(path, fingerprint, digest, log)
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
    stale = remove_stale_shards(output_prefix, [m["file"] for m in done], log)
    log(f"{len(done)} shards ({skipped} already complete), {documents_seen} documents, "
        f"{stats.instances} instances in {time.time() - start:.1f} s")
    return {"mode": "sharded", **stats.summary(), "documents": documents_seen, "shards": len(done),
            "shards_skipped_complete": skipped, "files": files, "stale_files_removed": len(stale),
            "wall_seconds": round(time.time() - start, 2)}

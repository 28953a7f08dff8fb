"""The files of sharded data prep: their names, their completion records, and which of them are ours.

Shard k of prefix P is `P-0000k.tfrecord[.gz]`. Its completion record is the sidecar
`P-0000k.tfrecord[.gz].json`, written before the shard takes its final name (so a shard under its
final name always has one): the shard's byte size and sha256, its counts, the options' fingerprint
and the digest of its text. A rerun skips a shard only while the file still matches its record
(`mismatch`), so a shard truncated or changed afterwards is redone.

Ownership: a file matching the shard pattern is ours only when it carries our record (a sidecar
with our keys that names it; neither may be a symbolic link). Only such files are ever deleted
(`stale_files`: shards of an earlier run with more shards or the other compression); any other file
matching the pattern is refused before any work (`foreign_files`), since a later `P-*` glob would
read it beside ours. These take the listing and the record reader as arguments, so the Beam
pipeline applies the same rules on any filesystem; `local_*` are the local-disk versions.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Callable, IO, Iterable, Sequence

from bert_tf.data.atomic_io import remove_temp_files_of
from bert_tf.data.files import file_sha256
from bert_tf.data.tfrecord import compressed_stream, frame_record

# The keys every completion record has (older records lack only "bytes" and "sha256").
_RECORD_KEYS = frozenset({"shard", "file", "documents", "fingerprint", "text_sha256", "stats"})

RecordReader = Callable[[str], "dict | None"]  # shard path -> its sidecar's content, or None


def shard_file(output_prefix: str, shard_index: int, compress: bool) -> str:
    return f"{output_prefix}-{shard_index:05d}.tfrecord" + (".gz" if compress else "")


def sidecar(path: str) -> str:
    return path + ".json"


def _name_pattern(output_prefix: str) -> re.Pattern:
    """Shard files and sidecars of `output_prefix`, by base name."""
    return re.compile(re.escape(os.path.basename(output_prefix)) + r"-\d{5}\.tfrecord(\.gz)?(\.json)?")


def text_digest(documents: Iterable[Sequence[str]]) -> str:
    """A digest of a shard's documents, recorded so that a rerun on other text redoes the shard."""
    h = hashlib.sha256()
    for doc in documents:
        h.update("\n".join(doc).encode("utf-8"))
        h.update(b"\n\n")
    return h.hexdigest()[:16]


class _Digesting:
    """A binary sink that counts and hashes what passes through it to `raw`."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.size, self.hash = raw, 0, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.size += len(data)
        self.hash.update(data)
        return len(data)

    def flush(self) -> None:
        self.raw.flush()


def write_records(raw: IO[bytes], records: Iterable[bytes], compress: bool) -> tuple[int, str]:
    """Writes framed TFRecords (gzip-compressed with data-only bytes when `compress`) to the open
    binary file `raw`; returns the bytes written and their sha256, for the completion record."""
    sink = _Digesting(raw)
    out = compressed_stream(sink) if compress else sink
    for record in records:
        out.write(frame_record(record))
    if compress:
        out.close()  # the gzip trailer; `raw` stays open
    return sink.size, sink.hash.hexdigest()


def completion_record(index: int, path: str, documents: int, fingerprint: str, text_sha256: str,
                      stats: dict, size: int, sha256: str) -> dict:
    """The sidecar of a finished shard."""
    return {"shard": index, "file": path, "documents": documents, "fingerprint": fingerprint,
            "text_sha256": text_sha256, "stats": stats, "bytes": size, "sha256": sha256}


def is_our_record(meta: object, shard_path: str) -> bool:
    """Whether `meta` is a completion record this module wrote for `shard_path`."""
    return (isinstance(meta, dict) and _RECORD_KEYS <= meta.keys() and isinstance(meta["file"], str)
            and os.path.basename(meta["file"]) == os.path.basename(shard_path))


def mismatch(path: str, meta: dict) -> str | None:
    """Why the shard at `path` no longer matches its completion record, or None when it does."""
    if os.path.islink(path) or not os.path.isfile(path):
        return "the file is missing"
    if "bytes" not in meta or "sha256" not in meta:
        return "its record has no size and checksum (an older version wrote it)"
    size = os.path.getsize(path)
    if size != meta["bytes"]:
        return f"size {size} bytes, its record says {meta['bytes']}"
    if file_sha256(path) != meta["sha256"]:
        return "its sha256 differs from its record"
    return None


def _shard_of(path: str) -> str:
    return path[:-len(".json")] if path.endswith(".json") else path


def foreign_files(paths: Iterable[str], output_prefix: str, record_of: RecordReader) -> list[str]:
    """The paths of shard files and sidecars of `output_prefix` that carry no record of ours."""
    pattern = _name_pattern(output_prefix)
    return sorted(p for p in paths if pattern.fullmatch(os.path.basename(p))
                  and not is_our_record(record_of(_shard_of(p)), _shard_of(p)))


def stale_files(paths: Iterable[str], output_prefix: str, keep: Iterable[str], record_of: RecordReader) -> list[str]:
    """Our shard files and sidecars of `output_prefix` whose shard is not in `keep` (an earlier run's)."""
    pattern = _name_pattern(output_prefix)
    keep = {os.path.basename(k) for k in keep}
    return sorted(p for p in paths if pattern.fullmatch(os.path.basename(p))
                  and os.path.basename(_shard_of(p)) not in keep
                  and is_our_record(record_of(_shard_of(p)), _shard_of(p)))


# ----------------------------------------------------------------------------- the local disk

def local_record(shard_path: str) -> dict | None:
    """The sidecar of `shard_path` as read from disk; None when absent, unreadable or a link (nor
    may the shard itself be a link: a planted link is never taken for ours)."""
    side = sidecar(shard_path)
    if os.path.islink(shard_path) or os.path.islink(side):
        return None
    try:
        with open(side, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _local_listing(output_prefix: str) -> list[str]:
    folder = os.path.dirname(os.path.abspath(output_prefix))
    return [os.path.join(folder, name) for name in os.listdir(folder)]


def local_foreign_files(output_prefix: str) -> list[str]:
    return foreign_files(_local_listing(output_prefix), output_prefix, local_record)


def remove_stale_shards(output_prefix: str, keep: Iterable[str], log: Callable[[str], None]) -> list[str]:
    """Deletes our shard files (shard first, then its sidecar) of `output_prefix` not in `keep`,
    naming each in the log; returns their paths. Files without our record are never touched."""
    stale = stale_files(_local_listing(output_prefix), output_prefix, keep, local_record)
    for path in sorted(stale, key=lambda p: p.endswith(".json")):
        os.remove(path)
        log(f"removed {path}: a shard file of an earlier run of this prefix (more shards or the other compression)")
    return stale


def remove_leftover_temp_files(output_prefix: str, log: Callable[[str], None]) -> list[str]:
    """Deletes the temporary shard and sidecar files a killed run of this prefix left behind."""
    return remove_temp_files_of(os.path.dirname(os.path.abspath(output_prefix)),
                                _name_pattern(output_prefix).pattern, log)

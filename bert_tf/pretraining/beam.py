"""Sharded pretraining-data creation as an Apache Beam pipeline (DirectRunner, Dataflow, Flink, Spark).

The same shards and records as `create_pretraining_data.py --mode=sharded`: one step streams the
input files in order and cuts them into shards with `sharded_pretraining_data.iter_shards` (the
same shard indices and documents), a reshuffle spreads the shards over the workers, and each
shard goes through the same pure `process_shard` and is written as `PREFIX-NNNNN.tfrecord[.gz]`
(temp name, then rename: a retried bundle leaves no partial file) with its `.json` sidecar. A last
step writes `PREFIX.summary.json` and deletes our shard files (those with our completion record) of
an earlier, larger run; files of the shard names without one are refused before the pipeline runs.

Reading the input is a single sequential step (cheap next to tokenization and masking, and what
keeps the shard assignment identical to local mode). Paths go through Beam's FileSystems, so
`gs://`, `hdfs://` or `s3://` work wherever the runner has the matching filesystem installed; the
vocabulary is copied to a local temp file once per worker.

Needs the optional extra `apache-beam[tfrecord]` (see docs/data_prep_beam.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import secrets
import tempfile
from typing import Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options import pipeline_options

from bert_tf.data.atomic_io import json_text, publish
from bert_tf.data.files import expand_globs
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import shard_files
from bert_tf.pretraining import sharded as spd


class _StrictOptionParser(pipeline_options._BeamArgumentParser):
    """Beam's own option parser, raising instead of exiting on a bad value."""

    def error(self, message: str):
        raise pd.DataPrepError(f"Beam pipeline option: {message}")


def _pipeline_option_parser() -> argparse.ArgumentParser:
    """A parser of every Beam pipeline option defined so far, built the way PipelineOptions builds its own."""
    parser = _StrictOptionParser(allow_abbrev=False, add_help=False)
    classes: dict = {}
    for cls in pipeline_options.PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)
    return parser


def unknown_pipeline_args(args: Sequence[str]) -> list[str]:
    """The arguments no Beam pipeline option takes, in order (Beam would drop them with a log line).

    A known option with a bad value (e.g. `--direct_running_mode=fast`) raises DataPrepError.
    """
    return _pipeline_option_parser().parse_known_args(list(args))[1]


def pipeline_option_names() -> list[str]:
    """Every Beam pipeline option's flag (`--runner`, `--project`, ...), for "did you mean" hints."""
    return [name for action in _pipeline_option_parser()._actions for name in action.option_strings]


def beam_files(pattern: str) -> list[str]:
    """Files matching one pattern on any Beam filesystem."""
    return [m.path for m in FileSystems.match([pattern])[0].metadata_list]


def expand_inputs(input_file: str) -> list[str]:
    """The comma list of files / globs of `--input_file` on any Beam filesystem, by local mode's rules."""
    return expand_globs(input_file, "--input_file", match=beam_files)


def read_shards(input_files: Sequence[str], docs_per_shard: int, max_shard_chars: int) -> Iterator[tuple]:
    """(shard index, documents) of the input, exactly as local sharded mode cuts them."""
    documents = pd.iter_text_documents(input_files, open_binary=FileSystems.open)
    yield from spd.iter_shards(documents, docs_per_shard, max_shard_chars)


def _replace(tmp: str, path: str) -> None:
    if "://" not in path:
        publish(tmp, path)  # the umask's permissions (mkstemp made it 0600), then os.replace
        return
    if FileSystems.exists(path):  # some filesystems' rename does not overwrite
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])


def _temp_name(path: str) -> str:
    """An unpredictable temp name beside `path`: created with O_EXCL (mkstemp) on a local disk, so a
    planted symlink is never written through; a random name on other filesystems."""
    if "://" not in path:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(path)))
        os.close(fd)
        return tmp
    return f"{path}.tmp-{secrets.token_hex(16)}"


def _write_records(tmp: str, records: list, compress: bool) -> tuple[int, str]:
    """Writes framed records to the temp name `tmp` (the bytes equal local mode's); returns their
    size and sha256."""
    with FileSystems.create(tmp) as raw:
        return shard_files.write_records(raw, records, compress)


def _record_of(shard_path: str) -> dict | None:
    """The sidecar of `shard_path` on any Beam filesystem, or None."""
    try:
        with FileSystems.open(shard_files.sidecar(shard_path)) as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):  # absent (BeamIOError is an OSError) or not JSON: not a record of ours
        return None


def _write_json(path: str, obj: dict) -> None:
    """The JSON text `write_json_atomic` writes, via a temp name."""
    tmp = _temp_name(path)
    with FileSystems.create(tmp) as f:
        f.write(json_text(obj).encode("utf-8"))
    _replace(tmp, path)


class WriteShardFn(beam.DoFn):
    """(index, documents) -> the shard's TFRecord file and sidecar; emits the sidecar dict."""

    def __init__(self, options: spd.ShardOptions, output_prefix: str, compress: bool, fingerprint: str):
        self._options, self._prefix, self._compress, self._fingerprint = options, output_prefix, compress, fingerprint

    def setup(self) -> None:
        # Workers may not see the launcher's paths: read the vocab through FileSystems, keep it locally.
        with FileSystems.open(self._options.vocab_file) as src:
            data = src.read()
        fd, local = tempfile.mkstemp(suffix="-vocab.txt")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        self._local_options = dataclasses.replace(self._options, vocab_file=local)

    def teardown(self) -> None:
        local = getattr(self, "_local_options", None)
        if local is not None and os.path.exists(local.vocab_file):
            os.remove(local.vocab_file)

    def process(self, element: tuple) -> Iterator[dict]:
        index, documents = element
        result = spd.process_shard(documents, index, self._local_options)
        path = spd.shard_file(self._prefix, index, self._compress)
        tmp = _temp_name(path)
        size, sha256 = _write_records(tmp, result.records, self._compress)
        meta = shard_files.completion_record(index, path, len(documents), self._fingerprint,
                                             shard_files.text_digest(documents),
                                             dataclasses.asdict(result.stats), size, sha256)
        _write_json(shard_files.sidecar(path), meta)  # before the shard's final name, as local mode
        _replace(tmp, path)
        yield meta


def _remove_stale(output_prefix: str, keep: set) -> int:
    """Beam-filesystem version of `spd.remove_stale_shards`: only files carrying our record."""
    stale = shard_files.stale_files(beam_files(output_prefix + "-*"), output_prefix, keep, _record_of)
    if stale:
        FileSystems.delete(stale)
    return len(stale)


def check_only_ours(output_prefix: str) -> None:
    """Refuses, before the pipeline runs, files of the shard names that carry no record of ours."""
    foreign = shard_files.foreign_files(beam_files(output_prefix + "-*"), output_prefix, _record_of)
    if foreign:
        raise pd.DataPrepError(f"{foreign[0]}: a file of this run's output names not written by "
                               "create_pretraining_data (no completion record of ours); a later glob would "
                               "read it: move it away or choose another --output_file")


def write_summary(metas: list, output_prefix: str, extra: dict) -> dict:
    """Merges the shards' counts into PREFIX.summary.json (the local mode's keys); removes stale shards."""
    if not metas:
        raise pd.DataPrepError("no documents: the input is empty")
    metas = sorted(metas, key=lambda m: m["shard"])
    stats = pd.InstanceStats()
    for meta in metas:
        stats.merge(pd.InstanceStats(**meta["stats"]))
    stale = _remove_stale(output_prefix, {m["file"] for m in metas})
    summary = {"mode": "sharded", "runner": "beam", **stats.summary(),
               "documents": sum(m["documents"] for m in metas), "shards": len(metas),
               "files": [{"file": m["file"], "instances": m["stats"]["instances"], "documents": m["documents"]}
                         for m in metas], "stale_files_removed": stale, **extra}
    _write_json(output_prefix + ".summary.json", summary)
    return summary


def build_pipeline(pipeline: beam.Pipeline, input_files: Sequence[str], output_prefix: str,
                   options: spd.ShardOptions, *, docs_per_shard: int = 500,
                   max_shard_chars: int = spd.DEFAULT_MAX_SHARD_CHARS, compress: bool = False,
                   summary_extra: dict | None = None) -> None:
    """Adds read -> reshuffle -> process/write -> summary to `pipeline` (after refusing files of
    the output names that are not ours)."""
    check_only_ours(output_prefix)
    with FileSystems.open(options.vocab_file) as f:  # the launcher may not see it as a local path
        fingerprint = options.fingerprint(hashlib.sha256(f.read()).hexdigest())
    _ = (pipeline
         | "Start" >> beam.Create([None])
         | "ReadShards" >> beam.FlatMap(lambda _: read_shards(input_files, docs_per_shard, max_shard_chars))
         | "Spread" >> beam.Reshuffle()
         | "ProcessAndWrite" >> beam.ParDo(WriteShardFn(options, output_prefix, compress, fingerprint))
         | "Collect" >> beam.combiners.ToList()
         | "Summary" >> beam.Map(write_summary, output_prefix, summary_extra or {}))

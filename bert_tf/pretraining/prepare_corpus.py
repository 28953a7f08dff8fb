"""Raw WikiExtractor output and Project Gutenberg books -> one sentence per line, sharded.

The output is the input format of create_pretraining_data: one sentence per line, a blank line between
documents. See docs/data_prep.md. (`data_prep/prepare_corpus.py` in a clone, `bert-tf-prepare-corpus`
installed, or `python -m bert_tf.pretraining.prepare_corpus`.)

  prepare_corpus --input='wiki/*/wiki_*,books/*.txt' --output_dir=/tmp/corpus --num_shards=4 --dedup

A second run writing the same --output_prefix into the same --output_dir is refused while the first runs.
"""
from __future__ import annotations

import dataclasses
import os
import time

from bert_tf import cli
from bert_tf.data import output_lock
from bert_tf.options import Options, option
from bert_tf.pretraining import corpus


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrepareCorpusOptions(Options):
    """Inputs, output shards and document filters."""

    input: str | None = option(None, "Comma-separated globs of input files.", required=True, path=True)
    output_dir: str | None = option(None, "Directory for the output shards (created if needed).", required=True,
                                    path=True)
    output_prefix: str = option("corpus", "Shard names: <prefix>-00000-of-0000N.txt.")
    format: str = option("auto", "wiki: WikiExtractor <doc> files; books: plain text / Project Gutenberg; "
                         "auto: detected per file.", enum=tuple(corpus.FORMATS))
    num_shards: int = option(0, "Number of output shards (document i -> shard i mod N). 0: use --shard_size_mb.",
                             non_negative=True)
    shard_size_mb: float = option(0.0, "Start a new shard once one holds this many MiB (used when "
                                  "--num_shards=0; 0 means a single shard).", non_negative=True)
    min_sentences_per_doc: int = option(1, "Drop documents with fewer sentences.")
    min_chars_per_doc: int = option(0, "Drop documents with fewer characters of text.")
    dedup: bool = option(False, "Keep only the first of documents with identical text.")
    language: str = option("en", "Language code given to the sentence segmenter.")


def run(options: PrepareCorpusOptions) -> None:
    """Read, segment, filter and write; prints a one-line summary."""
    options.validate()
    start = time.time()
    files = corpus.expand_inputs(options.input.split(","))
    output_lock.make_output_dir(options.output_dir, "--output_dir")
    shards = os.path.join(options.output_dir, options.output_prefix)
    with output_lock.lock_output(shards, "--output_dir",
                                 description=f"--output_dir {options.output_dir} (shards {options.output_prefix}-*)"):
        _write_shards(options, files, start)


def _write_shards(options: PrepareCorpusOptions, files: list[str], start: float) -> None:
    writer = corpus.ShardWriter(options.output_dir, options.output_prefix, options.num_shards,
                                options.shard_size_mb)
    try:
        for doc in corpus.corpus_documents(files, options.format, options.language, options.min_sentences_per_doc,
                                           options.min_chars_per_doc, options.dedup):
            writer.write(doc)
    except BaseException:
        writer.abort()
        raise
    names = writer.close()
    print(f"{len(files)} input files -> {writer.num_documents} documents, "
          f"{writer.num_sentences} sentences in {len(names)} shards under {options.output_dir} "
          f"({time.time() - start:.1f} s)")


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-prepare-corpus` / data_prep/prepare_corpus.py."""
    cli.run_program(run, PrepareCorpusOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

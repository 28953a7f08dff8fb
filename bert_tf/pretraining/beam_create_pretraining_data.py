"""create_pretraining_data, sharded mode, as an Apache Beam pipeline: same shards, same records.

  beam_create_pretraining_data --input_file=corpus.txt --output_file=gs://b/out/wiki \
      --vocab_file=vocab.txt --runner=DirectRunner [--dupe_factor=5 ...] [any Beam pipeline option]

(`data_prep/beam_create_pretraining_data.py` in a clone, `bert-tf-beam-create-pretraining-data` installed
with the `beam` extra, or `python -m bert_tf.pretraining.beam_create_pretraining_data`.)
Writes PREFIX-00000.tfrecord, ... (+ .json sidecars) and PREFIX.summary.json, record for record what
`create_pretraining_data --mode=sharded` writes for the same flags. Flags this program does not
know go to Beam (`--runner`, `--project`, `--region`, `--temp_location`, `--setup_file`, ...);
see docs/data_prep_beam.md for Dataflow and Flink. Its flags stay argparse: Beam's own options are
parsed by Beam from the same command line.
"""
from __future__ import annotations

import argparse
import logging
import sys

from bert_tf import cli
from bert_tf.cli import parse_bool
from bert_tf.errors import run_or_status
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import sharded as spd


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our flags (the local script's names and defaults) and the rest, for Beam."""
    ap = argparse.ArgumentParser(prog=cli.program_name(), description=__doc__.split("\n")[0])
    ap.add_argument("--input_file", required=True, help="comma list of files or globs (any Beam filesystem)")
    ap.add_argument("--output_file", required=True, help="output prefix: PREFIX-NNNNN.tfrecord")
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--do_lower_case", type=parse_bool, default=True)
    ap.add_argument("--do_whole_word_mask", type=parse_bool, default=False)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--max_predictions_per_seq", type=int, default=20)
    ap.add_argument("--random_seed", type=int, default=12345)
    ap.add_argument("--dupe_factor", type=int, default=10)
    ap.add_argument("--masked_lm_prob", type=float, default=0.15)
    ap.add_argument("--short_seq_prob", type=float, default=0.1)
    ap.add_argument("--docs_per_shard", type=int, default=500)
    ap.add_argument("--max_shard_chars", type=int, default=spd.DEFAULT_MAX_SHARD_CHARS)
    ap.add_argument("--tokenizer", choices=["exact", "fast"], default="exact")
    ap.add_argument("--gzip", type=parse_bool, nargs="?", const=True, default=False)
    return ap.parse_known_args(argv)


def run(argv: list[str]) -> dict | None:
    """Builds and runs the pipeline; returns nothing (the summary is written by the pipeline)."""
    try:
        import apache_beam as beam
        from apache_beam.options.pipeline_options import PipelineOptions
    except ImportError:
        raise pd.DataPrepError("Apache Beam is not installed: pip install 'bert_tf[beam]'") from None
    from bert_tf.pretraining import beam as bpd

    args, beam_args = parse_args(argv)
    options = pd.InstanceOptions(args.max_seq_length, args.max_predictions_per_seq, args.masked_lm_prob,
                                 args.short_seq_prob, args.do_whole_word_mask, args.dupe_factor)
    options.validate()
    if args.docs_per_shard < 1 or args.max_shard_chars < 1:
        raise pd.DataPrepError("--docs_per_shard and --max_shard_chars must be >= 1")
    input_files = bpd.expand_inputs(args.input_file)
    prefix = args.output_file[:-len(".tfrecord")] if args.output_file.endswith(".tfrecord") else args.output_file
    shard_options = spd.ShardOptions(options, args.vocab_file, args.do_lower_case, args.random_seed, args.tokenizer)
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        bpd.build_pipeline(pipeline, input_files, prefix, shard_options, docs_per_shard=args.docs_per_shard,
                           max_shard_chars=args.max_shard_chars, compress=args.gzip,
                           summary_extra={"flags": vars(args), "input_files": input_files})
    logging.info("wrote %s-*.tfrecord%s and %s.summary.json", prefix, ".gz" if args.gzip else "", prefix)
    return None


def main(argv: list[str] | None = None) -> int:
    """`bert-tf-beam-create-pretraining-data` / data_prep/beam_create_pretraining_data.py; the exit status."""
    logging.getLogger().setLevel(logging.INFO)
    prog = cli.program_name()
    cli.warn_if_source_tree_lacks_native_tokenizer(prog)
    status = run_or_status(lambda: run(sys.argv[1:] if argv is None else argv), prog)
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())

"""create_pretraining_data, sharded mode, as an Apache Beam pipeline: same shards, same records.

  python data_prep/beam_create_pretraining_data.py --input_file=corpus.txt --output_file=gs://b/out/wiki \
      --vocab_file=vocab.txt --runner=DirectRunner [--dupe_factor=5 ...] [any Beam pipeline option]

Writes PREFIX-00000.tfrecord, ... (+ .json sidecars) and PREFIX.summary.json, record for record what
`create_pretraining_data.py --mode=sharded` writes for the same flags. Flags this script does not
know go to Beam (`--runner`, `--project`, `--region`, `--temp_location`, `--setup_file`, ...);
see docs/data_prep_beam.md for Dataflow and Flink.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.pretraining import instances as pd  # noqa: E402
from bert_tf.cli import parse_bool  # noqa: E402
from bert_tf.pretraining import sharded as spd  # noqa: E402



def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our flags (the local script's names and defaults) and the rest, for Beam."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
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


def main() -> None:
    logging.getLogger().setLevel(logging.INFO)
    try:
        run(sys.argv[1:])
    except (pd.DataPrepError, OSError) as e:
        sys.exit(f"beam_create_pretraining_data: error: {e}")


if __name__ == "__main__":
    main()

"""create_pretraining_data, sharded mode, as an Apache Beam pipeline: same shards, same records.

  beam_create_pretraining_data --input_file=corpus.txt --output_file=gs://b/out/wiki \
      --vocab_file=vocab.txt --runner=DirectRunner [--dupe_factor=5 ...] [any Beam pipeline option]

(`data_prep/beam_create_pretraining_data.py` in a clone, `bert-tf-beam-create-pretraining-data` installed
with the `beam` extra, or `python -m bert_tf.pretraining.beam_create_pretraining_data`.)
Writes PREFIX-00000.tfrecord, ... (+ .json sidecars) and PREFIX.summary.json, record for record what
`create_pretraining_data --mode=sharded` writes for the same flags; the flags are that program's
(declared once, in CreatePretrainingDataOptions), less --mode, --num_workers and --overwrite. They are
parsed first, strictly; every other argument must be a Beam pipeline option (`--runner`, `--project`,
`--region`, `--temp_location`, `--setup_file`, ...; see docs/data_prep_beam.md for Dataflow and Flink).
Beam itself drops arguments it does not know, so a misspelled flag would otherwise pass unnoticed: here
it is one error line naming it.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import sys

from absl import flags

from bert_tf import cli
from bert_tf.errors import run_or_status
from bert_tf.options import declared_options, define_flags, option, parse_known
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import sharded as spd
from bert_tf.pretraining.create_pretraining_data import CreatePretrainingDataOptions

_HELP = ("--help", "-h", "--helpfull", "-help")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BeamCreatePretrainingDataOptions(CreatePretrainingDataOptions):
    """create_pretraining_data's options; the local run's own (mode, workers, overwrite) are not flags here."""

    mode: str = option("sharded", "Always sharded mode.", enum=("sharded",), flag=False)
    num_workers: int | None = option(None, "The runner's (e.g. Beam's --direct_num_workers).", flag=False)
    overwrite: bool = option(True, "Every shard is written anew.", flag=False)


def _flag_names() -> list[str]:
    return [f"--{d.name}" for d in declared_options(BeamCreatePretrainingDataOptions) if d.spec.flag]


def _unknown_argument_error(arg: str, beam_names: list[str]) -> cli.UsageError:
    """One line naming `arg`, with the closest flag of ours or Beam's when there is one."""
    if not arg.startswith("-"):
        return cli.UsageError(f"unexpected argument {arg!r}")
    name = arg.split("=", 1)[0]
    close = difflib.get_close_matches(name, _flag_names() + beam_names, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return cli.UsageError(f"{name}: unknown flag (neither this program's nor a Beam pipeline option){hint}")


def parse_args(argv: list[str]) -> tuple[BeamCreatePretrainingDataOptions, list[str]]:
    """Our options (parsed strictly, validated) and the rest, all Beam pipeline options."""
    from bert_tf.pretraining import beam as bpd

    options, beam_args = parse_known(BeamCreatePretrainingDataOptions, argv, program=cli.program_name())
    unknown = bpd.unknown_pipeline_args(beam_args)
    if unknown:
        raise _unknown_argument_error(unknown[0], bpd.pipeline_option_names())
    options.validate()
    return options, beam_args


def help_text() -> str:
    """`--help`: the module doc and our flags (Beam's own are listed by its documentation)."""
    flag_values = flags.FlagValues()
    define_flags(BeamCreatePretrainingDataOptions, flag_values)
    return f"{__doc__}\nflags:\n{flag_values.get_help(include_special_flags=False)}"


def run(argv: list[str]) -> dict | None:
    """Builds and runs the pipeline; returns nothing (the summary is written by the pipeline)."""
    if any(arg in _HELP for arg in argv):
        print(help_text())
        return None
    try:
        import apache_beam as beam
        from apache_beam.options.pipeline_options import PipelineOptions
    except ImportError:
        raise pd.DataPrepError("Apache Beam is not installed: pip install 'bert_tf[beam]'") from None
    from bert_tf.pretraining import beam as bpd

    args, beam_args = parse_args(argv)
    options = args.instance_options()
    input_files = bpd.expand_inputs(args.input_file)
    prefix = args.output_file.removesuffix(".tfrecord")
    shard_options = spd.ShardOptions(options, args.vocab_file, args.do_lower_case, args.random_seed, args.tokenizer)
    flag_values = {name[2:]: getattr(args, name[2:]) for name in _flag_names()}
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        bpd.build_pipeline(pipeline, input_files, prefix, shard_options, docs_per_shard=args.docs_per_shard,
                           max_shard_chars=args.max_shard_chars, compress=args.gzip,
                           summary_extra={"flags": flag_values, "input_files": input_files})
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

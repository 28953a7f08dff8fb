"""Creates masked-LM / next-sentence pretraining TFRecords from text (the original BERT's program).

  create_pretraining_data --input_file=corpus.txt --output_file=out.tfrecord \
      --vocab_file=vocab.txt [--mode=faithful|sharded] [--num_workers=N] [--gzip] [--overwrite]

(`data_prep/create_pretraining_data.py` in a clone, `bert-tf-create-pretraining-data` installed, or
`python -m bert_tf.pretraining.create_pretraining_data`.) Input: one sentence per line, a blank line
between documents. --mode=faithful (default) writes exactly the original's records (same records, same
order) into the comma list of --output_file, round-robin. --mode=sharded treats --output_file as a prefix
and writes PREFIX-00000.tfrecord, ... (see bert_tf/pretraining/sharded.py for how it differs; our shard
files left by an earlier, larger run are deleted, and other files of those names refused). Both write
PREFIX.summary.json, with each output's size and sha256: a rerun skips only outputs still as written.
--masking_unit=wordpiece|word|span chooses what is masked (span: SpanBERT's); --masking=none writes the
same instances unmasked, for masks drawn anew for every batch by run_pretraining --dynamic_masking.
No TensorFlow is imported (unless --tokenizer=fast).
"""
from __future__ import annotations

import dataclasses
import json
import os

from absl import logging

from bert_tf import cli
from bert_tf.data import output_lock
from bert_tf.options import Options, option
from bert_tf.pretraining import instances as pd
from bert_tf.pretraining import shard_files
from bert_tf.pretraining import sharded as spd
from bert_tf.pretraining.records import file_sha256, write_json_atomic

# Options that do not change the records: left out of the summary's "flags", so a rerun that changes
# only these still finds its outputs complete.
_NOT_IN_SUMMARY = ("num_workers", "overwrite")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreatePretrainingDataOptions(Options):
    """The original create_pretraining_data.py's flags and defaults, plus bert_tf's modes."""

    input_file: str | None = option(None, "Input text file(s): comma-separated list of files or globs.",
                                    required=True, path=True)
    output_file: str | None = option(None, "Output TFRecord file(s), comma-separated (faithful); one output "
                                     "prefix (sharded).", required=True, path=True)
    vocab_file: str | None = option(None, "The vocabulary file that the BERT model was trained on.",
                                    required=True, path=True)
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")
    do_whole_word_mask: bool = option(False, "Mask whole words rather than single WordPieces (the original's "
                                      "flag; the same as --masking_unit=word).")
    masking: str = option("static", "static: records carry their masks (the original). none: the same instances "
                          "with their true tokens and no predictions, for run_pretraining --dynamic_masking.",
                          enum=pd.MASKING_KINDS)
    masking_unit: str = option("wordpiece", "What is masked: single WordPieces (the original), whole words, or "
                               "SpanBERT's spans of whole words (geometric lengths, p=0.2, at most 10 words).",
                               enum=pd.MASKING_UNITS)
    max_seq_length: int = option(128, "Maximum sequence length (5 fit [CLS] A [SEP] B [SEP]; at most 8192, "
                                 "with --max_predictions_per_seq at most 2048, so a record stays below the "
                                 "encoder's 64 KiB).", maximum=8192)
    max_predictions_per_seq: int = option(20, "Maximum number of masked LM predictions per sequence.",
                                          positive=True, maximum=2048)
    random_seed: int = option(12345, "Random seed for data generation.")
    dupe_factor: int = option(10, "Number of times to duplicate the input data (with different masks).",
                              positive=True)
    masked_lm_prob: float = option(0.15, "Masked LM probability (each sequence still gets at least one "
                                   "prediction, as in the original).", positive=True, maximum=1)
    mask_token_prob: float = option(0.8, "Of the positions chosen for prediction, the share replaced by [MASK] "
                                    "(the paper's Table 8 varies it).", non_negative=True, maximum=1)
    random_token_prob: float = option(0.1, "Of the positions chosen for prediction, the share replaced by a random "
                                      "word; the rest keep their token.", non_negative=True, maximum=1)
    short_seq_prob: float = option(0.1, "Probability of creating sequences shorter than the maximum length.",
                                   non_negative=True, maximum=1)
    mode: str = option("faithful", "faithful: record-for-record the original's output. sharded: independent "
                       "shards on all cores with bounded memory (statistically equivalent, different records).",
                       enum=("faithful", "sharded"))
    num_workers: int | None = option(None, "Worker processes (default: all cores).")
    docs_per_shard: int = option(500, "Most documents per shard (sharded mode).", positive=True)
    max_shard_chars: int = option(500_000, "Most characters of text per shard (sharded mode); a shard closes at "
                                  "whichever limit comes first.", positive=True)
    tokenizer: str = option(
        "exact", "Tokenization path; the ids are identical. exact: no TensorFlow, light and cheap to fork (the "
        "default: on the 7 MiB wiki it tokenizes in ~1.8 s). fast: tensorflow-text, whose import costs ~3 s "
        "and ~540 MB per process; only worth it on far larger corpora.", enum=("exact", "fast"))
    gzip: bool = option(False, "Write gzip-compressed TFRecords (read with compression_type='GZIP').")
    overwrite: bool = option(False, "Redo outputs that are already complete.")

    def instance_options(self) -> pd.InstanceOptions:
        """The options that shape each instance, checked."""
        options = pd.InstanceOptions(self.max_seq_length, self.max_predictions_per_seq, self.masked_lm_prob,
                                     self.short_seq_prob, self.do_whole_word_mask, self.dupe_factor,
                                     self.mask_token_prob, self.random_token_prob, self.masking_unit,
                                     self.masking)
        options.validate()
        return options

    def summary_flags(self) -> dict:
        """The options that determine the records, as the summary file records them."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in _NOT_IN_SUMMARY}


def _already_complete(summary_file: str, flag_values: dict, vocab_sha256: str, log) -> bool:
    """Whether the summary's outputs were made with these flags and vocab and are still as written
    (size and sha256; one that is not is named in the log)."""
    try:
        with open(summary_file, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError):
        return False
    if old.get("flags") != flag_values or old.get("vocab_sha256") != vocab_sha256:
        return False
    for entry in old.get("files", []):
        reason = shard_files.mismatch(entry["file"], entry)
        if reason is not None:
            log(f"{entry['file']}: redoing the outputs: {reason}")
            return False
    return True


def _output_locks(options: CreatePretrainingDataOptions) -> list[output_lock.OutputLock]:
    """The locks of what a run writes: each output's stem (PREFIX in sharded mode), so that both modes
    writing one PREFIX.summary.json exclude each other."""
    locks = []
    for name in (f for f in options.output_file.split(",") if f):
        if options.mode == "faithful":
            output_lock.check_output_file(name, "--output_file")
        stem = name.removesuffix(".tfrecord") if options.mode == "sharded" else \
            pd.summary_path(name).removesuffix(".summary.json")
        locks.append(output_lock.lock_output(stem, "--output_file", description=f"--output_file {name}"))
    return locks


def create(options: CreatePretrainingDataOptions, log=logging.info) -> dict:
    """Runs the program for `options` holding the locks on its outputs (a second run on them is
    refused, naming this one: bert_tf.data.output_lock); returns the summary (also written to disk)."""
    options.validate()
    with output_lock.holding(_output_locks(options)):
        return _create(options, log)


def _create(options: CreatePretrainingDataOptions, log) -> dict:
    if not os.path.isfile(options.vocab_file):
        raise pd.DataPrepError(f"--vocab_file: file not found: {options.vocab_file}")
    instance_options = options.instance_options()
    warning = instance_options.masking_warning()
    if warning:
        logging.warning(warning)
    input_files = pd.expand_input_patterns(options.input_file)
    output_files = [f for f in options.output_file.split(",") if f]
    num_workers = options.num_workers or os.cpu_count() or 1
    flag_values, vocab_sha256 = options.summary_flags(), file_sha256(options.vocab_file)
    if options.mode == "faithful":
        if options.gzip:
            output_files = [f if f.endswith(".gz") else f + ".gz" for f in output_files]
        summary_file = pd.summary_path(output_files[0])
        if not options.overwrite and _already_complete(summary_file, flag_values, vocab_sha256, log):
            log(f"outputs already complete ({summary_file}); --overwrite to redo")
            return {}
        summary = pd.run_faithful(input_files, output_files, options.vocab_file, options.do_lower_case,
                                  instance_options, options.random_seed, tokenizer=options.tokenizer,
                                  num_workers=num_workers, compress=options.gzip, log=log)
    else:
        if len(output_files) != 1:
            raise pd.DataPrepError("--output_file: sharded mode takes one output prefix, not a list")
        prefix = output_files[0].removesuffix(".tfrecord")
        summary_file = prefix + ".summary.json"
        shard_options = spd.ShardOptions(instance_options, options.vocab_file, options.do_lower_case,
                                         options.random_seed, options.tokenizer)
        summary = spd.run_sharded(input_files, prefix, shard_options, num_workers=num_workers,
                                  docs_per_shard=options.docs_per_shard, max_shard_chars=options.max_shard_chars,
                                  compress=options.gzip, overwrite=options.overwrite, log=log)
    summary.update(flags=flag_values, vocab_sha256=vocab_sha256, input_files=input_files)
    write_json_atomic(summary_file, summary)
    log(f"Wrote {summary['instances']} total instances; summary: {summary_file}")
    return summary


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-create-pretraining-data` / data_prep/create_pretraining_data.py."""
    cli.run_program(create, CreatePretrainingDataOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

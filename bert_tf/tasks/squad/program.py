"""run_squad.py: SQuAD v1.1 / v2.0 fine-tuning, prediction and official evaluation in one program.

The original's flags and defaults (--max_seq_length=384, --doc_stride=128, --max_query_length=64,
--n_best_size=20, --max_answer_length=30, --version_2_with_negative, --null_score_diff_threshold, ...)
on the shared fine-tuning options. --do_train reads --train_file; --do_predict reads --predict_file
and writes predictions.json, nbest_predictions.json, null_odds.json (v2.0) and raw_logits.jsonl to
--output_dir, plus eval_results.json with the official figures when the file has answers.
--null_score_diff_threshold=best (v2.0) takes the threshold that maximises dev F1 and re-derives the
predictions with it. --raw_logits_file=PATH rebuilds all of that from saved logits without a model.
"""
from __future__ import annotations

import dataclasses
import os

from absl import logging

from bert_tf.options import OptionError, option
from bert_tf.tasks import finetune
from bert_tf.tasks.finetune import FinetuningOptions
from bert_tf.tasks.squad.task import BEST_THRESHOLD, SquadSettings, SquadTask
from bert_tf.tasks.squad.tfds_source import is_version_2, squad_json_from_tfds

__all__ = ["SquadOptions", "make_task", "run", "main"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SquadOptions(FinetuningOptions):
    """run_squad.py's flags: the fine-tuning options plus the original's SQuAD flags."""

    train_file: str | None = option(None, "SQuAD json for training. E.g., train-v1.1.json", path=True)
    predict_file: str | None = option(None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json",
                                      path=True)
    max_seq_length: int = option(384, "The maximum total input sequence length after WordPiece tokenization. "
                                 "Sequences longer than this will be truncated, and sequences shorter than this "
                                 "will be padded.", positive=True)
    doc_stride: int = option(128, "When splitting up a long document into chunks, how much stride to take "
                             "between chunks.", positive=True)
    max_query_length: int = option(64, "The maximum number of tokens for the question. Questions longer than "
                                   "this will be truncated to this length.", positive=True)
    n_best_size: int = option(20, "The total number of n-best predictions to generate in the "
                              "nbest_predictions.json output file.", positive=True)
    max_answer_length: int = option(30, "The maximum length of an answer that can be generated.", positive=True)
    verbose_logging: bool = option(False, "If true, all of the warnings related to data processing will be "
                                   "printed.")
    version_2_with_negative: bool = option(False, "If true, the SQuAD examples contain some that do not have "
                                           "an answer.")
    null_score_diff_threshold: str = option(
        "0.0", "If null_score - best_non_null is greater than the threshold predict null. 'best' (v2.0, with "
        "answers in --predict_file): the threshold that maximises F1, found by the official evaluation.")
    tfds_name: str | None = option(None, "Read SQuAD through TensorFlow Datasets instead of --train_file/"
                                   "--predict_file: squad/v1.1 or squad/v2.0 (its train and validation splits; "
                                   "prepared data only, nothing is downloaded; v2.0 implies "
                                   "--version_2_with_negative).")
    tfds_data_dir: str | None = option(None, "TensorFlow Datasets' data dir for --tfds_name (default: its own, "
                                       "~/tensorflow_datasets).", path=True)
    raw_logits_file: str | None = option(
        None, "Rebuild predictions, n-best, null odds and evaluation of --predict_file from this raw_logits.jsonl "
        "(or .jsonl.gz) of an earlier --do_predict, without running a model.", path=True)

    def validate(self) -> None:
        if self.raw_logits_file is not None:
            self._validate_replay()
            return
        if self.do_eval:
            raise OptionError("run_squad has no --do_eval: --do_predict evaluates when --predict_file has answers")
        if self.tfds_name and (self.train_file or self.predict_file):
            raise OptionError("--tfds_name replaces --train_file and --predict_file; give one or the other")
        if self.do_train and not (self.train_file or self.tfds_name):
            raise OptionError("--train_file is required with --do_train (or --tfds_name)")
        if self.do_predict and not (self.predict_file or self.tfds_name):
            raise OptionError("--predict_file is required with --do_predict (or --tfds_name)")
        self._validate_squad()
        super().validate()

    def _validate_replay(self) -> None:
        if self.do_train or not self.predict_file or self.vocab_file is None or self.output_dir is None:
            raise OptionError("--raw_logits_file needs --predict_file, --vocab_file and --output_dir, and no "
                              "--do_train")
        self._validate_squad()

    def _validate_squad(self) -> None:
        if self.max_seq_length <= self.max_query_length + 3:
            raise OptionError(f"--max_seq_length={self.max_seq_length} must be greater than --max_query_length="
                              f"{self.max_query_length} + 3 (the question, [CLS] and two [SEP])")
        threshold(self)


def threshold(options: SquadOptions) -> float | str:
    """--null_score_diff_threshold as a number, or "best" (v2.0 only)."""
    value = options.null_score_diff_threshold.strip()
    if value == BEST_THRESHOLD:
        if not options.version_2_with_negative:
            raise OptionError("--null_score_diff_threshold=best needs --version_2_with_negative")
        return BEST_THRESHOLD
    try:
        return float(value)
    except ValueError:
        raise OptionError(f"--null_score_diff_threshold must be a number or 'best', got {value!r}") from None


def make_task(options: SquadOptions) -> SquadTask:
    """The SQuAD task of the options, with the tokenizer of --vocab_file and --do_lower_case."""
    from bert_tf.text.tokenization import FullTokenizer

    settings = SquadSettings(
        train_file=options.train_file, predict_file=options.predict_file, max_seq_length=options.max_seq_length,
        doc_stride=options.doc_stride, max_query_length=options.max_query_length,
        version_2_with_negative=options.version_2_with_negative, do_lower_case=options.do_lower_case,
        n_best_size=options.n_best_size, max_answer_length=options.max_answer_length,
        null_score_diff_threshold=threshold(options), verbose_logging=options.verbose_logging)
    return SquadTask(settings, FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case))


def run(options: SquadOptions) -> dict[str, float]:
    """Trains and/or predicts (and evaluates) as the options say; returns the official figures, if any."""
    if options.raw_logits_file is not None:
        options.validate()
        os.makedirs(options.output_dir, exist_ok=True)
        return make_task(options).predict_from_raw_logits(options.raw_logits_file, options.output_dir)
    options = finetune.resolve(_from_tfds(options))
    task = make_task(options)
    finetune.run(options, task)
    if "best_f1_thresh" in task.figures:
        logging.info("Best null score threshold by F1: %g (--null_score_diff_threshold=best uses it)",
                     task.figures["best_f1_thresh"])
    return task.figures


def _from_tfds(options: SquadOptions) -> SquadOptions:
    """With --tfds_name: the options reading the tfds splits as SQuAD json files under OUTPUT_DIR/tfds/."""
    if options.tfds_name is None:
        return options
    options.validate()
    version_2 = is_version_2(options.tfds_name)
    if options.version_2_with_negative and not version_2:
        raise OptionError(f"--version_2_with_negative contradicts --tfds_name={options.tfds_name}")
    os.makedirs(options.output_dir, exist_ok=True)

    def path(split: str, wanted: bool) -> str | None:
        return squad_json_from_tfds(options.tfds_name, split, options.tfds_data_dir, options.output_dir) \
            if wanted else None

    return dataclasses.replace(options, tfds_name=None, train_file=path("train", options.do_train),
                               predict_file=path("predict", options.do_predict),
                               version_2_with_negative=version_2)


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-squad` / run_squad.py."""
    from bert_tf import cli

    cli.run_program(run, SquadOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

"""run_ner.py: token tagging (CoNLL-2003 named entities) by fine-tuning, as the paper's section 5.3.

--data_dir holds train.txt, dev.txt or valid.txt, and test.txt in CoNLL format (CoNLL-2003's
`token POS chunk NER` lines, or `token tag`; IOB1 or IOB2). --do_train fine-tunes on train.txt;
--do_eval scores dev with conlleval's entity-level figures (eval_results.txt); --do_predict tags
test.txt (test_results.txt when it has tags). Predictions are written in CoNLL format beside them.
The labels are the training file's tags ("O" first), or --label_list; a training run stores them
in OUTPUT_DIR/label_list.txt for later --do_eval/--do_predict runs.
"""
from __future__ import annotations

import dataclasses
import os

from absl import logging

from bert_tf.data.atomic_io import atomic_write
from bert_tf.options import OptionError, option
from bert_tf.checkpoints.model_folder import LABELS_FILE, labels_text, read_labels
from bert_tf.tasks import finetune
from bert_tf.tasks.feature_cache import CACHE_DIR
from bert_tf.tasks.finetune import FinetuningOptions
from bert_tf.tasks.ner.conll import ConllDataError, Sentence, label_list, read_conll, split_file
from bert_tf.tasks.ner.features import CONTEXTS
from bert_tf.tasks.ner.frozen_features import FEATURES
from bert_tf.tasks.ner.task import TaggingTask

__all__ = ["NerOptions", "make_task", "run", "main"]

MODES = ("finetune", "feature_based")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NerOptions(FinetuningOptions):
    """run_ner.py's flags: the fine-tuning options plus where the data is and how it is windowed."""

    data_dir: str | None = option(None, "The input data dir: train.txt, dev.txt (or valid.txt) and test.txt in "
                                  "CoNLL format (token ... tag per line, blank lines between sentences, "
                                  "-DOCSTART- lines between documents).", path=True)
    context: str = option("document", "document: each sentence inside as much of its document as fits "
                          "--max_seq_length (the paper's maximal document context); sentence: each sentence "
                          "alone.")
    label_list: str | None = option(None, "The tags, comma-separated, in output order (default: the tags of "
                                    "train.txt, O first, or OUTPUT_DIR/label_list.txt of the training run).")
    mode: str = option("finetune", "finetune: BERT fine-tuned with a softmax layer per word; feature_based: BERT "
                       "frozen, the --features of its layers into a BiLSTM tagger (the paper's Table 7).")
    features: str = option("concat_last_four", "feature_based: the layers read per word: " + ", ".join(FEATURES)
                           + " (sums are learned softmax-weighted, as ELMo's scalar mix).")
    lstm_units: int = option(768, "feature_based: units per direction of the 2-layer BiLSTM (the paper's 768).",
                             positive=True)
    feature_cache_dir: str | None = option(
        None, "feature_based: where the frozen encoder's per-layer word vectors are cached (default OUTPUT_DIR/"
        "features); runs of other --features on the same data and checkpoint reuse the layers found there.",
        path=True)
    max_words: int = option(128, "feature_based: words per BiLSTM row; a longer sentence is tagged in pieces.",
                            positive=True)
    tfds_name: str | None = option(None, "Read the data through TensorFlow Datasets instead of --data_dir: "
                                   "conll2003 (its train, dev and test splits; prepared data only, nothing is "
                                   "downloaded). It keeps no document boundaries: use --context=sentence.")
    tfds_data_dir: str | None = option(None, "TensorFlow Datasets' data dir for --tfds_name (default: its own, "
                                       "~/tensorflow_datasets).", path=True)

    def validate(self) -> None:
        if (self.data_dir is None) == (self.tfds_name is None):
            raise OptionError("give one of --data_dir or --tfds_name")
        if self.context not in CONTEXTS:
            raise OptionError(f"--context must be one of {', '.join(CONTEXTS)}, got {self.context!r}")
        if self.mode not in MODES:
            raise OptionError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == "feature_based" and self.features not in FEATURES:
            raise OptionError(f"--features must be one of {', '.join(FEATURES)}, got {self.features!r}")
        if self.mode == "feature_based" and not self.init_checkpoint:
            raise OptionError("--mode=feature_based needs --init_checkpoint (the frozen encoder)")
        if self.tfds_name is not None and self.context == "document":
            raise OptionError(f"--tfds_name={self.tfds_name} has no documents (TensorFlow Datasets drops the "
                              "-DOCSTART- lines and shuffles the sentences): pass --context=sentence, or "
                              "--data_dir with the CoNLL files for document context")
        super().validate()


class ConllSource:
    """A split's sentences from its CoNLL file in --data_dir (read once per split)."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self._read: dict[str, list[Sentence]] = {}

    def input_files(self, split: str) -> list[str]:
        return [split_file(self.data_dir, split)]

    def examples(self, split: str) -> list[Sentence]:
        if split not in self._read:
            self._read[split] = read_conll(self.input_files(split)[0])
        return self._read[split]


def labels_of(options: NerOptions, source: ConllSource) -> tuple[str, ...]:
    """--label_list, else the stored labels of a training run in OUTPUT_DIR (when not training again),
    else the training file's tags."""
    if options.label_list:
        labels = tuple(label.strip() for label in options.label_list.split(",") if label.strip())
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise OptionError(f"--label_list needs at least two distinct labels, got {options.label_list!r}")
        return labels
    stored = read_labels(options.output_dir)
    if not options.do_train and stored is not None:
        return tuple(stored)
    train = source.input_files("train")[0]
    return label_list(source.examples("train"), train)


def make_task(options: NerOptions) -> TaggingTask:
    """The tagging task of the options, with the tokenizer of --vocab_file and --do_lower_case."""
    from bert_tf.text.tokenization import FullTokenizer

    if options.tfds_name is not None:
        from bert_tf.tasks.ner.tfds_source import TfdsConllSource

        source = TfdsConllSource(options.tfds_name, options.tfds_data_dir)
    else:
        source = ConllSource(options.data_dir)
    labels = labels_of(options, source)
    tokenizer = FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)
    if options.mode == "finetune":
        return TaggingTask(source, labels, tokenizer, options.max_seq_length, options.context)
    from bert_tf.model.configs import BertConfig
    from bert_tf.tasks.ner.feature_based import CacheSettings, FeatureBasedTask, FrozenEncoder

    from bert_tf.training import run_setup

    # The frozen encoder keeps the mask it was pre-trained with (an LTR model's causal one), as fine-tuning does.
    config = run_setup.with_causal_attention(BertConfig.from_json_file(options.bert_config_file),
                                             options.causal_attention, options.init_checkpoint)
    encoder = FrozenEncoder(config, options.init_checkpoint)
    return FeatureBasedTask(source, labels, tokenizer, options.max_seq_length, options.context,
                            features=options.features, encoder=encoder, lstm_units=options.lstm_units,
                            max_words=options.max_words,
                            cache=CacheSettings(options.feature_cache_dir or os.path.join(options.output_dir, CACHE_DIR),
                                                options.vocab_file, options.do_lower_case))


def run(options: NerOptions) -> dict[str, float]:
    """Fine-tunes / evaluates / predicts as the options say; returns the dev figures (if evaluated)."""
    options = finetune.resolve(options)
    task = make_task(options)
    if options.do_train:
        _store_labels(options.output_dir, task.labels)
    logging.info("Tagging with %d labels: %s", len(task.labels), ", ".join(task.labels))
    return finetune.run(options, task)


def _store_labels(output_dir: str, labels: tuple[str, ...]) -> None:
    path, stored = os.path.join(output_dir, LABELS_FILE), read_labels(output_dir)
    if stored is not None:
        if tuple(stored) != labels:
            raise ConllDataError(f"{path}: this output folder was trained with the labels {', '.join(stored)}, "
                                 f"not {', '.join(labels)}; use another --output_dir")
        return
    os.makedirs(output_dir, exist_ok=True)
    with atomic_write(path) as f:
        f.write(labels_text(labels))


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-ner` / run_ner.py."""
    from bert_tf import cli

    cli.run_program(run, NerOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

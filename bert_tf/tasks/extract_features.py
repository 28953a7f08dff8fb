"""Extract pre-computed feature vectors from BERT (the original release's extract_features.py).

Same flags, defaults and JSON-lines output as google-research/bert's script (`extract_features.py` in a
clone, `bert-tf-extract-features` installed, or `python -m bert_tf.tasks.extract_features`):

    bert-tf-extract-features --input_file=input.txt --output_file=output.jsonl \
        --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
        --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

The TPU flags are accepted for command-line compatibility; this version runs on CPU/GPU.
"""
from __future__ import annotations

import dataclasses

from bert_tf import cli
from bert_tf.data import output_lock
from bert_tf.data.atomic_io import remove_leftover_temp_files
from bert_tf.options import OptionError, Options, option

_COMPATIBILITY = "Accepted for compatibility"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtractFeaturesOptions(Options):
    """The original extract_features.py's flags and defaults."""

    input_file: str | None = option(None, "Text file, one example per line; `A ||| B` is a pair.",
                                    required=True, path=True)
    output_file: str | None = option(None, "JSON-lines output file.", required=True, path=True)
    layers: str = option("-1,-2,-3,-4", "Encoder layers to output (Python indexes).")
    bert_config_file: str | None = option(
        None, "The config json file corresponding to the pre-trained BERT model.", required=True, path=True)
    max_seq_length: int = option(
        128, "Maximum total input length after WordPiece tokenization; longer inputs are truncated, shorter "
        "ones padded.")
    init_checkpoint: str | None = option(None, "Pre-trained BERT checkpoint (TF1 format).", required=True,
                                         path=True)
    vocab_file: str | None = option(None, "The vocabulary file the BERT model was trained on.", required=True,
                                    path=True)
    do_lower_case: bool = option(True, "Lower-case the input: True for uncased models, False for cased models.")
    batch_size: int = option(32, "Batch size for predictions.")
    use_tpu: bool = option(False, f"{_COMPATIBILITY}; TPUs are not used.")
    master: str | None = option(None, f"{_COMPATIBILITY}; unused.")
    num_tpu_cores: int = option(8, f"{_COMPATIBILITY}; unused.")
    use_one_hot_embeddings: bool = option(False, f"{_COMPATIBILITY}; embedding lookups are gathers here.")

    def validate(self) -> None:
        super().validate()
        if self.use_tpu:
            raise OptionError("--use_tpu is not supported by this version")


def run(options: ExtractFeaturesOptions) -> int:
    """Tokenize the input, run the model, write the JSON lines; returns the number of lines.

    --output_file is locked for the run: a second run writing it is refused, naming this one; so
    the temporary files of that name found beside it are a killed run's, removed and named."""
    options.validate()
    output_lock.check_output_file(options.output_file, "--output_file")
    with output_lock.lock_output(options.output_file, "--output_file"):
        remove_leftover_temp_files([options.output_file], log=print)
        return _extract(options)


def _extract(options: ExtractFeaturesOptions) -> int:
    import bert_tf._env  # noqa: F401
    from bert_tf.checkpoints import load_tf1_checkpoint
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig
    from bert_tf.tasks import feature_extraction as features
    from bert_tf.text import tokenization

    layer_indexes = features.parse_layers(options.layers)
    tokenization.validate_case_matches_checkpoint(options.do_lower_case, options.init_checkpoint)
    config = BertConfig.from_json_file(options.bert_config_file)
    config.validate(vocab_file=options.vocab_file, max_seq_length=options.max_seq_length,
                    source=options.bert_config_file)
    features.validate_layer_indexes(layer_indexes, config.num_hidden_layers)
    tokenizer = tokenization.FullTokenizer(options.vocab_file, do_lower_case=options.do_lower_case)
    examples = features.read_examples(options.input_file)
    input_features = features.convert_examples_to_features(examples, options.max_seq_length, tokenizer)
    model = BertModel(config)
    # A pretraining checkpoint also holds cls/* heads, which extract_features does not use.
    load_tf1_checkpoint(model, options.init_checkpoint, ignore_unexpected=True)
    results = features.extract_layers(model, input_features, layer_indexes, options.batch_size)
    count = features.write_features_json(options.output_file, results, layer_indexes, options.input_file)
    print(f"wrote {count} lines to {options.output_file}")
    return 0


def main(argv: list[str] | None = None) -> None:
    """`bert-tf-extract-features` / extract_features.py."""
    cli.run_program(run, ExtractFeaturesOptions, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()

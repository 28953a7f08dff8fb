"""Extract pre-computed feature vectors from BERT (the original release's extract_features.py).

Same flags, defaults and JSON-lines output as google-research/bert's script:

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \
        --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
        --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

The TPU flags are accepted for command-line compatibility; this version runs on CPU/GPU.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bert_tf._env  # noqa: E402,F401
from absl import app, flags  # noqa: E402

from bert_tf.tasks import feature_extraction as features  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402
from bert_tf.checkpoints import load_tf1_checkpoint  # noqa: E402
from bert_tf.model.configs import BertConfig  # noqa: E402
from bert_tf.model.bert import BertModel  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file, one example per line; `A ||| B` is a pair.")
flags.DEFINE_string("output_file", None, "JSON-lines output file.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Encoder layers to output (Python indexes).")
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model.")
flags.DEFINE_integer("max_seq_length", 128,
                     "Maximum total input length after WordPiece tokenization; longer inputs "
                     "are truncated, shorter ones padded.")
flags.DEFINE_string("init_checkpoint", None, "Pre-trained BERT checkpoint (TF1 format).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case the input: True for uncased models, False for cased models.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility; TPUs are not used.")
flags.DEFINE_string("master", None, "Accepted for compatibility; unused.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; unused.")
flags.DEFINE_bool("use_one_hot_embeddings", False,
                  "Accepted for compatibility; embedding lookups are gathers here.")


def run() -> int:
    """Tokenize the input, run the model, write the JSON lines; returns the number of lines."""
    layer_indexes = features.parse_layers(FLAGS.layers)
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    config.validate(vocab_file=FLAGS.vocab_file, max_seq_length=FLAGS.max_seq_length,
                    source=FLAGS.bert_config_file)
    features.validate_layer_indexes(layer_indexes, config.num_hidden_layers)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    examples = features.read_examples(FLAGS.input_file)
    input_features = features.convert_examples_to_features(examples, FLAGS.max_seq_length,
                                                           tokenizer)
    model = BertModel(config)
    # A pretraining checkpoint also holds cls/* heads, which extract_features does not use.
    load_tf1_checkpoint(model, FLAGS.init_checkpoint, ignore_unexpected=True)
    results = features.extract_layers(model, input_features, layer_indexes, FLAGS.batch_size)
    return features.write_features_json(FLAGS.output_file, results, layer_indexes)


def main(argv):
    del argv
    if FLAGS.use_tpu:
        sys.exit("extract_features.py: --use_tpu is not supported by this version")
    try:
        count = run()
    except ValueError as e:  # our errors name the file or flag; no deep traceback
        sys.exit(f"extract_features.py: error: {e}")
    print(f"wrote {count} lines to {FLAGS.output_file}")


if __name__ == "__main__":
    for name in ("input_file", "vocab_file", "bert_config_file", "init_checkpoint", "output_file"):
        flags.mark_flag_as_required(name)
    app.run(main)

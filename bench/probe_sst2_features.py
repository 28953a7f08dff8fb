"""Does a pre-trained encoder's frozen output carry SST-2's sentiment? A linear probe (issue #13's diagnosis).

Logistic regression (scikit-learn, standardised features) on the frozen encoder's last layer, mean-pooled over the
real tokens and at [CLS], fitted on the first --examples SST-2 training sentences (seq 64) and scored on the whole
dev set; the same for the same shape at random init (the original's initializer, --seed). A pre-trained encoder
whose features probe no better than random ones has learnt nothing the task's labels can read linearly.

    python bench/probe_sst2_features.py --init_checkpoint=WORK/pretrain/mlm_nsp/export \
        --bert_config_file=WORK/bert_mini_vocab8000_config.json --vocab_file=WORK/vocab-8000.txt
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._classifier_runs import SHARED  # noqa: E402

SEQ_LENGTH = 64


def read_sst2(split: str, limit: int | None = None) -> tuple[list[str], np.ndarray]:
    """SST-2's sentences and labels of a split ("train", "eval"), through run_classifier's GLUE reader."""
    from bert_tf.tasks import glue_data

    examples = glue_data.read_examples(os.path.join(SHARED, "data", "glue", "SST-2"), glue_data.GLUE["sst-2"], split)
    examples = examples[:limit] if limit else examples
    return [e.text_a for e in examples], np.array([int(e.label) for e in examples])


def encode(tokenizer, sentences: list[str]) -> dict[str, np.ndarray]:
    """Single-sentence inputs packed as run_classifier packs them ([CLS] text [SEP], padded to SEQ_LENGTH)."""
    from bert_tf.text.packing import pack

    packed = [pack(tokenizer.tokenize(sentence), None, SEQ_LENGTH, tokenizer) for sentence in sentences]
    return {name: np.array([getattr(row, name) for row in packed], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}


def features(model, tokenizer, sentences: list[str]) -> dict[str, np.ndarray]:
    """"mean" and "cls" features [rows, hidden] of the frozen encoder's last layer."""
    parts = {"mean": [], "cls": []}
    for start in range(0, len(sentences), 256):
        batch = encode(tokenizer, sentences[start:start + 256])
        sequence = model(batch, training=False)["sequence_output"].numpy()
        mask = batch["input_mask"][..., None]
        parts["mean"].append((sequence * mask).sum(1) / mask.sum(1))
        parts["cls"].append(sequence[:, 0])
    return {name: np.concatenate(values) for name, values in parts.items()}


def probe(train: np.ndarray, train_labels: np.ndarray, dev: np.ndarray, dev_labels: np.ndarray) -> float:
    """Dev accuracy (%) of a logistic regression on standardised features."""
    from sklearn.linear_model import LogisticRegression

    mean, std = train.mean(0), train.std(0) + 1e-6
    classifier = LogisticRegression(max_iter=2000).fit((train - mean) / std, train_labels)
    return 100 * classifier.score((dev - mean) / std, dev_labels)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--init_checkpoint", required=True, help="the pre-trained encoder (original format)")
    p.add_argument("--bert_config_file", required=True)
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--examples", type=int, default=5000, help="first N SST-2 training sentences")
    p.add_argument("--seed", type=int, default=1, help="the random-init encoder's seed")
    args = p.parse_args(argv)
    import keras
    from bert_tf import checkpoints
    from bert_tf.model.bert import BertModel
    from bert_tf.model.configs import BertConfig
    from bert_tf.text.tokenization import FullTokenizer

    tokenizer = FullTokenizer(args.vocab_file, do_lower_case=True)
    train, train_labels = read_sst2("train", args.examples)
    dev, dev_labels = read_sst2("eval")
    for name in ("pre-trained", "random init"):
        keras.utils.set_random_seed(args.seed)
        model = BertModel(BertConfig.from_json_file(args.bert_config_file))
        model(encode(tokenizer, train[:2]))
        if name == "pre-trained":
            checkpoints.load_init_checkpoint(model, args.init_checkpoint)
        train_features, dev_features = features(model, tokenizer, train), features(model, tokenizer, dev)
        scores = {kind: probe(train_features[kind], train_labels, dev_features[kind], dev_labels)
                  for kind in ("mean", "cls")}
        print(f"{name}: linear probe dev accuracy, mean-pooled {scores['mean']:.2f}, [CLS] {scores['cls']:.2f} "
              f"({args.examples} training sentences)", flush=True)


if __name__ == "__main__":
    main()

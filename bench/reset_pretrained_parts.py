"""Issue #13's diagnosis, as experiments: which part of our pre-trained BERT-Mini costs it on SST-2?

A copy of a pre-trained export with one part drawn again from the original's initializer (truncated normal of the
config's initializer_range for kernels and tables, zeros for biases, ones/zeros for LayerNorm), the rest kept:

    rare_words  the word-embedding rows of the tokens seen fewer than --min_count times in the pre-training corpus
                (counted there, never in SST-2). A masked LM with tied input/output embeddings pushes every token it
                rarely or never predicts along one shared direction (the softmax's gradient lowers all wrong logits
                together; Gao et al. 2019, "representation degeneration"), so after ~2M words of pre-training those
                tokens start fine-tuning nearly alike, where a random init gives each its own random vector.
    words       the whole word-embedding table (the encoder, position and segment embeddings, pooler kept).
    encoder     the transformer layers and the pooler (the embedding tables kept).
    pooler      the pooler alone: trained by next-sentence prediction, a task SST-2 does not share.
    top_layers  the top --layers transformer layers and the pooler, the rest kept: the re-initialisation of Zhang et
                al. 2021 ("Revisiting Few-sample BERT Fine-tuning"), whose top layers, specialised to the
                pre-training tasks, fine-tuned better on small tasks when drawn again.

Fine-tuned like any export (bench/bench_ablations.py in a work dir holding it as pretrain/mlm_nsp/export), each says
what the parts it keeps are worth on SST-2. The heads (cls/) are kept, so the held-out masked-LM loss still runs.

    python bench/reset_pretrained_parts.py --parts=rare_words --source=WORK/pretrain/mlm_nsp/export \
        --corpus='WORK/corpus/corpus-*' --output=WORK2/pretrain/mlm_nsp/export
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._ablation_pretrain import training_shards  # noqa: E402
from bench._classifier_runs import truncated_normal  # noqa: E402

PARTS = ("rare_words", "words", "encoder", "pooler", "top_layers")
WORDS = "bert/embeddings/word_embeddings"


def token_counts(files: list[str], vocab_file: str) -> collections.Counter:
    """Wordpiece id -> occurrences over the lines of `files` (the uncased FullTokenizer of the export's vocab)."""
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    counts = collections.Counter()
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
    return counts


def initial_value(name: str, shape: tuple[int, ...], stddev: float, rng: np.random.Generator) -> np.ndarray:
    """What the original's initializer gives the variable `name`."""
    if name.endswith("LayerNorm/gamma"):
        return np.ones(shape, np.float32)
    if name.endswith(("bias", "LayerNorm/beta")):
        return np.zeros(shape, np.float32)
    return truncated_normal(rng, shape, stddev)


def reset_names(names: list[str], part: str, layers: int = 1) -> list[str]:
    """The variables that `part` draws again (every part but rare_words), in the order of `names`; top_layers counts
    the model's layers from the names."""
    if part == "words":
        prefixes = (WORDS,)
    elif part == "encoder":
        prefixes = ("bert/encoder/", "bert/pooler/")
    elif part == "pooler":
        prefixes = ("bert/pooler/",)
    else:
        num_layers = len({n.split("/")[2] for n in names if n.startswith("bert/encoder/layer_")})
        top = range(num_layers - layers, num_layers)
        prefixes = tuple(f"bert/encoder/layer_{i}/" for i in top) + ("bert/pooler/",)
    return [n for n in names if n.startswith(prefixes)]


def reset(weights: dict[str, np.ndarray], part: str, stddev: float, rng: np.random.Generator,
          rare: np.ndarray | None = None, layers: int = 1) -> int:
    """Draws `part` of `weights` again in place; returns how many values it replaced."""
    if part == "rare_words":
        weights[WORDS] = weights[WORDS].copy()
        weights[WORDS][rare] = truncated_normal(rng, (len(rare), weights[WORDS].shape[1]), stddev)
        return weights[WORDS][rare].size
    names = reset_names(list(weights), part, layers)
    for name in names:
        weights[name] = initial_value(name, weights[name].shape, stddev, rng)
    return sum(weights[name].size for name in names)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", required=True, choices=PARTS, help="what to draw again")
    p.add_argument("--source", required=True, help="the pre-trained export (original format)")
    p.add_argument("--corpus", help="--parts=rare_words: glob of the corpus shards it was pre-trained on")
    p.add_argument("--output", required=True, help="the new export folder")
    p.add_argument("--min_count", type=int, default=10, help="rare_words: the rows of tokens seen fewer times")
    p.add_argument("--layers", type=int, default=1, help="top_layers: how many of the top layers to draw again")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.parts == "rare_words" and not args.corpus:
        p.error("--parts=rare_words needs --corpus")

    from bert_tf.checkpoints.tf1 import read_tf1_checkpoint, write_tf1_checkpoint
    from bert_tf.data.atomic_io import atomic_folder
    from bert_tf.model.configs import BertConfig

    vocab_file = os.path.join(args.source, "vocab.txt")
    config = BertConfig.from_json_file(os.path.join(args.source, "bert_config.json"))
    weights = read_tf1_checkpoint(os.path.join(args.source, "bert_model.ckpt"))
    summary = {"parts": args.parts, "source": args.source, "seed": args.seed}
    rare = None
    if args.parts == "rare_words":
        counts = token_counts(training_shards(glob.glob(args.corpus)), vocab_file)
        rare = np.array([i for i in range(config.vocab_size) if counts[i] < args.min_count])
        summary |= {"min_count": args.min_count, "tokens_reset": int(len(rare)), "vocab_size": config.vocab_size}
    if args.parts == "top_layers":
        if not 1 <= args.layers <= config.num_hidden_layers:
            p.error(f"--layers={args.layers}: the model has {config.num_hidden_layers} layers")
        summary["layers"] = args.layers
    summary["values_reset"] = reset(weights, args.parts, config.initializer_range, np.random.default_rng(args.seed),
                                    rare, args.layers)

    def fill(tmp: str) -> None:
        write_tf1_checkpoint(weights, os.path.join(tmp, "bert_model.ckpt"))
        for name in ("bert_config.json", "vocab.txt"):
            shutil.copyfile(os.path.join(args.source, name), os.path.join(tmp, name))
        with open(os.path.join(tmp, "embedding_reset.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)

    atomic_folder(args.output, True, fill)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

"""Issue #13's diagnosis: have the word embeddings of tokens our pre-training rarely saw collapsed together?

For the wordpieces of SST-2's dev sentences (ids >= 1000: no [unused], punctuation-only or single-character rows),
bucketed by how often the pre-training corpus holds them, the mean pairwise cosine similarity of their rows in each
export's word-embedding table, their mean norm and the effective rank of the centred rows (exp of the entropy of
the normalised squared singular values); "random init" is the original's initializer. A random table has cosine ~0;
rows pushed along one shared direction (representation degeneration of tied-embedding LMs) show a large mean
cosine. Dev text only picks which rows to look at; nothing is fitted on it.

    python bench/embedding_collapse.py --corpus='WORK/corpus/corpus-*' \
        --exports='wiki+books=WORK/pretrain/mlm_nsp/export,SST-2 text=WORK2/pretrain/mlm/export'
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._ablation_pretrain import training_shards  # noqa: E402
from bench._classifier_runs import truncated_normal  # noqa: E402
from bench.probe_sst2_features import read_sst2  # noqa: E402
from bench.reset_pretrained_parts import token_counts  # noqa: E402

BUCKETS = (("never seen", 0, 1), ("seen 1-9 times", 1, 10), ("seen 10-99 times", 10, 100),
           ("seen 100+ times", 100, None))


def dev_token_ids(vocab_file: str) -> np.ndarray:
    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file, do_lower_case=True)
    sentences, _ = read_sst2("eval")
    return np.array(sorted({i for s in sentences for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s))
                            if i >= 1000}))


def statistics(rows: np.ndarray) -> str:
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    n = len(rows)
    mean_cosine = ((unit @ unit.T).sum() - n) / (n * n - n)
    singular = np.linalg.svd(rows - rows.mean(0), compute_uv=False)
    share = singular ** 2 / (singular ** 2).sum()
    effective_rank = np.exp(-(share * np.log(share + 1e-12)).sum())
    return f"{mean_cosine:.2f} · {np.linalg.norm(rows, axis=1).mean():.2f} · {effective_rank:.0f}"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True, help="glob of the pre-training corpus shards (counts)")
    p.add_argument("--exports", required=True, help="comma list of name=export folder")
    args = p.parse_args(argv)
    from bert_tf.checkpoints.tf1 import read_tf1_checkpoint

    exports = dict(item.split("=", 1) for item in args.exports.split(","))
    vocab_file = os.path.join(next(iter(exports.values())), "vocab.txt")
    counts = token_counts(training_shards(glob.glob(args.corpus)), vocab_file)
    ids = dev_token_ids(vocab_file)
    buckets = [(name, ids[[low <= counts[i] and (high is None or counts[i] < high) for i in ids]])
               for name, low, high in BUCKETS]
    tables = {name: read_tf1_checkpoint(os.path.join(folder, "bert_model.ckpt"))["bert/embeddings/word_embeddings"]
              for name, folder in exports.items()}
    first = next(iter(tables.values()))
    tables = {"random init": truncated_normal(np.random.default_rng(1), first.shape, 0.02), **tables}
    lines = ["| word embeddings | " + " | ".join(f"{name} ({len(rows)} tokens)" for name, rows in buckets) + " |",
             "|---|" + "---:|" * len(buckets)]
    lines += [f"| {name} | " + " | ".join(statistics(table[rows]) for _, rows in buckets) + " |"
              for name, table in tables.items()]
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()

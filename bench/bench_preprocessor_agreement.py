"""Agreement of the exported preprocessor SavedModel's `tokenize` with `FullTokenizer`, on every shared corpus line.

For each vocab the preprocessor is saved with `save_preprocessor`, loaded back with `tf.saved_model.load` and
run on every line (each file split on LF, as the tokenizer goldens do: CR and BOM kept, blank lines included) of
the shared wiki, books and multilingual corpora; its ids, flattened over words, are compared with
`tokenization.FullTokenizer` (itself 100% equal to the original's goldens). For context, tensorflow-text's own
`BertTokenizer` (its ICU normalisation, 200 bytes per word) is compared the same way.

    nice -n 15 python bench/bench_preprocessor_agreement.py [--batch 2048] [--examples 3] [--no_write]
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bert_tf._env import tf  # noqa: E402  (TensorFlow, imported quietly)
import tensorflow_text as tf_text  # noqa: E402

from bench._cpu import read_cpu  # noqa: E402
from bench._report import write_section  # noqa: E402
from bert_tf.export.preprocessor import save_preprocessor  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402

SHARED = os.environ.get("BERT_TF_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")
CORPORA = {"wiki": "wiki/*/wiki_0*", "books": "books/*.txt", "multilingual": "multilingual/*.txt"}
# vocab -> (do_lower_case, corpora it is measured on); the Chinese vocab only on the multilingual text
VOCABS = {"uncased": (True, ("wiki", "books", "multilingual")), "cased": (False, ("wiki", "books", "multilingual")),
          "chinese": (True, ("multilingual",))}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=2048, help="lines per call of the SavedModel")
    p.add_argument("--examples", type=int, default=3, help="differing lines shown per corpus and vocab")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    return p.parse_args(argv)


def read_lines(pattern: str) -> tuple[list[str], int]:
    """Every line of the files matching `pattern` (split on LF only) and their UTF-8 size in bytes."""
    files = sorted(glob.glob(os.path.join(SHARED, "data", "corpus", pattern)))
    if not files:
        raise SystemExit(f"no shared corpus files match {pattern!r} under {SHARED}")
    lines, size = [], 0
    for path in files:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        lines.extend(text.split("\n"))
        size += len(text.encode("utf-8"))
    return lines, size


def batched_ids(tokenize, lines: list[str], batch: int) -> list[list[int]]:
    """Ids per line from a `strings -> ragged [batch, (words), (pieces)] or [batch, (pieces)]` function."""
    out = []
    for start in range(0, len(lines), batch):
        ragged = tokenize(tf.constant(lines[start:start + batch]))
        if ragged.ragged_rank > 1:
            ragged = ragged.merge_dims(1, -1)
        ids, splits = ragged.values.numpy().tolist(), ragged.row_splits.numpy().tolist()
        out.extend(ids[a:b] for a, b in zip(splits, splits[1:]))
    return out


def code_points(text: str) -> str:
    """The non-ASCII and control characters of `text` as U+XXXX, in order, without repeats."""
    seen = dict.fromkeys(c for c in text if not (c.isascii() and c.isprintable()))
    return " ".join(f"U+{ord(c):04X}" for c in seen) or "ASCII only"


def first_difference(exact: list[str], got: list[str]) -> str:
    """The tokens around the first position where two token lists part."""
    i = next((k for k, (a, b) in enumerate(zip(exact, got)) if a != b), min(len(exact), len(got)))
    return f"FullTokenizer {exact[max(0, i - 2):i + 3]} vs {got[max(0, i - 2):i + 3]}"


def compare(lines, exact_ids, ids, inv_vocab, limit: int) -> tuple[int, list[str]]:
    """(lines with identical ids, up to `limit` descriptions of differing lines)."""
    same, examples = 0, []
    for line, want, got in zip(lines, exact_ids, ids):
        if want == got:
            same += 1
        elif len(examples) < limit:
            tokens = [[inv_vocab.get(i, f"#{i}") for i in x] for x in (want, got)]
            examples.append(f"`{line[:60]!r}` ({code_points(line)}): {first_difference(*tokens)}")
    return same, examples


def measure_vocab(name: str, args, corpora: dict) -> list[dict]:
    """Rows of the table for one vocab: the SavedModel and tensorflow-text's BertTokenizer per corpus."""
    lower, names = VOCABS[name]
    vocab = os.path.join(SHARED, "data", "vocab", name, "vocab.txt")
    exact = tokenization.FullTokenizer(vocab, do_lower_case=lower)
    with tempfile.TemporaryDirectory() as folder:
        save_preprocessor(folder, vocab, lower, 128)
        loaded = tf.saved_model.load(folder)
        library = tf_text.BertTokenizer(vocab, lower_case=lower, token_out_type=tf.int32, max_bytes_per_word=200)
        rows = []
        for corpus in names:
            lines, size = corpora[corpus]
            want = [exact.convert_tokens_to_ids(exact.tokenize(x)) for x in lines]
            start = time.perf_counter()
            ours = batched_ids(loaded.tokenize, lines, args.batch)
            seconds = time.perf_counter() - start
            same, examples = compare(lines, want, ours, exact.inv_vocab, args.examples)
            library_same, _ = compare(lines, want, batched_ids(library.tokenize, lines, args.batch), {}, 0)
            rows.append(dict(corpus=corpus, vocab=name, lower=lower, lines=len(lines), mb=size / 1e6, same=same,
                             library_same=library_same, mbs=size / 1e6 / seconds, examples=examples))
            print(f"{corpus} / {name}: {same}/{len(lines)} identical ({same / len(lines):.4%}); tensorflow-text "
                  f"BertTokenizer alone {library_same / len(lines):.4%}; {size / 1e6 / seconds:.2f} MB/s",
                  flush=True)
            for example in examples:
                print("   ", example, flush=True)
    return rows


def report(rows: list[dict], args: argparse.Namespace) -> str:
    table = ["| corpus | vocab (do_lower_case) | lines | MB | identical lines, SavedModel `tokenize` | "
             "identical lines, tensorflow-text `BertTokenizer` alone | SavedModel MB/s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        table.append(f"| {r['corpus']} | {r['vocab']} ({r['lower']}) | {r['lines']:,} | {r['mb']:.2f} | "
                     f"**{r['same'] / r['lines']:.4%}** ({r['lines'] - r['same']} differ) | "
                     f"{r['library_same'] / r['lines']:.4%} ({r['lines'] - r['library_same']} differ) | "
                     f"{r['mbs']:.2f} |")
    examples = [f"- {r['corpus']} / {r['vocab']}: {e}" for r in rows for e in r["examples"]]
    return "\n".join([
        "## In-graph tokenizer agreement (preprocessor SavedModel)", "",
        f"CPU: {read_cpu().label()}. Every line of each corpus (split on LF; blank lines, CR and BOM kept), "
        "through the SavedModel written by `bert_tf.export.preprocessor.save_preprocessor` and loaded back, against "
        "`FullTokenizer` (100% equal to the original's goldens). tensorflow-text's `BertTokenizer` alone is there for "
        "context: it normalises with ICU (uncased: NFKC_Casefold, e.g. fullwidth （）→(), ß→ss, µ→μ, …→...; "
        "cased: NBSP is not a separator). MB/s: one pass of the loaded `tokenize` over UTF-8 input, batches of "
        f"{args.batch:,} lines, ids to Python lists included, on a machine shared with other work and under `nice` "
        "(indicative, not a speed benchmark).", "",
        *table, "", "First differing lines:" if examples else "No line differs.", *examples])


def main(argv=None) -> None:
    args = parse_args(argv)
    corpora = {name: read_lines(pattern) for name, pattern in CORPORA.items()}
    rows = [row for vocab in VOCABS for row in measure_vocab(vocab, args, corpora)]
    body = report(rows, args)
    print("\n" + body, flush=True)
    if not args.no_write:
        write_section("preprocessor_agreement", body, "nice -n 15 python " + " ".join(sys.argv))


if __name__ == "__main__":
    main()

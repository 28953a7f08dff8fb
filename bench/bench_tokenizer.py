"""Tokenizer throughput: the original, our exact path, our fast path, Hugging Face and tensorflow-text.

Every contender tokenizes the same lines (the corpus split on LF) to ids; MB/s is UTF-8 megabytes
(10^6 bytes) of input per wall-clock second, median of `--repeats` runs, each on a fresh tokenizer
(vocab loading and graph tracing excluded, per-tokenizer caches cold). "identical" is the share of
lines whose ids equal our exact path's (itself 100% equal to the original's goldens).

    python bench/bench_tokenizer.py [--corpus 'GLOB'] [--vocab PATH] [--repeats 3] [--reference DIR]
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bert_tf._env import tf  # noqa: E402  (TensorFlow, imported quietly)

from bench._report import write_section  # noqa: E402
from bert_tf.text import fast_tokenization  # noqa: E402
from bert_tf.text import native_wordpiece  # noqa: E402
from bert_tf.text import tokenization  # noqa: E402

SHARED = os.environ.get("BERT_TF_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=os.path.join(SHARED, "data", "corpus", "wiki", "*", "wiki_0*"),
                   help="file or glob of UTF-8 text files (default: the shared wiki text)")
    p.add_argument("--vocab", default=os.path.join(SHARED, "data", "vocab", "uncased", "vocab.txt"))
    p.add_argument("--do_lower_case", default="true", choices=["true", "false"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reference", default="/work/ref/bert",
                   help="checkout of google-research/bert to time the original too ('' to skip)")
    p.add_argument("--no_write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    return p.parse_args(argv)


def read_corpus(pattern: str) -> list[str]:
    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit(f"--corpus {pattern!r} matches no file")
    lines: list[str] = []
    for path in files:
        with open(path, encoding="utf-8", newline="") as f:
            lines.extend(f.read().split("\n"))
    return lines


def load_original(reference_dir: str, vocab: str, lower: bool):
    """The original FullTokenizer, its `tf.gfile` served by tf.compat.v1 (its only TF use)."""
    path = os.path.join(reference_dir, "tokenization.py")
    if not reference_dir or not os.path.isfile(path):
        return None
    saved = sys.modules.get("tensorflow")
    sys.modules["tensorflow"] = types.SimpleNamespace(gfile=tf.compat.v1.gfile)
    try:
        spec = importlib.util.spec_from_file_location("original_bert_tokenization", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.modules["tensorflow"] = saved
    tok = module.FullTokenizer(vocab, do_lower_case=lower)
    return lambda lines: [tok.convert_tokens_to_ids(tok.tokenize(x)) for x in lines]


def hf_tokenizer(vocab: str, lower: bool):
    """Hugging Face `tokenizers` BERT pipeline with the original's 200-char word limit."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    tok = Tokenizer(models.WordPiece.from_file(vocab, unk_token="[UNK]", max_input_chars_per_word=200))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    run = lambda lines: [e.ids for e in tok.encode_batch(lines, add_special_tokens=False)]  # noqa: E731
    run(["Warm-up: starts the thread pool."])  # not timed
    return run


def tf_text_tokenizer(vocab: str, lower: bool, arrays: bool = False):
    """tensorflow-text FastBertTokenizer on its own (ICU NFKC_Casefold normalisation).

    `arrays`: flat ids + row splits from one part per core in threads (the engine's ceiling here),
    else one call and Python lists.
    """
    import concurrent.futures

    import tensorflow_text as tf_text
    table = list(tokenization.load_vocab(vocab))
    tok = tf_text.FastBertTokenizer(table, max_bytes_per_word=200, token_out_type=tf.int32,
                                    lower_case_nfd_strip_accents=lower)

    def call(lines):
        ragged = tok.tokenize(tf.constant(lines))
        return ragged.flat_values.numpy(), ragged.row_splits.numpy()

    def run_lists(lines):
        flat, splits = (t.tolist() for t in call(lines))
        return [flat[a:b] for a, b in zip(splits, splits[1:])]

    pool = concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1)

    def run_arrays(lines):
        step = -(-len(lines) // (os.cpu_count() or 1))
        parts = [p.result() for p in [pool.submit(call, lines[k:k + step]) for k in range(0, len(lines), step)]]
        return fast_tokenization._concat_ragged(parts)

    run = run_arrays if arrays else run_lists
    run(["Warm-up: traces the graph."])  # not timed
    return run


def fast_tokenizer(vocab: str, lower: bool, arrays: bool, engine: str = "auto"):
    tok = fast_tokenization.FastTokenizer(vocab, do_lower_case=lower, engine=engine)
    tok.tokenize_batch(["Warm-up: traces the graphs. Ünïcode ½ 日本"])  # not timed
    if not arrays:
        return tok.tokenize_batch

    def run(lines):
        flat, splits = tok.tokenize_batch_arrays(lines)
        return flat, splits
    return run


def time_contender(make, lines, repeats: int):
    """Wall and CPU (all threads) seconds of `repeats` runs, each with a fresh tokenizer."""
    seconds, cpu_seconds, result = [], [], None
    for _ in range(repeats):
        fn = make()  # outside the clock
        result = None  # the previous run's output is freed outside the clock too
        start, cpu_start = time.perf_counter(), time.process_time()
        result = fn(lines)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
    return seconds, cpu_seconds, result


def main(argv=None) -> None:
    args = parse_args(argv)
    lower = args.do_lower_case == "true"
    try:
        tokenization.load_vocab(args.vocab)
    except tokenization.VocabError as e:
        raise SystemExit(f"--vocab: {e}") from None
    lines = read_corpus(args.corpus)
    megabytes = sum(len(x.encode("utf-8")) for x in lines) / 1e6
    load_before = os.getloadavg()
    exact_full = lambda: tokenization.FullTokenizer(args.vocab, lower)  # noqa: E731
    contenders = [
        ("bert_tf exact path (`FullTokenizer`)",
         lambda: (lambda t: lambda ls: [t.convert_tokens_to_ids(t.tokenize(x)) for x in ls])(exact_full())),
        ("bert_tf fast path, `tokenize_batch` → list[list[int]]", lambda: fast_tokenizer(args.vocab, lower, False)),
        ("bert_tf fast path, `tokenize_batch_arrays` → flat ids + row splits",
         lambda: fast_tokenizer(args.vocab, lower, True)),
        ("bert_tf fast path on its tensorflow-text engine (installs without a C compiler), arrays",
         lambda: fast_tokenizer(args.vocab, lower, True, engine="tf_text")),
        ("Hugging Face `tokenizers` (BertNormalizer + WordPiece, Rust)", lambda: hf_tokenizer(args.vocab, lower)),
        ("tensorflow-text `FastBertTokenizer` alone → lists", lambda: tf_text_tokenizer(args.vocab, lower)),
        ("tensorflow-text `FastBertTokenizer` alone → arrays, one part per core",
         lambda: tf_text_tokenizer(args.vocab, lower, arrays=True)),
    ]
    if load_original(args.reference, args.vocab, lower) is not None:
        contenders.insert(1, ("original google-research/bert `FullTokenizer`",
                              lambda: load_original(args.reference, args.vocab, lower)))
    rows, reference_ids = [], None
    for name, make in contenders:
        runs, cpu_runs, result = time_contender(make, lines, args.repeats)
        median, cpu_median = statistics.median(runs), statistics.median(cpu_runs)
        if isinstance(result, tuple):  # flat ids + row splits
            flat, splits = result[0].tolist(), result[1].tolist()
            result = [flat[a:b] for a, b in zip(splits, splits[1:])]
        if reference_ids is None:  # the first contender is our exact path
            reference_ids = result
        same = sum(a == b for a, b in zip(result, reference_ids)) / len(lines)
        rows.append((name, megabytes / median, [megabytes / s for s in runs], megabytes / cpu_median, same))
        print(f"{name}: {megabytes / median:.2f} MB/s (runs {', '.join(f'{megabytes / s:.2f}' for s in runs)}), "
              f"{megabytes / cpu_median:.2f} MB per CPU-second, identical lines {same:.4%}", flush=True)
    load_after = os.getloadavg()
    table = ["| tokenizer | MB/s (median, wall) | runs (MB/s) | MB per CPU-second | lines with identical ids |",
             "|---|---:|---|---:|---:|"]
    for name, mbs, runs, cpu_mbs, same in rows:
        table.append(f"| {name} | **{mbs:.2f}** | {', '.join(f'{r:.2f}' for r in runs)} | {cpu_mbs:.2f} | {same:.3%} |")
    body = "\n".join([
        "## Tokenizer throughput", "",
        f"Corpus: `{args.corpus}` — {len(lines):,} lines, {megabytes:.2f} MB; vocab `{args.vocab}`, "
        f"do_lower_case={lower}; median of {args.repeats} runs, fresh tokenizer each run; HF `tokenizers` "
        f"uses {os.cpu_count()} threads, the fast path one thread per core (native engine built: "
        f"{native_wordpiece.available()}). "
        f"Identity is against our exact path (100% equal to the original's goldens). MB = 10^6 bytes "
        f"of UTF-8 input; CPU-seconds count all threads of the process.", "",
        *table, "",
        f"Load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after: {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} (the machine is shared)."])
    print(body)
    if not args.no_write:
        write_section("tokenizer", body)


if __name__ == "__main__":
    main()

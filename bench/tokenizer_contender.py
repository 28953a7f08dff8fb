"""One tokenizer of the tokenizer speed study (studies/tables/speed_tokenizer.py), timed in a process of its own.

Every contender turns the same lines (the corpus split on LF) into ids; MB/s is UTF-8 megabytes (10^6 bytes) of
input per wall-clock second, the median of --repeats runs, each on a fresh tokenizer (vocab loading and tracing
excluded, caches cold). It writes OUT/result.json and OUT/line_hashes.npy (one hash of each line's ids); with
--same_as=DIR (our exact path's run), "identical_lines" is the share of lines whose ids equal that run's.

    python -m bench.tokenizer_contender --contender=fast_arrays --corpus='WIKI/*/wiki_0*' --vocab=VOCAB --out=DIR
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import os
import statistics
import sys
import time
import types
from typing import Callable

import numpy as np

from bench.result import report

Tokenize = Callable[[list[str]], object]  # lines -> list of id lists, or (flat ids, row splits)
NAMES = {"exact": "bert_tf exact path (`FullTokenizer`)",
         "original": "original google-research/bert `FullTokenizer`",
         "fast": "bert_tf fast path, `tokenize_batch` → list[list[int]]",
         "fast_arrays": "bert_tf fast path, `tokenize_batch_arrays` → flat ids + row splits",
         "fast_tf_text": "bert_tf fast path on its tensorflow-text engine, arrays",
         "hf": "Hugging Face `tokenizers` (BertNormalizer + WordPiece, Rust)",
         "tf_text": "tensorflow-text `FastBertTokenizer` alone → lists",
         "tf_text_arrays": "tensorflow-text `FastBertTokenizer` alone → arrays, one part per core"}


def read_lines(pattern: str, max_lines: int | None = None) -> list[str]:
    """The lines (split on LF) of every file matching `pattern`, in sorted order; the first `max_lines` only."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit(f"--corpus {pattern!r} matches no file")
    lines: list[str] = []
    for path in files:
        with open(path, encoding="utf-8", newline="") as f:
            lines.extend(f.read().split("\n"))
    return lines[:max_lines] if max_lines else lines


def original(checkout: str, vocab: str, lower: bool) -> Tokenize:
    """The original's FullTokenizer from a google-research/bert checkout; its one TensorFlow use, tf.gfile, is
    served by tf.compat.v1 (no original code is copied or changed)."""
    from bert_tf._env import tf

    saved = sys.modules.get("tensorflow")
    sys.modules["tensorflow"] = types.SimpleNamespace(gfile=tf.compat.v1.gfile)
    try:
        path = os.path.join(checkout, "tokenization.py")
        spec = importlib.util.spec_from_file_location("original_tokenization", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.modules["tensorflow"] = saved
    tok = module.FullTokenizer(vocab, do_lower_case=lower)
    return lambda lines: [tok.convert_tokens_to_ids(tok.tokenize(x)) for x in lines]


def exact(vocab: str, lower: bool) -> Tokenize:
    from bert_tf.text import tokenization

    tok = tokenization.FullTokenizer(vocab, lower)
    return lambda lines: [tok.convert_tokens_to_ids(tok.tokenize(x)) for x in lines]


def fast(vocab: str, lower: bool, arrays: bool, engine: str = "auto") -> Tokenize:
    """Our FastTokenizer (its native engine where built), warmed up outside the clock."""
    from bert_tf.text import fast_tokenization

    tok = fast_tokenization.FastTokenizer(vocab, do_lower_case=lower, engine=engine)
    tok.tokenize_batch(["Warm-up: traces the graphs. Ünïcode ½ 日本"])
    return tok.tokenize_batch_arrays if arrays else tok.tokenize_batch


def hugging_face(vocab: str, lower: bool) -> Tokenize:
    """Hugging Face `tokenizers`' BERT pipeline with the original's 200-character word limit."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece.from_file(vocab, unk_token="[UNK]", max_input_chars_per_word=200))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def run(lines: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(lines, add_special_tokens=False)]

    run(["Warm-up: starts the thread pool."])
    return run


def tf_text(vocab: str, lower: bool, arrays: bool) -> Tokenize:
    """tensorflow-text's FastBertTokenizer alone (ICU NFKC_Casefold normalisation): one call and Python lists, or
    flat ids + row splits from one part per core in threads (the engine's ceiling here)."""
    import concurrent.futures

    import tensorflow_text

    from bert_tf._env import tf
    from bert_tf.text import fast_tokenization, tokenization

    tok = tensorflow_text.FastBertTokenizer(list(tokenization.load_vocab(vocab)), max_bytes_per_word=200,
                                            token_out_type=tf.int32, lower_case_nfd_strip_accents=lower)
    cores = os.cpu_count() or 1
    pool = concurrent.futures.ThreadPoolExecutor(cores)

    def call(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ragged = tok.tokenize(tf.constant(lines))
        return ragged.flat_values.numpy(), ragged.row_splits.numpy()

    def run(lines: list[str]) -> object:
        if not arrays:
            flat, splits = (t.tolist() for t in call(lines))
            return [flat[a:b] for a, b in zip(splits, splits[1:])]
        step = -(-len(lines) // cores)
        parts = [pool.submit(call, lines[k:k + step]) for k in range(0, len(lines), step)]
        return fast_tokenization._concat_ragged([p.result() for p in parts])

    run(["Warm-up: traces the graph."])
    return run


def builder(args: argparse.Namespace) -> Callable[[], Tokenize]:
    """A maker of a fresh tokenizer of the chosen contender."""
    vocab, lower = args.vocab, args.do_lower_case
    return {"exact": lambda: exact(vocab, lower), "original": lambda: original(args.original, vocab, lower),
            "fast": lambda: fast(vocab, lower, False), "fast_arrays": lambda: fast(vocab, lower, True),
            "fast_tf_text": lambda: fast(vocab, lower, True, engine="tf_text"),
            "hf": lambda: hugging_face(vocab, lower), "tf_text": lambda: tf_text(vocab, lower, False),
            "tf_text_arrays": lambda: tf_text(vocab, lower, True)}[args.contender]


def line_hashes(result: object) -> np.ndarray:
    """One 64-bit hash of each line's ids, from id lists or (flat ids, row splits)."""
    if isinstance(result, tuple):
        flat, splits = np.asarray(result[0], np.int32), np.asarray(result[1])
        rows = (flat[a:b] for a, b in zip(splits[:-1], splits[1:]))
    else:
        rows = (np.asarray(ids, np.int32) for ids in result)
    return np.array([int.from_bytes(hashlib.blake2b(r.tobytes(), digest_size=8).digest(), "little")
                     for r in rows], np.uint64)


def time_runs(make: Callable[[], Tokenize], lines: list[str], repeats: int) -> tuple[list[float], list[float], object]:
    """Wall and CPU (all threads) seconds of `repeats` runs, each with a fresh tokenizer made outside the clock."""
    seconds, cpu_seconds, result = [], [], None
    for _ in range(repeats):
        tokenize = make()
        result = None  # the previous run's output is freed outside the clock too
        start, cpu_start = time.perf_counter(), time.process_time()
        result = tokenize(lines)
        seconds.append(time.perf_counter() - start)
        cpu_seconds.append(time.process_time() - cpu_start)
    return seconds, cpu_seconds, result


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contender", required=True, choices=tuple(NAMES))
    p.add_argument("--corpus", required=True, help="file or glob of UTF-8 text files")
    p.add_argument("--vocab", required=True)
    p.add_argument("--do_lower_case", type=lambda v: v.lower() == "true", default=True)
    p.add_argument("--max_lines", type=int, default=None, help="the corpus' first lines only")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--original", default=None, help="a google-research/bert checkout (contender original)")
    p.add_argument("--same_as", default=None, help="the exact path's run folder: identity is against its ids")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    lines = read_lines(args.corpus, args.max_lines)
    megabytes = sum(len(x.encode("utf-8")) for x in lines) / 1e6
    seconds, cpu_seconds, ids = time_runs(builder(args), lines, args.repeats)
    hashes = line_hashes(ids)
    reference = np.load(os.path.join(args.same_as, "line_hashes.npy")) if args.same_as else hashes
    result = {"contender": args.contender, "name": NAMES[args.contender], "lines": len(lines),
              "megabytes": megabytes, "mb_per_s": megabytes / statistics.median(seconds),
              "mb_per_cpu_s": megabytes / statistics.median(cpu_seconds),
              "runs_mb_per_s": [megabytes / s for s in seconds],
              "identical_lines": float(np.mean(hashes == reference)) if len(hashes) == len(reference) else 0.0}
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, "line_hashes.npy"), hashes)
    return report(args.out, result)


if __name__ == "__main__":
    main()

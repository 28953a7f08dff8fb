"""Pre-training input: text files -> documents of lines -> documents of token ids.

The original's input format: one sentence per line, a blank line between documents; documents
continue across input files until a blank line. Lines that tokenize to nothing are dropped, and so
are documents left empty. Tokenization is the exact path or the fast one (identical ids), on one
process or several.
"""
from __future__ import annotations

import functools
import multiprocessing
from typing import Callable, Iterable, Iterator, Sequence

from bert_tf.data.files import expand_globs
from bert_tf.errors import BertTfError
from bert_tf.text import tokenization
from bert_tf.text.text_presence import TextPresence, has_text

Document = list  # list of sentences, each a list of token ids


class DataPrepError(BertTfError, ValueError):
    """Bad input, flags or output path; the message names the file, line or flag."""


expand_input_patterns = expand_globs  # the name data_prep/create_pretraining_data.py calls


def iter_text_documents(input_files: Sequence[str], open_binary: Callable = functools.partial(open, mode="rb")
                        ) -> Iterator[list[str]]:
    """Streams documents as lists of stripped lines with text (lines split on \\n only, like tf.gfile).

    A line of only NUL bytes or control characters is dropped without ending its document: the
    original tokenizes it to nothing and drops it, in the same place. An input in which no file
    holds text is a DataPrepError naming the file; a file without text among others is a warning.
    `open_binary(path)` opens a file for reading bytes (Beam passes its FileSystems.open).
    """
    doc: list[str] = []
    presence = TextPresence()
    for path in input_files:
        held_text = False
        with open_binary(path) as f:
            for line_number, raw in enumerate(iter(f.readline, b""), 1):
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as e:
                    raise DataPrepError(f"{path}:{line_number}: not valid UTF-8 "
                                        f"(byte {e.start} of the line: {raw[e.start:e.start + 4]!r})") from None
                if not line:
                    if doc:
                        yield doc
                        doc = []
                elif has_text(line):
                    doc.append(line)
                    held_text = True
        presence.file_done(path, held_text)
    presence.finish(DataPrepError, prefix="no documents: ")
    if doc:
        yield doc


class ExactLineTokenizer:
    """Lines -> token ids with the original FullTokenizer (no TensorFlow: light, cheap to fork).

    FullTokenizer memoises WordPiece per distinct word; the memo is dropped after a batch once it
    holds `max_cached_words`, so a long sharded run's memory stays flat as the corpus grows.
    """

    def __init__(self, vocab_file: str, do_lower_case: bool, max_cached_words: int = 200_000):
        self.tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
        self.vocab = self.tokenizer.vocab
        self.max_cached_words = max_cached_words

    def tokenize_batch(self, lines: Sequence[str]) -> list[list[int]]:
        vocab, tokenize = self.vocab, self.tokenizer.tokenize
        ids = [[vocab[t] for t in tokenize(line)] for line in lines]
        memo = getattr(self.tokenizer, "_pieces_cache", None)
        if memo is not None and len(memo) > self.max_cached_words:
            memo.clear()
        return ids


@functools.lru_cache(maxsize=4)
def get_line_tokenizer(name: str, vocab_file: str, do_lower_case: bool):
    """The pluggable tokenization step: an object with `.vocab` and `.tokenize_batch(lines) -> ids`.

    "exact" is the original FullTokenizer; "fast" is `bert_tf.text.fast_tokenization.FastTokenizer`
    (ids identical by contract). Cached per process so pool workers load the vocab once.
    """
    try:
        if name == "exact":
            return ExactLineTokenizer(vocab_file, do_lower_case)
        if name == "fast":
            from bert_tf.text.fast_tokenization import FastTokenizer
            tok = FastTokenizer(vocab_file, do_lower_case)
            if not hasattr(tok, "vocab"):
                tok.vocab = tokenization.load_vocab(vocab_file)
            return tok
    except tokenization.VocabError as e:
        raise DataPrepError(f"--vocab_file: {e}") from None
    raise DataPrepError(f"--tokenizer={name!r}: expected 'exact' or 'fast'")


def load_vocab_checked(vocab_file: str) -> dict:
    """The vocab as {token: id}; a readable DataPrepError when it cannot be loaded."""
    try:
        return tokenization.load_vocab(vocab_file)
    except (tokenization.VocabError, OSError) as e:
        raise DataPrepError(f"--vocab_file: {e}") from None


def tokenize_documents(documents: Iterable[list[str]], tokenize_batch: Callable) -> list[Document]:
    """Tokenizes documents of lines; drops lines without tokens and documents left empty."""
    documents = list(documents)
    flat = tokenize_batch([line for doc in documents for line in doc])
    out, pos = [], 0
    for doc in documents:
        ids = [s for s in flat[pos:pos + len(doc)] if s]
        pos += len(doc)
        if ids:
            out.append(ids)
    return out


def _pool_tokenize(args: tuple) -> list[list[int]]:
    name, vocab_file, do_lower_case, lines = args
    return get_line_tokenizer(name, vocab_file, do_lower_case).tokenize_batch(lines)


def tokenize_lines_parallel(lines: list[str], tokenizer_name: str, vocab_file: str, do_lower_case: bool,
                            num_workers: int, chunk_lines: int = 2000,
                            min_parallel_lines: int = 200_000) -> list[list[int]]:
    """Tokenizes many lines in order, on `num_workers` processes (1 = in this process)."""
    # The fast tokenizer (TensorFlow) runs threads of its own and must not be forked: one big batch
    # here. Exact: each worker warms its own word cache, a loss below ~200k lines (measured).
    if num_workers <= 1 or len(lines) < min_parallel_lines or tokenizer_name != "exact":
        return get_line_tokenizer(tokenizer_name, vocab_file, do_lower_case).tokenize_batch(lines)
    chunks = [(tokenizer_name, vocab_file, do_lower_case, lines[i:i + chunk_lines])
              for i in range(0, len(lines), chunk_lines)]
    with multiprocessing.get_context("fork").Pool(num_workers) as pool:
        out: list[list[int]] = []
        for part in pool.imap(_pool_tokenize, chunks):
            out.extend(part)
    return out

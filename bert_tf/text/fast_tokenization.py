"""Bulk BERT tokenization with ids identical to the original `FullTokenizer`, at native speed.

`FastTokenizer(vocab_file, do_lower_case).tokenize_batch(lines)` returns the same ids as
`tokenization.FullTokenizer(...).tokenize` + `convert_tokens_to_ids` on every line. Two engines
serve it; `engine="auto"` takes the first available:

* "native" -- `bert_tf.text.native_wordpiece`: the original algorithm in C, driven by Unicode tables the
  exact tokenizer's own rules build, one part of the batch per core without the GIL. Lines it
  cannot decide alone (with do_lower_case: 'Σ' and 38 rare marks) take the exact path. Built at
  install time where a C compiler is present.
* "tf_text" -- tensorflow-text's C++ `FastWordpieceTokenizer` (end-to-end mode: it splits on its
  own whitespace and punctuation, then matches WordPiece), for installs without the extension.
  Its text normalisation (ICU NFKC_Casefold) is never used: it differs from the original on ~0.5%
  of wiki lines (ß→ss, ς→σ, …→..., ½, NBSP). Instead each line goes through one of three lanes:

1. ASCII lane -- lines holding only printable ASCII, tab, LF and CR (lower-cased by
   `tf.strings.lower`, which touches only A-Z, like `str.lower` on ASCII). The library and the
   original then agree by construction: ASCII punctuation and whitespace are the same in both, there
   is nothing to clean, strip or decompose, and a word's byte count is its character count, so
   `max_bytes_per_word=200` is the original's 200-character limit.
2. Normalised lane -- every other line, after each run of non-ASCII or control characters is
   rewritten in Python the original's way (lower-case; drop NUL, U+FFFD, Cc and Cf; whitespace to a
   space; spaces around CJK ideographs; NFD and drop Mn when lower-casing; spaces around Unicode
   punctuation; U+2028/U+2029, which the original's `str.split` splits on, become spaces). Runs are
   cached, so a repeated "é" or "–" costs one dict lookup. The library then only splits on spaces and
   ASCII punctuation. Its word limit is 200 bytes, not characters: a row where it emitted [UNK]
   and a word has more than 200 bytes is redone on lane 3 (rare: an [UNK] is needed first).
3. Exact lane (the original algorithm, `tokenization.FullTokenizer`) -- lines the library could get
   wrong, routed whole:
   - with do_lower_case, lines holding 'Σ' (U+03A3): Python lower-cases it to 'ς' or 'σ' depending
     on its neighbours, and the original decides that after dropping control characters;
   - lines whose normalised text holds a character the library classifies differently (its ICU
     tables vs Python's `unicodedata`): a word character it would split on, or a punctuation / CJK
     character it takes for whitespace. Each new character is probed once per tokenizer by
     tokenizing "a<c>a" (or " <c> ") with a 3-token vocab and counting words. Here that finds 36
     code points unassigned in Python's Unicode 14.0 but punctuation in the library (e.g. U+1B4E);
   - lines with a lone surrogate (not UTF-8 encodable), and the [UNK] rows of lane 2 above.

   On the shared wiki text 90.8% of lines take lane 1, 9.2% lane 2 and 2 lines (0.003%) lane 3. The
   library runs eagerly in worker threads, one part per core, while Python normalises the other lines.
"""
from __future__ import annotations

import concurrent.futures
import gc
import os
import re
from typing import Sequence

import numpy as np

from bert_tf.text import native_wordpiece
from bert_tf.text import tokenization

# TensorFlow is imported only by the tensorflow-text engine: the native engine needs neither, which
# saves ~3 s and ~500 MB per process (data prep workers).
tf = tf_text = None


def _import_tensorflow() -> None:
    global tf, tf_text
    if tf_text is None:
        import bert_tf._env  # noqa: F401  (quiet start-up)
        import tensorflow
        import tensorflow_text
        tf, tf_text = tensorflow, tensorflow_text

# Runs of anything but printable ASCII, tab, LF and CR. A long run (Chinese text) is cut again so
# that each CJK ideograph is cached on its own instead of whole sentences.
_SPECIAL_RUN_RE = re.compile("[^\\x20-\\x7e\\t\\n\\r]+")
_CJK_CLASS = tokenization._CJK_CLASS
_LONG_RUN_PIECE_RE = re.compile(f"[{_CJK_CLASS}]|[^{_CJK_CLASS}]+")
_LONG_RUN = 24
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CAPITAL_SIGMA = "\u03a3"
# Python's str.split() splits on these although the original's cleaning keeps them (Zl, Zp).
_SPLIT_ONLY_SPACES = str.maketrans({"\u2028": " ", "\u2029": " "})
_MAX_CHARS = tokenization.MAX_INPUT_CHARS_PER_WORD
_MAX_RUN_CACHE = 1 << 20
_CHUNK_LINES = 1 << 17


# Lanes run in worker threads (TensorFlow releases the GIL), cut in one part per core.
_SHARDS = max(1, min(4, os.cpu_count() or 1))
_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=_SHARDS, thread_name_prefix="fast-tokenizer")
    return _POOL


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\r"


def _all_printable(ascii_text: str) -> bool:
    """True when an ASCII string holds only printable characters, tab, LF and CR (C speed)."""
    return not ascii_text.encode("ascii").translate(None, _PRINTABLE_ASCII)


def _normalize_run(run: str, lower: bool) -> str:
    """The original's character-level BasicTokenizer steps on one run of non-ASCII characters.

    Returns the run with spaces where the original splits words, so that the line's words are then
    split exactly where the original splits them. Lower-casing a run alone equals lower-casing its
    word (only 'Σ' depends on neighbours, and lines with it go to the exact lane).
    """
    basic = tokenization.BasicTokenizer
    text = basic._tokenize_chinese_chars(basic._clean_text(run).translate(_SPLIT_ONLY_SPACES))
    if lower:
        text = basic._run_strip_accents(text.lower())
    return text.translate(tokenization._PUNCT_MAP)


def _is_standalone(char: str) -> bool:
    """True when the original makes `char` a token of its own (punctuation or CJK ideograph)."""
    return tokenization._is_punctuation(char) or tokenization._is_chinese_char(ord(char))


def library_vocab(vocab: dict[str, int]) -> list[str]:
    """Vocab list for tensorflow-text with the ids of `load_vocab` (which refuses duplicate tokens).

    Slots without a token of their own (blank lines) get a name containing brackets, which can
    never be matched because '[' is punctuation.
    """
    table = [f"[dup-{i}]" for i in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        if token:
            table[index] = token
    return table


class FastTokenizer:
    """Batch tokenizer with the original's ids; see the module docstring for how lines are routed."""

    ENGINES = ("auto", "native", "tf_text")

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True, engine: str = "auto"):
        if engine not in self.ENGINES:
            raise ValueError(f"engine must be one of {', '.join(self.ENGINES)}, not {engine!r}")
        if engine == "native" and not native_wordpiece.available():
            raise RuntimeError("engine='native' needs the C extension bert_tf.text._wordpiece, which was not "
                               "built (no C compiler when bert_tf was installed); use engine='auto'")
        if engine == "auto":
            engine = "native" if native_wordpiece.available() else "tf_text"
        self.engine = engine
        self.exact = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
        self.vocab_file = self.exact.vocab_file
        self.do_lower_case = do_lower_case
        self.vocab = self.exact.vocab
        self.inv_vocab = self.exact.inv_vocab
        if "[UNK]" not in self.vocab:
            raise tokenization.VocabError(f"vocab file {self.vocab_file} has no [UNK] token")
        self._unk_id = self.vocab["[UNK]"]
        self._shards = _SHARDS
        self._pool = _worker_pool()
        self.routed_to_exact = 0  # lines sent to the exact lane so far (for reports)
        if engine == "native":
            self._native = native_wordpiece.NativeWordpiece(self.vocab, self._unk_id, do_lower_case)
            return
        _import_tensorflow()
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            library_vocab(self.vocab), max_bytes_per_word=_MAX_CHARS, token_out_type=tf.int32,
            unknown_token="[UNK]")
        # A vocab that makes every word one token ("[UNK]" or "a"), so probes count words.
        self._word_counter = tf_text.FastWordpieceTokenizer(
            ["[UNK]", "a", "##a"], max_bytes_per_word=64, token_out_type=tf.int32, unknown_token="[UNK]")
        self._run_cache: dict[str, str] = {}
        self._unprobed: set[str] = set()  # non-ASCII chars of newly normalised runs
        self._char_ok: dict[str, bool] = {}  # char -> tensorflow-text treats it as the original does
        self._bad_chars: set[str] = set()  # the chars with False above
        self._bad_re: re.Pattern | None = None  # matches any of them (rebuilt when the set grows)
        self._bad_re_for = 0

    def _lane(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(flat ids, row splits) of lines from tensorflow-text; runs eagerly in the calling thread.

        Eager, not a tf.function: the two kernels then run in this worker thread instead of being
        handed to TensorFlow's inter-op pool, which costs ~10% more CPU here.
        """
        text = tf.constant(texts, tf.string)
        if self.do_lower_case:  # ASCII-only lower-casing (non-ASCII runs were lower-cased in Python)
            text = tf.strings.lower(text)
        ragged = self._wordpiece.tokenize(text)
        return ragged.flat_values.numpy(), ragged.row_splits.numpy()

    # ---- public API -------------------------------------------------------------------------

    def tokenize_batch(self, lines: Sequence[str]) -> list[list[int]]:
        """Token ids of each line, identical to the original FullTokenizer's."""
        out: list[list[int]] = []
        for start in range(0, len(lines), _CHUNK_LINES):
            chunk = lines[start:start + _CHUNK_LINES]
            rows: list = [None] * len(chunk)
            for idx, lane in self._tokenize_chunk(chunk):
                # Converting the ASCII lane here overlaps the wide lane's run in the worker threads.
                lists = _ragged_to_lists(*lane)
                if len(idx) == len(chunk):
                    rows = lists  # every line in this lane, in order
                else:
                    for i, ids in zip(idx, lists):
                        rows[i] = ids
            out.extend(rows)
        return out

    def tokenize_batch_arrays(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of all lines as one int32 array plus int64 row splits (line i is flat[s[i]:s[i+1]]).

        The form input pipelines want (`tf.RaggedTensor.from_row_splits`), with no per-token Python.
        """
        parts = []
        for start in range(0, len(lines), _CHUNK_LINES):
            n = len(lines[start:start + _CHUNK_LINES])
            lanes = list(self._tokenize_chunk(lines[start:start + _CHUNK_LINES]))
            parts.append(lanes[0][1] if len(lanes) == 1 else _merge_lanes(n, [(i, *lane) for i, lane in lanes]))
        if len(parts) == 1:
            return parts[0]
        return _concat_ragged(parts) if parts else (np.zeros(0, np.int32), np.zeros(1, np.int64))

    def tokenize_batch_tokens(self, lines: Sequence[str]) -> list[list[str]]:
        """Token strings of each line (ids mapped back through the vocab)."""
        inv = self.inv_vocab
        return [[inv[i] for i in ids] for ids in self.tokenize_batch(lines)]

    def tokenize(self, text: str | bytes) -> list[str]:
        """Token strings of one text (convenience; batch calls are much faster)."""
        return self.tokenize_batch_tokens([tokenization.convert_to_unicode(text)])[0]

    def convert_tokens_to_ids(self, tokens):
        return self.exact.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids):
        return self.exact.convert_ids_to_tokens(ids)

    # ---- routing ----------------------------------------------------------------------------

    def _tokenize_chunk(self, lines: Sequence[str]):
        """Yields (line indices, (flat ids, row splits)) for each lane of the engine."""
        lines = [x if isinstance(x, str) else tokenization.convert_to_unicode(x) for x in lines]
        if self.engine == "native":
            yield from self._native_lanes(lines)
        else:
            yield from self._tf_text_lanes(lines)

    def _native_lanes(self, lines: list[str]):
        """The C engine on one part per core, then the exact path for the rows it hands back."""
        step = max(1, -(-len(lines) // self._shards))
        starts = range(0, max(len(lines), 1), step)
        parts = list(self._pool.map(self._native.tokenize, [lines[k:k + step] for k in starts]))
        flat, splits = _concat_ragged([(f, s) for f, s, _ in parts])
        exact_idx = [k + i for k, (_, _, rows) in zip(starts, parts) for i in rows]
        if not exact_idx:
            yield range(len(lines)), (flat, splits)
            return
        keep = np.ones(len(lines), bool)
        keep[exact_idx] = False
        yield np.flatnonzero(keep).tolist(), _keep_rows(flat, splits, keep)
        yield exact_idx, self._exact_lane(lines, exact_idx)

    def _exact_lane(self, lines: list[str], idx: list[int]) -> tuple[np.ndarray, np.ndarray]:
        exact = self.exact
        self.routed_to_exact += len(idx)
        return _ragged_from_lists([exact.convert_tokens_to_ids(exact.tokenize(lines[i])) for i in idx])

    def _tf_text_lanes(self, lines: list[str]):
        """The ASCII, normalised and exact lanes of the tensorflow-text engine."""
        n = len(lines)
        plain = [x.isascii() for x in lines]  # O(1) per str in CPython
        ascii_idx = [i for i, p in enumerate(plain) if p]
        ascii_text = [lines[i] for i in ascii_idx] if len(ascii_idx) < n else lines
        special_idx = [i for i, p in enumerate(plain) if not p]
        if not _all_printable("\n".join(ascii_text)):  # ASCII control characters are rare
            clean = [_all_printable(x) for x in ascii_text]
            special_idx = sorted(special_idx + [i for i, ok in zip(ascii_idx, clean) if not ok])
            ascii_idx = [i for i, ok in zip(ascii_idx, clean) if ok]
            ascii_text = [x for x, ok in zip(ascii_text, clean) if ok]
        ascii_parts = self._submit(ascii_text)
        if len(ascii_idx) == n:
            yield ascii_idx, _concat_ragged([p.result() for p in ascii_parts])
            return
        wide_idx, wide_text, exact_idx = self._route_special(lines, special_idx)
        wide_parts = self._submit(wide_text)
        yield ascii_idx, _concat_ragged([p.result() for p in ascii_parts])
        flat, splits = _concat_ragged([p.result() for p in wide_parts])
        redo = self._long_word_rows(wide_text, flat, splits)
        if redo.any():
            exact_idx = sorted(exact_idx + [i for i, r in zip(wide_idx, redo) if r])
            wide_idx = [i for i, r in zip(wide_idx, redo) if not r]
            flat, splits = _keep_rows(flat, splits, ~redo)
        yield wide_idx, (flat, splits)
        yield exact_idx, self._exact_lane(lines, exact_idx)

    def _submit(self, texts: list[str]) -> list:
        """Starts the library on `texts` in the worker threads, one part per core."""
        step = max(1, -(-len(texts) // self._shards))
        return [self._pool.submit(self._lane, texts[k:k + step]) for k in range(0, max(len(texts), 1), step)]

    def _long_word_rows(self, texts: list[str], flat: np.ndarray, splits: np.ndarray) -> np.ndarray:
        """Rows whose [UNK] may come from the library's byte limit on a word of <= 200 characters.

        The library's limit is 200 UTF-8 bytes, the original's 200 characters: on normalised text
        they differ only for a word of more than 200 bytes, which the library makes [UNK]. So only
        rows holding an [UNK] need a look.
        """
        redo = np.zeros(len(texts), bool)
        unk_rows = np.unique(np.searchsorted(splits, np.flatnonzero(flat == self._unk_id), side="right") - 1)
        for row in unk_rows.tolist():
            redo[row] = _has_long_word(texts[row])
        return redo

    def _route_special(self, lines, special_idx):
        """Normalises the non-ASCII lines; returns (wide lane indices, their texts, exact lane indices)."""
        wide_idx, wide_text, exact_idx = [], [], []
        sigma = _CAPITAL_SIGMA if self.do_lower_case else None
        for i in special_idx:
            line = lines[i]
            if sigma and sigma in line:
                exact_idx.append(i)
            else:
                wide_idx.append(i)
                wide_text.append(self._normalize_line(line))
        if self._unprobed:
            self._probe(self._unprobed)
            self._unprobed = set()
        if not self._bad_chars:
            return wide_idx, wide_text, exact_idx
        bad = self._bad_chars_re()
        keep_idx, keep_text = [], []
        for i, text in zip(wide_idx, wide_text):
            if bad.search(text):
                exact_idx.append(i)
            else:
                keep_idx.append(i)
                keep_text.append(text)
        return keep_idx, keep_text, exact_idx

    def _bad_chars_re(self) -> re.Pattern:
        """A pattern matching any char that tensorflow-text treats unlike the original (cached)."""
        if self._bad_re is None or self._bad_re_for != len(self._bad_chars):
            self._bad_re = re.compile("[" + "".join(map(re.escape, sorted(self._bad_chars))) + "]")
            self._bad_re_for = len(self._bad_chars)
        return self._bad_re

    def _normalize_line(self, line: str) -> str:
        """Rewrites each non-ASCII (or control) run of `line` the original's way (runs are cached)."""
        cache = self._run_cache
        lower = self.do_lower_case

        def replace(match, piece=False):
            run = match.group()
            hit = cache.get(run)
            if hit is None:
                if len(run) > _LONG_RUN and not piece:
                    return _LONG_RUN_PIECE_RE.sub(lambda m: replace(m, piece=True), run)
                hit = _normalize_run(run, lower)
                self._unprobed.update(c for c in hit if not c.isascii())
                if len(cache) >= _MAX_RUN_CACHE:
                    cache.clear()
                cache[run] = hit
            return hit

        return _SPECIAL_RUN_RE.sub(replace, line)

    def _probe(self, chars: set) -> None:
        """Learns, for each new char, whether tensorflow-text splits words around it as the original."""
        new = sorted(c for c in chars if c not in self._char_ok)
        for c in new:
            if _SURROGATE_RE.match(c):
                self._char_ok[c] = False  # not encodable as UTF-8
                self._bad_chars.add(c)
        new = [c for c in new if c not in self._char_ok]
        if not new:
            return
        probes = [f" {c} " if _is_standalone(c) else f"a{c}a" for c in new]
        counts = self._word_counter.tokenize(tf.constant(probes)).row_lengths().numpy()
        for c, n in zip(new, counts):
            self._char_ok[c] = bool(n == 1)  # one word (or one punctuation token) in both
        self._bad_chars.update(c for c in new if not self._char_ok[c])


def _has_long_word(text: str) -> bool:
    """True when a whitespace-separated word of `text` has more than 200 UTF-8 bytes."""
    return max(len(w.encode("utf-8", "surrogatepass")) for w in text.split()) > _MAX_CHARS


def _ragged_to_lists(flat: np.ndarray, splits: np.ndarray) -> list[list[int]]:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small ints: the cyclic GC would rescan them for nothing
    try:
        flat, splits = flat.tolist(), splits.tolist()
        return [flat[a:b] for a, b in zip(splits, splits[1:])]
    finally:
        if gc_was_enabled:
            gc.enable()


def _ragged_from_lists(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    splits = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=splits[1:])
    flat = np.fromiter((t for r in rows for t in r), np.int32, count=int(splits[-1]))
    return flat, splits


def _concat_ragged(parts) -> tuple[np.ndarray, np.ndarray]:
    """Concatenates (flat, row_splits) pairs row-wise."""
    flat = np.concatenate([p[0] for p in parts]).astype(np.int32, copy=False)
    offsets = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
    splits = np.concatenate([parts[0][1][:1]] + [p[1][1:] + off for p, off in zip(parts, offsets)])
    return flat, splits.astype(np.int64, copy=False)


def _keep_rows(flat: np.ndarray, splits: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ragged rows where `keep` is True."""
    lengths = np.diff(splits)
    out_splits = np.zeros(int(keep.sum()) + 1, np.int64)
    np.cumsum(lengths[keep], out=out_splits[1:])
    return flat[np.repeat(keep, lengths)], out_splits


def _merge_lanes(n: int, lanes) -> tuple[np.ndarray, np.ndarray]:
    """Puts the rows of each lane (row indices, flat, splits) back in line order, vectorised."""
    lengths = np.zeros(n, np.int64)
    for idx, _, splits in lanes:
        lengths[np.asarray(idx, np.int64)] = np.diff(splits)
    out_splits = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=out_splits[1:])
    out_flat = np.empty(int(out_splits[-1]), np.int32)
    for idx, flat, splits in lanes:
        idx = np.asarray(idx, np.int64)
        row_lengths = np.diff(splits)
        shift = np.repeat(out_splits[idx] - splits[:-1], row_lengths)
        out_flat[shift + np.arange(len(flat))] = flat
    return out_flat, out_splits

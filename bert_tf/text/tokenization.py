"""The original BERT tokenizer (`FullTokenizer`), with exactly the original's semantics.

Public API kept for people porting code from google-research/bert:
`FullTokenizer(vocab_file, do_lower_case)`, `BasicTokenizer`, `WordpieceTokenizer`, `load_vocab`,
`convert_to_unicode`, `printable_text`, `validate_case_matches_checkpoint`.

Unicode policy: `str` input is used as is; `bytes` must be UTF-8. The original silently dropped
undecodable bytes (`decode("utf-8", "ignore")`); we raise `TokenizerInputError` naming the offending
byte offset instead, because silently changed training text is worse than a clear stop.

Speed without changing a single output: the per-character rules (cleaning, accent stripping,
punctuation splitting) run as lazily filled `str.translate` tables, and `FullTokenizer` caches the
WordPiece split of each word (a pure function of the word). For bulk work use
`bert_tf.text.fast_tokenization.FastTokenizer`, which gives the same ids much faster.
"""
from __future__ import annotations

import collections
import os
import re
import unicodedata
from typing import Iterable
from bert_tf.errors import BertTfError

# The original's limit (Hugging Face uses 100); measured after lower-casing and accent stripping.
MAX_INPUT_CHARS_PER_WORD = 200
_MAX_CACHED_WORDS = 1 << 20


class TokenizerInputError(BertTfError, ValueError):
    """Text given to the tokenizer cannot be decoded."""


class VocabError(BertTfError, ValueError):
    """A vocab file is missing, empty or not a vocab, or a vocabulary cannot be learned with the settings or
    input given (bert_tf.text.vocab_learning); the message names the flag or file."""


def convert_to_unicode(text: str | bytes) -> str:
    """Returns `text` as `str`; bytes must be valid UTF-8 (see module docstring)."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TokenizerInputError(
                f"tokenizer input is not valid UTF-8 at byte {e.start}: {text[max(0, e.start - 20):e.end + 20]!r}"
            ) from None
    raise TypeError(f"Unsupported string type: {type(text).__name__}")


def printable_text(text: str | bytes) -> str:
    """Text suitable for logging (the original's helper)."""
    return convert_to_unicode(text)


def load_vocab(vocab_file: str | os.PathLike) -> "collections.OrderedDict[str, int]":
    """Reads a vocab file (one token per line, id = line index) into an ordered dict.

    Like the original, each line is stripped of surrounding whitespace. A token on two lines is
    refused (VocabError naming both lines): the original silently kept the later id, leaving the
    earlier id with no token (`convert_ids_to_tokens` fails on it) and the model's row for it unused.
    No released vocab has one (the three in the shared data have none). Blank lines are kept as
    the original keeps them: no text gives an empty token, so they never match.
    """
    path = os.fspath(vocab_file)
    if not os.path.isfile(path):
        raise VocabError(f"vocab file not found: {path}")
    try:
        with open(path, "r", encoding="utf-8", newline="\n") as f:
            lines = f.read().split("\n")
    except UnicodeDecodeError as e:
        raise VocabError(f"vocab file {path} is not UTF-8 text (byte {e.start}); is it a vocab file?") from None
    if lines and lines[-1] == "":
        lines.pop()  # the final newline does not start another token
    if not lines:
        raise VocabError(f"vocab file {path} is empty")
    vocab: "collections.OrderedDict[str, int]" = collections.OrderedDict()
    for index, line in enumerate(lines):
        token = line.strip()
        if "\x00" in token:
            raise VocabError(f"vocab file {path} line {index + 1} holds a NUL byte; is it a vocab file?")
        if token and token in vocab:
            raise VocabError(f"vocab file {path}: token {token!r} is on line {vocab[token] + 1} and again on "
                             f"line {index + 1}; each token must appear once")
        vocab[token] = index
    return vocab


def whitespace_tokenize(text: str) -> list[str]:
    """Strips and splits on whitespace, as the original."""
    text = text.strip()
    return text.split() if text else []


def _is_whitespace(char: str) -> bool:
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # All non-letter/number ASCII counts as punctuation, as in the original (e.g. "^", "$", "`").
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


# The original's "CJK Unified Ideographs" ranges; Japanese kana and Hangul are not in them.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
_CJK_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in CJK_RANGES)
_CJK_RE = re.compile(f"([{_CJK_CLASS}])")


def _is_chinese_char(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


class _CharMap(dict):
    """A `str.translate` table filled the first time each code point is seen, from a per-char rule.

    Same result as applying the rule char by char in Python, at the C speed of `str.translate`.
    """

    def __init__(self, rule):
        super().__init__()
        self._rule = rule

    def __missing__(self, cp: int):
        value = self[cp] = self._rule(chr(cp))
        return value


def _clean_char(char: str) -> str | None:
    if char in "\x00\ufffd" or _is_control(char):
        return None
    return " " if _is_whitespace(char) else char


# The original's per-character rules as translate tables: cleaning (drop NUL, U+FFFD and control
# characters; whitespace -> " "), accent stripping after NFD (drop Mn), punctuation splitting.
_CLEAN_MAP = _CharMap(_clean_char)
_ACCENT_MAP = _CharMap(lambda c: None if unicodedata.category(c) == "Mn" else c)
_PUNCT_MAP = _CharMap(lambda c: f" {c} " if _is_punctuation(c) else c)


class BasicTokenizer:
    """Cleans text, splits on whitespace and punctuation, optionally lower-cases and strips accents."""

    def __init__(self, do_lower_case: bool = True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str | bytes) -> list[str]:
        text = self._clean_text(convert_to_unicode(text))
        # Applied to cased and uncased models alike (the original added it for the multilingual
        # and Chinese models; English text has almost no CJK characters anyway).
        text = self._tokenize_chinese_chars(text)
        if self.do_lower_case:
            # The original does this word by word; on the whole text it is the same, because
            # whitespace never decomposes, never carries accents and ends the context of 'Σ'.
            text = self._run_strip_accents(text.lower())
        # Spaces around each punctuation character, then split: the original's
        # `_run_split_on_punc` on every word followed by `whitespace_tokenize`.
        return text.translate(_PUNCT_MAP).split()

    @staticmethod
    def _run_strip_accents(text: str) -> str:
        if text.isascii():
            return text
        return unicodedata.normalize("NFD", text).translate(_ACCENT_MAP)

    @staticmethod
    def _run_split_on_punc(text: str) -> list[str]:
        output: list[list[str]] = []
        start_new_word = True
        for char in text:
            if _is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    @staticmethod
    def _tokenize_chinese_chars(text: str) -> str:
        return text if text.isascii() else _CJK_RE.sub(r" \1 ", text)

    @staticmethod
    def _clean_text(text: str) -> str:
        return text.translate(_CLEAN_MAP)


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece with `##` continuation pieces."""

    def __init__(self, vocab, unk_token: str = "[UNK]", max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str | bytes) -> list[str]:
        output: list[str] = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self._tokenize_word(token))
        return output

    def _tokenize_word(self, word: str) -> list[str]:
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        vocab = self.vocab
        pieces = []
        start, n = 0, len(word)
        while start < n:
            end = n
            piece = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces


class FullTokenizer:
    """End-to-end tokenization: BasicTokenizer then WordPiece (the original's `FullTokenizer`)."""

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True):
        self.vocab_file = os.fspath(vocab_file)
        self.do_lower_case = do_lower_case
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self._pieces_cache: dict[str, list[str]] = {}

    def tokenize(self, text: str | bytes) -> list[str]:
        wordpiece = self.wordpiece_tokenizer._tokenize_word
        cache = self._pieces_cache
        output: list[str] = []
        for token in self.basic_tokenizer.tokenize(text):
            pieces = cache.get(token)
            if pieces is None:  # WordPiece is a pure function of the word: remember its result
                if len(cache) >= _MAX_CACHED_WORDS:
                    cache.clear()
                pieces = cache[token] = wordpiece(token)
            output.extend(pieces)
        return output

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return convert_by_vocab(self.inv_vocab, ids)


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (the original's helper)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


# Released checkpoints whose casing is known: name -> do_lower_case they need.
_KNOWN_CHECKPOINT_CASING = {
    "uncased_L-24_H-1024_A-16": True, "uncased_L-12_H-768_A-12": True,
    "multilingual_L-12_H-768_A-12": True, "chinese_L-12_H-768_A-12": True,
    "cased_L-12_H-768_A-12": False, "cased_L-24_H-1024_A-16": False,
    "multi_cased_L-12_H-768_A-12": False,
    "wwm_uncased_L-24_H-1024_A-16": True, "wwm_cased_L-24_H-1024_A-16": False,
}


def validate_case_matches_checkpoint(do_lower_case: bool, init_checkpoint: str | None) -> None:
    """Raises ValueError when `do_lower_case` contradicts a released checkpoint's name.

    Only the names of Google's released checkpoints are known; anything else passes silently.
    """
    if not init_checkpoint:
        return
    m = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt", init_checkpoint.replace(os.sep, "/"))
    if m is None:
        return
    model_name = m.group(1)
    expected = _KNOWN_CHECKPOINT_CASING.get(model_name)
    if expected is None or expected == do_lower_case:
        return
    flag_value, needed = ("True", "False") if do_lower_case else ("False", "True")
    kind = "cased" if do_lower_case else "uncased"
    raise TokenizerInputError(
        f"You passed do_lower_case={flag_value} but init_checkpoint {init_checkpoint!r} is the "
        f"{kind} model `{model_name}`, which needs do_lower_case={needed}. Pass "
        f"--do_lower_case={needed}, or rename the checkpoint directory if it is not that model."
    )

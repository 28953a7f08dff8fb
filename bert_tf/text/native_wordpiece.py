"""The fast tokenizer's native engine: the original BasicTokenizer + WordPiece in C, driven by tables.

`bert_tf/text/_wordpiece.c` walks each line's code points through a class table (word character,
dropped, space, punctuation, CJK ideograph, normalised, or "take the exact path") and matches
WordPiece greedily with hash lookups, without the GIL so that threads run in parallel. Every
Unicode decision is made here, once per process, by the exact tokenizer's own rules on Python's
`unicodedata`, so the engine cannot drift from `tokenization.FullTokenizer`:

- cleaning: NUL, U+FFFD, Cc and Cf are dropped; Zs, tab, LF, CR are spaces, and so are the
  characters `str.split` splits on although the cleaning keeps them (U+2028, U+2029);
- CJK ideographs (the original's ranges) are words of their own;
- with do_lower_case each other character is replaced by `strip_accents(char.lower())` (NFD, Mn
  dropped); doing that per character equals doing it per word except for 'Σ', whose lower case
  depends on its neighbours, and 38 marks (viramas and the like: combining class > 0 but not Mn)
  that NFD may reorder and does not strip; lines with those take the exact path;
- punctuation is classified on the normalised characters, as the original splits after normalising.

The extension is optional: built where a C compiler is present (`pip install` does it), else
`available()` is False and `FastTokenizer` uses tensorflow-text instead.
"""
from __future__ import annotations

import functools
import unicodedata

import numpy as np

from bert_tf.text import tokenization

try:
    from bert_tf.text import _wordpiece
except ImportError:  # no compiler at install time: the tensorflow-text engine serves instead
    _wordpiece = None

# Character classes; the numbers are the C enum's.
WORD, DROP, SPACE, PUNCT, CJK, MAPPED, FALLBACK, UPPER = range(8)
_NUM_CODE_POINTS = 0x110000
_PUNCT_BIT = 0x80000000
_CAPITAL_SIGMA = 0x03A3


def available() -> bool:
    """True when the C extension was built and imports."""
    return _wordpiece is not None


def _base_class(char: str) -> int | None:
    """The class the original gives `char` before any normalisation, or None for a word character."""
    cp = ord(char)
    if cp in (0, 0xFFFD) or tokenization._is_control(char):
        return DROP
    if tokenization._is_whitespace(char) or char.isspace():
        return SPACE
    if tokenization._is_chinese_char(cp):
        return CJK
    return None


def _unsafe_to_normalise_alone(char: str) -> bool:
    """True when lower-casing + NFD + stripping `char` alone may differ from doing it in its word."""
    if ord(char) == _CAPITAL_SIGMA:
        return True
    decomposed = unicodedata.normalize("NFD", char.lower())
    if any(unicodedata.combining(c) and unicodedata.category(c) != "Mn" for c in decomposed):
        return True  # NFD reorders marks across characters; only stripped (Mn) ones are harmless
    # Whitespace or control characters made by normalising would be split on / kept differently.
    return any(c.isspace() or _base_class(c) in (DROP, SPACE) for c in decomposed)


@functools.lru_cache(maxsize=2)
def unicode_tables(do_lower_case: bool) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """(class per code point, mapped code points, their offsets, normalised outputs) for the engine.

    About a second of Python per process and casing; cached.
    """
    classes = bytearray(_NUM_CODE_POINTS)
    mapped: list[int] = []
    offsets = [0]
    outputs: list[int] = []
    for cp in range(_NUM_CODE_POINTS):
        char = chr(cp)
        category = unicodedata.category(char)
        if category in ("Cn", "Co", "Cs"):  # unassigned, private use, surrogates: nothing to normalise
            classes[cp] = CJK if tokenization._is_chinese_char(cp) else WORD  # the CJK ranges hold some
            continue
        cls = _base_class(char)
        if cls in (DROP, SPACE):
            classes[cp] = cls
            continue
        normalised = char
        if do_lower_case:
            if _unsafe_to_normalise_alone(char):
                classes[cp] = FALLBACK
                continue
            normalised = tokenization.BasicTokenizer._run_strip_accents(char.lower())
        if normalised != char:
            mapped.append(cp)
            outputs.extend(ord(c) | (_PUNCT_BIT if tokenization._is_punctuation(c) else 0) for c in normalised)
            offsets.append(len(outputs))
            classes[cp] = CJK if cls == CJK else MAPPED
        elif cls == CJK:
            classes[cp] = CJK
        elif tokenization._is_punctuation(char):
            classes[cp] = PUNCT
        if do_lower_case and 0x41 <= cp <= 0x5A:
            classes[cp] = UPPER  # A-Z inline in C instead of a mapping lookup
    return (bytes(classes), np.asarray(mapped, np.uint32), np.asarray(offsets, np.uint32),
            np.asarray(outputs, np.uint32))


class NativeWordpiece:
    """One engine for a vocab and casing; `tokenize` may be called from several threads at once."""

    def __init__(self, vocab: dict[str, int], unk_id: int, do_lower_case: bool):
        if _wordpiece is None:
            raise RuntimeError("bert_tf.text._wordpiece is not built (no C compiler at install time)")
        classes, cps, offsets, outputs = unicode_tables(do_lower_case)
        tokens = [(token.encode("utf-8", "surrogatepass"), index) for token, index in vocab.items()]
        self._engine = _wordpiece.new_engine(tokens, unk_id, classes, cps.tobytes(), offsets.tobytes(),
                                             outputs.tobytes())

    def tokenize(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(flat int32 ids, int64 row splits, rows left empty for the exact path) of `lines`."""
        flat, splits, exact_rows = _wordpiece.tokenize(self._engine, lines)
        return np.frombuffer(flat, np.int32), np.frombuffer(splits, np.int64), exact_rows

"""The original BasicTokenizer as TensorFlow ops, driven by tables built from the exact tokenizer's rules.

tensorflow-text normalises with ICU (NFKC_Casefold: ß→ss, ς→σ, …→..., ½→1/2, NBSP→space) and classifies
characters by its own ICU/RE2 tables, of other Unicode versions than Python's `unicodedata`; alone it
differs from the original on 0.3% (uncased) to 0.9% (cased) of wiki lines (docs/benchmarks.md). So
nothing here asks a library what a character is: at export time every code point is classified and
mapped by the rules of `bert_tf.text.tokenization` itself (same Python, same `unicodedata`), and the
graph only looks code points up in those tables (`tf.searchsorted` over ranges) and does integer
arithmetic, in the original's order:

1. decode UTF-8 (invalid input is an error, as in `convert_to_unicode`);
2. clean: drop NUL, U+FFFD, Cc and Cf but tab/LF/CR; whitespace (and U+2028/U+2029, on which the
   original's `str.split` splits) separates words;
3. with do_lower_case: Python's `str.lower` rule for 'Σ' (final sigma: after a cased letter, skipping
   case-ignorable characters, and not before one), decided on the cleaned text as the original
   does; then each code point becomes NFD(lower(c)) without Mn (table of the ~16,000 that change);
4. words: maximal runs of other characters; each punctuation character (ASCII 33-47, 58-64, 91-96,
   123-126 and Unicode P*) and each CJK ideograph is a word of its own.

Lines of printable ASCII (with tab, LF, CR) skip all that: nothing in them is dropped or decomposed,
lower-casing touches A-Z only, so `tf.strings.lower` and an RE2 split on the same ASCII classes give
the same words about 5x faster (checked against the tables when they are built).

One residual, by construction: NFD also reorders adjacent combining marks by combining class. Marks of
category Mn are dropped anyway, but 25 non-starters are not Mn (e.g. Balinese U+1B44, Hangul tone marks
U+302E/F, musical stems U+1D165); two of them with different classes in a row, out of canonical order,
would keep their input order here. The word would then differ, its ids only with a vocab holding such
marks (none of the shared uncased, cased and Chinese vocabs does: such words are [UNK] either way).
"""
from __future__ import annotations

import dataclasses
import functools
import unicodedata

import numpy as np

from bert_tf._env import tf  # TensorFlow, imported quietly
import tensorflow_text as tf_text

from bert_tf.errors import BertTfError
from bert_tf.text import tokenization

# Classes of a code point; STANDALONE characters are words of their own (punctuation, CJK ideographs).
DROP, SPACE, WORD, STANDALONE = 0, 1, 2, 3
# Python's final-sigma context classes (Objects/unicodeobject.c, handle_capital_sigma).
OTHER, IGNORABLE, CASED = 0, 1, 2
CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
_SIZE = 0x110000
# Lines made only of these take the ASCII lane (printable ASCII, tab, LF, CR).
_PLAIN_ASCII_CODES = [0x09, 0x0A, 0x0D] + list(range(0x20, 0x7F))
_PLAIN_ASCII = "[\\x{20}-\\x{7e}\\t\\n\\r]*"


class NormalizationTableError(BertTfError, RuntimeError):
    """This Python's Unicode data breaks an assumption the in-graph tokenizer relies on."""


@dataclasses.dataclass(frozen=True)
class Tables:
    """Range tables (start code points, values) and the expansion table of one casing mode."""

    do_lower_case: bool
    class_starts: np.ndarray
    class_values: np.ndarray
    sigma_starts: np.ndarray
    sigma_values: np.ndarray
    expand_keys: np.ndarray  # sorted code points that lower-casing + NFD + dropping Mn changes
    expand_splits: np.ndarray  # expand_keys[i] becomes expand_values[expand_splits[i]:expand_splits[i + 1]]
    expand_values: np.ndarray
    ascii_space: str  # RE2 classes of the ASCII lane's separators and of its one-character words
    ascii_standalone: str


def _assigned() -> list[int]:
    """Code points with a Unicode category other than unassigned, private use and surrogate."""
    return [cp for cp in range(_SIZE) if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]


def _char_classes(assigned: list[int]) -> np.ndarray:
    """DROP / SPACE / WORD / STANDALONE of every code point, by the original's `_clean_text` rules."""
    classes = np.full(_SIZE, WORD, np.int8)
    for cp in assigned:
        char = chr(cp)
        if cp in (0, 0xFFFD) or tokenization._is_control(char):
            classes[cp] = DROP
        elif tokenization._is_whitespace(char) or char.isspace():
            classes[cp] = SPACE
        elif tokenization._is_punctuation(char) or tokenization._is_chinese_char(cp):
            classes[cp] = STANDALONE
    for lo, hi in tokenization.CJK_RANGES:  # unassigned code points in the ranges count too
        classes[lo:hi + 1] = np.where(classes[lo:hi + 1] == WORD, STANDALONE, classes[lo:hi + 1])
    return classes


def _sigma_classes(assigned: list[int]) -> np.ndarray:
    """IGNORABLE / CASED / OTHER as Python's `str.lower` sees them, read off its own results for 'Σ'.

    'xΣ' gives 'ς' iff x is cased and not case-ignorable; 'AxΣ' iff x is cased or case-ignorable.
    """
    classes = np.full(_SIZE, OTHER, np.int8)
    for cp in assigned:
        char = chr(cp)
        if (char + "\u03a3").lower()[-1] == "\u03c2":
            classes[cp] = CASED
        elif ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
            classes[cp] = IGNORABLE
    return classes


def _stripped_lower(char: str) -> str:
    """The original's lower-casing and accent stripping of one character."""
    decomposed = unicodedata.normalize("NFD", char.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def _expansions(assigned: list[int], classes: np.ndarray) -> dict[int, str]:
    """Kept characters that lower-casing and accent stripping change, with what they become."""
    out = {}
    for cp in assigned:
        char = chr(cp)
        if classes[cp] in (WORD, STANDALONE) and cp != CAPITAL_SIGMA:
            new = _stripped_lower(char)
            if new != char:
                out[cp] = new
    return out


def _check(classes: np.ndarray, sigma: np.ndarray | None, expansions: dict[int, str]) -> None:
    """What the graph assumes: outputs are kept characters, CJK-ness survives, 'Σ' is cased."""
    for cp, new in expansions.items():
        for char in new:
            cjk = tokenization._is_chinese_char(ord(char))
            if classes[ord(char)] not in (WORD, STANDALONE) or cjk != tokenization._is_chinese_char(cp):
                raise NormalizationTableError(f"U+{cp:04X} lower-cases to U+{ord(char):04X}, which the "
                                              "in-graph tokenizer cannot classify after the fact")
    if sigma is not None and any(sigma[c] != CASED for c in (CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA)):
        raise NormalizationTableError("this Python's str.lower does not treat Greek sigma as cased")


def _check_ascii(classes: np.ndarray, expansions: dict[int, str], do_lower_case: bool) -> None:
    """What the ASCII lane assumes: nothing to drop, and lower-casing changes A-Z only (as tf.strings.lower)."""
    for cp in _PLAIN_ASCII_CODES:
        lowered = chr(cp + 32) if do_lower_case and 0x41 <= cp <= 0x5A else chr(cp)
        if classes[cp] == DROP or expansions.get(cp, chr(cp)) != lowered:
            raise NormalizationTableError(f"U+{cp:04X} breaks the ASCII lane's assumptions")


def _ascii_class(classes: np.ndarray, kind: int) -> str:
    """An RE2 character class of the plain ASCII characters of class `kind`."""
    return "[" + "".join(f"\\x{{{cp:02x}}}" for cp in _PLAIN_ASCII_CODES if classes[cp] == kind) + "]"


def _ranges(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start code points, value of each range) of a per-code-point array."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(values)) + 1]).astype(np.int32)
    return starts, values[starts].astype(np.int32)


@functools.lru_cache(maxsize=2)
def tables(do_lower_case: bool) -> Tables:
    """The tables of one casing mode (a few seconds of Python; cached per process)."""
    assigned = _assigned()
    classes = _char_classes(assigned)
    sigma = _sigma_classes(assigned) if do_lower_case else None
    expansions = _expansions(assigned, classes) if do_lower_case else {}
    _check(classes, sigma, expansions)
    _check_ascii(classes, expansions, do_lower_case)
    if sigma is None:
        sigma = np.zeros(_SIZE, np.int8)
    keys = np.array(sorted(expansions), np.int32)
    values = [ord(c) for k in keys.tolist() for c in expansions[k]]
    splits = np.concatenate([[0], np.cumsum([len(expansions[k]) for k in keys.tolist()])]).astype(np.int32)
    return Tables(do_lower_case, *_ranges(classes), *_ranges(sigma), keys, splits,
                  np.array(values + [0], np.int32),  # one spare value: gathers never see an empty table
                  _ascii_class(classes, SPACE), _ascii_class(classes, STANDALONE))


# ---- graph side: only TensorFlow ops on the tables above ----------------------------------------


def _lookup(code_points: tf.Tensor, starts: np.ndarray, values: np.ndarray) -> tf.Tensor:
    """The value of the range holding each code point."""
    index = tf.searchsorted(tf.constant(starts), code_points, side="right") - 1
    return tf.gather(tf.constant(values), index)


def _final_sigma(chars: tf.Tensor, rows: tf.Tensor, t: Tables) -> tf.Tensor:
    """Each 'Σ' of `chars` (flat code points; `rows`: line of each) lower-cased as Python's `str.lower`.

    Final ('ς') when the nearest non-ignorable character before it on its line is cased and the
    nearest after it is not (or there is none); otherwise 'σ'. Whitespace, which ends the original's
    words, is neither, so deciding on the whole line equals deciding per word.
    """
    sigma = tf.where(tf.equal(chars, CAPITAL_SIGMA))[:, 0]
    kind = _lookup(chars, t.sigma_starts, t.sigma_values)
    anchors = tf.where(tf.not_equal(kind, IGNORABLE))[:, 0]  # every 'Σ' is one of them (it is cased)
    rank = tf.gather(tf.cumsum(tf.cast(kind != IGNORABLE, tf.int64), exclusive=True), sigma)
    last = tf.size(anchors, tf.int64) - 1

    def cased_neighbour(step: int) -> tf.Tensor:
        at = rank + step
        pos = tf.gather(anchors, tf.clip_by_value(at, 0, tf.maximum(last, 0)))
        exists = (at >= 0) & (at <= last) & tf.equal(tf.gather(rows, pos), tf.gather(rows, sigma))
        return exists & tf.equal(tf.gather(kind, pos), CASED)

    final = cased_neighbour(-1) & ~cased_neighbour(1)
    lowered = tf.where(final, FINAL_SIGMA, SMALL_SIGMA)
    return tf.tensor_scatter_nd_update(chars, sigma[:, None], tf.cast(lowered, chars.dtype))


def _expand(chars: tf.Tensor, rows: tf.Tensor, t: Tables) -> tuple[tf.Tensor, tf.Tensor]:
    """Each code point replaced by its lower-cased, accent-stripped sequence (often empty or itself)."""
    keys = tf.constant(t.expand_keys)
    splits = tf.constant(t.expand_splits)
    slot = tf.minimum(tf.searchsorted(keys, chars, side="left"), tf.size(keys) - 1)
    hit = tf.equal(tf.gather(keys, slot), chars)
    lengths = tf.where(hit, tf.gather(splits, slot + 1) - tf.gather(splits, slot), 1)
    source = tf.repeat(tf.range(tf.size(chars)), lengths)
    offset = tf.range(tf.size(source)) - tf.gather(tf.cumsum(lengths, exclusive=True), source)
    mapped = tf.gather(tf.constant(t.expand_values), tf.gather(tf.gather(splits, slot), source) + offset)
    return tf.where(tf.gather(hit, source), mapped, tf.gather(chars, source)), tf.gather(rows, source)


def _previous(x: tf.Tensor, first) -> tf.Tensor:
    """x shifted right by one: element i is x[i - 1], element 0 is `first`."""
    return tf.concat([[first], x[:-1]], 0)


def _words(chars: tf.Tensor, rows: tf.Tensor, kind: tf.Tensor, lines: tf.Tensor) -> tf.RaggedTensor:
    """Code points cut into words: [lines, (words), (chars)]. SPACE separates; STANDALONE stands alone."""
    space = tf.equal(kind, SPACE)
    alone = tf.equal(kind, STANDALONE)
    new_line = tf.not_equal(rows, _previous(rows, tf.constant(-1, rows.dtype)))
    starts = ~space & (new_line | _previous(space, True) | _previous(alone, False) | alone)
    word = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    text = ~space
    words = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(chars, text), tf.boolean_mask(word, text),
                                              nrows=tf.reduce_sum(tf.cast(starts, tf.int64)), validate=False)
    return tf.RaggedTensor.from_value_rowids(words, tf.boolean_mask(rows, starts), nrows=lines, validate=False)


def _general_lane(text: tf.Tensor, t: Tables) -> tf.RaggedTensor:
    """Steps 1-4 of the module docstring on code points: words as strings [lines, (words)]."""
    decoded = tf.strings.unicode_decode(text, "UTF-8", errors="strict")
    chars, rows = decoded.flat_values, decoded.value_rowids()
    kind = _lookup(chars, t.class_starts, t.class_values)
    kept = tf.not_equal(kind, DROP)
    chars, rows, kind = (tf.boolean_mask(x, kept) for x in (chars, rows, kind))
    if t.do_lower_case:
        chars = tf.cond(tf.reduce_any(tf.equal(chars, CAPITAL_SIGMA)),
                        lambda: _final_sigma(chars, rows, t), lambda: chars)
        chars, rows = _expand(chars, rows, t)
        kind = _lookup(chars, t.class_starts, t.class_values)
    words = _words(chars, rows, kind, decoded.nrows())
    return words.with_values(tf.strings.unicode_encode(words.values, "UTF-8"))


def _ascii_lane(text: tf.Tensor, t: Tables) -> tf.RaggedTensor:
    """Lines of printable ASCII, tab, LF and CR: nothing to drop or decompose, so RE2 splits them."""
    if t.do_lower_case:
        text = tf.strings.lower(text)  # A-Z only, which is all str.lower changes in ASCII (checked)
    return tf_text.regex_split(text, f"{t.ascii_space}|{t.ascii_standalone}", t.ascii_standalone)


def _unless_empty(lane, text: tf.Tensor, t: Tables) -> tf.RaggedTensor:
    """`lane(text)`, skipped (no ops run) when no line takes it."""
    empty = tf.RaggedTensor.from_row_splits(tf.zeros([0], tf.string), tf.zeros([1], tf.int64), validate=False)
    return tf.cond(tf.size(text) > 0, lambda: lane(text, t), lambda: empty)


def basic_tokenize(text: tf.Tensor, t: Tables) -> tf.RaggedTensor:
    """The original BasicTokenizer on a batch of strings: its words as strings [batch, (words)].

    Lines of printable ASCII take the RE2 lane (about 5x faster), the others the code-point lane;
    the rows are put back in input order.
    """
    plain = tf.strings.regex_full_match(text, _PLAIN_ASCII)
    rows = [tf.where(plain)[:, 0], tf.where(~plain)[:, 0]]
    parts = [_unless_empty(lane, tf.gather(text, r), t) for lane, r in zip((_ascii_lane, _general_lane), rows)]
    return tf.gather(tf.concat(parts, axis=0), tf.math.invert_permutation(tf.concat(rows, 0)))

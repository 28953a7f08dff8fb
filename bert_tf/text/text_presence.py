"""Whether input files hold any text: one of only NUL bytes, control characters or whitespace holds none.

Every program that reads text (corpus preparation, vocab learning, pretraining data) asks this of its
inputs, so that an input without text ends as one error naming the file instead of empty outputs:

    presence = TextPresence()
    for path in files:
        ...
        presence.file_done(path, held_text)
    presence.finish(SomeBertTfError)

A file without text among others that have some is only a warning, logged once per file: a glob over
many files may well catch an empty one.
"""
from __future__ import annotations

import re

from absl import logging

from bert_tf.text import tokenization

_WORD_CHAR = re.compile(r"\w")  # letters, digits, "_": never dropped by the tokenizer's cleaning
_WHAT = "only whitespace, NUL bytes or control characters"


def has_text(line: str) -> bool:
    """True when `line` holds a character the original tokenizer's cleaning keeps, besides whitespace
    (not only NUL bytes, U+FFFD, control or format characters and spaces): without one a line gives no
    token."""
    if _WORD_CHAR.search(line):
        return True
    return bool(tokenization.BasicTokenizer._clean_text(line).strip())


class TextPresence:
    """Which input files held text (see the module docstring)."""

    def __init__(self) -> None:
        self._without_text: list[str] = []  # not yet reported
        self._any_text = False

    def file_done(self, path: str, held_text: bool) -> None:
        """Records one input file; warns about files without text once some input has text."""
        if not held_text:
            self._without_text.append(path)
        self._any_text = self._any_text or held_text
        if self._any_text:
            for skipped in self._without_text:
                logging.warning("%s: holds no text (%s); skipped", skipped, _WHAT)
            self._without_text = []

    def finish(self, error_type: type[Exception], prefix: str = "") -> None:
        """Raises `error_type` naming the input when files were read and none of them held text."""
        if self._any_text or not self._without_text:
            return
        first, others = self._without_text[0], len(self._without_text) - 1
        also = f" (nor do the {others} other input files)" if others else ""
        raise error_type(f"{prefix}{first} holds no text ({_WHAT}){also}")

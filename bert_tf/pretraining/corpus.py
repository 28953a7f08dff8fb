"""Raw text -> documents of sentences, the input format of create_pretraining_data.

The original BERT was pretrained on Wikipedia (extracted with WikiExtractor) and BooksCorpus,
given to `create_pretraining_data.py` as "one sentence per line, blank line between documents".
This module turns the two raw sources into that format:

  * WikiExtractor output: `<doc id=.. url=.. title=..>` blocks, the first line repeating the
    title, then one paragraph (or section heading) per line.
  * Project Gutenberg books: BOM, licence header/footer around the `*** START OF ... ***` /
    `*** END OF ... ***` markers, CRLF or LF, hard-wrapped paragraphs separated by blank lines,
    chapter headings. A book becomes one document per chapter.

Paragraphs are split into sentences with `sentencex` (a maintained, rule-based segmenter with
abbreviation lists, written in Rust: ~80 MB/s here); sentences never span paragraphs.
"""
from __future__ import annotations

import hashlib
import html
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, List, Optional, Sequence

import sentencex
from bert_tf.data import output_lock
from bert_tf.data.atomic_io import PendingFile, remove_temp_files_of
from bert_tf.data.files import expand_inputs, read_lines  # noqa: F401  (corpus.read_lines: data_prep's name)
from bert_tf.errors import BertTfError
from bert_tf.text.text_presence import TextPresence, has_text

FORMATS = ("wiki", "books", "auto")


class CorpusError(BertTfError, ValueError):
    """Bad input or output for corpus preparation; the message names the file (and line)."""


@dataclass
class Document:
    """One document: its origin (for messages) and its sentences, in order."""
    source: str
    sentences: List[str] = field(default_factory=list)

    def num_chars(self) -> int:
        return sum(len(s) for s in self.sentences)


# ----------------------------------------------------------------------------- reading



def detect_format(lines: Sequence[str]) -> str:
    """'wiki' when the first non-blank line opens a WikiExtractor `<doc ...>` block, else 'books'."""
    for line in lines:
        if line.strip():
            return "wiki" if line.lstrip().startswith("<doc ") else "books"
    return "books"


# ----------------------------------------------------------------------------- sentences

def split_sentences(paragraph: str, language: str = "en") -> List[str]:
    """Sentences of one paragraph (whitespace collapsed; empty pieces dropped)."""
    text = " ".join(paragraph.split())
    if not text:
        return []
    return [s.strip() for s in sentencex.segment(language, text) if s.strip()]


def paragraphs_to_document(source: str, paragraphs: Iterable[str],
                           language: str = "en") -> Document:
    """A Document whose sentences are those of each paragraph in turn."""
    doc = Document(source)
    for paragraph in paragraphs:
        doc.sentences.extend(split_sentences(paragraph, language))
    return doc


# ----------------------------------------------------------------------------- Wikipedia

_DOC_OPEN = re.compile(r'^\s*<doc\s+([^>]*)>\s*$')
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
# Markup WikiExtractor leaves behind (`<br>`, `</dl>`, `<ref>`...), once entities are unescaped.
_HTML_TAG = re.compile(r'</?[A-Za-z][A-Za-z0-9]*(\s[^<>]*)?/?>')


def clean_wiki_paragraph(line: str) -> str:
    """Unescape HTML entities (WikiExtractor 3.x writes `&amp;`) and drop leftover tags."""
    return _HTML_TAG.sub(" ", html.unescape(line)).strip()


def parse_wiki_lines(path: str, lines: Sequence[str]) -> Iterator[tuple]:
    """(source, title, paragraphs) for each `<doc>` block of a WikiExtractor file.

    The first non-blank body line is dropped when it repeats the title (WikiExtractor writes
    the title as the first line). Text outside `<doc>` blocks, a nested `<doc>` or a missing
    `</doc>` is an error naming the line.
    """
    open_line = 0
    title = source = ""
    paragraphs: List[str] = []
    for i, line in enumerate(lines, start=1):
        match = _DOC_OPEN.match(line)
        if match:
            if open_line:
                raise CorpusError(f"{path}:{i}: <doc> opened before the <doc> of line "
                                  f"{open_line} was closed")
            attributes = dict(_ATTRIBUTE.findall(match.group(1)))
            open_line, title, paragraphs = i, attributes.get("title", ""), []
            source = f"{path}:{i} (id={attributes.get('id', '?')})"
        elif line.strip() == "</doc>":
            if not open_line:
                raise CorpusError(f"{path}:{i}: </doc> without an opening <doc>")
            yield source, title, paragraphs
            open_line = 0
        elif open_line:
            text = line.strip()
            if text and not (not paragraphs and text == title.strip()):
                paragraphs.append(text)
        elif line.strip():
            raise CorpusError(f"{path}:{i}: text outside a <doc> block; is this WikiExtractor "
                              "output? (use --format=books for plain text)")
    if open_line:
        raise CorpusError(f"{path}:{open_line}: <doc> is never closed by </doc>")


def wiki_documents(path: str, lines: Sequence[str], language: str = "en") -> Iterator[Document]:
    """Documents of a WikiExtractor file, one per `<doc>` (title line dropped, paragraphs kept)."""
    for source, _, paragraphs in parse_wiki_lines(path, lines):
        cleaned = (clean_wiki_paragraph(p) for p in paragraphs)
        yield paragraphs_to_document(source, (p for p in cleaned if p), language)


# ----------------------------------------------------------------------------- books

_GUTENBERG_START = re.compile(
    r'^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG E-?(BOOK|TEXT)', re.IGNORECASE)
_GUTENBERG_END = re.compile(
    r'^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)',
    re.IGNORECASE)
_ROMAN = r'[IVXLCDM]+'
_NUMBER_WORD = (r'(ONE|TWO|THREE|FOUR|FIVE|SIX|SEVEN|EIGHT|NINE|TEN|ELEVEN|TWELVE|'
                r'THIRTEEN|FOURTEEN|FIFTEEN|SIXTEEN|SEVENTEEN|EIGHTEEN|NINETEEN|TWENTY|'
                r'FIRST|SECOND|THIRD|FOURTH|FIFTH|SIXTH|SEVENTH|EIGHTH|NINTH|TENTH|LAST)')
# "Chapter 1", "CHAPTER 1. Loomings.", "Chapter IV.", "PART ONE", "Letter 2", "EPILOGUE", "I."
# or "II. THE RED-HEADED LEAGUE": a heading that starts a new document (chapter). The
# keywords need their number, so that a short paragraph "Part of it, sir." is no heading.
_CHAPTER_HEADING = re.compile(
    rf'^\s*((CHAPTER|BOOK|PART|LETTER|STAVE|VOLUME)\s+(\d+|{_ROMAN}|{_NUMBER_WORD})\b(?![,\'’])'
    rf'|(EPILOGUE|PROLOGUE)\b\W*$|(?-i:{_ROMAN})\.(\s|$)|\d+\.\s*$)', re.IGNORECASE)
_MAX_HEADING_CHARS = 150  # "CHAPTER 56. Of the Less Erroneous Pictures of Whales, and the True ..."
_QUOTES = "\"'“‘«"


def strip_gutenberg_boilerplate(lines: Sequence[str]) -> List[str]:
    """The lines between the `*** START OF ...` and `*** END OF ...` markers.

    A file without a START marker is taken from its beginning, one without an END marker to
    its end: plain books from elsewhere pass through unchanged.
    """
    start, end = 0, len(lines)
    for i, line in enumerate(lines):
        if _GUTENBERG_START.match(line):
            start = i + 1
            break
    for i in range(start, len(lines)):
        if _GUTENBERG_END.match(lines[i]):
            end = i
            break
    return list(lines[start:end])


def _blocks(lines: Sequence[str]) -> Iterator[List[str]]:
    """Runs of non-blank lines (a hard-wrapped paragraph, a heading, a list)."""
    block: List[str] = []
    for line in lines:
        if line.strip():
            block.append(line.strip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def is_chapter_heading(block: Sequence[str]) -> bool:
    """A short block naming a chapter, part, letter or numbered story."""
    text = " ".join(block)
    return len(text) <= _MAX_HEADING_CHARS and bool(_CHAPTER_HEADING.match(text))


def is_non_prose(block: Sequence[str]) -> bool:
    """Headings, titles and notes that are no text to learn from.

    A block with no lower-case letter (a title in capitals, "CONTENTS", "I.") unless it
    opens with a quotation mark (a letter's “MY DEAR FRIEND,-- in dialogue), an
    `[Illustration]` note, the volunteers' "Produced by ..." credit, or a transcriber's
    note naming Project Gutenberg.
    """
    text = " ".join(block)
    if not any(c.islower() for c in text) and text[0] not in _QUOTES:
        return True
    lower = text.lower()
    return (text.startswith("[Illustration") or lower.startswith("produced by")
            or "project gutenberg" in lower)


def book_documents(path: str, lines: Sequence[str], language: str = "en") -> Iterator[Document]:
    """Documents of a book: one per chapter, chapter headings and front matter dropped.

    Text before the first chapter heading (title page, contents) is dropped when the book
    has chapter headings; a book without any is one document.
    """
    blocks = list(_blocks(strip_gutenberg_boilerplate(lines)))
    has_chapters = any(is_chapter_heading(b) for b in blocks)
    chapter: Optional[List[str]] = None if has_chapters else []
    number = 0
    for block in blocks:
        if is_chapter_heading(block):
            if chapter:
                yield paragraphs_to_document(f"{path} (chapter {number})", chapter, language)
            chapter, number = [], number + 1
        elif chapter is not None and not is_non_prose(block):
            chapter.append(" ".join(block))
    if chapter:
        yield paragraphs_to_document(f"{path} (chapter {number})", chapter, language)


# ----------------------------------------------------------------------------- pipeline

def file_documents(path: str, fmt: str = "auto", language: str = "en",
                   presence: Optional[TextPresence] = None) -> Iterator[Document]:
    """Documents of one input file in format 'wiki', 'books' or 'auto' (detected per file); `presence`
    records whether the file held text at all."""
    if fmt not in FORMATS:
        raise CorpusError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    lines = read_lines(path)
    if presence is not None:
        presence.file_done(path, any(map(has_text, lines)))
    if fmt == "auto":
        fmt = detect_format(lines)
    if fmt == "wiki":
        return wiki_documents(path, lines, language)
    return book_documents(path, lines, language)


def document_key(doc: Document) -> bytes:
    """A digest of a document's text, for dropping exact duplicates."""
    return hashlib.sha1("\n".join(doc.sentences).encode("utf-8")).digest()


def filter_documents(docs: Iterable[Document], min_sentences: int = 1, min_chars: int = 0,
                     dedup: bool = False) -> Iterator[Document]:
    """Documents with at least `min_sentences` sentences and `min_chars` characters of text;
    with `dedup`, only the first of documents with identical sentences."""
    seen = set()
    for doc in docs:
        if len(doc.sentences) < max(1, min_sentences) or doc.num_chars() < min_chars:
            continue
        if dedup:
            key = document_key(doc)
            if key in seen:
                continue
            seen.add(key)
        yield doc


def corpus_documents(files: Sequence[str], fmt: str = "auto", language: str = "en",
                     min_sentences: int = 1, min_chars: int = 0,
                     dedup: bool = False) -> Iterator[Document]:
    """All kept documents of `files`, in file order then document order. An input none of whose files
    holds text (only NUL bytes, say) is a CorpusError naming the file (bert_tf.text.text_presence)."""
    def all_docs():
        presence = TextPresence()
        for path in files:
            yield from file_documents(path, fmt, language, presence)
        presence.finish(CorpusError)
    return filter_documents(all_docs(), min_sentences, min_chars, dedup)


def format_document(doc: Document) -> str:
    """A document as create_pretraining_data reads it: one sentence per line."""
    return "".join(s + "\n" for s in doc.sentences)


# ----------------------------------------------------------------------------- output

def check_output_dir(output_dir: str) -> None:
    """Create `output_dir` if needed and prove it writable, before any work is done.

    The probe is a fresh `mkstemp` file (O_EXCL, unpredictable name), so a symlink planted in the
    folder can never redirect it.
    """
    output_lock.make_output_dir(output_dir, "--output_dir")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=output_dir)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise CorpusError(f"{output_dir}: output directory is not writable: "
                          f"{e.strerror}") from None


def shard_name(output_dir: str, prefix: str, index: int, num_shards: int) -> str:
    """Deterministic shard file name: `<prefix>-00003-of-00016.txt`."""
    return os.path.join(output_dir, f"{prefix}-{index:05d}-of-{num_shards:05d}.txt")


def check_no_other_total(output_dir: str, prefix: str, num_shards: int) -> None:
    """Refuses shards `<prefix>-NNNNN-of-MMMMM.txt` in `output_dir` of a total other than
    `num_shards`: a later `<prefix>-*` glob would read them beside this run's. They carry no record
    that this program wrote them, so they are never deleted; the user moves them."""
    pattern = re.compile(re.escape(prefix) + r"-\d{5}-of-(\d{5})\.txt")
    for name in sorted(os.listdir(output_dir)):
        match = pattern.fullmatch(name)
        if match and int(match.group(1)) != num_shards:
            raise CorpusError(f"{os.path.join(output_dir, name)}: a shard of an earlier run with {int(match.group(1))} "
                              f"shards (this run writes {num_shards}); a later {prefix}-* glob would read both: "
                              "move those shards away or choose another --output_dir")


class ShardWriter:
    """Writes documents into sharded text files, each first under a temporary name.

    With `num_shards`, document i goes to shard i mod num_shards (streaming, balanced).
    Otherwise a new shard starts once the current one holds `shard_size_mb`. Files are
    renamed to their final names only by `close()`, once the total is known: a crash
    never leaves a partial shard under a final name (its temp files are removed by the next
    run). Shards of the same prefix of another total are refused (`check_no_other_total`).
    """

    def __init__(self, output_dir: str, prefix: str = "corpus", num_shards: int = 0,
                 shard_size_mb: float = 0.0, log: Callable[[str], None] = print):
        if num_shards < 0 or shard_size_mb < 0:
            raise CorpusError("--num_shards and --shard_size_mb must not be negative")
        check_output_dir(output_dir)
        self.output_dir, self.prefix = output_dir, prefix
        self.num_shards = num_shards
        self.shard_bytes = int(shard_size_mb * 2**20) if not num_shards else 0
        if num_shards or not self.shard_bytes:  # the total is known now: refuse before any work
            check_no_other_total(output_dir, prefix, num_shards or 1)
        remove_temp_files_of(output_dir, re.escape(prefix) + r"-\d{5}\.txt", log)  # one run per prefix: locked
        self._files: List[PendingFile] = []
        self._sizes: List[int] = []
        self._docs_in: List[int] = []
        self.num_documents = self.num_sentences = 0

    def _open(self) -> None:
        self._files.append(PendingFile(self.output_dir, f"{self.prefix}-{len(self._files):05d}.txt"))
        self._sizes.append(0)
        self._docs_in.append(0)

    def _target(self) -> int:
        if self.num_shards:
            while len(self._files) < self.num_shards:
                self._open()
            return self.num_documents % self.num_shards
        if not self._files or (self.shard_bytes and self._sizes[-1] >= self.shard_bytes):
            self._open()
        return len(self._files) - 1

    def write(self, doc: Document) -> None:
        """Append one document (blank line before it unless first in its shard)."""
        index = self._target()
        text = ("\n" if self._docs_in[index] else "") + format_document(doc)
        self._files[index].file.write(text)
        self._sizes[index] += len(text.encode("utf-8"))
        self._docs_in[index] += 1
        self.num_documents += 1
        self.num_sentences += len(doc.sentences)

    def close(self) -> List[str]:
        """Close all shards and give them their final names; returns those names."""
        if not self._files:
            self._open()
        total = len(self._files)
        try:
            check_no_other_total(self.output_dir, self.prefix, total)
        except CorpusError:
            self.abort()
            raise
        names = []
        for index, pending in enumerate(self._files):
            names.append(shard_name(self.output_dir, self.prefix, index, total))
            pending.commit(names[-1])
        self._files = []
        return names

    def abort(self) -> None:
        """Close and delete the temporary files (after an error)."""
        for pending in self._files:
            pending.discard()
        self._files = []

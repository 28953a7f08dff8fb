"""Corpus preparation on the real shared Wikipedia and Gutenberg files."""
import glob
import os
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path
from bert_tf.pretraining import corpus

SCRIPT = str(REPO_ROOT / "data_prep" / "prepare_corpus.py")
GUTENBERG_LICENCE_MARKERS = ("project gutenberg", "*** start of", "*** end of", "gutenberg.org",
                             "this ebook is for the use of anyone", "full license")


@pytest.fixture(scope="module")
def wiki_files():
    return sorted(glob.glob(str(shared_path("corpus", "wiki") / "*" / "wiki_*")))


@pytest.fixture(scope="module")
def book_files():
    return sorted(glob.glob(str(shared_path("corpus", "books") / "*.txt")))


@pytest.fixture(scope="module")
def wiki_docs(wiki_files):
    return list(corpus.corpus_documents(wiki_files, "wiki"))


@pytest.fixture(scope="module")
def book_docs(book_files):
    return list(corpus.corpus_documents(book_files, "books"))


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)


def _read_docs(path):
    text = open(path, encoding="utf-8").read()
    return [block.split("\n") for block in text.strip("\n").split("\n\n")]


def test_every_wiki_doc_block_is_parsed(wiki_files):
    blocks = [b for f in wiki_files for b in corpus.parse_wiki_lines(f, corpus.read_lines(f))]
    assert len(blocks) == 8506  # shared README / SOURCE.md


def test_wiki_documents_with_text_match_the_shared_readme(wiki_docs, wiki_files):
    # README: "the whole corpus/wiki as one sentence per line (... 2,847 documents ...)".
    assert len(wiki_docs) == 2847
    # SOURCE.md: 1,922 docs with >= 300 characters of raw body text; ours counts the
    # characters of the cleaned sentences (entities unescaped, spaces between sentences gone).
    long_docs = list(corpus.corpus_documents(wiki_files, "wiki", min_chars=300))
    assert 1850 <= len(long_docs) <= 1922


def test_wiki_title_line_dropped_and_paragraphs_kept(wiki_docs):
    anarchism = wiki_docs[0]
    assert anarchism.sentences[0].startswith("Anarchism is a political philosophy")
    assert "Etymology and terminology." in anarchism.sentences  # section headings stay
    assert all(s != "Anarchism" for s in anarchism.sentences)


def test_wiki_html_entities_and_leftover_tags_are_cleaned(wiki_docs):
    text = "\n".join(s for d in wiki_docs for s in d.sentences)
    for residue in ("&amp;", "&lt;", "&gt;", "&quot;", "<br>", "</dl>"):
        assert residue not in text
    assert "debut for Jammu & Kashmir" in text and "MLA/V&A Purchase" in text


def test_no_gutenberg_licence_text_in_books(book_docs):
    assert len(book_docs) > 400  # one document per chapter of six novels
    for doc in book_docs:
        for sentence in doc.sentences:
            lower = sentence.lower()
            assert not any(m in lower for m in GUTENBERG_LICENCE_MARKERS), sentence


def test_book_is_one_document_per_chapter_without_headings(book_files):
    pride = [f for f in book_files if f.endswith("1342-0.txt")][0]
    docs = list(corpus.file_documents(pride))
    assert len(docs) == 61  # Pride and Prejudice has 61 chapters
    assert docs[0].sentences[0] == ("It is a truth universally acknowledged, that a single man "
                                    "in possession of a good fortune, must be in want of a wife.")
    assert not any(s.lower().startswith("chapter") for d in docs for s in d.sentences)


def test_books_split_into_their_real_chapters(book_files):
    counts = {os.path.basename(f): len(list(corpus.file_documents(f))) for f in book_files}
    assert counts["1399-0.txt"] == 239  # Anna Karenina: 8 parts, 239 chapters
    assert counts["16-0.txt"] == 17     # Peter Pan: 17 chapters
    assert counts["1661-0.txt"] == 14   # Sherlock Holmes: 12 stories, the first in 3 parts


def test_chapter_headings_from_the_books_are_recognised_and_prose_is_not():
    headings = ["Chapter 1", "Chapter I.", "CHAPTER 1. Loomings.", "PART ONE", "Letter 4",
                "I. A SCANDAL IN BOHEMIA", "II.", "Epilogue",
                "CHAPTER 56. Of the Less Erroneous Pictures of Whales, and the True "
                "Pictures of Whaling Scenes."]
    prose = ["Part of it, sir.", "Did.", "Book one's cover was red.",
             "“Chapter and verse,” said he."]
    assert all(corpus.is_chapter_heading([h]) for h in headings)
    assert not any(corpus.is_chapter_heading([p]) for p in prose)


def test_hard_wrapped_paragraphs_are_joined_like_the_golden_books_sample(book_files):
    # golden input of create_pretraining_data: chapters 1-12 of Pride and Prejudice, one
    # sentence per line; its text (not its sentence cuts or the spaces between them: it used
    # another splitter) must be ours.
    golden = shared_path("golden", "create_pretraining_data", "input", "books_sample.txt")
    golden_docs = [d for d in open(golden, encoding="utf-8").read().split("\n\n") if d.strip()]
    pride = [f for f in book_files if f.endswith("1342-0.txt")][0]
    ours = list(corpus.file_documents(pride))
    assert len(golden_docs) == 12
    for chapter, golden_doc in enumerate(golden_docs):
        assert "".join("".join(ours[chapter].sentences).split()) == "".join(golden_doc.split())


def test_crlf_and_bom_never_reach_sentences(book_docs):
    for doc in book_docs:
        for sentence in doc.sentences:
            assert "\r" not in sentence and "\n" not in sentence and "\ufeff" not in sentence
            assert sentence == sentence.strip() and "  " not in sentence


def test_abbreviations_do_not_end_sentences(wiki_docs, book_docs):
    sentences = [s for d in wiki_docs + book_docs for s in d.sentences]
    for abbreviation in ("Dr.", "Mr.", "Mrs.", "e.g.", "i.e.", "St."):
        inside = [s for s in sentences if f" {abbreviation} " in f" {s[:-1]}"]
        assert len(inside) > 5, abbreviation  # they occur mid-sentence in the real text
        ends = [s for s in sentences if s.endswith(" " + abbreviation)]
        # a paragraph may really end on one ("... from alcohols e.g." in the wiki)
        assert len(ends) <= 1 + len(inside) // 50, (abbreviation, ends[:3])
    assert any("U.S. " in s[:-5] for s in sentences)


def test_split_sentences_on_a_real_wiki_line(wiki_docs):
    line = ("Shockley's book, \"the new black\", won the 2012 Hurston/Wright Legacy Award. "
            "\"semiautomatic\" was a 2017 finalist for \"The Believer\" Poetry Award.")
    assert corpus.split_sentences(line) == [
        "Shockley's book, \"the new black\", won the 2012 Hurston/Wright Legacy Award.",
        "\"semiautomatic\" was a 2017 finalist for \"The Believer\" Poetry Award."]


def test_min_sentences_per_doc_drops_short_documents(wiki_files, wiki_docs):
    kept = list(corpus.corpus_documents(wiki_files, "wiki", min_sentences=5))
    assert len(kept) == sum(1 for d in wiki_docs if len(d.sentences) >= 5) < len(wiki_docs)


def test_dedup_keeps_the_first_of_identical_documents(tmp_path, wiki_files):
    copy = tmp_path / "copy_of_wiki_00"
    copy.write_bytes(open(wiki_files[0], "rb").read())
    both = [wiki_files[0], str(copy)]
    assert (len(list(corpus.corpus_documents(both, dedup=False)))
            == 2 * len(list(corpus.corpus_documents(both, dedup=True))))


def test_cli_writes_deterministic_shards_of_all_documents(tmp_path, wiki_docs):
    inputs = str(shared_path("corpus", "wiki")) + "/*/wiki_*"
    for run in ("a", "b"):
        result = _run(f"--input={inputs}", f"--output_dir={tmp_path / run}", "--num_shards=3")
        assert result.returncode == 0, result.stderr
    names = sorted(os.listdir(tmp_path / "a"))
    assert names == [f"corpus-{i:05d}-of-00003.txt" for i in range(3)]
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    docs = [d for n in names for d in _read_docs(tmp_path / "a" / n)]
    assert sorted(docs) == sorted(d.sentences for d in wiki_docs)


def test_shard_size_mb_bounds_every_shard(tmp_path, book_files, book_docs):
    writer = corpus.ShardWriter(str(tmp_path), "books", shard_size_mb=1.0)
    for doc in book_docs:
        writer.write(doc)
    names = writer.close()
    largest_doc = max(len(corpus.format_document(d).encode()) for d in book_docs) + 1
    sizes = [os.path.getsize(n) for n in names]
    assert len(names) == 5 and os.path.basename(names[0]) == "books-00000-of-00005.txt"
    assert all(size < 2**20 + largest_doc for size in sizes)
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]
    assert sum(len(_read_docs(n)) for n in names) == len(book_docs)


def test_missing_input_is_one_clear_error(tmp_path):
    result = _run(f"--input={tmp_path}/nothing_here_*.txt", f"--output_dir={tmp_path}/out")
    assert result.returncode == 1
    assert result.stderr.strip() == (f"prepare_corpus.py: error: --input: "
                                      f"'{tmp_path}/nothing_here_*.txt' matches no file")


def test_non_utf8_input_names_file_and_line(tmp_path, wiki_files):
    lines = open(wiki_files[0], "rb").read().split(b"\n")[:5]
    lines[3] = lines[3].replace(b"a", b"\xe9", 1)  # a Latin-1 byte on line 4
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"\n".join(lines))
    result = _run(f"--input={bad}", f"--output_dir={tmp_path}/out")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"prepare_corpus.py: error: {bad}:4: not valid UTF-8 (byte 0xe9); "
        "convert the file to UTF-8"]


def test_unwritable_output_is_one_clear_error(tmp_path, book_files):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    result = _run(f"--input={book_files[0]}", f"--output_dir={blocker}/out")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [f"prepare_corpus.py: error: --output_dir {blocker}/out: {blocker} is a file, not a folder"]

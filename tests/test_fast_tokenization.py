"""The bulk fast path (bert_tf.fast_tokenization) gives the exact path's ids on every real line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bert_tf import fast_tokenization, tokenization
from shared_data import shared_path

# golden file -> (vocab folder, do_lower_case), as listed in golden/tokenization/README.md
GOLDENS = {"uncased": ("uncased", True), "cased": ("cased", False), "chinese": ("chinese", True)}
_FAST: dict = {}


def fast_tokenizer(vocab_name: str, do_lower_case: bool) -> fast_tokenization.FastTokenizer:
    key = (vocab_name, do_lower_case)
    if key not in _FAST:
        _FAST[key] = fast_tokenization.FastTokenizer(shared_path("vocab", vocab_name, "vocab.txt"), do_lower_case)
    return _FAST[key]


def read_lines(path) -> list[str]:
    """Raw lines as the goldens define them: UTF-8, split on LF only (CR and BOM kept)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read().split("\n")


@pytest.fixture(scope="module")
def corpus_lines() -> dict[str, list[str]]:
    corpus = shared_path("corpus")
    files = (sorted(corpus.glob("wiki/*/wiki_0*")) + sorted(corpus.glob("books/*.txt"))
             + sorted(corpus.glob("multilingual/*.txt")))
    assert len(files) >= 18
    return {str(f.relative_to(corpus)): read_lines(f) for f in files}


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_fast_path_matches_every_golden_line(name):
    tokenizer = fast_tokenizer(*GOLDENS[name])
    with open(shared_path("golden", "tokenization", f"{name}.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts = [r["text"] for r in records]
    ids = tokenizer.tokenize_batch(texts)
    tokens = tokenizer.tokenize_batch_tokens(texts)
    assert [r["source"] for r, got in zip(records, ids) if got != r["ids"]] == []
    assert [r["source"] for r, got in zip(records, tokens) if got != r["tokens"]] == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_fast_path_equals_exact_path_on_every_corpus_line(name, corpus_lines):
    fast = fast_tokenizer(*GOLDENS[name])
    exact = fast.exact
    mismatches, total = [], 0
    for source, lines in corpus_lines.items():
        got = fast.tokenize_batch(lines)
        for number, (line, ids) in enumerate(zip(lines, got), start=1):
            if ids != exact.convert_tokens_to_ids(exact.tokenize(line)):
                mismatches.append(f"{source}:{number}")
        total += len(lines)
    assert total > 100_000
    assert mismatches == []


def test_arrays_form_holds_the_same_rows_and_chunks_join_seamlessly(monkeypatch):
    tokenizer = fast_tokenizer("uncased", True)
    lines = read_lines(shared_path("corpus", "wiki", "AA", "wiki_00"))[:3000]
    expected = tokenizer.tokenize_batch(lines)
    monkeypatch.setattr(fast_tokenization, "_CHUNK_LINES", 700)  # 5 chunks
    flat, splits = tokenizer.tokenize_batch_arrays(lines)
    assert flat.dtype == np.int32 and splits.dtype == np.int64 and len(splits) == len(lines) + 1
    assert [flat[a:b].tolist() for a, b in zip(splits, splits[1:])] == expected
    assert tokenizer.tokenize_batch([]) == []


def test_lines_the_library_would_get_wrong_go_to_the_exact_path_and_still_match():
    tokenizer = fast_tokenizer("uncased", True)
    exact = tokenizer.exact
    lines = [
        "ΟΔΟΣ\x01ΣΑΣ and Σ alone",  # capital sigma: lower-casing depends on neighbours
        "long " + "é" * 201 + " word",  # 201 chars after accent stripping -> [UNK]
        "x\u1b4ey",  # unassigned in Python's Unicode 14, punctuation in tensorflow-text's newer ICU
        "lone \ud800 surrogate",  # a Python str the library cannot be given (not UTF-8 encodable)
    ]
    before = tokenizer.routed_to_exact
    got = tokenizer.tokenize_batch(lines)
    assert got == [exact.convert_tokens_to_ids(exact.tokenize(line)) for line in lines]
    assert tokenizer.routed_to_exact - before == 4
    assert tokenizer._char_ok["\u1b4e"] is False
    assert got[1][1] == tokenizer.vocab["[UNK]"]


@pytest.mark.parametrize("lower", [True, False])
def test_word_limit_counts_characters_not_bytes(lower):
    """The library's limit is 200 bytes; rows it makes [UNK] on a long multi-byte word are redone."""
    tokenizer = fast_tokenizer("uncased" if lower else "cased", lower)
    exact = tokenizer.exact
    lines = [f"a {'ж' * n} b, {'ab' * 40}" for n in (99, 100, 101, 150, 200, 201)]
    lines += ["Ünïcode " + "é" * 200 + " x", "Ünïcode " + "é" * 201 + " x", "日本 " + "語" * 201]
    got = tokenizer.tokenize_batch(lines)
    assert got == [exact.convert_tokens_to_ids(exact.tokenize(line)) for line in lines]
    unk = tokenizer.vocab["[UNK]"]
    assert unk not in got[4] and got[5].count(unk) == 1  # 200 characters split, 201 do not


def test_control_characters_and_line_separators_are_cleaned_like_the_original():
    for name in ("uncased", "cased"):
        tokenizer = fast_tokenizer(*GOLDENS[name])
        exact = tokenizer.exact
        lines = ["ab\x01cd ef\x0bgh\x7fij", "tab\tand\rcr", "a\u2028b\u2029c", "soft\u00adhyphen zw\u200bsp",
                 "nbsp\u00a0ok \ufeffbom \ufffdrepl", "Ǆemo 😀 ﬁne ½ ß …", "日本語の文章と한국어"]
        assert tokenizer.tokenize_batch(lines) == [exact.convert_tokens_to_ids(exact.tokenize(x)) for x in lines]


def test_later_duplicate_vocab_entry_wins_in_both_paths(tmp_path):
    vocab = shared_path("vocab", "uncased", "vocab.txt").read_text(encoding="utf-8")
    path = tmp_path / "vocab.txt"
    path.write_text(vocab + "the\nrunning\n", encoding="utf-8")
    tokenizer = fast_tokenization.FastTokenizer(path, do_lower_case=True)
    lines = ["The running man", "the THE"]
    got = tokenizer.tokenize_batch(lines)
    assert got == [tokenizer.exact.convert_tokens_to_ids(tokenizer.exact.tokenize(x)) for x in lines]
    assert got[1] == [30522, 30522]


def test_bad_input_gives_one_readable_error(tmp_path):
    tokenizer = fast_tokenizer("uncased", True)
    with pytest.raises(tokenization.TokenizerInputError, match="not valid UTF-8 at byte 2"):
        tokenizer.tokenize_batch([b"ok", b"ab\xc3("])
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\nthe\n##s\n", encoding="utf-8")
    with pytest.raises(tokenization.VocabError, match=f"{path} has no \\[UNK\\]"):
        fast_tokenization.FastTokenizer(path)
    with pytest.raises(tokenization.VocabError, match="not found"):
        fast_tokenization.FastTokenizer(tmp_path / "missing.txt")

"""The bulk fast path (bert_tf.text.fast_tokenization) gives the exact path's ids on every real line.

Both engines are proven: the native C engine (the default where it was built) and tensorflow-text
(the engine of installs without a C compiler).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bert_tf.text import fast_tokenization
from bert_tf.text import native_wordpiece
from bert_tf.text import tokenization
from shared_data import shared_path

# golden file -> (vocab folder, do_lower_case), as listed in golden/tokenization/README.md
GOLDENS = {"uncased": ("uncased", True), "cased": ("cased", False), "chinese": ("chinese", True)}
ENGINES = ["native", "tf_text"]
_FAST: dict = {}


def fast_tokenizer(vocab_name: str, do_lower_case: bool, engine: str = "native") -> fast_tokenization.FastTokenizer:
    if engine == "native" and not native_wordpiece.available():
        pytest.skip("bert_tf.text._wordpiece not built (no C compiler at install); test_native_engine_is_built_in_ci "
                    "fails under CI")
    key = (vocab_name, do_lower_case, engine)
    if key not in _FAST:
        _FAST[key] = fast_tokenization.FastTokenizer(shared_path("vocab", vocab_name, "vocab.txt"), do_lower_case,
                                                     engine=engine)
    return _FAST[key]


def exact_ids(tokenizer, lines) -> list[list[int]]:
    exact = tokenizer.exact
    return [exact.convert_tokens_to_ids(exact.tokenize(line)) for line in lines]


def test_native_engine_is_built_in_ci_and_chosen_by_default():
    if not native_wordpiece.available():
        assert os.environ.get("CI", "").lower() != "true", "CI must build the C extension bert_tf.text._wordpiece"
        pytest.skip("bert_tf.text._wordpiece not built here")
    tokenizer = fast_tokenization.FastTokenizer(shared_path("vocab", "uncased", "vocab.txt"))
    assert tokenizer.engine == "native"


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


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_fast_path_matches_every_golden_line(name, engine):
    tokenizer = fast_tokenizer(*GOLDENS[name], engine)
    with open(shared_path("golden", "tokenization", f"{name}.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    texts = [r["text"] for r in records]
    ids = tokenizer.tokenize_batch(texts)
    tokens = tokenizer.tokenize_batch_tokens(texts)
    assert [r["source"] for r, got in zip(records, ids) if got != r["ids"]] == []
    assert [r["source"] for r, got in zip(records, tokens) if got != r["tokens"]] == []


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_fast_path_equals_exact_path_on_every_corpus_line(name, engine, corpus_lines):
    fast = fast_tokenizer(*GOLDENS[name], engine)
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


@pytest.mark.parametrize("engine", ENGINES)
def test_arrays_form_holds_the_same_rows_and_chunks_join_seamlessly(monkeypatch, engine):
    tokenizer = fast_tokenizer("uncased", True, engine)
    lines = read_lines(shared_path("corpus", "wiki", "AA", "wiki_00"))[:3000]
    expected = tokenizer.tokenize_batch(lines)
    monkeypatch.setattr(fast_tokenization, "_CHUNK_LINES", 700)  # 5 chunks
    flat, splits = tokenizer.tokenize_batch_arrays(lines)
    assert flat.dtype == np.int32 and splits.dtype == np.int64 and len(splits) == len(lines) + 1
    assert [flat[a:b].tolist() for a, b in zip(splits, splits[1:])] == expected
    assert tokenizer.tokenize_batch([]) == []


def test_lines_tensorflow_text_would_get_wrong_go_to_the_exact_path_and_still_match():
    tokenizer = fast_tokenizer("uncased", True, "tf_text")
    lines = [
        "ΟΔΟΣ\x01ΣΑΣ and Σ alone",  # capital sigma: lower-casing depends on neighbours
        "long " + "é" * 201 + " word",  # 201 chars after accent stripping -> [UNK]
        "x\u1b4ey",  # unassigned in Python's Unicode 14, punctuation in tensorflow-text's newer ICU
        "lone \ud800 surrogate",  # a Python str the library cannot be given (not UTF-8 encodable)
    ]
    before = tokenizer.routed_to_exact
    got = tokenizer.tokenize_batch(lines)
    assert got == exact_ids(tokenizer, lines)
    assert tokenizer.routed_to_exact - before == 4
    assert tokenizer._char_ok["\u1b4e"] is False
    assert got[1][1] == tokenizer.vocab["[UNK]"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("lower", [True, False])
def test_word_limit_counts_characters_not_bytes(lower, engine):
    """tensorflow-text's limit is 200 bytes: rows it makes [UNK] on a long multi-byte word are redone."""
    tokenizer = fast_tokenizer("uncased" if lower else "cased", lower, engine)
    lines = [f"a {'ж' * n} b, {'ab' * 40}" for n in (99, 100, 101, 150, 200, 201)]
    lines += ["Ünïcode " + "é" * 200 + " x", "Ünïcode " + "é" * 201 + " x", "日本 " + "語" * 201]
    got = tokenizer.tokenize_batch(lines)
    assert got == exact_ids(tokenizer, lines)
    unk = tokenizer.vocab["[UNK]"]
    assert unk not in got[4] and got[5].count(unk) == 1  # 200 characters split, 201 do not


@pytest.mark.parametrize("engine", ENGINES)
def test_control_characters_and_line_separators_are_cleaned_like_the_original(engine):
    for name in ("uncased", "cased"):
        tokenizer = fast_tokenizer(*GOLDENS[name], engine)
        lines = ["ab\x01cd ef\x0bgh\x7fij", "tab\tand\rcr", "a\u2028b\u2029c", "soft\u00adhyphen zw\u200bsp",
                 "nbsp\u00a0ok \ufeffbom \ufffdrepl", "Ǆemo 😀 ﬁne ½ ß …", "日本語の文章と한국어"]
        assert tokenizer.tokenize_batch(lines) == exact_ids(tokenizer, lines)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_duplicate_vocab_token_is_refused_by_both_paths_naming_both_lines(tmp_path, engine):
    fast_tokenizer("uncased", True, engine)  # skips where the engine is not built
    vocab = shared_path("vocab", "uncased", "vocab.txt").read_text(encoding="utf-8")
    path = tmp_path / "vocab.txt"
    path.write_text(vocab + "the\nrunning\n", encoding="utf-8")
    message = f"{path}: token 'the' is on line 1997 and again on line 30523"
    with pytest.raises(tokenization.VocabError, match=message):
        fast_tokenization.FastTokenizer(path, do_lower_case=True, engine=engine)
    with pytest.raises(tokenization.VocabError, match=message):
        tokenization.FullTokenizer(path, do_lower_case=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_input_gives_one_readable_error(tmp_path, engine):
    tokenizer = fast_tokenizer("uncased", True, engine)
    with pytest.raises(tokenization.TokenizerInputError, match="not valid UTF-8 at byte 2"):
        tokenizer.tokenize_batch([b"ok", b"ab\xc3("])
    with pytest.raises(TypeError, match="Unsupported string type: int"):
        tokenizer.tokenize_batch(["ok", 3])
    with pytest.raises(ValueError, match="engine must be one of auto, native, tf_text, not 'rust'"):
        fast_tokenization.FastTokenizer(shared_path("vocab", "uncased", "vocab.txt"), engine="rust")
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\nthe\n##s\n", encoding="utf-8")
    with pytest.raises(tokenization.VocabError, match=f"{path} has no \\[UNK\\]"):
        fast_tokenization.FastTokenizer(path)
    with pytest.raises(tokenization.VocabError, match="not found"):
        fast_tokenization.FastTokenizer(tmp_path / "missing.txt")


@pytest.mark.parametrize("lower", [True, False])
def test_native_engine_equals_exact_path_on_every_assigned_code_point(lower):
    """Each code point of the first four planes and plane 14, alone and inside words, upper and lower.

    This proves the engine's Unicode tables (classes and normalised forms) against the exact rules.
    """
    tokenizer = fast_tokenizer("uncased" if lower else "cased", lower)
    points = [cp for cp in list(range(0x40000)) + list(range(0xE0000, 0xE1000)) if not 0xD800 <= cp <= 0xDFFF]
    lines = [f"A{chr(cp)}b {chr(cp)} Ab{chr(cp)}{chr(cp)}" for cp in points]
    got = tokenizer.tokenize_batch(lines)
    expected = exact_ids(tokenizer, lines)
    assert [hex(cp) for cp, a, b in zip(points, got, expected) if a != b] == []


def test_native_engine_sends_context_dependent_lines_to_the_exact_path():
    tokenizer = fast_tokenizer("uncased", True)
    lines = [
        "ΟΔΟΣ\x01ΣΑΣ and Σ alone",  # capital sigma: lower-casing depends on neighbours
        "ka\u1b44ra",  # a virama: combining class > 0 but not Mn, so NFD may reorder it unstripped
        "lone \ud800 surrogate",  # never matches a vocab entry in either path: [UNK], no routing
        "long " + "é" * 201 + " word",  # 201 chars after accent stripping -> [UNK], no routing
    ]
    before = tokenizer.routed_to_exact
    got = tokenizer.tokenize_batch(lines)
    assert got == exact_ids(tokenizer, lines)
    assert tokenizer.routed_to_exact - before == 2
    assert got[3][1] == tokenizer.vocab["[UNK]"]
    cased = fast_tokenizer("cased", False)
    before = cased.routed_to_exact
    assert cased.tokenize_batch(lines) == exact_ids(cased, lines)
    assert cased.routed_to_exact == before  # without lower-casing nothing depends on context


def test_native_engine_tokenizes_parts_in_parallel_threads_with_the_same_result():
    tokenizer = fast_tokenizer("uncased", True)
    lines = read_lines(shared_path("corpus", "wiki", "AA", "wiki_00"))[:4000]
    expected = tokenizer.tokenize_batch(lines)
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(tokenizer.tokenize_batch, [lines] * 8))
    assert all(r == expected for r in results)

"""The exact tokenizer (bert_tf.text.tokenization) against the original's golden outputs and API."""
from __future__ import annotations

import json

import pytest

from bert_tf.text import tokenization
from shared_data import shared_path

# golden file -> (vocab folder, do_lower_case), as listed in golden/tokenization/README.md
GOLDENS = {"uncased": ("uncased", True), "cased": ("cased", False), "chinese": ("chinese", True)}
_TOKENIZERS: dict = {}


def full_tokenizer(vocab_name: str, do_lower_case: bool) -> tokenization.FullTokenizer:
    key = (vocab_name, do_lower_case)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = tokenization.FullTokenizer(shared_path("vocab", vocab_name, "vocab.txt"), do_lower_case)
    return _TOKENIZERS[key]


def read_golden(name: str) -> list[dict]:
    with open(shared_path("golden", "tokenization", f"{name}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_exact_path_matches_every_golden_line_tokens_and_ids(name):
    tokenizer = full_tokenizer(*GOLDENS[name])
    records = read_golden(name)
    token_mismatch = [r["source"] for r in records if tokenizer.tokenize(r["text"]) != r["tokens"]]
    id_mismatch = [r["source"] for r in records
                   if tokenizer.convert_tokens_to_ids(tokenizer.tokenize(r["text"])) != r["ids"]]
    assert len(records) > 3000
    assert token_mismatch == []
    assert id_mismatch == []


def test_vocab_loads_with_line_index_ids_and_inverse():
    tokenizer = full_tokenizer("uncased", True)
    lines = shared_path("vocab", "uncased", "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert len(tokenizer.vocab) == 30522
    assert tokenizer.vocab[lines[100].strip()] == 100
    assert tokenizer.inv_vocab[100] == lines[100].strip()
    tokens = tokenizer.tokenize("Unaffable running, naïvely!")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenization.convert_ids_to_tokens(tokenizer.inv_vocab, ids) == tokens
    assert tokenization.convert_tokens_to_ids(tokenizer.vocab, tokens) == ids


def test_basic_tokenizer_cleans_splits_and_lowercases_like_the_original():
    text = " \tHeLLo!how  \n Are yoU?\u00ad  \u535a\u63a8 caf\u00e9\x00 "
    assert tokenization.BasicTokenizer(do_lower_case=True).tokenize(text) == [
        "hello", "!", "how", "are", "you", "?", "\u535a", "\u63a8", "cafe"]
    assert tokenization.BasicTokenizer(do_lower_case=False).tokenize(text) == [
        "HeLLo", "!", "how", "Are", "yoU", "?", "\u535a", "\u63a8", "caf\u00e9"]


def test_wordpiece_is_greedy_longest_match_first_with_whole_word_unk():
    vocab = tokenization.load_vocab(shared_path("vocab", "uncased", "vocab.txt"))
    wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
    pieces = wordpiece.tokenize("unaffable")
    assert len(pieces) > 1 and pieces[0] in vocab and all(p.startswith("##") for p in pieces[1:])
    assert "".join(p.removeprefix("##") for p in pieces) == "unaffable"
    # the first piece is the longest vocab prefix of the word
    assert not any("unaffable"[:k] in vocab for k in range(len(pieces[0]) + 1, 10))
    assert wordpiece.tokenize("unaffable\u2603") == ["[UNK]"]  # one unknown char: whole word [UNK]


def test_words_over_200_chars_become_unk_measured_after_accent_stripping():
    tokenizer = full_tokenizer("uncased", True)
    pieces = tokenizer.tokenize("a" * 200)
    assert "[UNK]" not in pieces and "".join(p.removeprefix("##") for p in pieces) == "a" * 200
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]
    assert tokenizer.tokenize("x " + "a" * 201 + " y") == ["x", "[UNK]", "y"]
    assert tokenizer.tokenize("e\u0301" * 101) != ["[UNK]"]  # 202 chars raw, 101 after stripping


@pytest.mark.parametrize("do_lower_case,checkpoint,ok", [
    (True, "/models/cased_L-12_H-768_A-12/bert_model.ckpt", False),
    (False, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", False),
    (False, "gs://b/multi_cased_L-12_H-768_A-12/bert_model.ckpt", True),
    (True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", True),
    (False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt", True),
    (True, "/models/my_own_model/bert_model.ckpt", True),
    (True, None, True),
])
def test_validate_case_matches_checkpoint(do_lower_case, checkpoint, ok):
    if ok:
        tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
    else:
        with pytest.raises(ValueError, match=r"do_lower_case=(True|False).*cased"):
            tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)


def test_missing_vocab_file_names_the_file(tmp_path):
    path = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(tokenization.VocabError, match="not found.*nope/vocab.txt"):
        tokenization.FullTokenizer(path)


def test_empty_vocab_file_names_the_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"")
    with pytest.raises(tokenization.VocabError, match=f"{path}.* empty"):
        tokenization.FullTokenizer(path)


def test_binary_vocab_file_names_the_file_and_byte(tmp_path):
    path = tmp_path / "vocab.txt"
    # a real binary file: the start of the uncased vocab compressed is not UTF-8 text
    import gzip
    path.write_bytes(gzip.compress(shared_path("vocab", "uncased", "vocab.txt").read_bytes()[:5000]))
    with pytest.raises(tokenization.VocabError, match=f"{path} is not UTF-8 text \\(byte \\d+\\)"):
        tokenization.FullTokenizer(path)


def test_vocab_file_with_nul_bytes_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\nab\x00cd\n")
    with pytest.raises(tokenization.VocabError, match=f"{path} line 3 holds a NUL"):
        tokenization.load_vocab(path)


def test_non_utf8_bytes_given_to_tokenize_name_the_byte_offset():
    tokenizer = full_tokenizer("uncased", True)
    with pytest.raises(tokenization.TokenizerInputError, match="not valid UTF-8 at byte 6"):
        tokenizer.tokenize("hello ".encode() + b"\xff world")
    assert tokenizer.tokenize("naïve café".encode("utf-8")) == tokenizer.tokenize("naïve café")
    with pytest.raises(TypeError):
        tokenizer.tokenize(12)

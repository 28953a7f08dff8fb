"""The preprocessor SavedModel tokenizes as the original FullTokenizer and packs as the original scripts, alone.

Ids are compared with the original's goldens (real wiki, books, GLUE, multilingual lines and the hand-written
edge cases) and with `FullTokenizer` on the cases where tensorflow-text's own normalisation differs; packing
with `bert_tf.text.packing` on real MRPC pairs. The saved folder is loaded in a process where bert_tf cannot
be imported.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import unicodedata

import numpy as np
import pytest

from bert_tf._env import tf  # noqa: F401  (TensorFlow, imported quietly)
from bert_tf.export import preprocessor
from bert_tf.text import packing
from bert_tf.text import tokenization
from shared_data import shared_path

# golden file -> (vocab folder, do_lower_case), as listed in golden/tokenization/README.md
GOLDENS = {"uncased": ("uncased", True), "cased": ("cased", False), "chinese": ("chinese", True)}

# Where tensorflow-text's ICU normalisation (or a byte-based word limit) parts from the original.
HARD_CASES = [
    "", "   ", "\t\r\n", "\u00a0", "Straße STRASSE ẞ groß", "ΣΑΣ ΟΔΥΣΣΕΥΣ Σ aΣ ΑΣ. ΑΣΒ ΑΣ'Β ΑΣ' Α.Σ ΑΣ\u0301Β",
    "ὈΔΥΣΣΕΎΣ ΣΣ ΑΣ\x00Β ΑΣ\u00adΒ Σ\u00ad", "wait… ½ ¼ x² ℌ", "a\u00a0b\u2009c\u3000d", "中文字符 日本語 한국어 カタカナ 𠀀",
    "café naïve Ångström İstanbul ǅ ﬁ", "ＦＵＬＬ ｗｉｄｔｈ", "a\x00b\x01c\x7fd\ufffde\u200bf\u00adg\ufeffh",
    "x\u2028y\u2029z\x85w\x0bv\x0cu", "a\u1fefb c\u037ed", "e\u0301" * 101, "a" * 200, "b" * 201, "é" * 150,
    "[CLS] [MASK] ##a don’t “quoted” — ok", "𝐀𝐁𝐂 🙂 👍🏽 \U000e0067", "\u0301\u0302 \u1b44\u302e",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    """The uncased preprocessor, saved (seq_length 128)."""
    folder = str(tmp_path_factory.mktemp("preprocessor"))
    preprocessor.save_preprocessor(folder, str(shared_path("vocab", "uncased", "vocab.txt")), True, 128)
    return folder


@pytest.fixture(scope="module")
def loaded(saved):
    return tf.saved_model.load(saved)


_BUILT: dict = {}


def built(name: str) -> preprocessor.BertPreprocessor:
    """An in-process preprocessor for a golden's vocab (not saved)."""
    if name not in _BUILT:
        vocab, lower = GOLDENS[name]
        _BUILT[name] = preprocessor.BertPreprocessor(str(shared_path("vocab", vocab, "vocab.txt")), lower, 128)
    return _BUILT[name]


def exact_tokenizer(name: str) -> tokenization.FullTokenizer:
    vocab, lower = GOLDENS[name]
    return tokenization.FullTokenizer(shared_path("vocab", vocab, "vocab.txt"), do_lower_case=lower)


def word_ids(tokenize, lines) -> list[list[list[int]]]:
    """Ids per word per line (RaggedTensor.to_list is ~10x slower on thousands of lines)."""
    ragged = tokenize(tf.constant(lines))
    ids, pieces, words = (x.tolist() for x in (ragged.flat_values.numpy(), ragged.values.row_splits.numpy(),
                                               ragged.row_splits.numpy()))
    per_word = [ids[a:b] for a, b in zip(pieces, pieces[1:])]
    return [per_word[a:b] for a, b in zip(words, words[1:])]


def flat_ids(tokenize, lines) -> list[list[int]]:
    return [sum(words, []) for words in word_ids(tokenize, lines)]


def basic_then_wordpiece(exact: tokenization.FullTokenizer, text: str) -> list[list[int]]:
    """FullTokenizer's ids, per BasicTokenizer word."""
    return [exact.convert_tokens_to_ids(exact.wordpiece_tokenizer._tokenize_word(w))
            for w in exact.basic_tokenizer.tokenize(text)]


@pytest.mark.parametrize("name", list(GOLDENS))
def test_tokenize_gives_the_original_ids_on_every_golden_line(name, loaded):
    rows = [json.loads(line) for line in open(shared_path("golden", "tokenization", f"{name}.jsonl"), encoding="utf-8")]
    tokenize = loaded.tokenize if name == "uncased" else built(name).tokenize
    got = flat_ids(tokenize, [r["text"] for r in rows])
    wrong = [(r["source"], r["text"][:60]) for r, ids in zip(rows, got) if ids != r["ids"]]
    assert not wrong, f"{len(wrong)} of {len(rows)} lines differ from the original, e.g. {wrong[:3]}"


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_hard_cases_give_full_tokenizers_words_and_wordpieces(name, loaded):
    exact = exact_tokenizer(name)
    tokenize = loaded.tokenize if name == "uncased" else built(name).tokenize
    for text, words in zip(HARD_CASES, word_ids(tokenize, HARD_CASES)):
        got = exact.convert_ids_to_tokens(sum(words, []))
        assert words == basic_then_wordpiece(exact, text), f"{text[:40]!r}: {got}"


def assigned_code_points() -> list[int]:
    return [cp for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_every_assigned_code_point_and_sigma_contexts_give_full_tokenizers_words(name, loaded):
    """All of Unicode (Python's version), 64 code points per line, then random mixes of the hard characters."""
    code_points = assigned_code_points()
    lines = ["".join(map(chr, code_points[i:i + 64])) for i in range(0, len(code_points), 64)]
    rng = random.Random(18)
    tricky = list("ΣσςAa'.\u0301\u00ad\x00 中1ʰ\u2028İß…\u1fef\u037e한éΩ\u200b\u00a0\tǅＡ½\x7f\u0345\u1fbc")
    lines += ["".join(rng.choice(tricky) for _ in range(rng.randint(0, 10))) for _ in range(3000)]
    exact = exact_tokenizer(name)
    tokenize = loaded.tokenize if name == "uncased" else built(name).tokenize
    wrong = [text for text, words in zip(lines, word_ids(tokenize, lines))
             if words != basic_then_wordpiece(exact, text)]
    assert not wrong, f"{len(wrong)} of {len(lines)} lines differ, e.g. {[hex(ord(c)) for c in wrong[0][:8]]}"


def test_words_over_200_characters_become_unk_counted_in_characters_not_bytes(loaded):
    unk = tokenization.load_vocab(shared_path("vocab", "uncased", "vocab.txt"))["[UNK]"]
    got = flat_ids(loaded.tokenize, ["b" * 201, "b" * 200, "é" * 150])
    assert got[0] == [unk] and unk not in got[1] and unk not in got[2]


def test_invalid_utf8_is_refused_as_the_exact_tokenizer_refuses_it(loaded):
    with pytest.raises(tf.errors.InvalidArgumentError):
        loaded.tokenize(tf.constant([b"ok", b"caf\xc3"]))


def mrpc_pairs() -> list[tuple[str, str]]:
    with open(shared_path("glue", "MRPC", "dev.tsv"), encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [(r[3], r[4]) for r in rows]


def packed(tokenizer, pairs, seq_length: int) -> dict[str, np.ndarray]:
    """What the original scripts feed the model: `packing.pack` of FullTokenizer's tokens."""
    rows = [packing.pack(tokenizer.tokenize(a), tokenizer.tokenize(b) if b is not None else None, seq_length,
                         tokenizer) for a, b in pairs]
    return {"input_word_ids": np.array([r.input_ids for r in rows]),
            "input_mask": np.array([r.input_mask for r in rows]),
            "input_type_ids": np.array([r.segment_ids for r in rows])}


def assert_same_inputs(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), want[key], err_msg=key)


@pytest.mark.parametrize("seq_length", [24, 128])
def test_real_pairs_pack_and_truncate_as_the_original(seq_length, loaded):
    pairs = mrpc_pairs()
    assert len(pairs) == 408
    a, b = (loaded.tokenize(tf.constant([p[i] for p in pairs])) for i in (0, 1))
    got = loaded.bert_pack_inputs([a, b], seq_length=seq_length)
    assert_same_inputs(got, packed(exact_tokenizer("uncased"), pairs, seq_length))


def test_the_default_call_packs_single_texts_and_pairs_to_the_saved_length(loaded):
    pairs = mrpc_pairs()[:40] + [("a b c", ""), ("only a", "\x00\u200b"), ("", "x y")]
    exact = exact_tokenizer("uncased")
    singles = loaded(tf.constant([a for a, _ in pairs]))
    assert_same_inputs(singles, packed(exact, [(a, None) for a, _ in pairs], 128))
    both = loaded.signatures["serving_pair"](text_a=tf.constant([a for a, _ in pairs]),
                                             text_b=tf.constant([b for _, b in pairs]))
    assert_same_inputs(both, packed(exact, pairs, 128))


def test_truncation_keeps_what_truncate_seq_pair_keeps():
    grid = [(a, b, m) for a in range(12) for b in range(12) for m in range(0, 16)]
    keep_a, keep_b = preprocessor.kept_lengths(*(tf.constant(x, tf.int64) for x in zip(*grid)))
    for (len_a, len_b, budget), got in zip(grid, zip(keep_a.numpy(), keep_b.numpy())):
        tokens_a, tokens_b = list(range(len_a)), list(range(len_b))
        packing.truncate_seq_pair(tokens_a, tokens_b, budget)
        assert got == (len(tokens_a), len(tokens_b)), (len_a, len_b, budget)


def test_bad_settings_are_one_line_errors(tmp_path):
    vocab = shared_path("vocab", "uncased", "vocab.txt")
    with pytest.raises(preprocessor.PreprocessorError, match="at least 3"):
        preprocessor.BertPreprocessor(str(vocab), True, 2)
    no_cls = tmp_path / "vocab.txt"
    no_cls.write_text("[PAD]\n[UNK]\n[SEP]\nthe\n", encoding="utf-8")
    with pytest.raises(preprocessor.PreprocessorError, match=r"no \[CLS\]"):
        preprocessor.BertPreprocessor(str(no_cls), True, 128)


_CLEAN_PROCESS = textwrap.dedent("""
    import json, sys
    sys.modules["bert_tf"] = None  # importing bert_tf now fails
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the WordPiece op)
    model = tf.saved_model.load(sys.argv[1])
    texts = tf.constant(json.loads(sys.argv[2]))
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "tokenize": model.tokenize(texts).to_list(),
        "default": {k: v.numpy().tolist() for k, v in model.signatures["serving_default"](text=texts).items()},
        "pack16": {k: v.numpy().tolist() for k, v in model.bert_pack_inputs(
            [model.tokenize(texts), model.tokenize(texts)], seq_length=16).items()},
        "special": {k: int(v) for k, v in model.tokenize.get_special_tokens_dict().items()},
    }))
""")


def test_saved_model_runs_in_a_process_without_bert_tf(saved, loaded):
    texts = HARD_CASES[:12] + [a for a, _ in mrpc_pairs()[:4]]
    done = subprocess.run([sys.executable, "-c", _CLEAN_PROCESS, saved, json.dumps(texts)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    exact = exact_tokenizer("uncased")
    assert out["signatures"] == ["serving_default", "serving_pair"]
    assert [sum(words, []) for words in out["tokenize"]] == [exact.convert_tokens_to_ids(exact.tokenize(t))
                                                             for t in texts]
    assert_same_inputs(out["default"], packed(exact, [(t, None) for t in texts], 128))
    assert_same_inputs(out["pack16"], packed(exact, [(t, t) for t in texts], 16))
    assert out["special"] == {"vocab_size": 30522, "start_of_sequence_id": 101, "end_of_segment_id": 102,
                              "padding_id": 0, "mask_id": 103}

"""WordPiece vocabulary learning on the real shared Wikipedia corpus."""
import glob
import subprocess
import sys

import pytest

from shared_data import REPO_ROOT, shared_path
from bert_tf.pretraining import corpus
from bert_tf.text import tokenization
from bert_tf.text import vocab_learning

SCRIPT = str(REPO_ROOT / "data_prep" / "create_vocab.py")
VOCAB_SIZE = 8000


@pytest.fixture(scope="module")
def wiki_docs():
    files = sorted(glob.glob(str(shared_path("corpus", "wiki") / "*" / "wiki_*")))
    return list(corpus.corpus_documents(files, "wiki"))


@pytest.fixture(scope="module")
def train_counts(wiki_docs):
    """Uncased word counts of every 8th sentence of 9 in 10 wiki documents (0.8 MB)."""
    train = [s for i, d in enumerate(wiki_docs) if i % 10 for s in d.sentences][::8]
    return vocab_learning.count_words(train, do_lower_case=True)


@pytest.fixture(scope="module")
def learned_vocab(train_counts, tmp_path_factory):
    """An 8k uncased vocab from the default learner (tensorflow-text's; ~20 s)."""
    tokens = vocab_learning.learn_vocab(train_counts, VOCAB_SIZE, max_input_words=12_000)
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab_learning.write_vocab(str(path), tokens)
    return path, tokens


@pytest.mark.slow
def test_learned_vocab_tokenizes_held_back_wiki_with_under_1_percent_unk(learned_vocab,
                                                                          wiki_docs):
    path, _ = learned_vocab
    tokenizer = tokenization.FullTokenizer(str(path), do_lower_case=True)
    held_back = [s for i, d in enumerate(wiki_docs) if i % 10 == 0 for s in d.sentences]
    tokens = [t for s in held_back[::2] for t in tokenizer.tokenize(s)]
    assert len(tokens) > 50_000
    assert tokens.count("[UNK]") / len(tokens) < 0.01
    # and it is a real subword vocabulary, not characters: well under 2 pieces per word
    words = sum(len(tokenizer.basic_tokenizer.tokenize(s)) for s in held_back[::2])
    assert len(tokens) / words < 1.6


def test_tokenizers_learner_is_as_good_and_in_the_same_layout(train_counts, wiki_docs,
                                                             tmp_path):
    pytest.importorskip("tokenizers", reason="optional learner --learner=tokenizers")
    tokens = vocab_learning.learn_vocab(train_counts, VOCAB_SIZE, learner_name="tokenizers")
    assert len(tokens) == VOCAB_SIZE and tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    path = tmp_path / "vocab.txt"
    vocab_learning.write_vocab(str(path), tokens)
    tokenizer = tokenization.FullTokenizer(str(path), do_lower_case=True)
    held_back = [s for i, d in enumerate(wiki_docs) if i % 10 == 0 for s in d.sentences][::4]
    pieces = [t for s in held_back for t in tokenizer.tokenize(s)]
    words = sum(len(tokenizer.basic_tokenizer.tokenize(s)) for s in held_back)
    assert pieces.count("[UNK]") / len(pieces) < 0.01 and len(pieces) / words < 1.6
    first_word = next(t for t in tokens[999:] if len(t) > 1 and not t.startswith("##"))
    assert first_word == "the"


@pytest.mark.slow
def test_vocab_layout_is_the_originals(learned_vocab):
    path, tokens = learned_vocab
    vocab = tokenization.load_vocab(str(path))
    assert len(vocab) == len(tokens) == VOCAB_SIZE
    assert vocab["[PAD]"] == 0 and vocab["[unused0]"] == 1 and vocab["[unused98]"] == 99
    assert [vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [100, 101, 102, 103]
    assert vocab["[unused99]"] == 104 and vocab["[unused993]"] == 998
    # then single characters in code-point order, as in the released uncased vocab
    first_chars = tokens[999:1003]
    assert first_chars == ["!", '"', "#", "$"]
    chars = [t for t in tokens[999:] if len(t) == 1]
    assert chars == sorted(chars) and tokens[999:999 + len(chars)] == chars
    # then words by frequency, and the ## characters last
    assert tokens[999 + len(chars)] == "the"
    assert all(t.startswith("##") and len(t) == 3 for t in tokens[-len(chars):])
    assert any(t.startswith("##") and len(t) > 3 for t in tokens)
    assert all(t == t.lower() for t in tokens if not t.startswith("["))


def test_reserved_block_puts_unk_at_100_for_any_unused_count():
    for num_unused in (99, 200, 994):
        tokens = vocab_learning.reserved_tokens(num_unused)
        assert len(tokens) == num_unused + 5 and tokens.index("[UNK]") == 100
    with pytest.raises(vocab_learning.VocabError, match="--num_unused"):
        vocab_learning.reserved_tokens(50)


@pytest.mark.slow
def test_tensorflow_text_learner_is_deterministic_cased_and_in_layout(wiki_docs, tmp_path):
    sentences = [s for d in wiki_docs[:60] for s in d.sentences][::15]  # ~3k distinct words
    first = vocab_learning.learn_vocab(vocab_learning.count_words(sentences, False), 800,
                                       num_unused=99)
    again = vocab_learning.learn_vocab(vocab_learning.count_words(reversed(sentences), False),
                                       800, num_unused=99)
    assert first == again and len(first) == 800
    assert first[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] and first[104] in "!\"#$"
    assert "The" in first and "the" in first  # cased
    assert any(t.startswith("##") and len(t) > 3 for t in first)
    path = tmp_path / "vocab.txt"
    vocab_learning.write_vocab(str(path), first)
    tokenizer = tokenization.FullTokenizer(str(path), do_lower_case=False)
    held_back = [s for d in wiki_docs[60:80] for s in d.sentences]
    tokens = [t for s in held_back for t in tokenizer.tokenize(s)]
    assert tokens.count("[UNK]") / len(tokens) < 0.01


def test_too_small_vocab_size_is_one_clear_error():
    counts = vocab_learning.count_words(["Ünïcödé wörds", "日本語 text"] * 3)
    with pytest.raises(vocab_learning.VocabError, match="--vocab_size=110 is too small"):
        vocab_learning.learn_vocab(counts, 110, num_unused=99)


def test_cli_learns_from_prepared_corpus_and_reports_bad_input(tmp_path, wiki_docs):
    text = tmp_path / "corpus-00000-of-00001.txt"
    text.write_text("\n\n".join(corpus.format_document(d) for d in wiki_docs[:60]),
                    encoding="utf-8")
    out = tmp_path / "vocab.txt"
    run = subprocess.run([sys.executable, SCRIPT, f"--input={text}", f"--output={out}",
                          "--vocab_size=2000", "--num_unused=99",
                          "--learner=tokenizers"],
                         capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    assert len(tokenization.load_vocab(str(out))) == 2000
    missing = subprocess.run([sys.executable, SCRIPT, f"--input={tmp_path}/none*.txt",
                              f"--output={out}"], capture_output=True, text=True,
                             cwd=REPO_ROOT, timeout=300)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        f"create_vocab.py: error: --input: '{tmp_path}/none*.txt' matches no file")

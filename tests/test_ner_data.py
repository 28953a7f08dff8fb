"""CoNLL files as run_ner reads them, and the tagging windows: every word scored exactly once, on its first
sub-token, inside as much of its document as fits."""
import pytest

from shared_data import shared_path

from bert_tf.tasks.ner.conll import ConllDataError, check_tags, label_list, read_conll, split_file
from bert_tf.tasks.ner.features import tag_windows
from bert_tf.text.tokenization import FullTokenizer

# The shared README's counts: documents, sentences, tokens.
COUNTS = {"train.txt": (946, 14041, 203621), "valid.txt": (216, 3250, 51362), "test.txt": (231, 3453, 46435)}
CONLL_LABELS = ("O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER")


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(str(shared_path("vocab", "uncased", "vocab.txt")), do_lower_case=True)


@pytest.fixture(scope="module")
def valid():
    return read_conll(str(shared_path("conll2003", "valid.txt")))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_conll2003_splits_read_with_the_readmes_documents_sentences_and_tokens(name):
    sentences = read_conll(str(shared_path("conll2003", name)))
    documents, count, tokens = COUNTS[name]
    assert len({s.document for s in sentences}) == documents
    assert len(sentences) == count and sum(len(s.words) for s in sentences) == tokens
    assert all(s.tags is not None and len(s.tags) == len(s.words) for s in sentences)


def test_labels_come_from_the_training_tags_o_first_then_by_type_b_before_i():
    train = read_conll(str(shared_path("conll2003", "train.txt")))
    assert label_list(train, "train.txt") == CONLL_LABELS


def test_a_two_column_file_and_a_token_only_file_read_as_tagged_and_untagged_text(tmp_path):
    (tmp_path / "two.txt").write_text("Paris B-LOC\nis O\n\nfine O\n")
    two = read_conll(str(tmp_path / "two.txt"))
    assert [(s.words, s.tags, s.document, s.line) for s in two] == [
        (("Paris", "is"), ("B-LOC", "O"), 0, 1), (("fine",), ("O",), 0, 4)]
    (tmp_path / "one.txt").write_text("-DOCSTART-\n\nParis\nis\n")
    assert [(s.words, s.tags, s.document) for s in read_conll(str(tmp_path / "one.txt"))] == [
        (("Paris", "is"), None, 1)]


@pytest.mark.parametrize("text, message", [
    ("EU NNP B-NP B-ORG\nrejects VBZ B-VP\n", r"bad\.txt:2: 3 fields where the file's lines have 4 "
                                             r"\(token POS chunk NER\)"),
    ("", r"bad\.txt: no sentences"),
    ("-DOCSTART- -X- -X- O\n\n", r"bad\.txt: no sentences"),
    (b"caf\xe9 O\n", r"bad\.txt: not UTF-8 text"),
])
def test_bad_files_are_refused_naming_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConllDataError, match=message):
        read_conll(str(path))


def test_a_tag_outside_the_training_labels_names_its_line(tmp_path):
    (tmp_path / "dev.txt").write_text("-DOCSTART- O\n\nParis B-LOC\nrocks B-GENRE\n")
    with pytest.raises(ConllDataError, match=r"dev\.txt:4: tag 'B-GENRE' is not among the training labels"):
        check_tags(read_conll(str(tmp_path / "dev.txt")), CONLL_LABELS, str(tmp_path / "dev.txt"))


def test_split_files_accept_conlls_dev_names(tmp_path):
    for name in ("train.txt", "valid.txt", "eng.testb"):
        (tmp_path / name).write_text("a O\n")
    assert [split_file(str(tmp_path), s).rsplit("/", 1)[1] for s in ("train", "eval", "predict")] == [
        "train.txt", "valid.txt", "eng.testb"]
    (tmp_path / "valid.txt").unlink()
    with pytest.raises(ConllDataError, match="no dev.txt or valid.txt or eng.testa for the eval split"):
        split_file(str(tmp_path), "eval")


def _scored(sentences, windows):
    return [(w.sentence, word) for w in windows for word in w.words]


@pytest.mark.parametrize("context", ["document", "sentence"])
@pytest.mark.parametrize("length", [128, 24])
def test_every_word_is_scored_exactly_once_in_file_order(valid, tokenizer, context, length):
    windows = tag_windows(valid, CONLL_LABELS, tokenizer, length, context)
    expected = [(i, w) for i, s in enumerate(valid) for w in range(len(s.words))]
    assert _scored(valid, windows) == expected
    assert all(len(w.input_ids) <= length for w in windows)
    if length == 24:  # long sentences are cut into pieces, never dropped
        assert len(windows) > len(valid)


def test_words_are_labelled_on_their_first_sub_token_and_the_rest_carry_no_weight(valid, tokenizer):
    windows = tag_windows(valid, CONLL_LABELS, tokenizer, 128, "sentence")
    for window in windows[:300]:
        sentence = valid[window.sentence]
        tokens = tokenizer.convert_ids_to_tokens(window.input_ids)
        for word, position, label in zip(window.words, window.positions, window.label_ids):
            assert tokens[position] == tokenizer.tokenize(sentence.words[word])[0]
            assert CONLL_LABELS[label] == sentence.tags[word]
        row = window.row(128)
        assert [i for i, weight in enumerate(row["label_weights"]) if weight] == list(window.positions)
        assert sum(row["input_mask"]) == len(window.input_ids) and row["segment_ids"] == [0] * 128


def test_document_context_fills_the_window_with_the_sentences_neighbours(valid, tokenizer):
    by_document = tag_windows(valid, CONLL_LABELS, tokenizer, 128, "document")
    alone = tag_windows(valid, CONLL_LABELS, tokenizer, 128, "sentence")
    sizes = [sum(len(tokenizer.tokenize(word)) or 1 for word in s.words) for s in valid]
    document_tokens = {}
    for sentence, size in zip(valid, sizes):
        document_tokens[sentence.document] = document_tokens.get(sentence.document, 0) + size
    checked = 0
    for window, own in zip(by_document, alone):
        assert window.sentence == own.sentence and window.words == own.words
        assert len(window.input_ids) - 2 == min(126, document_tokens[valid[window.sentence].document])
        if sizes[window.sentence] <= 126:  # a whole sentence: its own tokens sit inside, unchanged
            shift = window.positions[0] - own.positions[0]
            assert window.input_ids[1 + shift:len(own.input_ids) - 1 + shift] == own.input_ids[1:-1]
            checked += 1
    assert checked >= len(valid) - 3

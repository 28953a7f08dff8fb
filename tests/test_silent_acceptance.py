"""Input the programs used to accept silently (issue #17): each is now a warning or one error line naming it."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from shared_data import shared_path

from bert_tf.options import OptionError, parse
from bert_tf.pretraining import corpus, documents
from bert_tf.pretraining.create_pretraining_data import CreatePretrainingDataOptions, create
from bert_tf.text import create_vocab, tokenization, vocab_learning

TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "a", "dog"]


def _vocab(tmp_path, tokens=TOY_VOCAB):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return path


def _text(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _prep_options(tmp_path, input_file: str, *flags: str) -> CreatePretrainingDataOptions:
    return parse(CreatePretrainingDataOptions, [f"--input_file={input_file}", f"--output_file={tmp_path / 'out'}",
                                                f"--vocab_file={_vocab(tmp_path)}", "--dupe_factor=1", *flags])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# 1. duplicate vocab tokens -------------------------------------------------------------------------------

def test_a_vocab_token_on_two_lines_is_an_error_naming_the_file_the_token_and_both_lines(tmp_path):
    for name in ("uncased", "cased", "chinese"):  # no released vocab has a duplicate: the check never fires on one
        tokenization.load_vocab(shared_path("vocab", name, "vocab.txt"))
    path = _vocab(tmp_path, TOY_VOCAB + ["", "", "cat"])  # blank lines stay allowed, as in the original
    with pytest.raises(tokenization.VocabError) as error:
        tokenization.FullTokenizer(path)
    assert str(error.value) == f"vocab file {path}: token 'cat' is on line 7 and again on line 16; each token " \
                               "must appear once"


# 2. and 7. create_pretraining_data flags --------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["faithful", "sharded"])
def test_a_masked_lm_prob_of_zero_is_an_error_naming_the_flag_before_anything_is_written(tmp_path, mode):
    text = _text(tmp_path, "in.txt", b"the cat sat on the mat .\na dog sat .\n\nthe dog sat .\nthe cat .\n")
    with pytest.raises(OptionError, match=r"^--masked_lm_prob must be within \(0, 1\], got 0.0$"):
        create(_prep_options(tmp_path, text, "--masked_lm_prob=0", f"--mode={mode}"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "vocab.txt"]
    # A valid tiny probability still masks one token per sequence: the original's max(1, round(n * p)).
    summary = create(_prep_options(tmp_path, text, "--masked_lm_prob=0.001", f"--mode={mode}"))
    assert summary["instances"] > 0 and summary["masked_positions"] == summary["instances"]


def test_a_max_seq_length_beyond_the_record_encoder_is_an_error_naming_the_flag_and_the_limit(tmp_path):
    text = _text(tmp_path, "in.txt", b"the cat sat .\n")
    for flag, message in [("--max_seq_length=100000", "--max_seq_length must be at most 8192, got 100000"),
                          ("--max_predictions_per_seq=5000",
                           "--max_predictions_per_seq must be within (0, 2048], got 5000")]:
        with pytest.raises(OptionError) as error:
            create(_prep_options(tmp_path, text, flag))
        assert str(error.value) == message


def test_beam_mode_refuses_the_same_flag_values_as_local_mode(tmp_path):
    pytest.importorskip("apache_beam", reason="optional extra apache-beam[tfrecord] not installed")
    from bert_tf.pretraining.beam_create_pretraining_data import parse_args

    flags = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out'}", "--vocab_file=v.txt"]
    with pytest.raises(OptionError, match=r"--masked_lm_prob must be within \(0, 1\], got 0.0"):
        parse_args([*flags, "--masked_lm_prob=0", "--runner=DirectRunner"])


# 3. training options ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "-0.001"])
def test_a_learning_rate_that_is_not_positive_is_an_error_naming_the_flag(value):
    from bert_tf.training.options import TrainingOptions

    options = parse(TrainingOptions, ["--bert_config_file=c.json", "--output_dir=o", f"--learning_rate={value}"])
    with pytest.raises(OptionError, match=f"^--learning_rate must be positive, got {float(value)}$"):
        options.validate()


def test_a_fine_tuning_max_seq_length_below_3_is_an_error_naming_the_flag():
    """[CLS] x [SEP] needs 3; run_ner stopped on an AssertionError with 2."""
    from bert_tf.tasks.finetune import FinetuningOptions

    options = FinetuningOptions(bert_config_file="c.json", vocab_file="v.txt", output_dir="o", do_train=True,
                                max_seq_length=2)
    with pytest.raises(OptionError, match="^--max_seq_length must be at least 3, got 2$"):
        options.validate()


# 4. vocab_size beyond the corpus ------------------------------------------------------------------------------

def test_a_vocab_size_the_corpus_cannot_fill_is_a_warning_saying_how_many_tokens_it_gives(caplog):
    reserved = vocab_learning.reserved_tokens(99)
    with caplog.at_level(logging.WARNING):
        tokens = vocab_learning.arrange_vocab(reserved, ["a", "b", "ab", "##b"], vocab_size=1000)
    assert len(tokens) == 1000
    assert _warnings(caplog) == ["--vocab_size=1000 is more than the corpus can fill: it gives only 5 tokens "
                                 "(characters, their ## forms and learned pieces) besides the 104 reserved; the "
                                 "other 891 are [unusedN] tokens"]


# 5. inputs without text ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["faithful", "sharded"])
def test_pretraining_data_from_only_nul_bytes_is_one_error_naming_the_file(tmp_path, mode):
    nul = _text(tmp_path, "nul.txt", b"\x00" * 1000 + b"\n\x00\x01\n")
    with pytest.raises(documents.DataPrepError) as error:
        create(_prep_options(tmp_path, nul, f"--mode={mode}"))
    assert str(error.value) == f"no documents: {nul} holds no text (only whitespace, NUL bytes or control " \
                               "characters)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nul.txt", "vocab.txt"]


def test_a_line_without_text_is_dropped_inside_its_document_and_a_file_without_text_is_a_warning(tmp_path, caplog):
    text = _text(tmp_path, "a.txt", b"the cat .\n\x00\x00\x00\na dog .\n\nthe mat .\n")
    nul = _text(tmp_path, "nul.txt", b"\x00\x00\n")
    with caplog.at_level(logging.WARNING):
        docs = list(documents.iter_text_documents([nul, text]))
    assert docs == [["the cat .", "a dog ."], ["the mat ."]]  # the original: one document, the line gives nothing
    assert _warnings(caplog) == [f"{nul}: holds no text (only whitespace, NUL bytes or control characters); "
                                 "skipped"]


def test_corpus_preparation_from_only_nul_bytes_is_one_error_naming_the_file(tmp_path):
    nul = _text(tmp_path, "nul.txt", b"\x00" * 100)
    empty = _text(tmp_path, "empty.txt", b"")
    with pytest.raises(corpus.CorpusError, match=f"^{nul} holds no text .* \\(nor do the 1 other input files\\)$"):
        list(corpus.corpus_documents([nul, empty], "books"))


def test_vocab_learning_from_only_nul_bytes_is_one_error_naming_the_file(tmp_path):
    nul = _text(tmp_path, "nul.txt", b"\x00" * 100 + b"\n")
    options = create_vocab.CreateVocabOptions(input=nul, output=str(tmp_path / "vocab.txt"), vocab_size=200)
    with pytest.raises(vocab_learning.VocabError, match=f"^--input: {nul} holds no text"):
        create_vocab.run(options)
    assert not (tmp_path / "vocab.txt").exists()


# 6. Beam flags ------------------------------------------------------------------------------------------------

def test_a_misspelled_flag_on_the_beam_pipeline_is_one_error_line_naming_it(tmp_path, capsys):
    pytest.importorskip("apache_beam", reason="optional extra apache-beam[tfrecord] not installed")
    from bert_tf.pretraining import beam_create_pretraining_data as program

    text = _text(tmp_path, "in.txt", b"the cat sat .\n")
    status = program.main([f"--input_file={text}", f"--output_file={tmp_path / 'out'}",
                           f"--vocab_file={_vocab(tmp_path)}", "--max_seq_lenght=64", "--runner=DirectRunner"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and lines[-1].endswith(
        "error: --max_seq_lenght: unknown flag (neither this program's nor a Beam pipeline option); did you mean "
        "--max_seq_length?")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "vocab.txt"]


# 8. NaN in extract_features -----------------------------------------------------------------------------------

def test_extract_features_refuses_nan_naming_the_input_line_and_layer_and_writes_nothing(tmp_path):
    from bert_tf.tasks import feature_extraction as features

    def feature(line: int):
        return features.InputFeatures(line, ["[CLS]", "hi", "[SEP]"], [2, 5, 3], [1, 1, 1], [0, 0, 0])

    good = [np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32)]
    bad = [good[0], np.array([[0, 1, 2, 3], [0, np.nan, 0, 0], [0] * 4], np.float32)]
    output = tmp_path / "out.jsonl"
    with pytest.raises(features.FeatureExtractionError) as error:
        features.write_features_json(output, [(feature(0), good), (feature(1), bad)], [-1, -2])
    assert str(error.value) == ("--input_file:2: layer -2 of the model's output holds NaN, which JSON cannot "
                                "hold; are the weights of --init_checkpoint sound?")
    assert not output.exists()
    with pytest.raises(features.FeatureExtractionError, match="^in.txt:2: layer -2"):  # extract_features names it
        features.write_features_json(output, [(feature(1), bad)], [-1, -2], input_file="in.txt")
    assert features.write_features_json(output, [(feature(0), good)], [-1, -2]) == 1
    assert json.loads(output.read_text())["linex_index"] == 0

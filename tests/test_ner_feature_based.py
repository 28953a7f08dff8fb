"""run_ner.py --mode=feature_based (the paper's Table 7): the frozen encoder's vectors are its hidden states at each
word's first sub-token, cached and verified, and a BiLSTM tagger trains on them from the command line."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from shared_data import shared_path

import bert_tf._env  # noqa: F401
import keras

from bert_tf.checkpoints import load_tf1_checkpoint
from bert_tf.model.bert import BertModel
from bert_tf.model.configs import BertConfig
from bert_tf.tasks.ner.bilstm import BiLstmTagger
from bert_tf.tasks.ner.conll import label_list, read_conll
from bert_tf.tasks.ner.features import tag_windows
from bert_tf.tasks.ner.frozen_features import FEATURES, cached_table, encode_words, layer_indices
from bert_tf.text.tokenization import FullTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "tf1_tiny_from_original_bert_code"
DOCSTART = "-DOCSTART- -X- -X- O\n"


def test_feature_choices_read_the_papers_layers():
    assert {f: layer_indices(f, 12) for f in FEATURES} == {
        "embeddings": (0,), "second_to_last": (11,), "last": (12,), "sum_last_four": (9, 10, 11, 12),
        "concat_last_four": (9, 10, 11, 12), "sum_all": tuple(range(1, 13))}
    with pytest.raises(Exception, match="needs at least 4 layers; the model has 2"):
        layer_indices("sum_last_four", 2)


@pytest.fixture(scope="module")
def tiny():
    folder = shared_path("checkpoints", TINY)
    model = BertModel(BertConfig.from_json_file(folder / "bert_config.json"), name="bert")
    load_tf1_checkpoint(model, folder / "bert_model.ckpt", ignore_unexpected=True)
    return model, FullTokenizer(str(folder / "vocab.txt"), do_lower_case=True)


def test_frozen_vectors_are_the_encoders_states_at_each_words_first_sub_token(tiny):
    model, tokenizer = tiny
    sentences = read_conll(str(shared_path("conll2003", "valid.txt")))[:40]
    windows = tag_windows(sentences, label_list(sentences, "valid"), tokenizer, 64, "document")
    table = encode_words(model, windows, (0, 1, 2), batch_size=8)
    assert table.shape == (sum(len(s.words) for s in sentences), 3, 64)
    row = 0
    for window in windows:  # each window alone, padded to the full length
        ids = np.zeros((1, 64), np.int32)
        ids[0, :len(window.input_ids)] = window.input_ids
        mask = np.zeros_like(ids)
        mask[0, :len(window.input_ids)] = 1
        out = model({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
        states = np.stack([out["embedding_output"].numpy()] + [h.numpy() for h in out["encoder_outputs"]], axis=2)
        expected = states[0, list(window.positions)]
        np.testing.assert_allclose(table[row:row + len(expected)], expected, rtol=0, atol=1e-5)
        row += len(expected)
    assert row == len(table)


def test_a_cached_table_is_reused_only_while_its_record_matches(tmp_path):
    path = str(tmp_path / "t.npy")
    made = []

    def make():
        made.append(1)
        return np.arange(24, dtype=np.float32).reshape(4, 2, 3)

    first = np.array(cached_table(path, make))
    again = cached_table(path, make)
    np.testing.assert_array_equal(again, first)
    assert len(made) == 1
    with open(path, "r+b") as f:  # truncated afterwards: verified, not trusted
        f.truncate(os.path.getsize(path) - 8)
    np.testing.assert_array_equal(cached_table(path, make), first)
    assert len(made) == 2


@pytest.mark.parametrize("combine, layers", [("sum", 3), ("concat", 4), ("single", 1)])
def test_the_bilstm_tagger_round_trips_its_config_and_masks_padding(combine, layers):
    model = BiLstmTagger(9, layers, 16, combine, lstm_units=8)
    clone = BiLstmTagger.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    rng = np.random.default_rng(0)
    features = rng.normal(size=(2, 5, layers, 16)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    out = model({"word_features": features, "input_mask": mask})["logits"].numpy()
    np.testing.assert_array_equal(clone({"word_features": features, "input_mask": mask})["logits"].numpy(), out)
    changed = features.copy()
    changed[0, 3:] = 99.0  # padding words do not reach the real ones (backward LSTM included)
    np.testing.assert_allclose(model({"word_features": changed, "input_mask": mask})["logits"].numpy()[0, :3],
                               out[0, :3], rtol=0, atol=1e-6)


def test_the_bilstm_tagger_builds_under_mixed_precision():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        model = BiLstmTagger(9, 4, 16, "sum", lstm_units=8)
        logits = model({"word_features": np.ones((1, 3, 4, 16), np.float32), "input_mask": np.ones((1, 3), np.int32)})
        assert logits["logits"].dtype == "float32"
    finally:
        keras.config.set_dtype_policy(previous)


def _slice(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in (("train.txt", 4), ("valid.txt", 2), ("test.txt", 1)):
        parts = shared_path("conll2003", name).read_text().split(DOCSTART)[1:]
        (folder / name).write_text("".join(DOCSTART + part for part in parts[:count]))
    return folder


@pytest.mark.slow
def test_a_tiny_feature_based_run_trains_a_bilstm_and_tags_every_word_from_the_command_line(tmp_path):
    tiny = shared_path("checkpoints", TINY)
    data, out = _slice(tmp_path / "data"), tmp_path / "out"
    command = [sys.executable, os.path.join(REPO, "run_ner.py"), f"--data_dir={data}", f"--output_dir={out}",
               f"--vocab_file={tiny / 'vocab.txt'}", f"--bert_config_file={tiny / 'bert_config.json'}",
               f"--init_checkpoint={tiny / 'bert_model.ckpt'}", "--mode=feature_based", "--features=sum_all",
               "--lstm_units=16", "--max_words=20", "--max_seq_length=64", "--train_batch_size=8",
               "--learning_rate=1e-2", "--num_train_epochs=3", "--seed=1"]
    done = subprocess.run(command + ["--do_train", "--do_eval"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    predicted = read_conll(str(out / "eval_predictions.txt"))
    assert [s.words for s in predicted] == [s.words for s in read_conll(str(data / "valid.txt"))]
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert float(results["global_step"]) > 0 and 0 <= float(results["f1"]) <= 100
    assert not (out / "export").exists()  # the tagger has no BERT variables to export
    tables = sorted((out / "features").glob("ner_frozen-*.npy"))  # layers 1 and 2, train and eval
    assert [t.name.rsplit("-", 1)[1] for t in tables] == ["layer1.npy", "layer2.npy"] * 2
    assert all(json.loads(open(f"{t}.json").read())["shape"][1:] == [64] for t in tables)
    before = (out / "eval_predictions.txt").read_bytes()
    again = subprocess.run(command + ["--do_eval"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "frozen features from the cache" in again.stderr and not re.search(r"encoded \d+ words", again.stderr)
    assert (out / "eval_predictions.txt").read_bytes() == before
    # another feature choice over the same windows and checkpoint reads the cached layer, encoding nothing
    other = [flag.replace("sum_all", "last").replace(f"--output_dir={out}", f"--output_dir={tmp_path / 'last'}")
             for flag in command]
    last = subprocess.run(other + ["--do_train", "--do_eval", f"--feature_cache_dir={out / 'features'}"],
                          capture_output=True, text=True, timeout=600)
    assert last.returncode == 0, last.stderr[-3000:]
    assert not re.search(r"encoded \d+ words", last.stderr) and "layer2.npy" in last.stderr


def test_weight_decay_spares_the_scalar_mix_as_elmo_but_not_the_lstm():
    from bert_tf.training.optimization import AdamWeightDecay

    model = BiLstmTagger(9, 4, 16, "sum", lstm_units=8)
    optimizer = AdamWeightDecay(learning_rate=1e-3, weight_decay_rate=0.01)
    decayed = {v.path: optimizer.decays(v) for v in model.trainable_variables}
    assert {path for path, used in decayed.items() if not used} == {
        p for p in decayed if "scalar_mix" in p or p.endswith("bias")}
    assert any(used for path, used in decayed.items() if "kernel" in path)
